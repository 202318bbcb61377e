"""One ground truth on every interpreter: the tracer, the sandbox and the builders give the
same rows on 3.11, 3.12 and 3.13 (docs/sandbox.md, "One trace on every interpreter").

The tests of this file run under every interpreter the suite runs under (`make test` runs
the model-free tests in the light 3.12 and 3.13 environments too); the cross-interpreter
ones trace the same programs under each other interpreter found and compare."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from codeexecutor.execution import ExecStatus, interpreters
from codeexecutor.execution.crosscheck import first_difference, run_under, trace_all

from .conftest import FIXTURES, ROOT

PROGRAMS = FIXTURES / "versions"
REFERENCE = interpreters.VERSIONS[0]  # 3.11: the trace the others must give (the datasets' and the release's)
# The suite under 3.11 compares every other interpreter with it; under another one (the
# light environments of `make test`) the same comparisons would only be repeated.
OTHERS = [v for v in interpreters.VERSIONS if v != REFERENCE] if interpreters.current() == REFERENCE else []


def fixture_programs() -> list[dict]:
    out = []
    for path in sorted(PROGRAMS.glob("*.py")):
        stdin = path.with_suffix(".in")
        out.append({"id": path.name, "source": path.read_text(), "stdin": stdin.read_text() if stdin.exists() else ""})
    return out


def other_interpreter(version: str, needs: tuple[str, ...] = ()) -> str:
    python = interpreters.find(version, needs)
    if python is None:
        pytest.skip(
            f"no Python {version} with {', '.join(needs) or 'the standard library'} here "
            f"(`make venvs` builds .venv-{version} where pyenv or PATH has Python {version})"
        )
    return python


def test_a_comprehension_is_one_step_of_its_line(pool):
    """The issue's example: 4 steps on every interpreter, no comprehension variable in a state."""
    r = pool.execute("x = 5\nys = [x * i for i in range(3)]\nz = {k: k + 1 for k in ys}\nprint(x, ys, z)\n")
    assert r.status is ExecStatus.OK and r.stderr == ""
    assert [s.line for s in r.steps] == [1, 2, 3, 4]
    assert [list(s.state) for s in r.steps] == [["x"], ["x", "ys"], ["x", "ys", "z"], ["x", "ys", "z"]]


def test_names_keep_the_order_they_were_first_bound_in(pool):
    """A function lists a name where it was first bound (3.11's frame dictionary), not in
    its slot order (what 3.13's frame proxy would give): `a` has the first slot here."""
    r = pool.execute("def f(n):\n    if n:\n        a = 1\n    b = 2\n    a = 3\n    return a + b\nf(0)\n")
    states = [s.state for s in r.steps if s.depth == 1]
    assert list(states[-1]) == ["n", "b", "a"], states


def test_tracing_changes_nothing_the_program_does(pool):
    """No warning written, the same output traced and untraced: reading a frame in the middle
    of an inlined comprehension would write into it on 3.12 ('assigning None to unbound local')."""
    for p in fixture_programs():
        traced = pool.execute(p["source"], p["stdin"])
        plain = pool.execute(p["source"], p["stdin"], trace=False)
        assert traced.status is ExecStatus.OK and traced.stderr == "", (p["id"], traced.error, traced.stderr)
        assert (plain.status, plain.stdout, plain.stderr) == (traced.status, traced.stdout, traced.stderr), p["id"]


def test_a_program_cannot_reach_the_tracer_events(pool):
    """From 3.12 the tracer is a sys.monitoring tool: the program sees the sys of 3.11 (no
    `monitoring`), and registering a callback is a violation like sys.settrace."""
    r = pool.execute("import sys\nprint(hasattr(sys, 'monitoring'))\n")
    assert r.stdout == "False\n"
    r = pool.execute(
        "import gc\nm = [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'sys.monitoring']\n"
        "m[0].register_callback(0, 1, print) if m else print('none')\n"
    )
    assert r.status in (ExecStatus.VIOLATION, ExecStatus.OK), r
    assert r.status is ExecStatus.VIOLATION or r.stdout == "none\n"


@pytest.mark.parametrize("version", OTHERS)
def test_fixture_programs_trace_the_same_under_every_interpreter(version):
    python = other_interpreter(version)
    programs = fixture_programs()
    mine, _ = trace_all(programs, workers=2)
    theirs, summary = run_under(python, programs, workers=2, timeout=300)
    assert summary["python"].startswith(version)
    diffs = {p["id"]: first_difference(mine[p["id"]], theirs[p["id"]]) for p in programs}
    assert not any(diffs.values()), {k: v for k, v in diffs.items() if v}


def _build_demo(python: str, out: pathlib.Path) -> None:
    """The demo datasets (curricula/demo) built under `python`, as `make demo` builds them."""
    demo = ROOT / "curricula" / "demo"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    cli = [python, "-m", "codeexecutor", "build"]
    for args in (
        ["codenetmut", "--codenet", str(demo), "--out", str(out / "codenetmut"), "--mutants", "8"],
        [
            "functions",
            "--from",
            str(demo / "functions"),
            "--out",
            str(out / "functions"),
            "--mutants",
            "2",
            "--input-mutants",
            "1",
        ],
        ["tutorial", "--sources", str(demo / "tutorial"), "--out", str(out / "tutorial"), "--mutants", "8"],
        ["singleline", "--from", str(out / "codenetmut"), "--out", str(out / "singleline")],
    ):
        proc = subprocess.run(
            cli + args + ["--workers", "2"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
        )
        assert proc.returncode == 0, (python, args[0], proc.stderr[-2000:])


def _rows(folder: pathlib.Path) -> dict[str, dict]:
    import datasets

    rows = {}
    for path in sorted(folder.glob("*/*/dataset_dict.json")):
        ds = datasets.load_from_disk(str(path.parent))
        for split in ds:
            for r in ds[split]:
                rows[f"{path.parent.relative_to(folder)}/{split}/{r['id']}"] = r
    return rows


@pytest.mark.parametrize("version", OTHERS)
def test_demo_datasets_are_the_same_rows_under_every_interpreter(version, tmp_path):
    """Property test over everything the builders do (inlining, mutation, tracing, splits):
    every row's code, steps, status, output and error agree, and each build says which
    interpreter traced it."""
    python = other_interpreter(version, needs=("datasets", "tree_sitter_python", "yaml"))
    _build_demo(sys.executable, tmp_path / "mine")
    _build_demo(python, tmp_path / "theirs")
    mine, theirs = _rows(tmp_path / "mine"), _rows(tmp_path / "theirs")
    assert len(mine) > 100 and set(mine) == set(theirs)
    fields = ("code", "steps", "status", "error")
    differ = [k for k in mine if any(mine[k][f] != theirs[k][f] for f in fields)]
    assert not differ, (differ[:5], [(mine[k], theirs[k]) for k in differ[:1]])
    for name in ("codenetmut", "functions", "tutorial", "singleline"):
        mine_stats = json.loads((tmp_path / "mine" / name / "stats.json").read_text())
        theirs_stats = json.loads((tmp_path / "theirs" / name / "stats.json").read_text())
        assert mine_stats["python"] == interpreters.current() and theirs_stats["python"] == version


NEEDS_3_13 = "def first[T = int](xs: list[T]) -> T:\n    return xs[0]\nprint(first([3]))\n"  # PEP 696
NEEDS_3_12 = 'type Pair = tuple[int, int]\nd = {\'a\': 1}\nprint(f"{d["a"]}")\n'  # PEP 695 and 701


def test_a_program_for_a_newer_python_has_its_own_status(pool):
    for source, version in ((NEEDS_3_13, (3, 13)), (NEEDS_3_12, (3, 12))):
        r = pool.execute(source)
        if sys.version_info[:2] >= version:
            assert r.status is ExecStatus.OK, r
        else:
            assert r.status is ExecStatus.NEWER_PYTHON, r
            assert f"needs Python {version[0]}.{version[1]}" in r.error.message
    assert pool.execute("x = = 1\n").status is ExecStatus.SYNTAX_ERROR  # a real syntax error stays one


def test_the_cli_names_the_python_a_program_needs(tmp_path):
    if sys.version_info[:2] >= (3, 13):
        pytest.skip("no syntax newer than this interpreter's to test with")
    prog = tmp_path / "new.py"
    prog.write_text(NEEDS_3_13)
    out = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "mutate", str(prog)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "needs python 3.13" in lines[0].lower() and "pep 696" in lines[0].lower()


def _codenet_layout(root: pathlib.Path, programs: dict[str, str]) -> pathlib.Path:
    """A CodeNet-layout folder: one problem, a submission per program, one sample input."""
    (root / "data" / "p00001" / "Python").mkdir(parents=True)
    (root / "derived" / "input_output" / "data" / "p00001").mkdir(parents=True)
    (root / "derived" / "input_output" / "data" / "p00001" / "input_0.txt").write_text("3\n")
    for sid, source in programs.items():
        (root / "data" / "p00001" / "Python" / f"{sid}.py").write_text(source)
    return root


def test_builds_count_newer_python_and_record_their_interpreter(tmp_path):
    from curricula.codenet import CodeNetBuilder
    from curricula.common import BuildSetup

    if sys.version_info[:2] >= (3, 13):
        pytest.skip("no syntax newer than this interpreter's to test with")
    corpus = _codenet_layout(tmp_path / "corpus", {"s1": "n = int(input())\nprint(n * 2)\n", "s2": NEEDS_3_13})
    stats = CodeNetBuilder(str(corpus), str(tmp_path / "out"), mutants=2, setup=BuildSetup(workers=1)).run(
        progress=False
    )
    assert stats["counts"]["skip:newer_python"] == 1 and stats["counts"]["programs_used"] == 1
    assert stats["python"] == interpreters.current()
    done = [json.loads(line) for line in (tmp_path / "out" / "journal.jsonl").read_text().splitlines()]
    assert all(r["python"] == interpreters.current() for r in done if "_done" in r)


def _journal_of(folder: pathlib.Path, python: str) -> None:
    """Rewrite a build folder's journal as if `python` had traced it."""
    path = folder / "journal.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "python": python} if "_done" in r else r) + "\n" for r in rows))


def test_no_build_mixes_interpreters(tmp_path):
    """A resume by another interpreter and a merge of shards traced by two are refused in one
    line naming both; shards of one interpreter merge."""
    corpus = _codenet_layout(tmp_path / "corpus", {f"s{k}": f"n = int(input())\nprint(n * {k})\n" for k in range(4)})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "codeexecutor", "build"]

    def build(*args):
        return subprocess.run(cli + list(args), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    for k in range(2):
        assert (
            build(
                "codenetmut",
                "--codenet",
                str(corpus),
                "--out",
                str(tmp_path / f"shard{k}"),
                "--mutants",
                "1",
                "--shard",
                f"{k}/2",
                "--workers",
                "1",
            ).returncode
            == 0
        )
    ok = build("merge", "--out", str(tmp_path / "merged"), str(tmp_path / "shard0"), str(tmp_path / "shard1"))
    assert ok.returncode == 0, ok.stderr
    other = "3.99"
    _journal_of(tmp_path / "shard1", other)
    refused = build("merge", "--out", str(tmp_path / "merged2"), str(tmp_path / "shard0"), str(tmp_path / "shard1"))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert other in lines[0] and interpreters.current() in lines[0]
    resumed = build(
        "codenetmut",
        "--codenet",
        str(corpus),
        "--out",
        str(tmp_path / "shard1"),
        "--mutants",
        "1",
        "--shard",
        "1/2",
        "--workers",
        "1",
    )
    lines = [line for line in resumed.stderr.splitlines() if line.strip() and "[WARNING]" not in line]
    assert resumed.returncode == 2 and len(lines) == 1 and other in lines[0], resumed.stderr


def test_a_model_knows_the_interpreter_of_its_traces(demo_data):
    """The training curriculum's builds name their interpreter; the model's config keeps it
    (`trace_python`), and a run or test set of another interpreter gets a note, not a refusal."""
    import types

    import yaml

    pytest.importorskip("torch", reason="the training side")
    from codeexecutor.execution.interpreters import dataset_python
    from codeexecutor.generation.api import interpreter_note
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.setup import traced_python

    raw = yaml.safe_load((ROOT / "curricula" / "demo.yaml").read_text())
    for stage in raw["stages"]:
        for src in stage["sources"]:
            src["path"] = str(demo_data / src["path"].split("demo_out/data/", 1)[1])
    cur = Curriculum.from_dict(raw)
    assert dataset_python(str(demo_data / "codenetmut" / "codenetmut")) == interpreters.current()
    assert traced_python(cur) == interpreters.current()
    config = types.SimpleNamespace(trace_python="3.11")
    assert interpreter_note(config, "3.11") is None
    note = interpreter_note(config, "3.13")
    assert "3.11" in note and "3.13" in note and "same traces" in note
    assert interpreter_note(types.SimpleNamespace(), "3.13") is None  # a model from before the record
