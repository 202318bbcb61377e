"""Compact traces (modeling/compact.py): which steps are deltas, and that expanding the
compact text gives back the full-state text exactly, on every example of real builds."""

import json

import datasets
import pytest

from codeexecutor.execution.records import ExecError, Step
from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.compact import compact_plan, expand, line_scopes
from codeexecutor.modeling.format import finish_order, format_trace, parse_trace
from codeexecutor.modeling.profiles import Profile

from .conftest import SHARED_DATA

FUNC = """def f(a):
    b = a + 1
    return b
x = f(1)
y = x
"""


def test_plan_writes_changes_and_whole_states_where_frames_or_names_change():
    steps = [
        Step(1, {"f": "<function>"}),
        Step(2, {"a": "1", "b": "2"}),
        Step(3, {"a": "1", "b": "2"}),
        Step(4, {"f": "<function>", "x": "2"}),
        Step(5, {"f": "<function>", "x": "2", "y": "2"}),
        Step(5, {"f": "<function>", "y": "2"}),  # `del x`
        Step(5, {"f": "<function>", "y": "3"}),
    ]
    plan = compact_plan(steps, FUNC)
    assert plan == [None, None, [], None, ["y"], None, ["y"]]
    assert line_scopes(FUNC) == {2: 2, 3: 2}
    # without the code, a same-named frame would be a delta; the order check still holds
    assert compact_plan([Step(2, {"b": "1"}), Step(2, {"a": "0", "b": "1"})]) == [None, None]


def test_compact_text_and_its_expansion():
    steps = [Step(1, {"a": "1"}), Step(2, {"a": "1", "s": "'x y'"}, "x y\n"), Step(3, {"a": "2", "s": "'x y'"})]
    error = ExecError("ZeroDivisionError", "division by zero", 3)
    full = format_trace(steps, error=error)
    compact = format_trace(steps, error=error, compact=True)
    assert compact == (
        "<line> <0> <state> a : 1 </state> <line> <1> <delta> s : 'x y' </state> <output> x y\\n "
        "<line> <2> <delta> a : 2 </state> <exception> <2> ZeroDivisionError"
    )
    e = expand(compact)
    assert e.text == full and not e.problems and (e.deltas, e.wholes) == (2, 1)
    assert parse_trace(compact).steps == parse_trace(full).steps
    assert expand(full).text == full  # full text is left alone


def test_malformed_generation_expands_as_far_as_it_can():
    e = expand("<line> <3> <delta> x : 1 </state> <line> <4> <delta> y : 2 <dictsep> bad </state> <line> <5> <delta> z")
    assert e.text.startswith("<line> <3> <state> x : 1 </state> <line> <4> <state> x : 1 <dictsep> y : 2 </state>")
    assert e.text.endswith("<line> <5> <delta> z")  # a step left open stays as written (the metric drops it)
    assert len(e.problems) == 2 and "before any whole state" in e.problems[0]
    parsed = parse_trace(e.text)
    assert [s.state for s in parsed.steps] == [{"x": "1"}, {"x": "1", "y": "2"}]


def _assert_lossless(folder) -> int:
    """Every row's compact target expands to its full target, and the states parsed back
    are the tracer's (a step at line 0, code the tracer attributes to no line, has no
    line token the parser reads, in either format)."""
    checked = 0
    for name in (
        "codenetmut/codenetmut",
        "codenetmut/errors",
        "tutorial/tutorial",
        "functions/functions",
        "functions/functions_errors",
    ):
        path = folder / name
        if not path.exists():
            continue
        for split, table in datasets.load_from_disk(str(path)).items():
            for row in table:
                raw = [
                    Step(s["line"], s["state"], s.get("output", ""), s.get("depth", 0))
                    for s in json.loads(row["steps"])
                ]
                crashed = bool(row["error"]) and row["status"] in ("error", "memory")  # as Profile.example reads it
                for order, steps in (("start", raw), ("end", finish_order(raw, crashed))):
                    full, delta = Profile("exact", order=order), Profile("exact", state="delta", order=order)
                    want = full.example(row)[1]
                    got = delta.expand(delta.example(row)[1])
                    assert got.text == want and not got.problems, (name, split, row["id"], order)
                    lines = [(s.line, dict(s.state)) for s in steps if s.line > 0]  # line 0: see below
                    assert [(s.line, s.state) for s in parse_trace(got.text).steps] == lines, (
                        name,
                        split,
                        row["id"],
                        order,
                    )
                checked += 1
    return checked


def test_values_that_begin_or_end_with_spaces_survive_expansion():
    # An object whose repr is ' - 3' (TheAlgorithms' Polynomial): the pair is `self :  - 3`.
    steps = [
        Step(1, {"self": " - 3", "d": "2"}),
        Step(2, {"self": " - 3 ", "d": "2"}),
        Step(3, {"self": " - 3 ", "d": "4"}),
    ]
    full = format_trace(steps)
    compact = format_trace(steps, compact=True)
    assert "<delta> self :  - 3  </state>" in compact
    assert expand(compact).text == full


def test_lossless_on_every_demo_example(demo_data):
    assert _assert_lossless(demo_data) > 50


@pytest.mark.integration
@pytest.mark.data
def test_lossless_on_every_example_of_a_shared_corpus_build(tmp_path):
    from curricula.codenet import CodeNetBuilder
    from curricula.common import BuildSetup
    from curricula.tutorial import build_tutorial

    corpus, tutorial = SHARED_DATA / "atcoder-python", SHARED_DATA / "python-tutorial" / "tutorial_rst"
    if not corpus.exists() or not tutorial.exists():
        pytest.skip("../shared/data is not available")
    CodeNetBuilder([str(corpus)], str(tmp_path / "codenetmut"), mutants=4, setup=BuildSetup(workers=2, limit=400)).run(
        progress=False
    )
    build_tutorial(str(tmp_path / "tutorial"), sources=str(tutorial), mutants=2, workers=2, progress=False)
    functions = SHARED_DATA / "thealgorithms-python" / "files" / "maths"
    if functions.exists():  # custom reprs, recursion, classes
        from curricula.functions import FunctionsBuilder

        FunctionsBuilder([str(functions)], str(tmp_path / "functions"), mutants=2, input_mutants=1, humaneval=None).run(
            progress=False
        )
    assert _assert_lossless(tmp_path) > 1000


def test_a_compact_model_generates_deltas_that_every_consumer_reads_as_whole_states(overfit_delta_model, tmp_path):
    from codeexecutor.generation import TraceGenerator
    from eval.evaluate import EvalOptions, evaluate_model

    path, rows = overfit_delta_model
    gen = TraceGenerator(str(path))
    assert gen.profile.delta and "<delta>" in gen.tok.get_vocab()
    full = gen.profile.full
    outs = gen.generate(
        [gen.code_input(r["code"], r["task"]) for r in rows], Decoding(beam=1, names=False, values=False)
    )
    for o, r in zip(outs, rows):
        assert "<delta>" in o.compact and "<delta>" not in o.text and o.expansion_problems == 0
        # the whole-state trace, scored as a full model's would be (cut where references are)
        assert gen.encoder.scored(o.text) == gen.encoder.gold(full.example(r)[1])
        assert gen.parse(o.text).steps == gen.parse(o.compact).steps
    assert (
        gen.generate([gen.code_input(rows[0]["code"], rows[0]["task"])], Decoding(beam=3, names=False, values=False))[
            0
        ].text
        == outs[0].text
    )
    # evaluate scores the expansion against whole-state references: the memorised rows are exact
    data = tmp_path / "data"
    import datasets

    sets = {
        "tutorial/tutorial": [r for r in rows if r["task"] == "tutorial"],
        "codenetmut/codenetmut": [r for r in rows if r["task"] == "codenet" and r["status"] == "ok"],
        "codenetmut/errors": [r for r in rows if r["status"] != "ok"],
    }
    for name, mine in sets.items():
        assert mine, name
        datasets.DatasetDict({"test": datasets.Dataset.from_list(mine)}).save_to_disk(str(data / name))
    report = evaluate_model(
        str(path),
        str(data),
        progress=False,
        decoding=Decoding(beam=1, names=False, values=False),
        options=EvalOptions(html=str(tmp_path / "pages")),
    )
    assert report["trace_state"] == "delta"
    pages = sorted(p.name for p in (tmp_path / "pages").iterdir())  # the viewer: a page per example and an index
    assert len(pages) == len(rows) + 1 and "index.html" in pages and report["html_index"].endswith("index.html")
    for entry in report["datasets"].values():
        assert entry["table3"]["trace_accuracy"] == 100.0 and entry["expansion"]["malformed"] == 0
    assert report["runtime_errors"]["detection_accuracy"] == 100.0  # the crashes come through the expansion
    assert report["runtime_errors"]["localisation_accuracy"] == 100.0

    from eval.exception_rank import exception_ranks

    ranks = exception_ranks(str(path), str(data))
    assert ranks["scored"] == len(sets["codenetmut/errors"]) and ranks["kinds"]["all"]["ranked_first"] == 100.0
