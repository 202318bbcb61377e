"""A GPU lease's second call (gpu_run/measure.py), rehearsed on the CPU in fp32 at toy
sizes: the step's speed, the GPU tests skipped without a GPU, fp16's path through the
deepspeed launcher and DeepSpeed's engine with overlap_comm off and on."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

pytest.importorskip("torch")


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_second_call_measures_the_step_and_deepspeeds_paths(tmp_path):
    cmd = [
        sys.executable,
        "gpu_run/measure.py",
        "--smoke",
        "--out",
        str(tmp_path / "out"),
        "--work",
        str(tmp_path / "w"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    record = json.loads((tmp_path / "out" / "measure.json").read_text())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert record["throughput"]["status"] == "ok" and record["throughput"]["steps"][0]["tokens_per_s"] > 0
    assert record["tests"]["status"].startswith("skipped")  # no GPU here
    assert record["fp16"]["status"] == "ok" and record["fp16"]["engine"] == "deepspeed"
    runs = record["overlap"]["runs"]
    assert [runs[k]["overlap_comm"] for k in ("overlap-off", "overlap-on")] == [False, True]
    assert record["overlap"]["on_over_off"] > 0
