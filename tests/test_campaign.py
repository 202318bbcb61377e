"""The GPU campaign script, run on the CPU at toy sizes (CAMPAIGN_SMOKE=1): every step
the device call makes, the same commands, so a GPU session spends its time measuring."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_gpu_campaign_smoke_on_cpu(tmp_path):
    env = {**os.environ, "CAMPAIGN_SMOKE": "1", "OUT": str(tmp_path / "out"), "CAMPAIGN_WORK": str(tmp_path / "work"),
           "PYTHON": sys.executable, "OMP_NUM_THREADS": "2"}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_campaign.sh"), "benches"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = tmp_path / "out"
    accel = json.loads((out / "bench_train-cpu.json").read_text())["accelerator"]
    assert set(accel["runs"]) == {"token_budget_sdpa", "fixed_sdpa", "token_budget_eager"}
    rows = [json.loads(line) for line in (out / "fp16_zero2_train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
    assert json.loads((out / "bench_generate.json").read_text())["cpu"]["identical_outputs"] == 2
    # the quality part with a budget of seconds writes its report next to the others
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_campaign.sh"), "quality", "0.3", "tiny"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / "quality-cpu-tiny.json").read_text())  # a non-default preset names its file
    assert report["preset"] == "tiny" and set(report["test"]) >= {"singleline", "tutorial", "codenetmut"}


def test_campaign_check_plans_and_checks_its_inputs_without_training(tmp_path):
    env = {**os.environ, "CAMPAIGN_SMOKE": "1", "OUT": str(tmp_path / "out"), "CAMPAIGN_WORK": str(tmp_path / "work"),
           "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_campaign.sh"), "check"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "check passed; nothing trained" in run.stdout and "recipe cpu-hour.yaml" in run.stdout
    assert "torch" in (tmp_path / "out" / "versions.txt").read_text()
    assert not (tmp_path / "work" / "data").exists()  # nothing built
    bad = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_campaign.sh"), "everything"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "unknown part 'everything'" in bad.stderr and not bad.stdout  # refused before any work
