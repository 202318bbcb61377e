"""The code window (`code_window`): which tokens of a program longer than the code length
a model reads. `head` keeps the first ones (the release's cut); `ends` keeps the first ones
and the last whole lines, so a long module's final call stays in view."""

import pytest

from codeexecutor.errors import ConfigError
from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.format import format_code
from codeexecutor.modeling.model import CodeExecutorConfig
from codeexecutor.modeling.profiles import Profile, profile_of
from codeexecutor.modeling.tokenizer import Encoder, train_tokenizer

BODY = "\n".join(f"    total = total + {i} * x" for i in range(40))
MODULE = f"def f(x):\n    total = 0\n{BODY}\n    return total\n\nprint(repr(f([3, 1, 2])))\n"


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer([format_code(MODULE)] * 5, vocab_size=400, min_frequency=1)


def encoders(tok, length=64):
    return Encoder(tok, length, 64, Profile("exact")), Encoder(tok, length, 64, Profile("exact", window="ends"))


def test_a_program_that_fits_is_read_whole_in_either_window(tok):
    head, ends = encoders(tok, 256)
    short = format_code("x = 1\nprint(x)\n")
    assert head.code(short) == ends.code(short)
    assert head.unseen_lines(short) == (len(head.ids(short)), [])


def test_head_keeps_the_first_tokens_as_the_release_does(tok):
    head, _ = encoders(tok)
    ids = head.ids(format_code(MODULE))
    assert len(ids) > head.code_body
    assert head.window(ids) == ids[: head.code_body]


def test_ends_keeps_the_final_call_and_its_line_number(tok):
    head, ends = encoders(tok)
    text = format_code(MODULE)
    ids = ends.ids(text)
    kept = ends.window(ids)
    assert len(kept) == ends.code_body  # the same length as the release's cut
    call = ends.ids(" <44> <dedent> print(repr(f([3, 1, 2])))")
    assert kept[-len(call) :] == call and ids[-len(call) :] == call  # the call line whole, `<44>` first
    assert kept[: ends.code_body - len(call)] == ids[: ends.code_body - len(call)]  # then the head
    assert tok.convert_ids_to_tokens(call[0]) == "<44>"
    assert ends.decode(head.window(ids)).count("[3, 1, 2]") == 0  # the head cut loses the input


def test_a_last_line_too_long_for_the_window_keeps_its_end(tok):
    _, ends = encoders(tok)
    text = format_code("x = 0\n" * 30 + "print(" + " + ".join(["x"] * 80) + ")\n")
    ids = ends.ids(text)
    kept = ends.window(ids)
    assert len(kept) == ends.code_body and kept[-(ends.code_body // 4) :] == ids[-(ends.code_body // 4) :]


def test_unseen_lines_name_what_the_model_does_not_read(tok):
    head, ends = encoders(tok)
    text = format_code(MODULE)
    n, missed_head = head.unseen_lines(text)
    _, missed_ends = ends.unseen_lines(text)
    assert n == len(head.ids(text))
    assert 44 in missed_head and 44 not in missed_ends  # the call line: out of view, then in view
    assert 0 not in missed_head and 0 not in missed_ends  # `def f(x):` is read by both
    assert set(missed_ends) - set(missed_head) and len(missed_ends) >= len(missed_head) - 2  # ends trades middle lines


def test_the_window_is_saved_with_a_model_and_read_back():
    cfg = CodeExecutorConfig(**Profile("exact", state="delta", order="end", window="ends").to_config())
    assert profile_of(cfg) == Profile("exact", True, "delta", "end", "ends")
    assert profile_of(CodeExecutorConfig()).window == "head"  # configs saved before the option
    assert Profile("exact", window="ends").full.window == "ends"
    assert Profile("exact", window="ends").label == "exact+ends"
    with pytest.raises(ValueError, match="code window"):
        Profile("exact", window="middle")


def test_a_curriculum_names_a_known_window():
    from codeexecutor.training.config import Curriculum

    stages = [{"name": "s", "steps": 1, "sources": [{"path": "x", "task": "codenet"}]}]
    assert Curriculum.from_dict({"model": {"code_window": "ends"}, "stages": stages}).model.code_window == "ends"
    with pytest.raises(ConfigError, match="code_window must be one of head, ends or left out"):
        Curriculum.from_dict({"model": {"code_window": "tail"}, "stages": stages})
    with pytest.raises(ConfigError, match="needs the exact profile"):
        Curriculum.from_dict({"model": {"code_window": "ends", "format_profile": "official"}, "stages": stages})


def _untrained(tok, path, window):
    from codeexecutor.modeling.model import CodeExecutorModel
    from codeexecutor.modeling.tokenizer import structural_ids

    cfg = CodeExecutorConfig.preset(
        "tiny",
        vocab_size=len(tok),
        structural_token_ids=structural_ids(tok),
        pad_token_id=tok.pad_token_id,
        max_code_length=64,
        max_trace_length=64,
        **Profile("exact", window=window).to_config(),
    )
    CodeExecutorModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_the_trace_report_says_which_lines_were_not_read(tok, tmp_path):
    from codeexecutor.generation.api import _spans, trace_programs

    notes = {}
    for window in ("head", "ends"):
        model = _untrained(tok, tmp_path / window, window)
        (report,) = trace_programs([{"code": MODULE}], model, decoding=Decoding(beam=1, max_length=4))
        notes[window] = next(n for n in report["notes"] if "predicted without being read" in n)
    assert "code_window head" in notes["head"] and notes["head"].endswith(
        "-43, 45 are predicted without being read"
    )  # 44 is blank
    assert "code_window ends" in notes["ends"] and "45" not in notes["ends"].split("lines ")[1]  # the call is read
    assert _spans([3, 4, 5, 9, 11, 12]) == "3-5, 9, 11-12"
    assert report["constrained"] == {"names": False, "values": False}  # this tokenizer splits ' :': no rules by default
    from codeexecutor.errors import UsageError

    with pytest.raises(UsageError, match="splits ' :'"):  # asked for, they are refused in one line
        trace_programs([{"code": MODULE}], model, decoding=Decoding(beam=1, max_length=4, names=True))
    assert _spans([7]) == "7"


def test_stats_count_programs_longer_than_the_window(tok):
    import json

    from curricula.stats import trace_lengths

    steps = json.dumps([{"line": 0, "state": {"x": "1"}}, {"line": 1, "state": {"x": "1"}}])
    rows = [
        {"task": "codenet", "code": code, "steps": steps, "error": None, "status": "ok"}
        for code in (MODULE, "x = 1\nprint(x)\n")
    ]
    code = trace_lengths(rows, tok)["code"]
    assert code["over_window_share"] == 0.5 and code["median"] > 10
    assert "code" not in trace_lengths(rows)  # pieces only: no tokenizer, no window to compare with
