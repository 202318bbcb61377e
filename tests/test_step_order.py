"""Step order (`step_order`): the tracer's call depth, and traces written as lines finish,
so that a call's steps come before the line that made the call."""

import json

import pytest

from codeexecutor.errors import ConfigError
from codeexecutor.execution import Step
from codeexecutor.modeling.format import finish_order, parse_trace
from codeexecutor.modeling.model import CodeExecutorConfig
from codeexecutor.modeling.profiles import Profile, lacks_depth, profile_of

from .conftest import fixture_source

CALL = """def f(a):
    b = a * 2
    return b + 1
print(repr(f(3)))
"""


def test_the_tracer_records_each_steps_call_depth(pool):
    r = pool.execute(fixture_source("programs/recursion.py"))
    assert [(s.line, s.depth) for s in r.steps] == [(1, 0), (5, 0), (2, 1), (4, 1), (2, 2), (4, 2), (2, 3), (3, 3)]
    assert "depth" not in r.steps[0].to_json() and r.steps[2].to_json()["depth"] == 1


def test_finish_order_puts_a_calls_steps_before_the_line_that_made_it(pool):
    r = pool.execute(fixture_source("programs/recursion.py"))
    ordered = finish_order(r.steps)
    assert [s.line for s in ordered] == [1, 2, 2, 2, 3, 4, 4, 5]
    assert [s.depth for s in ordered] == [0, 1, 2, 3, 3, 2, 1, 0]
    assert sorted(map(id, ordered)) == sorted(map(id, r.steps))  # a permutation: nothing lost or doubled
    flat = [Step(1, {"a": "1"}), Step(2, {"a": "2"})]
    assert finish_order(flat) == flat  # module-level programs keep their order


def test_end_order_writes_the_result_after_the_steps_that_compute_it(pool):
    r = pool.execute(CALL)
    start = Profile("exact").trace(r.steps, r.error, CALL)
    end = Profile("exact", order="end").trace(r.steps, r.error, CALL)
    assert start.index("<output> 7") < start.index("b : 6")
    assert end.index("b : 6") < end.index("<output> 7") and end.endswith("<output> 7\\n")
    delta = Profile("exact", state="delta", order="end")
    assert delta.expand(delta.trace(r.steps, r.error, CALL)).text == end
    assert [s.line for s in parse_trace(end).steps] == [1, 2, 3, 4]


def test_a_crash_inside_a_call_follows_the_raising_line_and_waiting_lines_have_no_step(pool):
    src = "def g(a):\n    return 1 // a\ndef f(a):\n    b = g(a)\n    return b\nx = f(0)\n"
    r = pool.execute(src)
    assert [s.line for s in r.steps] == [1, 3, 6, 4, 2]
    text = Profile("exact", order="end").trace(r.steps, r.error, src)
    assert [s.line for s in parse_trace(text).steps] == [1, 3, 2]  # lines 6 and 4 wait on the call and never finish
    assert text.endswith("<line> <1> <state> a : 0 </state> <exception> <1> ZeroDivisionError")
    assert Profile("exact").trace(r.steps, r.error, src).count("<line>") == 5  # start order keeps every step


def test_the_order_is_saved_with_a_model_and_read_back():
    cfg = CodeExecutorConfig(**Profile("exact", state="delta", order="end").to_config())
    assert profile_of(cfg) == Profile("exact", True, "delta", "end")
    assert profile_of(CodeExecutorConfig()).order == "start"  # configs saved before the option
    assert Profile("exact", order="end").full.order == "end"  # references are scored in the model's order
    with pytest.raises(ValueError, match="step order"):
        Profile("exact", order="backwards")


def test_builds_without_depth_are_refused_for_end_order():
    old = {
        "task": "codenet",
        "code": CALL,
        "steps": json.dumps([{"line": 1, "state": {}}, {"line": 4, "state": {}}, {"line": 2, "state": {"a": "3"}}]),
    }
    new = dict(
        old,
        steps=json.dumps(
            [{"line": 1, "state": {}}, {"line": 4, "state": {}}, {"line": 2, "state": {"a": "3"}, "depth": 1}]
        ),
    )
    flat = {"task": "codenet", "code": "x = 1\n", "steps": json.dumps([{"line": 1, "state": {"x": "1"}}])}
    assert lacks_depth([old, flat]) and not lacks_depth([new, old]) and not lacks_depth([flat])


def test_a_curriculum_names_a_known_order():
    from codeexecutor.training.config import Curriculum

    stages = [{"name": "s", "steps": 1, "sources": [{"path": "x", "task": "codenet"}]}]
    with pytest.raises(ConfigError, match="step_order must be one of start, end or left out"):
        Curriculum.from_dict({"model": {"step_order": "sideways"}, "stages": stages})
    with pytest.raises(ConfigError, match="needs the exact profile"):
        Curriculum.from_dict({"model": {"step_order": "end", "format_profile": "official"}, "stages": stages})


def test_trace_compare_shows_the_real_run_in_end_order(pool):
    from codeexecutor.generation.api import _finish_ordered

    src = "def g(a):\n    return 1 // a\nx = g(1)\ny = g(0)\n"
    real = pool.execute(src)
    assert [s.line for s in real.steps] == [1, 3, 2, 4, 2]
    shown = _finish_ordered(real)
    assert [s.line for s in shown.steps] == [1, 2, 3, 2] and shown.error == real.error  # line 4 waits on the crash
