"""The ground floor's files (codeexecutor/atomic.py): a replaced file never half written,
an append-only JSON Lines file read back to its last whole line."""

import json

import pytest

from codeexecutor.atomic import complete_lines, cut_to, write_json


def test_a_torn_or_unreadable_line_ends_the_reading_and_is_cut(tmp_path):
    path = tmp_path / "journal.jsonl"
    whole = [json.dumps({"k": i}) + "\n" for i in range(3)]
    path.write_text("".join(whole) + '{"k": 3, "cut')  # a kill mid-line
    read = list(complete_lines(path))
    assert [obj["k"] for _, obj in read] == [0, 1, 2] and read[-1][0] == len("".join(whole))
    cut_to(path, read[-1][0])
    assert path.read_text() == "".join(whole)
    path.write_text(whole[0] + "not json\n" + whole[1])
    assert [obj["k"] for _, obj in complete_lines(path)] == [0]
    assert list(complete_lines(tmp_path / "none.jsonl")) == []


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "out.json"
    write_json(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1} and not (tmp_path / "out.json.tmp").exists()


def test_a_closed_journal_read_back_refuses_damage_but_not_a_torn_end(tmp_path):
    from curricula.journal import read_journal

    path = tmp_path / "journal.jsonl"
    path.write_text('{"a": 1}\n{"_done": "u1"}\n{"a": 2')  # a kill's torn last line
    assert [kind for kind, _ in read_journal(str(path))] == ["record", "done"]
    path.write_text('{"a": 1}\nnot json\n{"_done": "u1"}\n')
    with pytest.raises(ValueError, match="damaged"):
        list(read_journal(str(path)))
    with pytest.raises(FileNotFoundError):
        list(read_journal(str(tmp_path / "none.jsonl")))
