import glob
import json
import os
import subprocess
import sys

import pytest

from codeexecutor.errors import ConfigError
from codeexecutor.train import Curriculum, TrainArgs, load_ds_config, lr_at

from .conftest import ROOT


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "curricula" / "*.yaml"))), ids=os.path.basename)
def test_curriculum_files_validate(path):
    cur = Curriculum.load(path)
    assert len(cur.stages) == 3
    assert [s.name for s in cur.stages] == ["singleline", "tutorial", "codenet"]
    assert any(src.hardest for src in cur.stages[1].sources)


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "ds_configs" / "*.json"))), ids=os.path.basename)
@pytest.mark.parametrize("world", [1, 2, 16])
def test_ds_configs_batch_identity(path, world):
    train = TrainArgs(micro_batch_size=4, grad_accum=2)
    cfg = load_ds_config(path, train, world)
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * world
    assert cfg["zero_optimization"]["stage"] in (1, 2, 3)
    assert not (cfg.get("bf16", {}).get("enabled") and cfg.get("fp16", {}).get("enabled"))


def test_wrong_batch_size_and_optimizer_block_are_explained(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}))
    with pytest.raises(ConfigError, match="train_batch_size 10 != micro 4"):
        load_ds_config(str(bad), TrainArgs(), 2)
    bad.write_text(json.dumps({"optimizer": {"type": "Adam"}}))
    with pytest.raises(ConfigError, match="fused_adam"):
        load_ds_config(str(bad), TrainArgs(), 1)


def test_curriculum_errors_are_collected():
    with pytest.raises(ConfigError) as err:
        Curriculum.from_dict({"model": {"preset": "huge", "colour": 1},
                              "stages": [{"name": "a", "steps": 0, "sources": [{"path": "x", "task": "nope", "hardest": 5}]}]})
    text = str(err.value)
    for fragment in ("colour", "preset", "steps must be >= 1", "task must be one of", "hardest needs a previous stage"):
        assert fragment in text


def test_lr_schedule_warms_up_and_decays_per_stage():
    from codeexecutor.train import Source, Stage

    st = [Stage("a", [Source("p", "singleline")], steps=10, lr=1.0, warmup=2), Stage("b", [Source("p", "tutorial")], steps=10, lr=0.5, warmup=0)]
    assert lr_at(st, 0) == 0.5 and lr_at(st, 1) == 1.0
    assert lr_at(st, 9) < lr_at(st, 5) < 1.0
    assert lr_at(st, 10) == 0.5 and lr_at(st, 20) == 0.0


def _curriculum(tmp_path, data, steps):
    cur = {
        "model": {"preset": "tiny", "vocab_size": 600, "max_code_length": 128, "max_trace_length": 256},
        "train": {"output_dir": str(tmp_path / "run"), "micro_batch_size": 2, "grad_accum": 2, "save_every": 2, "log_every": 1},
        "stages": [
            {"name": "singleline", "steps": steps, "lr": 1e-3, "warmup": 1, "sources": [{"path": str(data / "singleline" / "singleline"), "task": "singleline"}]},
            {"name": "tutorial", "steps": steps, "lr": 1e-3, "warmup": 1, "sources": [
                {"path": str(data / "singleline" / "singleline"), "task": "singleline", "hardest": 8},
                {"path": str(data / "tutorial" / "tutorial"), "task": "tutorial"}]},
            {"name": "codenet", "steps": steps, "lr": 1e-3, "warmup": 1, "sources": [
                {"path": str(data / "codenetmut" / "codenetmut"), "task": "codenet"},
                {"path": str(data / "codenetmut" / "errors"), "task": "codenet"}]},
        ],
    }
    import yaml

    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    return path


def test_two_process_zero2_over_gloo_with_resume(tmp_path, demo_data):
    """A real DeepSpeed ZeRO-2 run with 2 processes (torchrun, gloo), killed by --max-steps and resumed."""
    cur = _curriculum(tmp_path, demo_data, steps=2)
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517", "-m",
           "codeexecutor.train", "--curriculum", str(cur), "--ds-config", str(ROOT / "ds_configs" / "cpu.json")]
    first = subprocess.run(cmd + ["--max-steps", "3"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run = tmp_path / "run"
    assert (run / "stage1-singleline" / "config.json").exists() and not (run / "final").exists()
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "resuming from" in second.stdout and "at step 3" in second.stdout
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]  # every step once, across the kill
    assert len(json.loads((run / "stage2-tutorial-hardest-0.json").read_text())) == 8
    assert (run / "loss.png").exists() and (run / "final" / "model.safetensors").exists()
    assert sorted(d.name for d in (run / "checkpoints").iterdir() if d.name.startswith("step")) == ["step4", "step6"]
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(run / "final"))
    out = gen.generate(["<codenet> <0> x = 1"], beam=2, max_length=8)
    assert isinstance(out[0].text, str) and out[0].logprob <= 0
