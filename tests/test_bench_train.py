"""bench_train (rows against fixed batches) and fp16 loss-scale logging."""

import json
import os
import sys
import types

import pytest
import torch

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments"))


def _tiny(vocab=300):
    from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel

    torch.manual_seed(0)
    return CodeExecutorModel(CodeExecutorConfig.preset("tiny", vocab_size=vocab, pad_token_id=1))


def test_rows_pad_less_than_fixed_batches_and_train_on_the_cpu(demo_data):
    import bench_train

    report = bench_train.batching(demo_data, 3, 8, 2048, "tiny")
    assert all(s["token_budget"] < s["fixed"] for s in report["padding_share"].values())
    assert report["fixed_real_tokens_per_s"] > 0 and report["token_budget_real_tokens_per_s"] > 0


def test_loss_scaling_is_logged_for_fp16_only():
    from codeexecutor.training.stages import loss_scaling

    fp16 = types.SimpleNamespace(fp16_enabled=lambda: True, optimizer=types.SimpleNamespace(cur_scale=32768.0), skipped_steps=3)
    assert loss_scaling(fp16) == {"loss_scale": 32768.0, "skipped_steps": 3}
    bf16 = types.SimpleNamespace(fp16_enabled=lambda: False, optimizer=None, skipped_steps=0)
    assert loss_scaling(bf16) == {}


def test_quality_defaults_pick_the_token_budget_by_device_and_pilot_refuses_missing_data(tmp_path):
    import subprocess

    import bench_quality

    assert bench_quality.MAX_TOKENS["cpu"] < bench_quality.MAX_TOKENS["gpu"]  # small CPU steps, full GPU batches
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "pilot_singleline.py"), "--name", "x", "--steps", "1",
                          "--data", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1 and "no SingleLine dataset under" in run.stderr and "Traceback" not in run.stderr


def test_quality_calibration_leaves_out_each_stage_set_up(tmp_path, monkeypatch):
    import json

    import bench_quality

    def fake_train(cur, run, log):  # 2 s of set-up on each stage's first step, then 0.3 s a step
        import os

        os.makedirs(run, exist_ok=True)
        with open(os.path.join(run, "train_log.jsonl"), "w") as f:
            for stage in cur["stages"]:
                for k in range(stage["steps"]):
                    f.write(json.dumps({"stage": stage["name"], "loss": 1.0, "stage_seconds": 2.0 + 0.3 * (k + 1)}) + "\n")
        return 0.0

    seen = []
    monkeypatch.setattr(bench_quality, "train", lambda cur, run, log: seen.append(cur) or fake_train(cur, run, log))
    per_step = bench_quality.calibrate(bench_quality.load_recipe(), str(tmp_path), str(tmp_path), 10, None, {}, {})
    assert all(abs(v - 0.3) < 1e-9 for v in per_step.values()), per_step
    mined = seen[0]["stages"][1]["sources"][0]
    assert mined["hardest"] == 10 and mined["mine_from"] == 20  # the calibration scores twice what it keeps
    assert bench_quality.calibration_steps(1024)["singleline"] == 60 and bench_quality.calibration_steps(8192)["singleline"] == 10


def test_quality_curriculum_is_the_recipe_with_the_runs_steps_data_and_mining(tmp_path):
    import yaml

    import bench_quality

    from codeexecutor.training.config import Curriculum

    recipe = bench_quality.load_recipe()
    steps = {"singleline": 30, "tutorial": 20, "codenet": 3000}
    raw = bench_quality.curriculum(recipe, str(tmp_path), str(tmp_path / "run"), steps, hardest=100, mine_from=300)
    cur = Curriculum.from_dict(raw)
    first, second, third = cur.stages
    assert [s.steps for s in cur.stages] == [30, 20, 3000] and [s.warmup for s in cur.stages] == [3, 2, 200]
    assert second.lr == third.lr < first.lr  # the later stages at a lower rate, as the recipe says
    singleline = [src for src in second.sources if src.task == "singleline"]
    assert [(src.hardest, src.mine_from) for src in singleline] == [(100, 300), (None, None)]
    assert sum(src.weight for src in singleline) == 0.5
    assert all(src.path.startswith(str(tmp_path) + "/") for st in cur.stages for src in st.sources)  # the run's data
    assert cur.train.output_dir == str(tmp_path / "run") and cur.train.autocast is None
    plain = bench_quality.curriculum(recipe, str(tmp_path), "run", steps, hardest=100)
    assert "mine_from" not in plain["stages"][1]["sources"][0]  # all of them scored when no pool is given
    assert recipe == bench_quality.load_recipe()  # the recipe itself is left as it was
    # the recipe is a curriculum run_pretrain.sh takes as it is
    on_disk = Curriculum.from_dict(yaml.safe_load(open(bench_quality.RECIPE)))
    assert on_disk.model.preset == "mini" and [s.name for s in on_disk.stages] == list(bench_quality.STAGE_SHARES)
    assert on_disk.data.dir == bench_quality.RECIPE_DATA
    assert all(src.path.startswith(bench_quality.RECIPE_DATA + "/") for st in on_disk.stages for src in st.sources)


def test_stage_exports_come_in_stage_order_and_a_run_without_them_is_refused(tmp_path):
    import subprocess

    import stage_exports

    for name in ("stage10-extra", "stage2-tutorial", "stage1-singleline", "stage1-singleline-best", "stage3-codenet"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "stage4-unfinished").mkdir()  # no export written yet
    assert [p.rsplit("/", 1)[1] for p in stage_exports.stage_exports(str(tmp_path))] == [
        "stage1-singleline", "stage2-tutorial", "stage3-codenet", "stage10-extra"]
    empty = tmp_path / "empty"
    empty.mkdir()
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "stage_exports.py"), "--run", str(empty)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "no stage exports under" in run.stderr and "Traceback" not in run.stderr


def test_quality_variants_name_their_results_and_reach_the_model_config(tmp_path):
    import bench_quality

    from codeexecutor.training.config import Curriculum

    recipe = bench_quality.load_recipe()
    base = recipe["model"]
    assert bench_quality.result_name("cpu", recipe, {}) == "quality-cpu"
    assert bench_quality.result_name("cpu", recipe, {"preset": base["preset"], "positions": base["positions"]}) == "quality-cpu"
    names = {bench_quality.result_name("cpu", recipe, {"preset": preset, "positions": positions})
             for preset in ("mini", "mini-wide") for positions in ("absolute", "rotary")}
    names.add(bench_quality.result_name("cpu", recipe, {"vocab_size": 2000}))
    names.add(bench_quality.result_name("cpu", recipe, {}, errors_weight=0.3))
    names.add(bench_quality.result_name("cpu", recipe, {"trace_state": "delta" if base["trace_state"] == "full" else "full"}))
    names.add(bench_quality.result_name("cpu", recipe, {}, functions_weight=0.3 + bench_quality.recipe_functions_weight(recipe)))
    other_order = "start" if base.get("step_order", "start") == "end" else "end"
    names.add(bench_quality.result_name("cpu", recipe, {"step_order": other_order}))
    names.add(bench_quality.result_name("cpu", recipe, {"exception_weight": 40.0}))
    other_window = "head" if base.get("code_window", "head") == "ends" else "ends"
    names.add(bench_quality.result_name("cpu", recipe, {"code_window": other_window}))
    assert len(names) == 11  # no variant overwrites another's results
    assert bench_quality.result_name("cpu", recipe, {"code_window": base.get("code_window", "head")}) == "quality-cpu"
    assert bench_quality.result_name("cpu", recipe, {"step_order": base.get("step_order", "start")}) == "quality-cpu"
    steps = {"singleline": 3, "tutorial": 2, "codenet": 1}
    third = Curriculum.from_dict(bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, errors_weight=0.3)).stages[2]
    assert third.sources[3].path.endswith("codenetmut/errors") and third.sources[3].weight == 0.3
    assert bench_quality.recipe_errors_weight(recipe) == 0.1
    weight = bench_quality.recipe_functions_weight(recipe) + 0.25
    with_functions = bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=weight)
    sources = Curriculum.from_dict(with_functions).stages[2].sources
    assert [(s.path[len(str(tmp_path)) + 1:], s.weight) for s in sources if "/functions/" in s.path] == [
        ("functions/functions", weight), ("functions/functions_errors", round(weight / 3, 4))]
    without = Curriculum.from_dict(bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=0))
    assert not [s for s in without.stages[2].sources if "/functions/" in s.path]
    assert bench_quality.recipe_functions_weight(bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10,
                                                                          functions_weight=0)) == 0.0
    for positions in ("absolute", "rotary"):
        cur = Curriculum.from_dict(bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, model={"positions": positions}))
        assert cur.model.positions == positions


def test_replan_fits_the_stages_left_into_the_time_left():
    import bench_quality

    per_step = {"singleline": 0.1, "tutorial": 0.2, "codenet": 0.3}
    rest = ["tutorial", "codenet"]
    for speed in (0.8, 1.0, 1.3):
        steps = bench_quality.replan(rest, 1000.0, per_step, speed, overhead_s=20.0, mining_s=30.0)
        used = sum(steps[n] * per_step[n] * speed for n in rest) + 2 * 20.0 + 30.0 * speed
        assert 0.97 * 1000 <= used <= 1000  # fills the time left, never more
    slow = bench_quality.replan(rest, 1000.0, per_step, 1.3, 20.0, 30.0)
    fast = bench_quality.replan(rest, 1000.0, per_step, 0.8, 20.0, 30.0)
    assert all(slow[n] < fast[n] for n in rest)
    assert bench_quality.replan(rest, 10.0, per_step, 1.0, 20.0, 30.0) == {"tutorial": 1, "codenet": 1}  # overrun: one step each


def test_a_slower_machine_than_calibrated_still_ends_within_the_budget(tmp_path):
    """Stage 1 runs 1.5x slower than calibrated; stages 2 and 3 are re-planned to fit."""
    import bench_quality

    per_step = {"singleline": 0.1, "tutorial": 0.2, "codenet": 0.3}
    budget, mining, slow, start_up = 3600.0, 60.0, 1.5, 15.0
    planned = bench_quality.plan(budget * 0.93, per_step, bench_quality.STAGE_SHARES, mining)
    run, now, calls = tmp_path / "run", [0.0], []

    def fake_train(cur, run_dir, log, max_steps=None):  # what the loop logs, on a simulated clock
        ends, done = 0, 0
        for st in cur["stages"]:
            done, ends = ends, ends + st["steps"]
            if ends == max_steps:
                break
        seconds = (ends - done) * per_step[st["name"]] * slow
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "train_log.jsonl"), "a") as f:
            f.write(json.dumps({"step": ends, "stage": st["name"], "loss": 1.0, "stage_tokens": 0,
                                "stage_seconds": seconds, "padding_share": 0.0}) + "\n")
        calls.append(max_steps)
        now[0] += seconds + start_up + (mining * slow if st["name"] == "tutorial" else 0)
        return seconds

    original = bench_quality.train
    bench_quality.train = fake_train
    try:
        make_cur = lambda steps: {"stages": [{"name": n, "steps": k} for n, k in steps.items()]}  # noqa: E731
        seconds, steps, replans = bench_quality.train_in_budget(make_cur, str(run), None, budget, per_step, planned, mining,
                                                                clock=lambda: now[0])
    finally:
        bench_quality.train = original
    assert calls == [steps["singleline"], steps["singleline"] + steps["tutorial"], sum(steps.values())]
    assert steps["singleline"] == planned["singleline"]
    assert steps["tutorial"] < planned["tutorial"] and steps["codenet"] < planned["codenet"]
    assert [r["after"] for r in replans] == ["singleline", "tutorial"]
    assert abs(replans[0]["speed_vs_calibration"] - slow) < 0.01 and abs(replans[0]["overhead_seconds"] - start_up) < 0.5
    assert 0.95 * budget <= seconds <= budget  # the budget holds (without re-planning: 1.5x it)


def test_a_result_names_the_machine_its_wall_clock_figures_came_from():
    from _common import fast_bf16, machine

    m = machine()
    assert m["cores"] >= 1 and m["torch_threads"] >= 1
    assert m["bf16_native"] is fast_bf16()
    assert m["device"] == ("cpu" if not torch.cuda.is_available() else torch.cuda.get_device_name(0))


def test_constraint_bench_compares_both_decodings_and_refuses_a_run_without_a_model(tmp_path):
    import subprocess

    import bench_constraint

    lines = [{"dataset": "tutorial", "decoding_rule": "free", "trace_accuracy": 28.0, "unfinished_share": 30.0},
             {"dataset": "tutorial", "decoding_rule": "names", "trace_accuracy": 28.67, "unfinished_share": 19.33},
             {"dataset": "singleline", "decoding_rule": "names", "trace_accuracy": 52.33, "unfinished_share": None},
             {"dataset": "tutorial", "decoding_rule": "names-v1", "trace_accuracy": 1.0, "unfinished_share": 1.0}]
    table = bench_constraint.compare(lines).splitlines()
    assert table[0].split()[1:] == ["free", "trace", "free", "cut", "names", "trace", "names", "cut"]  # only those run
    assert table[1].split() == ["tutorial", "28.0", "30.0%", "28.67", "19.3%"]
    assert table[2].split() == ["singleline", "-", "-", "52.33", "-"]
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "bench_constraint.py"), "--run", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "no model at" in run.stderr and "Traceback" not in run.stderr


def test_exception_bias_bench_replays_verdicts_and_chooses_the_bias_on_its_split(tmp_path):
    import math
    import subprocess

    import bench_exception_bias as eb

    programs = [{"crashed": True, "peak": -0.5}, {"crashed": True, "peak": -1.5}, {"crashed": True, "peak": None},
                {"crashed": False, "peak": -3.0}, {"crashed": False, "peak": -1.0}, {"crashed": False, "peak": -6.0}]
    assert eb.replay(programs, 0.0)["tp"] == 0 and eb.replay(programs, 0.0)["detection_accuracy"] == 50
    at = eb.replay(programs, 2.0)  # -0.5, -1.5 (crashes) and -1.0 (clean) are above -2
    assert (at["tp"], at["fp"]) == (2, 1) and math.isclose(at["detection_accuracy"], 400 / 6)
    bias = eb.choose_bias(programs)
    assert bias == 0.75  # midway between the peaks -0.5 and -1.0: one crash caught, no false alarm
    assert eb.choose_bias([{"crashed": False, "peak": -1.0}, {"crashed": True, "peak": -2.0}]) == 0.0  # none beats 0
    ends = [{"crashed": True, "written": False, "finished": True, "end": -1.0, "peak": -0.1},
            {"crashed": True, "written": False, "finished": False, "end": -0.5, "peak": -0.2},  # cut: never ends
            {"crashed": False, "written": False, "finished": True, "end": -3.0, "peak": -0.3},
            {"crashed": False, "written": True, "finished": True, "end": -9.0, "peak": 1.0}]  # a crash written already
    assert (eb.replay(ends, 2.0, "end")["tp"], eb.replay(ends, 2.0, "end")["fp"]) == (1, 1)
    assert eb.choose_bias(ends, "end") == 2.0 and eb.auroc(ends, "end") == 25.0  # 1 of 4 (crash, clean) pairs ranked right
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "bench_exception_bias.py"), "--run", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "no model at" in run.stderr and "Traceback" not in run.stderr


def test_busy_share_sees_another_process_burning_a_core():
    import os
    import subprocess

    from _common import busy_share

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        share = busy_share(1.0)
    finally:
        spinner.kill()
    assert share is not None and 0.5 / os.cpu_count() <= share <= 1.0  # one core of cpu_count, at least half the time


def test_a_build_without_call_depths_is_found_before_an_end_order_run(tmp_path):
    import json

    import datasets

    import bench_quality

    code = "def f(a):\n    return a\nx = f(1)\n"
    for name, depth in (("old", None), ("new", 1)):
        inner = {"line": 2, "state": {"a": "1"}, **({"depth": depth} if depth else {})}
        steps = [{"line": 1, "state": {}}, {"line": 3, "state": {}}, inner]
        table = datasets.Dataset.from_dict({"task": ["codenet"], "code": [code], "steps": [json.dumps(steps)]})
        datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / name / "codenetmut" / "codenetmut"))
    assert bench_quality.stale_build(str(tmp_path / "old")) and not bench_quality.stale_build(str(tmp_path / "new"))


def test_score_only_reads_a_finished_run_and_refuses_an_unfinished_one(tmp_path, capsys):
    import bench_quality
    import pytest

    run, calibration = tmp_path / "run", tmp_path / "calibration"
    (run / "final").mkdir(parents=True)
    calibration.mkdir()
    rows = [{"step": 1, "stage": "singleline", "loss": 1.0, "stage_seconds": 0.5},
            {"step": 4, "stage": "singleline", "loss": 1.0, "stage_seconds": 2.0},
            {"step": 4, "stage": "singleline", "eval": {}},
            {"step": 6, "stage": "tutorial", "loss": 1.0, "stage_seconds": 3.0},
            {"step": 7, "stage": "codenet", "loss": 1.0, "stage_seconds": 1.0}]
    (run / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (calibration / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"stage": name, "loss": 1.0, "stage_seconds": s} for name in ("singleline", "tutorial", "codenet") for s in (1.0, 1.5, 2.0)]))
    with pytest.raises(SystemExit) as exit_:  # no model yet
        bench_quality.finished_run(str(run), str(tmp_path))
    assert exit_.value.code == 2 and "needs a finished run" in capsys.readouterr().err
    (run / "final" / "config.json").write_text("{}")
    rates, seconds, steps = bench_quality.finished_run(str(run), str(tmp_path))
    assert steps == {"singleline": 4, "tutorial": 2, "codenet": 1} and seconds == 6.0
    assert rates == {"singleline": 0.5, "tutorial": 0.5, "codenet": 0.5}
    (run / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    with pytest.raises(SystemExit):  # stopped in stage 1
        bench_quality.finished_run(str(run), str(tmp_path))
    assert "did not finish" in capsys.readouterr().err


def test_comparison_columns_name_the_options_their_runs_set():
    import compare_quality

    assert compare_quality.extras({"code_window": "head", "exception_weight": None}) == ""
    assert compare_quality.extras({"code_window": "ends", "exception_weight": 40.0}) == ", ends window, exception weight 40"
    assert compare_quality.extras({"functions_stage": 0.5}) == ", a functions stage of 0.5 of stage 3"


def test_a_functions_stage_draws_every_source_as_often_as_stage_three_did(tmp_path):
    import bench_quality

    from codeexecutor.training.config import Curriculum

    recipe = bench_quality.load_recipe()
    steps = {"singleline": 30, "tutorial": 20, "codenet": 1000}
    share = bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=0.3)
    split = Curriculum.from_dict(bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=0.3,
                                                          functions_stage=0.5))
    assert [(s.name, s.steps) for s in split.stages] == [("singleline", 30), ("tutorial", 20), ("codenet", 500), ("functions", 500)]
    assert not [src for src in split.stages[2].sources if "/functions/" in src.path]

    def drawn(stages) -> dict[str, float]:  # expected steps' worth of each source
        out: dict[str, float] = {}
        for st in stages:
            total = sum(src.weight for src in st.sources)
            for src in st.sources:
                out[src.path] = out.get(src.path, 0.0) + st.steps * src.weight / total
        return out

    before = drawn(Curriculum.from_dict(share).stages[2:])
    after = drawn(split.stages[2:])
    assert before.keys() == after.keys() and all(abs(before[k] - after[k]) < 1.0 for k in before)
    tail = split.stages[3]
    assert sum(s.weight for s in tail.sources if "/functions/" in s.path) / sum(s.weight for s in tail.sources) > 0.5
    for bad in (0.1, 1.0):  # below the functions' part of stage 3 (0.29), or the whole stage
        with pytest.raises(SystemExit) as exc:
            bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=0.3, functions_stage=bad)
        assert exc.value.code == 2
    with pytest.raises(SystemExit):
        bench_quality.curriculum(recipe, str(tmp_path), "run", steps, 10, functions_weight=0, functions_stage=0.5)
    names = {bench_quality.result_name("cpu", recipe, {}), bench_quality.result_name("cpu", recipe, {}, functions_stage=0.5)}
    assert len(names) == 2
