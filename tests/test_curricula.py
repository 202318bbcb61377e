import json
import os
import signal
import subprocess
import sys
import time

import pytest

from codeexecutor.modeling.format import parse_trace
from curricula.common import BuildSetup, assign_splits
from curricula.journal import Journal, read_journal, record_units

from .conftest import ATCODER, ROOT, texts


def test_journal_drops_partial_units_and_torn_lines(tmp_path):
    path = str(tmp_path / "j.jsonl")
    with Journal(path) as j:
        j.write_unit("a", [{"id": 1}, {"id": 2}])
        j.write_unit("b", [{"id": 3}])
    with open(path, "a") as f:
        f.write('{"id": 4}\n{"id": 5')  # unit c cut by a kill: one record, then a torn line
    with Journal(path) as j:
        assert j.done == {"a", "b"} and j.records_kept == 3
        j.write_unit("c", [{"id": 4}])
    records = [o["id"] for kind, o in read_journal(path) if kind == "record"]
    assert records == [1, 2, 3, 4]


def test_record_units_keeps_every_unit_finished_before_a_failure(tmp_path):
    path = str(tmp_path / "j.jsonl")

    def work():
        yield "a", [{"id": 1}], {"counts": {"ok": 2}}
        yield "b", [], {"counts": {"ok": 1, "skip": 1}}
        raise RuntimeError("a worker died")

    journal = Journal(path)
    with pytest.raises(RuntimeError):
        record_units(journal, work(), total=3, done=0, desc="test", unit="unit", progress=False)
    assert journal._file.closed  # closed on the way out: what was written is on disk
    assert Journal(path).done == {"a", "b"}
    counts = record_units(Journal(path), iter([("c", [{"id": 2}], {"counts": {"ok": 5}})]), 3, 2, "test", "unit", False)
    assert counts == {"ok": 5}  # this run's units only; the journal holds the earlier ones
    assert [o["id"] for kind, o in read_journal(path) if kind == "record"] == [1, 2]


def test_splits_are_by_group_stable_and_never_empty():
    groups = [f"p{i:05d}" for i in range(200)]
    a, b = assign_splits(groups), assign_splits(reversed(groups))
    assert a == b
    assert {"train", "valid", "test"} == set(a.values())
    small = assign_splits(["x", "y", "z"])
    assert sorted(small.values()) == ["test", "train", "valid"]


def _build(out, limit, workers=2, extra=()):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "build",
            "codenetmut",
            "--codenet",
            str(ATCODER),
            "--out",
            str(out),
            "--mutants",
            "3",
            "--limit",
            str(limit),
            "--workers",
            str(workers),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _rows(out):
    import datasets

    rows = {}
    for name in ("codenetmut", "errors"):
        dd = datasets.load_from_disk(str(out / name))
        for split in dd:
            for r in dd[split]:
                rows[r["id"]] = (name, split, r["problem_id"], texts(r)[1])
    return rows


@pytest.mark.data
def test_codenetmut_build_splits_format_and_kill9_resume(tmp_path):
    if not ATCODER.exists():
        pytest.skip("no shared data")
    clean = tmp_path / "clean"
    p = _build(clean, 24)
    assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]
    reference = _rows(clean)
    assert reference
    # no problem in two splits, across both datasets
    split_of = {}
    for _name, split, pid, _ in reference.values():
        assert split_of.setdefault(pid, split) == split
    # targets parse back to the stored steps
    import datasets

    for row in datasets.load_from_disk(str(clean / "codenetmut"))["train"].select(range(5)):
        steps = [s.to_json() for s in parse_trace(texts(row)[1]).steps]
        assert steps == [
            {k: v for k, v in s.items() if k != "depth"} for s in json.loads(row["steps"])
        ]  # text has no depth
    stats = json.loads((clean / "stats.json").read_text())
    assert stats["programs"] == 24 and stats["datasets"]["codenetmut"]["train"] > 0

    killed = tmp_path / "killed"
    p = _build(killed, 24, workers=1)
    journal = killed / "journal.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if journal.exists() and journal.read_text().count('"_done"') >= 4:
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not (killed / "codenetmut").exists()  # it really was stopped before the end
    p = _build(killed, 24)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err.decode()[-2000:]
    assert b"resuming" in out
    assert _rows(killed) == reference  # nothing lost, nothing duplicated


@pytest.mark.data
def test_two_corpora_shards_merge_into_one_dataset(tmp_path):
    """Two CodeNet-layout corpora at once, built as two --shard tasks (as a SLURM array
    would), merge into the same dataset as one build of both."""
    second = ATCODER.parent / "atcoder-python-2"
    if not ATCODER.exists() or not second.exists():
        pytest.skip("no shared data")
    from curricula.codenet import CodeNetBuilder, merge_shards, read_layouts

    subs, _ = read_layouts([str(ATCODER), str(second)])
    assert len({s.submission_id for s in subs}) == len(subs) > 5000
    # a small sample over both corpora: every 600th submission, which includes both of them
    roots = [str(ATCODER), str(second)]
    whole = CodeNetBuilder(roots, str(tmp_path / "whole"), mutants=2, setup=BuildSetup(shard=(0, 600))).run(
        progress=False
    )
    for i, shard in enumerate([(0, 1200), (600, 1200)]):  # the same programs as two of 1,200 array tasks (--partial)
        CodeNetBuilder(roots, str(tmp_path / f"part{i}"), mutants=2, setup=BuildSetup(shard=shard)).run(progress=False)
    merged = merge_shards(str(tmp_path / "merged"), [str(tmp_path / "part0"), str(tmp_path / "part1")], partial=True)
    assert merged["datasets"] == whole["datasets"]
    assert _rows(tmp_path / "merged") == _rows(tmp_path / "whole")
    assert {r[1] for r in _rows(tmp_path / "whole").values()} <= {"train", "valid", "test"}


@pytest.mark.data
def test_tutorial_and_singleline_builds(tmp_path):
    from codeexecutor.errors import UsageError
    from curricula.singleline import build_singleline
    from curricula.stats import dataset_stats
    from curricula.tutorial import build_tutorial, default_sources

    try:
        default_sources()
    except UsageError:
        pytest.skip("no tutorial sources (python3.11-doc or ../shared/data/python-tutorial)")
    stats = build_tutorial(str(tmp_path / "tut"), mutants=2, progress=False)
    assert stats["datasets"]["tutorial"]["train"] > 100
    sl = build_singleline(str(tmp_path / "sl"), source=str(tmp_path / "tut"), limit=200, progress=False)
    assert sl["datasets"]["singleline"]["train"] > 20
    # resume: a build killed after its first chunk redoes only the rest and ends the same
    import curricula.singleline as singleline

    singleline.CHUNK, chunk = 64, singleline.CHUNK
    scan = singleline._candidate_items
    try:
        ref = build_singleline(str(tmp_path / "sl64"), source=str(tmp_path / "tut"), limit=200, progress=False)
        journal = tmp_path / "sl64" / "journal.jsonl"
        lines = journal.read_text().splitlines(keepends=True)
        first_done = next(i for i, line in enumerate(lines) if '"_done"' in line)
        journal.write_text("".join(lines[: first_done + 1]) + lines[first_done + 1][:10])  # killed mid-write
        scans = []
        singleline._candidate_items = lambda *a: scans.append(a) or scan(*a)
        again = build_singleline(str(tmp_path / "sl64"), source=str(tmp_path / "tut"), limit=200, progress=False)
        assert not scans  # the resume read the candidates the first run scanned
        other = build_singleline(str(tmp_path / "sl64b"), source=str(tmp_path / "tut"), limit=100, progress=False)
        assert len(scans) == 1 and other["counts"]["unique_programs"] == 100
    finally:
        singleline.CHUNK = chunk
        singleline._candidate_items = scan
    assert again["datasets"] == ref["datasets"] == sl["datasets"] and again["counts"] == ref["counts"]
    report = dataset_stats(str(tmp_path / "tut"))
    assert (tmp_path / "tut" / "table2.png").exists()
    t = report["datasets"]["tutorial"]["train"]
    assert 1 < t["avg_code_lines"] < 10 and t["avg_trace_steps"] > 1


def test_tutorial_extraction_of_sessions_and_code_blocks():
    from curricula.tutorial import extract_snippets

    text = "Intro::\n\n   >>> x = 1\n   >>> x + 1\n   2\n\nAnd code::\n\n   def f(a):\n       return a\n\n   print(f(3))\n\nEnd.\n"  # noqa: E501
    snippets = extract_snippets(text, "t")
    assert snippets == [("t:3", "x = 1\nx + 1\n"), ("t:9", "def f(a):\n    return a\n\nprint(f(3))\n")]


def test_singleline_candidates_and_kaggle_records(tmp_path):
    from curricula.singleline import build_singleline, candidates, kaggle_program

    code = "c = 98\nz = 3\nc += z\nprint(c)\n"
    steps = [
        {"line": 1, "state": {"c": "98"}},
        {"line": 2, "state": {"c": "98", "z": "3"}},
        {"line": 3, "state": {"c": "101", "z": "3"}},
        {"line": 4, "state": {"c": "101", "z": "3"}},
    ]
    assert candidates(code, steps) == ["c = 98\nz = 3\nc += z\n", "c = 101\nprint(c)\n"]
    assert kaggle_program({"start": "{'a': 1}", "code": "a += 1", "end": "{'a': 2}"}) == "a = 1\na += 1\n"
    assert kaggle_program({"code": 3}) is None
    path = tmp_path / "k.jsonl"
    path.write_text(
        "\n".join(json.dumps({"start": {"a": i}, "code": "b = a * 2"}) for i in range(30)) + "\n" + '{"x": 1}\n'
    )
    stats = build_singleline(str(tmp_path / "out"), kaggle=str(path))
    assert stats["counts"]["examples"] == 30 and stats["counts"]["skip:kaggle_record_shape"] == 1


def test_singleline_cap_per_statement_keeps_a_hot_loop_to_k_examples():
    from curricula.singleline import cap_per_statement

    loop = {f"i = {i}\nmn = min(mn, i * 7 % 2019)\n": (f"s001_m0{i % 3}_s{i:03d}", "p1", "test") for i in range(50)}
    other = {"a = 1\nb = a + 1\n": ("s001_s900", "p1", "test"), "a = 2\nb = a + 1\n": ("s002_s000", "p2", "train")}
    kept = cap_per_statement({**loop, **other}, 4)
    assert sum(code in loop for code in kept) == 4  # mutants m00..m02 of s001 are one program
    assert all(code in kept for code in other)  # another statement, another program: kept
    assert kept == cap_per_statement(dict(reversed(list({**loop, **other}.items()))), 4)  # order does not matter
    assert len(cap_per_statement(loop, 1)) == 1


def test_singleline_variant_renames_and_redraws_but_keeps_the_line_shape():
    import ast

    from curricula.augment import new_value, variant, variants

    code = "dp = [3, 14, 159]\nk = 2\nres = {'a': 7}\ndp.append(res['a'] * k % 2019)\n"
    rng = __import__("random").Random(0)
    seen = set()
    for _ in range(30):
        v = variant(code, rng, name_pool=["ans", "cnt", "dp", "k"])
        if v is None:
            continue
        seen.add(v)
        tree, old = ast.parse(v), ast.parse(code)
        assert [type(n).__name__ for n in ast.walk(tree)] == [type(n).__name__ for n in ast.walk(old)]  # same shape
        assert ".append(" in v and "['a']" in v  # attributes and dict keys stay
        names = [s.targets[0].id for s in tree.body[:3]]
        assert len(set(names)) == 3 and not set(names) & {"dp", "k", "res", "append"}  # fresh, distinct names
        values = [ast.literal_eval(s.value) for s in tree.body[:3]]
        assert len(values[0]) == 3 and [len(str(x)) for x in values[0]] == [1, 2, 3] and list(values[2]) == ["a"]
        scope: dict = {}
        exec(v, {}, scope)  # it still runs
    assert len(seen) > 20  # values and names do vary
    assert variants(code, 3, "s1") == variants(code, 3, "s1") != variants(code, 3, "s2")
    assert variant("x = 1\nprint(f'{x}')\n", rng) is None  # f-strings are left alone
    assert new_value({"k": [True, None, -45, "Ab 9."]}, rng)["k"][:2] == [True, None]
    drawn = new_value([-45, "Ab 9.", 2.5], rng)
    assert (
        -99 <= drawn[0] <= -10
        and len(drawn[1]) == 5
        and drawn[1][2] == " "
        and drawn[1][4] == "."
        and drawn[1][3].isdigit()
    )


def test_singleline_augment_varies_training_programs_only_and_guards_its_resume(tmp_path):
    from codeexecutor.errors import UsageError
    from curricula.singleline import AUGMENTED, augmented_programs, build_singleline

    items = [
        ("a = 5\nb = a * 3\n", ("s1_s000", "p1", "train")),
        ("a = 7\nb = a + 1\n", ("s2_s000", "p2", "test")),
        ("x = 'ab'\ny = x.upper()\n", ("s3_s000", "p3", "train")),
    ]
    extra = augmented_programs(items, 2)
    assert len(extra) == 4 and {meta[2] for _, meta in extra} == {"train"}
    assert {meta[0].split(AUGMENTED)[0] for _, meta in extra} == {"s1_s000", "s3_s000"}
    path = tmp_path / "k.jsonl"
    path.write_text("\n".join(json.dumps({"start": {"a": i}, "code": "b = a * 2"}) for i in range(20)) + "\n")
    stats = build_singleline(str(tmp_path / "out"), kaggle=str(path), augment=2, progress=False)
    assert stats["counts"]["augmented_programs"] > 0
    with pytest.raises(UsageError, match="augment 2 -> 0"):  # resuming with other options would mix two builds
        build_singleline(str(tmp_path / "out"), kaggle=str(path), augment=0, progress=False)


def test_augment_renders_values_the_same_in_every_process():
    import ast
    import subprocess
    import sys

    from curricula.augment import render

    value = [{"b", "a", "c"}, (1,), {"k": {"y", "x"}}, set(), 2.5, None]
    assert ast.literal_eval(render(value))[:2] == value[:2] and render(value).startswith("[{'a', 'b', 'c'}, (1,), ")
    prog = (
        "import random; from curricula.augment import variant; "
        "print(variant(\"s = {'ab', 'cd', 'ef', 'gh'}\\nt = sorted(s)\\n\", random.Random(1)))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", prog],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(outs) == 1 and "{" in outs.pop()


def test_long_jobs_write_progress_lines_to_their_log(caplog):
    import logging

    from codeexecutor.progress import bar

    logger = logging.getLogger("curricula.test_progress")
    with caplog.at_level(logging.INFO, logger="curricula.test_progress"):
        seen = list(bar(range(5), desc="build", unit="prog", logger=logger, log_every=0.0))
    assert seen == [0, 1, 2, 3, 4]
    lines = [r.getMessage() for r in caplog.records if r.name == "curricula.test_progress"]
    assert len(lines) == 6 and lines[2].startswith("build: 3/5 prog") and lines[-1].startswith("build: 5/5 prog")
