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
    if os.path.basename(path) == "crash_finetune.yaml":  # one stage from the released checkpoint
        assert cur.model.init == "microsoft/codeexecutor" and cur.model.exception_step and len(cur.stages) == 1
        assert {s.path.split("/")[-1] for s in cur.stages[0].sources} == {"errors", "codenetmut"}
        return
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


def test_crash_finetune_from_a_released_layout_checkpoint(tmp_path, demo_data):
    """The released checkpoint as `init`: <exception> joins its vocabulary with a new row,
    the profile stays official, training reads the structured steps in that profile."""
    import yaml
    from safetensors.torch import load_file

    from .release_layout import write_release_checkpoint

    released = write_release_checkpoint(tmp_path / "released")
    base = len(json.loads((released / "vocab.json").read_text()))
    cur = {
        "model": {"init": str(released), "exception_step": True, "max_code_length": 128, "max_trace_length": 256},
        "train": {"output_dir": str(tmp_path / "run"), "micro_batch_size": 2, "grad_accum": 1, "save_every": 10, "log_every": 1},
        "stages": [{"name": "crashes", "steps": 2, "lr": 1e-4, "warmup": 1, "sources": [
            {"path": str(demo_data / "codenetmut" / "errors"), "task": "codenet"},
            {"path": str(demo_data / "codenetmut" / "codenetmut"), "task": "codenet"}]}],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "codeexecutor.train", "--curriculum", str(path), "--ds-config",
                          str(ROOT / "ds_configs" / "cpu.json")], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    final = tmp_path / "run" / "final"
    config = json.loads((final / "config.json").read_text())
    assert (config["format_profile"], config["exception_step"], config["vocab_size"]) == ("official", True, base + 212)
    weights = load_file(str(final / "model.safetensors"))
    original = load_file(str(released / "model.safetensors"))
    assert weights["roberta.embeddings.word_embeddings.weight"].shape[0] == base + 212
    assert "dense.weight" not in weights and "roberta.encoder.layer.0.attention.self.query.weight" in weights
    assert original["encoder.layer.0.attention.self.query.weight"].shape == weights["roberta.encoder.layer.0.attention.self.query.weight"].shape
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(str(final), device="cpu")
    assert gen.tok.convert_tokens_to_ids("<exception>") == base + 211
    assert gen.profile.label == "official+exception"
    assert gen.code_input("x = [1, 'a']\n") == "<codenet> <0> x = [ 1 , 'a' ]"
