"""Several processes over gloo on the CPU, as several GPUs or nodes run: each rank draws
its own examples, every rank steps the same path, and a run resumes on another number
of processes with its stage, step and learning-rate schedule."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration  # ZeRO runs of two processes over gloo

pytest.importorskip("deepspeed")

ENV = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def test_ranks_draw_different_examples_in_the_same_number_of_micro_batches():
    import numpy as np

    from codeexecutor.training.data import StageData

    rng = np.random.default_rng(0)
    data = StageData.from_lengths("s", rng.integers(10, 120, 5000), rng.integers(10, 400, 5000), 2048)
    shared = 0
    for step in range(40):
        ranks = [set(data.indices(7, step, 0, rank, 2)[1]) for rank in (0, 1)]
        assert all(ranks)
        shared += len(ranks[0] & ranks[1]) / len(ranks[0] | ranks[1])
        assert data.indices(7, step, 0, 1, 2) == data.indices(7, step, 0, 1, 2)  # a rank's draw is its own, repeatable
    assert shared / 40 < 0.05  # the two ranks' rows of a step hardly overlap


def _run(cur, procs: int, ds_config, *extra):
    launch = (
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(procs), "--master_port", "29523"]
        if procs > 1
        else [sys.executable]
    )
    done = subprocess.run(
        launch + ["-m", "codeexecutor.training", "--curriculum", str(cur), "--ds-config", str(ds_config), *extra],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _curriculum(tmp_path, demo_data, zero_stage: int):
    import yaml

    cfg = json.loads((ROOT / "ds_configs" / "cpu.json").read_text())
    cfg["zero_optimization"]["stage"] = zero_stage
    ds = tmp_path / f"zero{zero_stage}.json"
    ds.write_text(json.dumps(cfg))
    cur = {
        "model": {"preset": "tiny", "vocab_size": 600, "max_code_length": 128, "max_trace_length": 256},
        "train": {
            "output_dir": str(tmp_path / "run"),
            "micro_batch_size": 2,
            "grad_accum": 2,
            "save_every": 2,
            "log_every": 1,
            "max_tokens": 1024,
            "eval_examples": 0,
            "engine": "deepspeed",
        },
        "stages": [
            {
                "name": "singleline",
                "steps": 3,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": str(demo_data / "singleline" / "singleline"), "task": "singleline"}],
            },
            {
                "name": "tutorial",
                "steps": 3,
                "lr": 5e-4,
                "warmup": 1,
                "sources": [{"path": str(demo_data / "tutorial" / "tutorial"), "task": "tutorial"}],
            },
        ],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    return path, ds


def test_a_zero2_run_resumes_from_two_processes_on_one_and_back_on_two(tmp_path, demo_data):
    """Two processes to step 2, one to step 4, two to the end: DeepSpeed's universal
    format carries the partitioned optimizer state across; every step is logged once,
    in its stage, at the learning rate the schedule gives it."""
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.run import lr_at

    cur, ds = _curriculum(tmp_path, demo_data, 2)
    _run(cur, 2, ds, "--max-steps", "2")
    one = _run(cur, 1, ds, "--max-steps", "4")
    assert "checkpoint of 2 process(es) with 1" in one.stderr and "at step 2" in one.stdout
    two = _run(cur, 2, ds)
    assert "checkpoint of 1 process(es) with 2" in two.stderr and "at step 4" in two.stdout
    run = tmp_path / "run"
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if '"loss"' in line]
    stages = Curriculum.load(str(cur)).stages
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert [r["stage"] for r in log] == ["singleline"] * 3 + ["tutorial"] * 3
    assert [r["lr"] for r in log] == pytest.approx([lr_at(stages, s) for s in range(1, 7)])
    assert all(r["loss"] > 0 for r in log) and (run / "final" / "model.safetensors").exists()
    assert json.loads((run / "checkpoints" / "step6" / "world.json").read_text()) == {"world_size": 2}


def test_zero1_over_two_processes_steps_and_exports(tmp_path, demo_data):
    cur, ds = _curriculum(tmp_path, demo_data, 1)
    _run(cur, 2, ds)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5, 6]
    setup = json.loads((tmp_path / "run" / "curriculum.json").read_text())["setup"]
    assert setup["engine"] == "deepspeed" and setup["world_size"] == 2
    assert (tmp_path / "run" / "final" / "model.safetensors").exists()


AGREE = """
import os, sys, types
import torch
import torch.distributed as dist
sys.path.insert(0, os.environ["ROOT"])
from tests.test_rows import tiny
from codeexecutor.training.step import prepare_rows

dist.init_process_group("gloo")
rank = dist.get_rank()
real = torch.compile
def compile_(fn, **kwargs):  # rank 1's compiler fails on every graph; rank 0's works
    if rank == 1:
        def broken(*args, **kw):
            raise RuntimeError("no kernel on this rank")
        return broken
    return real(fn, backend="eager", **{k: v for k, v in kwargs.items() if k != "backend"})
torch.compile = compile_
cur = types.SimpleNamespace(model=types.SimpleNamespace(max_code_length=128, max_trace_length=256),
                            train=types.SimpleNamespace(max_tokens=1024, compile=True))
attention, probe = prepare_rows(tiny(), cur, "tiles", "cpu", None, "torch", 0)
check = torch.tensor([rank + 1.0])
dist.all_reduce(check)  # a rank left inside another collective would fail this one
with open(os.path.join(os.environ["OUT"], f"rank{rank}.txt"), "w") as f:  # one file a rank: their prints interleave
    f.write(" ".join([attention, str(probe["compiled"]), str(float(check)), "|".join(probe["fallbacks"])]))
dist.destroy_process_group()
"""


def test_a_rank_whose_compile_fails_takes_every_rank_to_the_eager_path(tmp_path):
    """Two ranks, the compiler failing on one: both step the tile path eagerly, the other
    says why, and no rank is left in a collective of its own (the next all-reduce meets)."""
    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541", str(script)],
        env={**ENV, "ROOT": str(ROOT), "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = {f"RANK{r}": (tmp_path / f"rank{r}.txt").read_text().split(maxsplit=3) for r in (0, 1)}
    assert [lines[r][:3] for r in ("RANK0", "RANK1")] == [["tiles", "False", "3.0"]] * 2
    assert "another rank steps eager tiles" in lines["RANK0"][3]
    assert "no kernel on this rank" in lines["RANK1"][3]
