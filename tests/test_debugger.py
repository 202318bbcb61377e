"""The neural debugger: where its actions land, the forced continuation of a trace, the real
walk's states, the command line's answers and refusals, and the scored tasks."""

import json
import random
import subprocess
import sys

import pytest

from .conftest import ROOT

CALLS = """def f(a):
    b = a * 2
    return b + 1
x = 3
y = f(x)
z = y + x
print(z)
"""


def _real(code: str, order: str = "end"):
    from codeexecutor.debugger.events import real_events
    from codeexecutor.execution import execute

    result = execute(code, "")
    return real_events(list(result.steps), result.error, order)


def test_actions_land_where_pdb_would_in_the_order_the_model_writes():
    from codeexecutor.debugger.events import Frames, target, with_depths

    events = _real(CALLS)  # as lines finish: the call's steps before the line that called
    assert [e.line for e in events] == [1, 4, 2, 3, 5, 6, 7]
    assert [e.depth for e in events] == [0, 0, 1, 1, 0, 0, 0]
    assert target(events, 1, 0, "step") == 2  # into f
    assert target(events, 1, 0, "next") == 4  # over the call: the line that called, its result in y
    assert events[4].state["y"] == "7"
    assert target(events, 2, 1, "out") == 4  # out of f, to the caller's state
    assert target(events, -1, 0, "continue", 6) == 5 and target(events, 5, 0, "continue", 6) is None
    assert target(events, 6, 0, "out") is None  # module level: the program ends
    # a predicted trace has no depths: they come from the scopes, the same here
    bare = [type(e)(e.line, e.state, e.output) for e in events]
    assert [e.depth for e in with_depths(CALLS, bare, Frames(CALLS))] == [0, 0, 1, 1, 0, 0, 0]
    siblings = "def read():\n    return 3\ndef solve(n):\n    return n * 2\nprint(solve(read()))\n"
    real = _real(siblings)  # read returns before solve is called: both one call deep
    assert [(e.line, e.depth) for e in real] == [(1, 0), (3, 0), (2, 1), (4, 1), (5, 0)]
    bare = [type(e)(e.line, e.state, e.output) for e in real]
    assert [e.depth for e in with_depths(siblings, bare, Frames(siblings))] == [0, 0, 1, 1, 0]
    crash = _real("a = 1\nb = a / 0\nc = 2\n")
    assert crash[-1].exception == "ZeroDivisionError"
    assert target(crash, 0, 0, "continue", 3) == len(crash) - 1  # line 3 never runs: the crash ends the walk


def test_a_memorized_program_continues_from_any_imposed_step_with_its_real_rest(overfit_delta_model):
    """The tiny model reproduces its programs under teacher forcing, so given the real steps up
    to any event, greedy decoding must go on with the real events: every action lands on the
    real event, and the full-trace reading agrees. Anything lost between the imposed prefix
    and the decoder (ids, positions, the cache, compact states, parsing) breaks it."""
    from codeexecutor.generation.search import TraceGenerator
    from eval.debugger import row_events, score_program, summarize

    path, rows = overfit_delta_model
    gen = TraceGenerator(str(path), device="cpu")
    results = []
    for row in rows[:8]:
        events = row_events(row, gen.profile.order)
        results += score_program(gen, row, len(events), random.Random(0))
    summary = summarize(results)
    assert summary["step"]["scored"] >= 20 and summary["next"]["scored"] >= 8
    for action, figures in summary.items():
        assert figures["event"] == figures["state"] == figures["full_trace"] == 100.0, (action, figures)
        assert figures["unchanged"] < 100.0 or action != "step"


def test_the_state_at_a_breakpoint_is_the_sandboxs_on_every_demo_program(overfit_model):
    """Real-until-breakpoint: whatever the model says, the walk stands on the real run."""
    from codeexecutor.debugger import Session
    from codeexecutor.debugger.events import real_events
    from codeexecutor.execution import execute
    from codeexecutor.generation.api import prepare

    path, _ = overfit_model
    programs = sorted((ROOT / "curricula" / "demo" / "data").glob("p*/Python/*.py"))
    assert len(programs) >= 8
    checked = 0
    for program in programs:
        stdin_file = ROOT / "curricula" / "demo" / "derived" / "input_output" / "data" / program.parts[-3] / "input.txt"
        stdin = stdin_file.read_text() if stdin_file.exists() else ""
        code = prepare(program.read_text(), stdin)[0]
        result = execute(code, "")
        truth = real_events(list(result.steps), result.error, "start")
        lines = sorted({e.line for e in truth if not e.exception})
        for line in lines[:3]:
            session = Session(program.read_text(), stdin, model=str(path))
            answer = session.run_to(line)
            first = next(e for e in truth if e.line == line)
            assert answer["walk"] == "real" and answer["line"] == line
            assert answer["state"] == dict(first.state) == session.state, (program, line)
            checked += 1
    assert checked >= 15


def _debug(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "codeexecutor", "debug", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_a_script_answers_in_json_lines_and_bad_commands_get_one_line_each(overfit_model, tmp_path):
    path, _ = overfit_model
    program = tmp_path / "p.py"
    program.write_text(CALLS)
    run = _debug(
        str(program), "--model", str(path), "--do", "b 6; b 99; c; p z; p nope; set z = (; set z = 100; s; back; zap; q"
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    assert lines[0]["action"] == "start" and lines[0]["walk"] == "real"
    assert lines[1] == {"action": "break", "line": 6, "breakpoints": [6]}
    assert "the program has lines 1 to 7" in lines[2]["error"]
    assert lines[3]["action"] == "continue" and lines[3]["real"]["state"]["z"] == "10" and lines[3]["line"] == 6
    assert lines[4]["value"] == "10"
    assert "no variable nope" in lines[5]["error"] and "not a Python expression" in lines[6]["error"]
    assert lines[7]["state"]["z"] == "100" and lines[7]["walk"] == "predicted"
    assert lines[8]["action"] == "step" and lines[8]["real"] is None
    assert lines[9]["action"] == "back" and lines[9]["line"] == 6
    assert "unknown command 'zap'" in lines[10]["error"] and len(lines) == 11  # q ends the script
    missing = _debug(str(tmp_path / "none.py"), "--model", str(path), "--do", "s")
    assert missing.returncode == 2 and "program not found" in missing.stderr and "Traceback" not in missing.stderr


def test_a_program_that_cannot_run_here_is_predicted_from_its_start(overfit_model):
    from codeexecutor.debugger import Session

    path, _ = overfit_model
    session = Session("n = int(input())\nprint(n + 1)\n", model=str(path))
    assert session.real_run is None and not session.walk_is_real
    assert any("reads input and none was given" in note for note in session.notes)
    missing = Session("import no_such_module_here\nx = 1\n", model=str(path))
    assert missing.real_run is None and any("ModuleNotFoundError" in note for note in missing.notes)
    called = Session(CALLS.replace("x = 3\n", "").split("y = f")[0], call="f(4)", model=str(path))
    assert any(e.output == "9\n" for e in called.real_run)  # the call appended, its value printed
    with pytest.raises(Exception, match="not a Python expression"):
        Session(CALLS, call="f(", model=str(path))


def test_the_prompt_answers_each_command_as_a_person_reads_it(overfit_model, tmp_path):
    path, _ = overfit_model
    program = tmp_path / "p.py"
    program.write_text(CALLS)
    run = subprocess.run(
        [sys.executable, "-m", "codeexecutor", "debug", str(program), "--model", str(path)],
        input="b 6\nc\np z\nzap\nq\n",
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "breakpoints at lines 6" in out and "real:   line 6" in out and "z = 10" in out
    assert "*** unknown command 'zap'" in out and "Traceback" not in out + run.stderr
