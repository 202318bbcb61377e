"""bench_train (rows against fixed batches) and fp16 loss-scale logging."""

import json
import os
import sys
import types

import pytest
import torch

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))


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

    fp16 = types.SimpleNamespace(
        fp16_enabled=lambda: True, optimizer=types.SimpleNamespace(cur_scale=32768.0), skipped_steps=3
    )
    assert loss_scaling(fp16) == {"loss_scale": 32768.0, "skipped_steps": 3}
    bf16 = types.SimpleNamespace(fp16_enabled=lambda: False, optimizer=None, skipped_steps=0)
    assert loss_scaling(bf16) == {}


def test_quality_defaults_pick_the_token_budget_by_device():
    import bench_quality

    assert bench_quality.MAX_TOKENS["cpu"] < bench_quality.MAX_TOKENS["gpu"]  # small CPU steps, full GPU batches


def _variant(argv: list[str], device: str = "cpu") -> tuple[dict, list[str]]:
    """bench_quality's options parsed as its main does, and the recipe with their --set fields."""
    import argparse
    import copy

    import bench_quality

    from codeexecutor.training.recipe import apply_overrides

    names = {
        "--steps": None,
        "--lr": float,
        "--data": str,
        "--mutants": int,
        "--errors-weight": float,
        "--functions-weight": float,
        "--positions": str,
        "--preset": str,
    }
    ap = argparse.ArgumentParser()
    for flag, kind in names.items():
        ap.add_argument(flag, type=kind)
    args = ap.parse_args(argv)
    for field in (
        "dropout",
        "vocab_size",
        "state",
        "order",
        "code_window",
        "exception_weight",
        "max_tokens",
        "autocast",
        "corpora",
        "codenet_limit",
        "tutorial_sources",
        "singleline_limit",
        "augment",
        "function_corpora",
        "workers",
    ):
        setattr(args, field, None)
    args.split_digits, args.valid_examples, args.eval_limit = False, 0, 300
    if args.steps:
        args.steps = dict(zip(bench_quality.STAGES, (int(n) for n in args.steps.split(","))))
    recipe = bench_quality.load_recipe()
    _, sets = bench_quality.options(args, recipe, device)
    return apply_overrides(copy.deepcopy(recipe), sets), sets


def test_a_quality_variant_is_the_recipe_with_the_runs_fields_set(tmp_path):
    import bench_quality
    import yaml

    from codeexecutor.training.config import Curriculum

    recipe = bench_quality.load_recipe()
    raw, sets = _variant(["--steps", "30,20,3000", "--data", str(tmp_path), "--lr", "2e-3", "--mutants", "3"])
    assert all(item.split("=", 1)[0].split(".")[0] in ("model", "train", "score", "data", "stages") for item in sets)
    cur = Curriculum.from_dict(raw)
    first, second, third = cur.stages
    assert [s.steps for s in cur.stages] == [30, 20, 3000] and [s.warmup for s in cur.stages] == [3, 2, 200]
    assert first.lr == pytest.approx(2e-3) and second.lr == third.lr == pytest.approx(1e-3)  # scaled alike
    assert all(src.path.startswith(str(tmp_path) + "/") for st in cur.stages for src in st.sources)  # the run's data
    assert raw["data"]["builds"]["codenetmut"]["mutants"] == 3
    assert raw["data"]["builds"]["codenetmut"]["codenet"] == recipe["data"]["builds"]["codenetmut"]["codenet"]
    assert cur.train.autocast is None and raw["score"]["limit"] == 300
    assert recipe == bench_quality.load_recipe()  # the recipe itself is left as it was
    # the recipe is a curriculum run_pretrain.sh takes as it is
    raw_recipe = yaml.safe_load(open(bench_quality.RECIPE))
    on_disk = Curriculum.from_dict(raw_recipe)
    assert on_disk.model.preset == "mini" and [s.name for s in on_disk.stages] == list(bench_quality.STAGES)
    data_dir = raw_recipe["data"]["dir"]
    assert all(src.path.startswith(data_dir + "/") for st in on_disk.stages for src in st.sources)
    # no steps: the recipe's own, which `pretrain --minutes` replaces
    timed, _ = _variant([])
    assert [st["steps"] for st in timed["stages"]] == [st["steps"] for st in recipe["stages"]]
    assert timed["data"]["dir"] == data_dir and sum(st["share"] for st in timed["stages"]) == pytest.approx(1.0)
    gpu, _ = _variant([], device="gpu")
    assert gpu["train"]["max_tokens"] == bench_quality.MAX_TOKENS["gpu"]  # full batches on a GPU


def test_quality_variants_name_their_results_and_reach_the_model_config():
    import bench_quality

    recipe = bench_quality.load_recipe()
    base = recipe["model"]
    assert bench_quality.result_name("cpu", recipe, {}) == "quality-cpu"
    assert (
        bench_quality.result_name("cpu", recipe, {"preset": base["preset"], "positions": base["positions"]})
        == "quality-cpu"
    )
    names = {
        bench_quality.result_name("cpu", recipe, {"preset": preset, "positions": positions})
        for preset in ("mini", "mini-wide")
        for positions in ("absolute", "rotary")
    }
    names.add(bench_quality.result_name("cpu", recipe, {"vocab_size": 2000}))
    names.add(bench_quality.result_name("cpu", recipe, {}, errors_weight=0.3))
    names.add(
        bench_quality.result_name("cpu", recipe, {"trace_state": "delta" if base["trace_state"] == "full" else "full"})
    )
    names.add(
        bench_quality.result_name(
            "cpu", recipe, {}, functions_weight=0.3 + bench_quality.recipe_functions_weight(recipe)
        )
    )
    other_order = "start" if base.get("step_order", "start") == "end" else "end"
    names.add(bench_quality.result_name("cpu", recipe, {"step_order": other_order}))
    names.add(bench_quality.result_name("cpu", recipe, {"exception_weight": 40.0}))
    other_window = "head" if base.get("code_window", "head") == "ends" else "ends"
    names.add(bench_quality.result_name("cpu", recipe, {"code_window": other_window}))
    assert len(names) == 11  # no variant overwrites another's results
    assert bench_quality.result_name("cpu", recipe, {"code_window": base.get("code_window", "head")}) == "quality-cpu"
    assert bench_quality.result_name("cpu", recipe, {"step_order": base.get("step_order", "start")}) == "quality-cpu"
    from codeexecutor.training.config import Curriculum

    third = Curriculum.from_dict(_variant(["--errors-weight", "0.3"])[0]).stages[2]
    assert third.sources[3].path.endswith("codenetmut/errors") and third.sources[3].weight == 0.3
    assert bench_quality.recipe_errors_weight(recipe) == 0.1
    weight = bench_quality.recipe_functions_weight(recipe) + 0.25
    sources = Curriculum.from_dict(_variant(["--functions-weight", str(weight)])[0]).stages[2].sources
    assert [("/".join(s.path.split("/")[-2:]), s.weight) for s in sources if "/functions/" in s.path] == [
        ("functions/functions", weight),
        ("functions/functions_errors", round(weight / 3, 4)),
    ]
    without, _ = _variant(["--functions-weight", "0"])  # a weight of 0 leaves the source out
    assert not [s for s in Curriculum.from_dict(without).stages[2].sources if "/functions/" in s.path]
    assert bench_quality.recipe_functions_weight(without) == 0.0
    for positions in ("absolute", "rotary"):
        assert Curriculum.from_dict(_variant(["--positions", positions])[0]).model.positions == positions


def test_a_result_names_the_machine_its_wall_clock_figures_came_from():
    from _common import fast_bf16, machine

    m = machine()
    assert m["cores"] >= 1 and m["torch_threads"] >= 1
    assert m["bf16_native"] is fast_bf16()
    assert m["device"] == ("cpu" if not torch.cuda.is_available() else torch.cuda.get_device_name(0))


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

    import bench_quality
    import datasets

    code = "def f(a):\n    return a\nx = f(1)\n"
    for name, depth in (("old", None), ("new", 1)):
        inner = {"line": 2, "state": {"a": "1"}, **({"depth": depth} if depth else {})}
        steps = [{"line": 1, "state": {}}, {"line": 3, "state": {}}, inner]
        table = datasets.Dataset.from_dict({"task": ["codenet"], "code": [code], "steps": [json.dumps(steps)]})
        datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / name / "codenetmut" / "codenetmut"))
    assert bench_quality.stale_build(str(tmp_path / "old")) and not bench_quality.stale_build(str(tmp_path / "new"))


def test_comparison_columns_name_the_options_their_runs_set():
    import compare_quality

    assert compare_quality.extras({"code_window": "head", "exception_weight": None}) == ""
    assert (
        compare_quality.extras({"code_window": "ends", "exception_weight": 40.0})
        == ", ends window, exception weight 40"
    )
    assert compare_quality.extras({"functions_stage": 0.5}) == ", a functions stage of 0.5 of stage 3"


@pytest.mark.integration
@pytest.mark.timeout(900)  # pretrain's six phases and a second scoring: 235 s on 2 cores beside a data build
def test_a_quality_run_is_pretrain_on_a_variant_and_gathers_its_scores(tmp_path, demo_data):
    """bench_quality on the demo recipe, a few steps: the variant written, `pretrain` run
    on it, the per-build scores merged into one result file with the run's steps."""
    import subprocess

    import yaml

    raw = yaml.safe_load(open(ROOT / "curricula" / "demo.yaml"))
    for st in raw["stages"]:
        for src in st["sources"]:
            src["path"] = "/".join(src["path"].split("/")[-2:])
    raw["data"] = {"dir": str(demo_data)}
    recipe = tmp_path / "demo-recipe.yaml"
    recipe.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "CODEEXECUTOR_RESULTS": str(tmp_path / "results"), "OMP_NUM_THREADS": "2"}
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_quality.py"),
        "--recipe",
        str(recipe),
        "--steps",
        "3,2,2",
        "--out",
        str(tmp_path / "run"),
        "--eval-limit",
        "2",
        "--valid-examples",
        "0",
        "--autocast",
        "none",
        "--errors-weight",
        "0.3",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    variant = json.loads((tmp_path / "run" / "pretrain.json").read_text())["settings"][
        "recipe"
    ]  # what pretrain trained
    assert [st["steps"] for st in variant["stages"]] == [3, 2, 2]
    assert [s["weight"] for s in variant["stages"][2]["sources"] if s["path"].endswith("codenetmut/errors")] == [0.3]
    result = json.loads((tmp_path / "results" / "quality-cpu-errors0.3.json").read_text())
    assert "stages.codenet.sources.codenetmut/errors.weight=0.3" in result["sets"]
    assert result["steps"] == {"singleline": 3, "tutorial": 2, "codenet": 2}
    assert {"singleline", "tutorial", "codenetmut", "errors"} <= set(result["test"])
    assert all(e["examples"] == 2 for e in result["test"].values()) and result["runtime_errors"] is not None
    assert result["model"].endswith("run/final") and result["parameters"] > 0
    record = json.loads((tmp_path / "run" / "pretrain.json").read_text())
    assert all(record["phases"][p]["done"] for p in ("build", "tokenizer", "tokenize", "train", "score", "card"))
    # scored again: the finished run's model, not trained again
    again = subprocess.run(cmd + ["--score-only"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "pretrain.json").read_text())["phases"]["train"] == record["phases"]["train"]
    empty = subprocess.run(
        cmd[:2] + ["--recipe", str(recipe), "--out", str(tmp_path / "none"), "--score-only"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert empty.returncode == 2 and "needs a finished run" in empty.stderr and "Traceback" not in empty.stderr


def test_step_speed_counts_example_tokens_and_the_attention_the_rule_allows():
    import numpy as np
    import torch
    from _step_speed import attended_keys, example_tokens

    from codeexecutor.modeling.model import prefix_lm_mask
    from codeexecutor.modeling.rows import pack_row

    codes, traces = [[0, 5, 2, 7, 2], [0, 6, 2, 2]], [[4, 9, 9, 2], [4, 8, 8, 8, 8, 2]]
    row = pack_row(codes, traces, 32, 1, np.ones(16, dtype=np.float32))
    assert example_tokens(row) == 19  # 32 tokens, 13 of them padding
    dense = 0
    for c, t in zip(codes, traces):  # the rule's pairs, counted off the dense mask of each example alone
        mask = prefix_lm_mask(torch.ones(1, len(c)), torch.ones(1, len(t)))
        dense += int(mask.sum())
    assert attended_keys(row) == dense
