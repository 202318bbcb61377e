import pathlib

import pytest

from codeexecutor.execution import ExecutorPool

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SHARED_DATA = ROOT.parent / "shared" / "data"
ATCODER = SHARED_DATA / "atcoder-python"


@pytest.fixture(scope="session")
def pool():
    with ExecutorPool(workers=2) as p:
        yield p


def texts(row) -> tuple[str, str]:
    """A dataset row's model input and target in the default format profile (rows store
    structured steps only; a run serializes them so)."""
    from codeexecutor.modeling.profiles import Profile

    return Profile().example(row)


def fixture_source(name: str) -> str:
    return (FIXTURES / name).read_text()


def real_programs(limit: int | None = None, seed: int = 0):
    """(submission_id, source, first sample input) for real contest programs; skip if absent."""
    import json
    import random

    index = ATCODER / "index.jsonl"
    if not index.exists():
        pytest.skip("../shared/data/atcoder-python is not available")
    records = [json.loads(line) for line in index.open()]
    if limit is not None:
        records = random.Random(seed).sample(records, limit)
    out = []
    for rec in records:
        pid, sid = rec["problem_id"], rec["submission_id"]
        src = (ATCODER / "data" / pid / "Python" / f"{sid}.py").read_text(encoding="utf-8", errors="replace")
        inp = ATCODER / "derived" / "input_output" / "data" / pid / "input_0.txt"
        out.append((sid, src, inp.read_text() if inp.exists() else ""))
    return out


def run_cli(argv: list[str], cwd=None):
    """`codeexecutor ARGV` called in this process (`cli.main`), its exit code and what it
    printed captured as a finished process's: the command as a user runs it, without
    paying for a fresh interpreter that imports torch each time."""
    import contextlib
    import io
    import os
    import subprocess

    from codeexecutor import cli

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in argv])
            except SystemExit as exc:  # argparse's own refusals
                code = exc.code
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
