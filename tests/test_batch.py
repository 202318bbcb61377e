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
