"""The SLURM scripts (slurm/) run as the scheduler would run them, on this machine: `srun`,
`scontrol` and `sbatch` are stand-ins that start the tasks here (one node), so everything
after them is real: the shard builds and their merge, and a `pretrain --launcher` whose
training is one torchrun of two processes started through srun."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

pytest.importorskip("deepspeed")

SRUN = """#!/usr/bin/env bash
echo "srun $*" >> "$SHIM_LOG"
while [ $# -gt 0 ]; do
  case "$1" in --nodes|--ntasks-per-node|--cpus-per-task|-n) shift 2;; -*) shift;; *) break;; esac
done
exec "$@"
"""
SCONTROL = """#!/usr/bin/env bash
echo localhost
"""
SBATCH = """#!/usr/bin/env bash
# the array's tasks one after another, then whatever depends on them; prints a job id
echo "sbatch $*" >> "$SHIM_LOG"
array=""; script=""
for a in "$@"; do case "$a" in --array=*) array="${a#--array=}";; -*) ;; *) script="$a";; esac; done
if [ -n "$array" ]; then
  first="${array%-*}"; last="${array#*-}"
  for i in $(seq "$first" "$last"); do
    SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_MIN=$first SLURM_ARRAY_TASK_COUNT=$((last - first + 1)) \
      SLURM_CPUS_PER_TASK=1 bash "$script" >&2 || exit 1
  done
else
  bash "$script" >&2 || exit 1
fi
echo $RANDOM
"""  # noqa: E501  (a script run as written)


@pytest.fixture()
def shims(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("sbatch", SBATCH)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    log = tmp_path / "shims.log"
    env = {
        **os.environ,
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "SHIM_LOG": str(log),
        "PYTHON": sys.executable,
        "DS_ACCELERATOR": "cpu",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "SLURM_SUBMIT_DIR": str(ROOT),
    }
    return env, log


def test_the_build_array_and_its_merge_make_one_dataset(tmp_path, shims):
    env, log = shims
    env.update(
        CODENET=str(ROOT / "curricula" / "demo"),
        SHARDS=str(tmp_path / "shards"),
        DATA=str(tmp_path / "data"),
        MUTANTS="2",
    )
    done = subprocess.run(
        ["bash", "slurm/build.sh", "--array=0-1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    calls = log.read_text().splitlines()
    assert calls[0].startswith("sbatch --parsable --export=ALL --array=0-1 slurm/build.sbatch")
    assert "--dependency=afterok:" in calls[1] and calls[1].endswith("slurm/merge.sbatch")
    shards = [json.loads((tmp_path / "shards" / i / "stats.json").read_text()) for i in ("0", "1")]
    merged = json.loads((tmp_path / "data" / "stats.json").read_text())
    assert all(s["programs"] > 0 for s in shards) and merged["programs"] == sum(s["programs"] for s in shards)
    for name in ("codenetmut", "errors"):  # every row of every shard, once
        assert merged["datasets"][name] == {
            split: sum(s["datasets"][name][split] for s in shards) for split in ("train", "valid", "test")
        }


@pytest.mark.integration
def test_a_pretrain_job_trains_through_srun_and_torchrun(tmp_path, shims):
    import yaml

    env, log = shims
    recipe = {
        "model": {"preset": "tiny", "vocab_size": 400, "max_code_length": 128, "max_trace_length": 256, "dropout": 0.0},
        "train": {
            "output_dir": str(tmp_path / "unused"),
            "max_tokens": 1024,
            "log_every": 1,
            "save_every": 2,
            "eval_examples": 0,
            "micro_batch_size": 2,
        },
        "data": {
            "dir": str(tmp_path / "data"),
            "builds": {
                "codenetmut": {"kind": "codenetmut", "codenet": [str(ROOT / "curricula" / "demo")], "mutants": 2}
            },
        },
        "tokenizer": {"sample": 400},
        "stages": [
            {
                "name": "only",
                "steps": 3,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": "codenetmut/codenetmut", "task": "codenet"}],
            }
        ],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    env.update(
        SLURM_JOB_ID="4242",
        SLURM_CPUS_PER_TASK="2",
        SLURM_NNODES="1",
        SLURM_JOB_NODELIST="node[1]",
        GPUS_PER_NODE="2",
        MASTER_PORT="29531",
        RECIPE=str(path),
        OUT=str(tmp_path / "out"),
    )
    done = subprocess.run(
        ["bash", "slurm/pretrain.sbatch", "--no-score"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    srun = [c for c in log.read_text().splitlines() if c.startswith("srun")]
    assert len(srun) == 1 and "--nnodes 1 --nproc_per_node 2 --rdzv_id 4242 --rdzv_backend c10d" in srun[0]
    assert "--rdzv_endpoint localhost:29531" in srun[0] and "--cpus-per-task 2" in srun[0]
    run = tmp_path / "out" / "run"
    setup = json.loads((run / "curriculum.json").read_text())["setup"]
    assert setup["world_size"] == 2 and setup["ds_config"] == "cpu.json" and setup["ds_config_chosen_by"] == "device"
    steps = [
        json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text().splitlines() if '"loss"' in line
    ]
    assert steps == [1, 2, 3] and (run / "final" / "config.json").exists()
    again = subprocess.run(
        ["bash", "slurm/pretrain.sbatch", "--no-score"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )  # a requeued job: --resume, every phase done before
    assert again.returncode == 0 and "done before" in again.stderr, again.stderr[-2000:]


def test_srun_outside_an_allocation_is_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(
        ["bash", "run_pretrain.sh"],
        cwd=ROOT,
        env={**env, "LAUNCHER": "srun", "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(
        "run_pretrain.sh: LAUNCHER=srun needs"
    )
