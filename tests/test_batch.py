from codeexecutor.execution import ExecStatus, ExecutorPool, Program, execute_many


def test_execute_many_yields_every_program_with_its_key():
    programs = [Program(f"print({i})\n", key=f"p{i}") for i in range(12)]
    programs.append(Program("raise ValueError('x')\n", key="bad"))
    programs.append(Program("while True:\n    pass\n", key="loop"))
    results = dict(execute_many(programs, workers=2))
    assert set(results) == {p.key for p in programs}
    assert all(results[f"p{i}"].stdout == f"{i}\n" for i in range(12))
    assert results["bad"].status is ExecStatus.ERROR
    assert results["loop"].status is ExecStatus.TRACE_LIMIT


def test_execute_many_accepts_plain_sources_and_tuples():
    out = dict(execute_many(["print('a')\n", ("print(input())\n", "b\n")], workers=1))
    assert out[0].stdout == "a\n" and out[1].stdout == "b\n"


def test_stopping_early_does_not_hang():
    with ExecutorPool(2) as pool:
        gen = pool.execute_many(f"print({i})\n" for i in range(100))
        first = next(gen)
        gen.close()
        assert first[1].status is ExecStatus.OK
        assert pool.execute("print(7)\n").stdout == "7\n"


def test_batch_mixes_flavors_and_syntax_errors_and_returns_every_worker():
    programs = []
    for i in range(10):
        programs.append(Program(f"x = {i}\nprint(x)\n", key=("base", i)))
        programs.append(Program(f"import numpy as np\nprint(int(np.int64({i}) * 2))\n", key=("np", i)))
    programs.append(Program("print 'py2'\n", key="syntax"))
    with ExecutorPool(2) as pool:
        results = dict(pool.execute_many(programs))
        assert results["syntax"].status is ExecStatus.SYNTAX_ERROR
        assert all(results[("base", i)].stdout == f"{i}\n" for i in range(10))
        wrong = {i: results[("np", i)] for i in range(10) if results[("np", i)].stdout != f"{2 * i}\n"}
        assert not wrong, wrong
        flavors = sorted(w.flavor for w in pool._all)
        assert flavors.count("base") == 2 and 1 <= flavors.count("numpy") <= 2
        # every worker is idle again: a second batch and single runs still work
        assert pool._idle["base"].qsize() == 2
        assert dict(pool.execute_many(["print(5)\n"]))[0].stdout == "5\n"


def test_a_worker_dying_mid_batch_costs_one_program_not_the_batch():
    with ExecutorPool(1) as pool:
        pid = pool._all[0].proc.pid
        programs = [f"print({i})\n" for i in range(5)]
        programs.insert(2, f"import os\nos.kill({pid}, 9)\n")  # the sandbox refuses this: a violation
        results = dict(pool.execute_many(programs))
        assert results[2].status is ExecStatus.VIOLATION
        # now really kill the worker: the program sent to it gets the error, the next a new worker
        gen = pool.execute_many(["while True:\n    pass\n", "print('after')\n"])
        pool._all[0].proc.kill()
        got = dict(gen)
        assert got[0].status is ExecStatus.ERROR and got[0].error.type == "SandboxError"
        assert got[1].stdout == "after\n"
