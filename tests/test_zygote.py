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
        ("from scipy.sparse import csr_matrix\n", "numpy"),
        ("import numpy.linalg\n", "numpy"),
        ("def f():\n    import pandas\n", "numpy"),
        ("x = 1  # numpy would be faster\n", "base"),
        ("s = 'import numpy'\n", "base"),
        ("import math\n", "base"),
    ],
)
def test_flavor_of_finds_numpy_imports_in_the_code(source, flavor):
    assert flavor_of(source, _compile(source)) == flavor


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
    assert a.ok and a.stdout == b.stdout == c.stdout
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
