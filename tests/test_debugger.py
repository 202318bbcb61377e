"""The neural debugger: where its actions land, the forced continuation of a trace, the real
walk's states, the command line's answers and refusals, and the scored tasks."""

import json
import random
import subprocess
import sys

import pytest

from .conftest import ROOT, run_cli

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
    return run_cli(["debug", *args], cwd=cwd)


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
    untaught = _debug(str(program), "--model", str(path), "--actions", "taught", "--do", "n")
    assert untaught.returncode == 2 and "not trained on the actions" in untaught.stderr
    assert len(untaught.stderr.strip().splitlines()) == 1


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


SUM_TO = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"


def test_proposals_reach_the_answer_keep_an_examples_shape_and_never_repeat():
    from codeexecutor.debugger.proposals import call_candidates, stdin_candidates

    calls = call_candidates(SUM_TO + "f(2)\n", "f", "6", None, 32)
    assert "f(4)" in calls and len(calls) == len(set(calls)) <= 32  # 0+1+2+3 = 6, among 32 distinct
    assert call_candidates(SUM_TO, "f", "6", [7], 8)[0] == "f(7)"  # an example call is proposed first
    shaped = stdin_candidates("2 3\nab\n", "12", "a, b = map(int, input().split())\nprint(a * b)\n", 24)
    assert shaped[0] == "2 3\nab\n" and len(shaped) == len(set(shaped)) > 10
    assert all([len(line.split()) for line in s.splitlines()] == [2, 1] for s in shaped)  # the example's shape


class _Runner:
    """A stand-in for the model that predicts every output right (by running the program),
    so that the ranking and the check are tested apart from the model's skill."""

    def __init__(self):
        from codeexecutor.generation.search import Generated

        self.Generated = Generated

    def code_input(self, code, task):
        return code

    def rules_apply(self):
        return False

    def generate(self, inputs, decoding=None, **_):
        from codeexecutor.execution import execute

        return [self.Generated(execute(code, "").stdout, -1.0, 1) for code in inputs]

    def parse(self, text):
        return type("Parsed", (), {"output": text})()


def test_a_right_prediction_ranks_first_and_the_sandbox_confirms_it():
    from codeexecutor.debugger.inverse import Tries, inputs_for

    found = inputs_for(_Runner(), SUM_TO, "6", call="f", tries=Tries(k=5, candidates=32))
    best = found["ranked"][0]
    assert best["predicted_matches"] and best["reproduces"] and found["pass@1"] and found["pass@5"]
    assert found["wanted"] == "6" and found["mode"] == "call"
    assert all("reproduces" in c for c in found["ranked"][:5]) and "reproduces" not in found["ranked"][5]
    words = inputs_for(_Runner(), "def g(s):\n    return s[::-1]\n", "cba", call="g('xy')", tries=Tries(k=5))
    assert words["wanted"] == "'cba'" and words["pass@1"]  # a bare word is the string it names
    printed = inputs_for(_Runner(), "a, b = map(int, input().split())\nprint(a * b)\n", "12", stdin="2 3\n")
    assert printed["mode"] == "stdin" and printed["pass@1"]


def test_inputs_for_from_the_command_line_and_its_refusals(tmp_path):
    prog = tmp_path / "f.py"
    prog.write_text(SUM_TO)
    model = str(ROOT / "models" / "codeexecutor-mini-cpu")
    cmd = [sys.executable, "-m", "codeexecutor", "debug", str(prog), "--model", model]
    run = run_cli(cmd[3:] + ["--call", "f", "--inputs-for", "6", "--top", "3"])
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r.get("rank") for r in lines[:3]] == [1, 2, 3] and lines[-1]["action"] == "inputs_for"
    for r in lines[:3]:  # each checked input's real output is the sandbox's
        from codeexecutor.execution import execute

        real = execute(SUM_TO + f"print(repr({r['input']}))\n", "").stdout or None
        assert r["real_output"] == real and r["reproduces"] == (real == "6\n")
    assert lines[-1]["pass@3"] == any(r["reproduces"] for r in lines[:3])
    for bad, words in (
        (["--inputs-for", "6"], "needs --call"),
        (["--call", "f(", "--inputs-for", "6"], "--call 'f('"),
        (["--call", "f", "--inputs-for", "6", "--top", "0"], "--top 0"),
        (["--call", "h", "--inputs-for", "6"], "defines no function h"),
        (["--call", "f", "--inputs-for", "6", "--do", "s"], "runs no session"),
        (["--call", "f(3)", "--do", "s", "--html", str(tmp_path / "no" / "p.html")], "does not exist"),
    ):
        out = run_cli(cmd[3:] + bad)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_inverse_questions_hide_the_last_call_and_score_three_orders(demo_data, overfit_model):
    from eval.inverse import inverse_tasks, question

    row = {"status": "ok", "n_steps": 4, "code": SUM_TO + "f(2)\nprint(repr(f(4)))\n", "stdout": "6\n"}
    assert question(row, 30) == (SUM_TO + "f(2)\n", "f", "f(4)", "6")
    assert question(dict(row, stdout="<object at 0x1>\n"), 30) is None  # a value that is no literal
    assert question(dict(row, n_steps=99), 30) is None
    assert question(dict(row, code=SUM_TO + "print(repr(str(4)))\n", stdout="'4'\n"), 30) is None  # not its own
    report = inverse_tasks(str(overfit_model[0]), str(demo_data), "test", limit=3, candidates=8)
    f = report["datasets"]["functions"]
    assert f["scored"] == min(3, f["questions"]) > 0
    assert f["model@1"] <= f["model@5"] <= f["coverage"] and f["proposed@1"] <= f["proposed@5"] <= f["coverage"]


def test_a_contest_program_is_asked_for_a_stdin_that_prints_its_other_samples_output(overfit_model, tmp_path):
    from codeexecutor.generation.api import cached_generator
    from eval.inverse import contest_question, score_question

    root = tmp_path / "codenet"
    (root / "data" / "p1" / "Python").mkdir(parents=True)
    (root / "data" / "p1" / "Python" / "s1.py").write_text("n = int(input())\nprint(n * 2)\n")
    (root / "data" / "p1" / "Python" / "s2.py").write_text("n = int(input())\nprint(n > 0)\n")
    samples = root / "derived" / "input_output" / "data" / "p1"
    samples.mkdir(parents=True)
    (samples / "input_0.txt").write_text("3\n")
    (samples / "input_1.txt").write_text("5\n")
    row = {"kind": "original", "problem_id": "p1", "source_id": "s1"}
    source, example, wanted = contest_question(row, [str(tmp_path / "elsewhere"), str(root)])
    assert (example, wanted) == ("3\n", "10\n") and "input()" in source
    assert contest_question(dict(row, source_id="s2"), [str(root)]) is None  # both samples print True
    assert contest_question(dict(row, kind="mutant"), [str(root)]) is None
    found = score_question(cached_generator(str(overfit_model[0])), source, None, wanted, 16, stdin=example)
    assert found["coverage"] and found["candidates"] > 7  # the budget spread over one token reaches 5, and it is run
    assert found["model@1"] <= found["model@5"] <= found["coverage"]


def test_revals_questions_are_answered_from_a_trace_and_a_perfect_trace_answers_all():
    from codeexecutor.debugger.events import Event
    from eval.reval import QUESTIONS, answer, ask

    real = _real(CALLS)
    stdout = "10\n"
    rng = random.Random(0)
    asked = [q for _ in range(20) for q in ask(CALLS, real, stdout, rng)]
    assert {q["q"] for q in asked} == set(QUESTIONS)
    assert all(answer(q, real) == q["real"] for q in asked)  # the real run answers its own questions
    shifted = [Event(e.line, {k: v + "0" for k, v in e.state.items()}, e.output) for e in real]
    assert any(answer(q, shifted) != q["real"] for q in asked if q["q"] == "state")  # other values are wrong
    assert answer({"q": "path", "line": 4, "n": 3}, real) is None  # no fourth run of line 4: no answer


def test_reval_scores_a_memorized_model_on_the_demo_sets(demo_data, overfit_model):
    from eval.reval import reval_tasks

    report = reval_tasks(str(overfit_model[0]), str(demo_data), "test", limit=4)
    assert {"codenetmut", "functions"} <= set(report["datasets"])
    for qs in report["datasets"].values():
        assert 1 <= qs["output"]["asked"] <= 4 and all(0 <= f["model"] <= 100 for f in qs.values())
        assert all("baseline" in f for q, f in qs.items() if q in ("coverage", "path"))


def test_a_session_opens_in_the_viewer_one_step_an_action(tmp_path):
    import re

    prog = tmp_path / "calls.py"
    prog.write_text(CALLS)
    page = tmp_path / "session.html"
    cmd = [
        sys.executable,
        "-m",
        "codeexecutor",
        "debug",
        str(prog),
        "--model",
        str(ROOT / "models" / "codeexecutor-mini-cpu"),
    ]
    run = run_cli(cmd[3:] + ["--do", "b 6; c; s; p", "--html", str(page)])
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', page.read_text(), re.S).group(1))
    assert data["labels"] == ["c → continue", "s → step"] and "breakpoints: 6" in data["title"]
    assert [s["line"] for s in data["real"]["steps"]] == [6, 7]  # the real landings beside the model's
    assert data["real"]["steps"][0]["state"] == {"f": "<function>", "x": "3", "y": "7", "z": "10"}
    refused = run_cli(cmd[3:] + ["--do", "s", "--html", str(tmp_path)])
    assert refused.returncode == 2 and "is a folder" in refused.stderr and "Traceback" not in refused.stderr


class _Wrong(_Runner):
    """A stand-in that predicts the same wrong output for every candidate."""

    def generate(self, inputs, decoding=None, **_):
        return [self.Generated("-99\n", -1.0, 1) for _ in inputs]


def test_the_sandbox_checks_but_never_reorders_and_earlier_output_does_not_count():
    from codeexecutor.debugger.inverse import Tries, inputs_for
    from codeexecutor.debugger.proposals import call_candidates

    blind = inputs_for(_Wrong(), SUM_TO, "6", call="f", tries=Tries(k=32, candidates=32))
    assert [c["input"] for c in blind["ranked"]] == call_candidates(SUM_TO, "f", "6", None, 32)  # proposed order
    assert blind["pass@1"] == blind["ranked"][0]["reproduces"] and blind["pass@32"]  # f(4) is among them
    chatty = SUM_TO + "print('start')\nprint(f(3))\n"  # prints before the call: only the call's line counts
    assert inputs_for(_Runner(), chatty, "6", call="f")["pass@1"]
    reads = SUM_TO + "k = int(input())\n"  # reads stdin: the call's candidates run with the stdin given
    assert inputs_for(_Runner(), reads, "6", call="f", stdin="3\n")["pass@1"]
    assert inputs_for(_Runner(), SUM_TO, "1e999", call="f(1e999)")["candidates"] > 1  # no crash on inf


def test_coverage_asks_only_of_lines_that_can_have_an_event():
    from eval.reval import event_lines

    code = "def f(x):\n    '''doc'''\n    if x:\n        return 1\n    else:\n        return 2\nf(1)\n"
    assert event_lines(code) == {1, 3, 4, 6, 7}  # not the docstring, not else:


@pytest.mark.parametrize("flag", [["--inverse", "8"], ["--reval"]])
def test_a_folder_without_the_sets_a_measure_reads_is_refused(tmp_path, flag):
    model = str(ROOT / "models" / "codeexecutor-mini-cpu")
    cmd = [sys.executable, "-m", "codeexecutor", "evaluate", "--model", model, "--data", str(tmp_path), *flag]
    out = run_cli(cmd[3:])
    assert out.returncode == 2 and ("holds none" in out.stderr or "has none" in out.stderr), out.stderr[-1500:]
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir())  # no empty report written


def test_the_debugger_measure_reports_what_it_scored_and_where(demo_data, overfit_model):
    from eval.debugger import debugger_tasks, table

    report = debugger_tasks(str(overfit_model[0]), str(demo_data), "test", limit=1, positions=1)
    assert report["positions"] == 1 and report["device"] and report["torch"] and report["metric"]
    assert "codenetmut" in report["datasets"] and table(report).startswith("dataset")
    step = report["datasets"]["codenetmut"]["step"]
    assert step["scored"] == 1 and all(0 <= step[m] <= 100 for m in ("state", "event", "unchanged", "full_trace"))
