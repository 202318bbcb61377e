"""The lab's scripts: anchor_choice's length halves, stage_exports' order, the constraint
and exception-bias benches' tables, and their refusals of a run they cannot read."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

TRACE = "<line> <{k}> <state> a : {v} </state> <output> {v}\\n"


def test_halves_split_at_the_reference_length_and_score_each_half_apart():
    from anchor_choice import halves

    golds = [TRACE.format(k=k, v="x" * n) for k, n in enumerate((1, 40, 2, 50))]
    preds = list(golds)
    preds[1] = TRACE.format(k=1, v="wrong")  # one long answer wrong: the short half stays perfect
    out = halves(preds, golds)
    assert out["short"]["examples"] == out["long"]["examples"] == 2
    assert out["short"]["trace_accuracy"] == 100.0 and out["long"]["trace_accuracy"] == 50.0
    assert out["short"]["max_reference_chars"] < out["long"]["max_reference_chars"] == len(golds[3])


def test_stage_exports_come_in_stage_order_and_a_run_without_them_is_refused(tmp_path):
    import subprocess

    import stage_exports

    for name in ("stage10-extra", "stage2-tutorial", "stage1-singleline", "stage1-singleline-best", "stage3-codenet"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "stage4-unfinished").mkdir()  # no export written yet
    assert [p.rsplit("/", 1)[1] for p in stage_exports.stage_exports(str(tmp_path))] == [
        "stage1-singleline",
        "stage2-tutorial",
        "stage3-codenet",
        "stage10-extra",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    run = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "stage_exports.py"), "--run", str(empty)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "no stage exports under" in run.stderr and "Traceback" not in run.stderr


def test_constraint_bench_compares_both_decodings_and_refuses_a_run_without_a_model(tmp_path):
    import subprocess

    import bench_constraint

    lines = [
        {"dataset": "tutorial", "decoding_rule": "free", "trace_accuracy": 28.0, "unfinished_share": 30.0},
        {"dataset": "tutorial", "decoding_rule": "names", "trace_accuracy": 28.67, "unfinished_share": 19.33},
        {"dataset": "singleline", "decoding_rule": "names", "trace_accuracy": 52.33, "unfinished_share": None},
        {"dataset": "tutorial", "decoding_rule": "names-v1", "trace_accuracy": 1.0, "unfinished_share": 1.0},
    ]
    table = bench_constraint.compare(lines).splitlines()
    assert table[0].split()[1:] == ["free", "trace", "free", "cut", "names", "trace", "names", "cut"]  # only those run
    assert table[1].split() == ["tutorial", "28.0", "30.0%", "28.67", "19.3%"]
    assert table[2].split() == ["singleline", "-", "-", "52.33", "-"]
    run = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "bench_constraint.py"), "--run", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "no model at" in run.stderr and "Traceback" not in run.stderr


def test_exception_bias_bench_replays_verdicts_and_chooses_the_bias_on_its_split(tmp_path):
    import math
    import subprocess

    import bench_exception_bias as eb

    programs = [
        {"crashed": True, "peak": -0.5},
        {"crashed": True, "peak": -1.5},
        {"crashed": True, "peak": None},
        {"crashed": False, "peak": -3.0},
        {"crashed": False, "peak": -1.0},
        {"crashed": False, "peak": -6.0},
    ]
    assert eb.replay(programs, 0.0)["tp"] == 0 and eb.replay(programs, 0.0)["detection_accuracy"] == 50
    at = eb.replay(programs, 2.0)  # -0.5, -1.5 (crashes) and -1.0 (clean) are above -2
    assert (at["tp"], at["fp"]) == (2, 1) and math.isclose(at["detection_accuracy"], 400 / 6)
    bias = eb.choose_bias(programs)
    assert bias == 0.75  # midway between the peaks -0.5 and -1.0: one crash caught, no false alarm
    assert eb.choose_bias([{"crashed": False, "peak": -1.0}, {"crashed": True, "peak": -2.0}]) == 0.0  # none beats 0
    ends = [
        {"crashed": True, "written": False, "finished": True, "end": -1.0, "peak": -0.1},
        {"crashed": True, "written": False, "finished": False, "end": -0.5, "peak": -0.2},  # cut: never ends
        {"crashed": False, "written": False, "finished": True, "end": -3.0, "peak": -0.3},
        {"crashed": False, "written": True, "finished": True, "end": -9.0, "peak": 1.0},
    ]  # a crash written already
    assert (eb.replay(ends, 2.0, "end")["tp"], eb.replay(ends, 2.0, "end")["fp"]) == (1, 1)
    assert (
        eb.choose_bias(ends, "end") == 2.0 and eb.auroc(ends, "end") == 25.0
    )  # 1 of 4 (crash, clean) pairs ranked right
    run = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "bench_exception_bias.py"), "--run", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "no model at" in run.stderr and "Traceback" not in run.stderr


def test_the_singleline_pilot_refuses_a_folder_without_the_dataset(tmp_path):
    import subprocess

    run = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "pilot_singleline.py"), "--name", "x", "--steps", "1"]
        + ["--data", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "no SingleLine dataset under" in run.stderr and "Traceback" not in run.stderr
