"""Metrics on hand-computed cases."""

import functools
import json
import math

import pytest
import torch

from codeexecutor.execution import Step
from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.format import format_trace
from codeexecutor.modeling.trace_metrics import (
    TraceRecord,
    aligned_metrics,
    error_metrics,
    orca_metrics,
    release_metrics,
    release_singleline_metrics,
    weighted_f1,
)
from eval.code_search import mean_average_precision
from eval.rerank import docstring_examples, pass_at_k, ranked_pass_at_k

from .conftest import ROOT

# The paper's Figure 3: six steps, the model gets nmin wrong (2 instead of 0) in step 5.
GOLD = [
    (1, {"rec": "['10', '3', '5']"}),
    (2, {"rec": "['10', '3', '5']", "n": "10", "a": "3", "b": "5"}),
    (3, {"rec": "['10', '3', '5']", "n": "10", "a": "3", "b": "5", "nin": "[3, 5]"}),
    (4, {"rec": "['10', '3', '5']", "n": "10", "a": "3", "b": "5", "nin": "[3, 5]", "nmax": "3"}),
    (5, {"rec": "['10', '3', '5']", "n": "10", "a": "3", "b": "5", "nin": "[3, 5]", "nmax": "3", "nmin": "0"}),
    (6, {"rec": "['10', '3', '5']", "n": "10", "a": "3", "b": "5", "nin": "[3, 5]", "nmax": "3", "nmin": "0"}),
]

SHORT = Decoding(beam=1, max_length=24, names=False, values=False)  # greedy, short: the resume tests' decoding


def rec(steps, exc=None, line=None, outputs=None):
    outputs = outputs or {}
    return TraceRecord.from_text(
        format_trace([Step(lineno, s, outputs.get(i, "")) for i, (lineno, s) in enumerate(steps)], error=None)
        + (f" <exception> <{line - 1}> {exc}" if exc else "")
    )


# OFFICIAL-RELEASE.md's hand-checked cases: gold has 3 state steps and one output step.
HAND_GOLD = (
    "<line> <0> <state> a : 1 </state> <line> <1> <state> a : 1 <dictsep> b : 3 </state> <output> 3 "
    "<line> <2> <state> a : 1 <dictsep> b : 4 </state>"
)
ORDER = (
    "output_accuracy",
    "trace_accuracy",
    "line_precision",
    "line_recall",
    "line_f1",
    "identifier_precision",
    "identifier_recall",
    "identifier_f1",
)


def official(preds, golds):
    m = release_metrics(preds, golds)
    return [m[k] for k in ORDER]


@pytest.mark.parametrize(
    "pred,golds,expected",
    [
        (HAND_GOLD.replace("b : 3", "b : 5"), [HAND_GOLD], [100, 0, 75, 75, 75, 80, 80, 80]),  # one wrong value
        (
            HAND_GOLD.replace("<line> <2>", "<line> <7>"),
            [HAND_GOLD],
            [100, 0, 75, 75, 75, 60, 60, 60],
        ),  # one wrong line
        (HAND_GOLD.replace("<output> 3", "<output> 4"), [HAND_GOLD], [0, 0, 75, 75, 75, 100, 100, 100]),  # wrong output
    ],
)
def test_release_metric_hand_cases(pred, golds, expected):
    assert official([pred], golds) == expected


def test_release_metric_trailing_output_is_never_scored():
    # the prediction differs only by an <output> after its last state; plus one identical program
    pred = HAND_GOLD + " <output> 99"
    assert official([pred, HAND_GOLD], [HAND_GOLD, HAND_GOLD]) == [100] * 8


def test_release_metric_own_cases():
    # a missing step shifts every later position (the release compares by position):
    # gold segments 4, predicted 3; only the first is equal
    pred = HAND_GOLD.replace("<line> <1> <state> a : 1 <dictsep> b : 3 </state> ", "")
    m = release_metrics([pred], [HAND_GOLD])
    assert (m["line_precision"], m["line_recall"]) == (round(100 / 3, 2), 25.0)
    # identifiers: pred 1 + 0 (output) + 2 = 3; gold 5; credited: step 0 (1 pair); position 1 is an output in
    # the prediction, position 2 the output in the gold: no credit; so 1/3 and 1/5
    assert (m["identifier_precision"], m["identifier_recall"]) == (round(100 / 3, 2), 20.0)
    assert m["output_accuracy"] == 100.0 and m["trace_accuracy"] == 0.0
    # values compare as strings after stripping; the order of names in a state does not matter
    swapped = HAND_GOLD.replace("a : 1 <dictsep> b : 3", "b :  3 <dictsep> a : 1")
    assert official([swapped], [HAND_GOLD])[1] == 100.0
    # a gold without output: output accuracy has no programs to count
    assert (
        release_metrics(["<line> <0> <state> a : 1 </state>"], ["<line> <0> <state> a : 2 </state>"])["output_accuracy"]
        is None
    )
    # an unfinished last state is dropped on both sides
    cut = HAND_GOLD + " <line> <3> <state> a : 1"
    assert official([cut], [HAND_GOLD]) == [100] * 8


def test_release_singleline_metric():
    m = release_singleline_metrics(
        ["<state> a : 1 <dictsep> b : 2 </state>", "<state> a : 1 </state>"],
        ["<state> b : 2 <dictsep> a : 1 </state>", "<state> a : 3 </state>"],
    )
    assert m["trace_accuracy"] == 50.0
    assert (m["identifier_precision"], m["identifier_recall"]) == (round(100 * 2 / 3, 2), round(100 * 2 / 3, 2))
    # names and values are the first two ':' fields, as the release splits them
    assert (
        release_singleline_metrics(["<state> d : { a : 1 } </state>"], ["<state> d : { a : 2 } </state>"])[
            "trace_accuracy"
        ]
        == 100.0
    )


def test_aligned_variant_on_a_missing_step():
    pred = GOLD[:2] + GOLD[3:]  # step 3 skipped
    ali = aligned_metrics([rec(pred)], [rec(GOLD)])
    assert ali["aligned_line_precision"] == 100.0 and ali["aligned_line_recall"] == pytest.approx(100 * 5 / 6)
    assert all(k.startswith("aligned_") or k == "programs" for k in ali)


def test_cut_final_segment_is_dropped_before_scoring():
    text = format_trace([Step(lineno, s) for lineno, s in GOLD]) + " <line> <6> <state> rec : ['10'"
    assert len(TraceRecord.from_text(text).steps) == 6


def test_error_metrics_hand_computed():
    crash = lambda t, lineno: rec(GOLD[:2], t, lineno)  # noqa: E731
    ok = rec(GOLD[:2])
    preds = [crash("KeyError", 2), crash("IndexError", 1), ok, crash("KeyError", 2), ok]
    refs = [crash("KeyError", 2), crash("KeyError", 2), crash("TypeError", 2), ok, ok]
    m = error_metrics(preds, refs)
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (2, 1, 1, 1)
    assert m["detection_accuracy"] == 60.0
    assert m["localisation_accuracy"] == pytest.approx(100 / 3)  # 1 of 3 real crashes at the right line
    assert m["kind_accuracy"] == pytest.approx(100 / 3)
    # classes: KeyError (support 2: p=1/1, r=1/2 -> f1 2/3), TypeError (support 1: f1 0)
    assert m["kind_weighted_f1"] == pytest.approx(100 * (2 * (2 / 3) + 0) / 3)
    assert weighted_f1(["a"], ["a"]) == 1.0


def test_orca_metrics():
    m = orca_metrics([rec(GOLD[:3] + GOLD[4:5])], [rec(GOLD)])
    assert m["exact_match"] == 0.0
    assert m["prefix_precision"] == 75.0 and m["prefix_recall"] == 50.0
    assert m["coverage_precision"] == 100.0 and m["coverage_recall"] == pytest.approx(400 / 6)


def test_pass_at_k():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(5, 0, 10) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - math.comb(7, 2) / math.comb(10, 2))


def test_ranked_pass_at_k_averages_over_tie_orders():
    passed = [False] * 7 + [True] * 3
    for k in (1, 2, 5, 10, 20):  # one big tie is the unranked estimator
        assert ranked_pass_at_k([0.5] * 10, passed, k) == pytest.approx(pass_at_k(10, 3, k))
    assert ranked_pass_at_k([0.1, 0.9, 0.2], [False, True, False], 1) == 1.0
    assert ranked_pass_at_k([0.1, 0.9, 0.2], [True, False, False], 2) == 0.0
    scores, ok = [0.9, 0.9, 0.5, 0.5, 0.5], [False, False, True, False, False]
    assert ranked_pass_at_k(scores, ok, 2) == 0.0  # the failing pair fills both places
    assert ranked_pass_at_k(scores, ok, 3) == pytest.approx(1 / 3)  # one draw from the next group
    assert ranked_pass_at_k(scores, ok, 4) == pytest.approx(2 / 3)


def test_docstring_examples():
    prompt = 'def f(x):\n    """Doubles.\n    >>> f(2)\n    4\n    >>> f("a")\n    \'aa\'\n    f(3) == 6\n    """\n'
    assert docstring_examples(prompt, "f") == [("f(2)", "4"), ('f("a")', "'aa'"), ("f(3)", "6")]


def test_map():
    scores = torch.tensor([[9, 5, 1, 0], [5, 9, 0, 1], [1, 0, 9, 5], [0, 1, 5, 9.0]])
    assert mean_average_precision(scores, ["a", "a", "b", "b"]) == 100.0
    scores = torch.tensor([[9, 0, 5, 1], [0, 9, 1, 5], [5, 1, 9, 0], [1, 5, 0, 9.0]])
    assert mean_average_precision(scores, ["a", "a", "b", "b"]) == pytest.approx(
        100 * (1 / 3)
    )  # relevant one ranked 3rd


def test_local_metric_modules_load_offline(monkeypatch):
    import evaluate

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    ce = evaluate.load(str(ROOT / "eval" / "metrics" / "code_execution"))
    gold = format_trace([Step(lineno, s) for lineno, s in GOLD])
    assert ce.compute(predictions=[gold], references=[gold])["trace_accuracy"] == 100.0
    out = ce.compute(predictions=[HAND_GOLD.replace("b : 3", "b : 5")], references=[HAND_GOLD], aligned=True)
    assert [out[k] for k in ORDER] == [100, 0, 75, 75, 75, 80, 80, 80] and "aligned_line_f1" in out
    re_ = evaluate.load(str(ROOT / "eval" / "metrics" / "runtime_errors"))
    out = re_.compute(predictions=[gold + " <exception> <5> KeyError"], references=[gold])
    assert out["fp"] == 1 and out["detection_accuracy"] == 0.0


def test_evaluate_and_rerank_end_to_end(overfit_model, demo_data, tmp_path):
    from eval.evaluate import evaluate_model
    from eval.report import table3
    from eval.rerank import Problem, rerank

    model, _ = overfit_model
    rep = evaluate_model(
        str(model),
        str(demo_data),
        limit=5,
        progress=False,
        decoding=Decoding(beam=1, max_length=32, names=False, values=False),
    )
    assert {"codenetmut", "tutorial", "singleline", "functions", "functions_errors"} <= set(rep["datasets"])
    crashes = rep["runtime_errors_functions"]  # the functions' crashes against the clean functions
    assert crashes["tp"] + crashes["fn"] == rep["datasets"]["functions_errors"]["examples"]
    assert "trace acc" in table3(rep) and "inference/metric.py" in table3(rep)
    assert all(1 <= e["examples"] <= 5 for e in rep["datasets"].values())
    assert len(rep["predictions"]) == sum(e["examples"] for e in rep["datasets"].values())
    for name, e in rep["datasets"].items():  # the unfinished count agrees with the flagged predictions
        assert e["unfinished"]["predictions"] == sum(
            not p["finished"] for p in rep["predictions"] if p["dataset"] == name
        )
    long = {n: e["past_code_window"]["examples"] for n, e in rep["datasets"].items() if "past_code_window" in e}
    assert long, "the tiny model reads 124 code tokens: some demo programs are longer"
    for name, count in long.items():  # named in the report, the unread lines in each prediction
        assert count == sum(bool(p.get("unseen_lines")) for p in rep["predictions"] if p["dataset"] == name)
        assert any(note.startswith(f"{name}: {count} of ") for note in rep["notes"])
    cut = evaluate_model(
        str(model), str(demo_data), limit=5, progress=False, decoding=Decoding(max_length=3, names=False, values=False)
    )
    assert cut["beam"] == 1  # no beam given: decoded as `trace` decodes our own formats, greedily
    assert all(
        e["unfinished"]["share"] == 100.0 and e["unfinished"]["trace_accuracy_of_finished"] is None
        for e in cut["datasets"].values()
    )
    assert "hit the length cap before </s>" in table3(cut)
    if "runtime_errors" in cut:  # no trace ended, so no verdict over finished ones
        assert cut["runtime_errors"]["unfinished_share"] == 100.0 and "finished_only" not in cut["runtime_errors"]
    prob = Problem(
        "t/0",
        'def add(a, b):\n    """>>> add(1, 2)\n    3\n    """\n',
        "add",
        "def check(f):\n    assert f(1, 2) == 3\n",
        [("add(1, 2)", "3")],
        ["    return a + b\n", "    return a - b\n", "    return b + a\n", "    return a + b\n"],
    )
    out = rerank([prob], str(model), Decoding(beam=1, max_length=16, names=False, values=False), progress=False)
    assert out["per_problem"][0]["correct"] == 3
    assert out["candidates"] == 4 and out["decoded"] == 3  # a repeated sample is decoded once
    assert out["summary"]["oracle"]["pass@1"] == 100.0
    assert out["summary"]["baseline"]["pass@1"] == pytest.approx(100 * 3 / 4)
    assert out["summary"]["oracle_expected"]["pass@1"] == 100.0  # the three right sums print 3
    assert out["per_problem"][0]["passed"] == [True, False, True, True]
    assert len(out["per_problem"][0]["model_scores"]) == 4
    ruled = rerank([prob], str(model), Decoding(beam=1, max_length=16, names=True, values=True), progress=False)
    assert ruled["constrained_names"] and ruled["constrained_values"] and not out["constrained_values"]
    assert ruled["summary"]["oracle"] == out["summary"]["oracle"]  # the rules change predictions, not the tests


def test_find_datasets_follows_links_and_lists_each_folder_once(tmp_path):
    from eval.evaluate import find_datasets

    (tmp_path / "shared" / "codenetmut" / "errors").mkdir(parents=True)
    (tmp_path / "shared" / "codenetmut" / "errors" / "dataset_dict.json").write_text("{}")
    data = tmp_path / "data"
    (data / "singleline" / "singleline").mkdir(parents=True)
    (data / "singleline" / "singleline" / "dataset_dict.json").write_text("{}")
    (data / "codenetmut").symlink_to(tmp_path / "shared" / "codenetmut")  # shared with another data folder
    (data / "singleline" / "loop").symlink_to(data)  # a link back up the tree ends the walk there
    found = find_datasets(str(data))
    assert sorted(found) == ["errors", "singleline"]
    assert found["errors"] == str(data / "codenetmut" / "errors")


def test_an_evaluation_appends_its_answers_and_resumes_from_them(overfit_model, demo_data, tmp_path):
    """Answers go to a JSON Lines file batch by batch; the same evaluation started again
    decodes nothing it has, a line cut by a kill is redone, and other settings start afresh."""
    from eval.evaluate import EvalOptions, evaluate_model, sample

    model, _ = overfit_model
    run = functools.partial(evaluate_model, str(model), str(demo_data), limit=4, progress=False, decoding=SHORT)
    answers = tmp_path / "answers.jsonl"
    first = run(options=EvalOptions(batch_size=2, answers=str(answers)))
    lines = answers.read_text().splitlines()
    assert first["answers"]["resumed"] == 0 and len(lines) == len(first["predictions"])
    answers.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # the last one cut short
    again = run(options=EvalOptions(batch_size=2, answers=str(answers)))
    assert again["answers"]["resumed"] == len(lines) - 1
    assert [p["prediction"] for p in again["predictions"]] == [p["prediction"] for p in first["predictions"]]
    other = run(
        options=EvalOptions(answers=str(answers)), decoding=Decoding(beam=1, max_length=20, names=False, values=False)
    )
    assert other["answers"]["resumed"] == 0  # another length cap: another answer
    rows = [json.loads(line) for line in answers.read_text().splitlines()]  # every line whole after the resume
    assert len(rows) == len(lines) + len(other["predictions"])
    assert set(sample(1000, 50)) < set(sample(1000, 300)) and set(sample(80, 5)) < set(sample(80, 30))


def test_shards_decode_apart_and_a_plain_run_scores_their_answers(overfit_model, demo_data, tmp_path):
    """Two shards decode disjoint halves into files of their own; the run without a shard
    decodes nothing more and scores as one unsharded evaluation does."""
    from eval.evaluate import EvalOptions, evaluate_model

    model, _ = overfit_model
    run = functools.partial(evaluate_model, str(model), str(demo_data), limit=4, progress=False, decoding=SHORT)
    whole = run(options=EvalOptions(batch_size=2, answers=str(tmp_path / "whole.jsonl")))
    answers = tmp_path / "answers.jsonl"
    parts = [run(options=EvalOptions(batch_size=2, answers=str(answers), shard=(i, 2))) for i in range(2)]
    assert "predictions" not in parts[0] and parts[0]["answers"].endswith(".shard-0-of-2")
    keys = [{json.loads(line)["key"] for line in open(p["answers"])} for p in parts]
    assert keys[0] and keys[1] and not keys[0] & keys[1]
    assert sum(p["decoded"] for p in parts) == len(whole["predictions"])
    scored = run(options=EvalOptions(batch_size=2, answers=str(answers)))
    assert scored["answers"]["resumed"] == len(whole["predictions"])
    assert [p["prediction"] for p in scored["predictions"]] == [p["prediction"] for p in whole["predictions"]]
    assert not answers.exists() or answers.read_text() == ""  # nothing left to decode: nothing appended
