"""The worker as a zygote: setup made once in the worker, inherited by every child, must
leave no trace from one run in the next; flavored (numpy) workers; wire-format fallbacks."""

import importlib.util

import pytest

from codeexecutor.execution import ExecStatus, ExecutorPool
from codeexecutor.execution.pool import _compile, compile_program, flavor_of

HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def test_no_state_leaks_between_runs_of_one_worker():
    with ExecutorPool(1) as pool:
        first = pool.execute(
            "import sys, collections\n"
            "collections.leak = 1\n"
            "sys.leak = 2\n"
            "print('A')\n"
            "sys.stderr.write('E')\n"
            "x = input()\n",
            "from-stdin\n",
        )
        assert first.ok and first.stdout == "A\n" and first.stderr == "E"
        second = pool.execute(
            "import sys, collections\n"
            "print(hasattr(collections, 'leak'), hasattr(sys, 'leak'))\n"
            "print(sys.stdin.read() == '')\n"
        )
        assert second.ok and second.stdout == "False False\nTrue\n" and second.stderr == ""
        assert len(second.steps) == 3 and second.steps[0].output == ""


def test_site_builtins_exist_in_workers_started_without_site(pool):
    r = pool.execute("print(1)\nexit()\nprint(2)\n")
    assert r.status is ExecStatus.OK and r.stdout == "1\n"
    r = pool.execute("quit(3)\n")
    assert r.status is ExecStatus.EXIT and r.error.message == "3"


@pytest.mark.parametrize(
    "source, flavor",
    [
        ("import numpy as np\n", "numpy"),
        ("from scipy.sparse import csr_matrix\n", "science"),
        ("def f():\n    from sympy import factorint\n", "science"),
        ("import numpy as np\nimport scipy.special\n", "science"),
        ("import numpy.linalg\n", "numpy"),
        ("def f():\n    import pandas\n", "numpy"),
        ("x = 1  # numpy would be faster\n", "base"),
        ("s = 'import numpy'\n", "base"),
        ("import math\n", "base"),
    ],
)
def test_flavor_of_finds_numpy_imports_in_the_code(source, flavor):
    assert flavor_of(source, _compile(source)) == flavor


def test_a_sympy_or_scipy_import_costs_the_program_none_of_its_cpu_limit(pool):
    """Their imports cost a fresh child 0.3-0.7 s of CPU; the science worker pays them once,
    so a program that only imports them runs well inside a 0.25 s limit."""
    pytest.importorskip("sympy")
    pytest.importorskip("scipy")
    from codeexecutor.execution import Limits

    for source in (
        "import sympy\nprint(sympy.factorint(360))\n",
        "from scipy.sparse.csgraph import shortest_path\nimport scipy.special\nprint(scipy.special.comb(5, 2))\n",
    ):
        r = pool.execute(source, limits=Limits(timeout=0.25))
        assert r.status is ExecStatus.OK, (source, r.status, r.error)


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_numpy_programs_run_in_a_numpy_worker_with_seeded_random():
    program = "import numpy as np\nx = np.random.randint(100)\nprint(x)\n"
    with ExecutorPool(1) as pool:
        a = pool.execute(program)
        assert [w.flavor for w in pool._all] == ["base", "numpy"]
        b = pool.execute(program)
        assert len(pool._all) == 2  # the numpy worker is reused
        # numpy imported by a base worker (not recognised) is seeded the same way
        c = pool.execute("np = __import__('numpy')\nx = np.random.randint(100)\nprint(x)\n")
    assert a.ok and a.stdout == b.stdout == c.stdout, (a, b, c)
    assert a.steps[-1].state["x"] == a.stdout.strip()


def test_prestart_rejects_unknown_flavors():
    with pytest.raises(ValueError, match="unknown worker flavor"):
        ExecutorPool(1, prestart=("tensorflow",))


def test_results_that_orjson_refuses_still_come_back(pool):
    r = pool.execute('x = 2 ** 70\nraise ValueError("bad \\ud800 here")\n')
    assert r.status is ExecStatus.ERROR and r.error.message == "bad ? here" and r.error.line == 2
    assert r.steps[0].state == {"x": "1180591620717411303424"}


def test_source_with_lone_surrogates_is_a_syntax_error_not_a_crash():
    r = compile_program('x = "\ud800"\n')
    assert r.status is ExecStatus.SYNTAX_ERROR and "binary" in r.error.message


# The rehearsal runs in a fresh interpreter: prepare_zygote patches os._exit and os.close,
# installs signal handlers and an audit hook, which must not happen to the test process.
_REHEARSAL_CHECK = r"""
import io, sys
from codeexecutor.execution import rehearsal, sandbox
template = sandbox.prepare_zygote()
streams = sys.stdin, sys.stdout, sys.stderr
main = sys.modules["__main__"]
ok = rehearsal.rehearse()
assert (sys.stdin, sys.stdout, sys.stderr) == streams, "streams not put back"
assert sys.modules["__main__"] is main, "__main__ not put back"
assert sys.gettrace() is None
assert not template.active and not template.tracer.steps and not template.tracer._memo
assert not template.stdout.chunks and not template.stderr.chunks
assert "best" not in vars(main) and "bfs" not in vars(main)
print("rehearsed" if ok else "failed")
"""


def _run_python(code: str, *args: str) -> str:
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_rehearsal_runs_and_leaves_the_template_and_interpreter_as_they_were():
    assert _run_python(_REHEARSAL_CHECK).strip() == "rehearsed"


def test_a_failing_rehearsal_is_harmless():
    broken = _REHEARSAL_CHECK.replace(
        "ok = rehearsal.rehearse()", "rehearsal._REHEARSAL = 'raise ValueError(1)\\n'\nok = rehearsal.rehearse()"
    )
    assert _run_python(broken).strip() == "failed"


def test_rehearsal_program_matches_its_input():
    # The rehearsal only warms what a child runs if the program itself runs to the end.
    code = (
        "import io, sys\n"
        "from codeexecutor.execution import rehearsal\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(rehearsal._REHEARSAL_INPUT))\n"
        "exec(compile(rehearsal._REHEARSAL, '<program>', 'exec'), {'__name__': '__main__'})\n"
    )
    assert _run_python(code).count("\n") == 5


def test_workers_report_their_rehearsal_and_children_see_none_of_it():
    with ExecutorPool(1) as pool:
        assert [w.rehearsed for w in pool._all] == [True]
        # names the rehearsal program used: a child starts without them, and its tracer's
        # memo of rendered values starts empty (n renders as this run's value)
        r = pool.execute(
            "n = 7\nprint(sorted(k for k in globals() if not k.startswith('__')), input())\n",
            "line\n",
        )
    assert r.ok and r.stdout == "['n'] line\n"
    assert [s.state for s in r.steps] == [{"n": "7"}, {"n": "7"}]


def test_free_blocks_are_read_and_filled():
    code = (
        "import gc, importlib, json\n"
        "from codeexecutor.execution import worker\n"
        "for name in worker.PREIMPORT:\n"
        "    importlib.import_module(name)\n"
        "gc.collect()\n"
        "before = worker.free_blocks()\n"
        "keep = worker.fill_free_blocks()\n"
        "after = worker.free_blocks()\n"
        "print(json.dumps([before, after, len(keep)]))\n"
    )
    import json

    before, after, kept = json.loads(_run_python(code))
    assert len(before) == 32 and min(map(int, before)) == 16 and max(map(int, before)) == 512
    assert kept >= sum(before.values()) // 2
    # every size class that had holes is filled, but for the fresh pages the fill itself took
    assert sum(1 for n in after.values() if n) <= sum(1 for n in before.values() if n) // 2


def test_a_scratch_dir_name_already_taken_is_skipped():
    # Pids are reused (pid_max is often 32768): a dir left by a dead worker must not
    # kill a new one that happens to want the same name.
    import os

    with ExecutorPool(1) as pool:
        worker = pool._all[0]
        taken = [f"{worker.scratch_prefix}{n}" for n in range(2, 6)]
        for path in taken:
            os.mkdir(path)
        try:
            results = [pool.execute(f"print({i})\n") for i in range(3)]
            assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"]
            assert pool._all == [worker] and worker.proc.poll() is None  # not replaced
        finally:
            for path in taken:
                os.rmdir(path)


def test_the_waiting_child_of_a_killed_worker_removes_its_scratch_dir():
    import os
    import signal
    import time

    with ExecutorPool(1) as pool:
        worker = pool._all[0]
        assert pool.execute("print(1)\n").ok
        base, name = os.path.split(worker.scratch_prefix)
        time.sleep(0.3)  # the worker reaps the last child and forks the next, which waits
        assert [e for e in os.listdir(base) if e.startswith(name)] == [f"{name}2"]  # 1 ran, 2 waits
        os.kill(worker.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while any(entry.startswith(name) for entry in os.listdir(base)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(entry.startswith(name) for entry in os.listdir(base))


def test_stale_scratch_dirs_of_dead_pids_are_removed(tmp_path):
    import os
    import subprocess

    from codeexecutor.execution.worker import remove_stale_scratch

    done = subprocess.Popen(["true"])
    done.wait()
    dead = tmp_path / f"codeexecutor-{done.pid}-1-7"
    dead.mkdir()
    (dead / ".fd1").write_text("left over")
    alive = tmp_path / f"codeexecutor-{os.getpid()}-1-1"
    alive.mkdir()
    other = tmp_path / "codeexecutor-notapid"
    other.mkdir()
    assert remove_stale_scratch(str(tmp_path)) == 1
    assert not dead.exists() and alive.exists() and other.exists()


def test_a_run_that_cannot_get_a_scratch_dir_is_an_error_not_a_dead_worker():
    import os
    import time

    with ExecutorPool(1) as pool:
        worker = pool._all[0]
        assert pool.execute("print(1)\n").ok  # child 1 ran; child 2 is forked and waits
        time.sleep(0.3)
        taken = [f"{worker.scratch_prefix}{n}" for n in range(3, 203)]  # every name two spawns try
        for path in taken:
            os.mkdir(path)
        try:
            assert pool.execute("print(2)\n").stdout == "2\n"  # the waiting child
            r = pool.execute("print(3)\n")
            assert r.status is ExecStatus.ERROR and r.error.type == "SandboxError"
            assert "cannot create a scratch dir" in r.error.message
        finally:
            for path in taken:
                os.rmdir(path)
        assert pool.execute("print(4)\n").stdout == "4\n"
        assert pool._all == [worker] and worker.proc.poll() is None
