"""The precision and attention path a run takes, by the device's compute capability
(simulated on the CPU: 7.0 a V100, 8.0 an A100, 9.0 an H100)."""

import os

import pytest

from codeexecutor.errors import ConfigError

from .conftest import ROOT

pytest.importorskip("torch")

BF16 = {"bf16": {"enabled": True}}
FP16 = {"fp16": {"enabled": True}}


def test_a_gpu_with_native_bf16_trains_in_bf16_and_tf32_unless_told_otherwise():
    from codeexecutor.training.precision import choose_precision

    for cap in ((8, 0), (9, 0)):
        plain = choose_precision(cap, "torch", {}, None)
        assert (plain.autocast, plain.tf32, plain.chosen_by) == ("bf16", True, "device")
        assert "bf16 autocast" in plain.label and "TF32" in plain.label
        ds = choose_precision(cap, "deepspeed", FP16, None)  # the user's fp16 config wins
        assert (ds.autocast, ds.tf32, ds.chosen_by) == (None, True, "config") and ds.label.startswith("fp16 weights")
        assert choose_precision(cap, "torch", BF16, None).autocast == "bf16"


def test_a_v100_is_never_put_in_emulated_bf16():
    from codeexecutor.training.precision import choose_precision

    plain = choose_precision((7, 0), "torch", {}, None)
    assert (plain.autocast, plain.tf32) == (None, False) and "7.0" in plain.label
    assert choose_precision((7, 0), "deepspeed", FP16, None).label.startswith("fp16 weights")
    for ds, asked in ((BF16, None), ({}, "bf16")):
        with pytest.raises(ConfigError, match="zero2_fp16.json"):
            choose_precision((7, 0), "torch", ds, asked)


def test_the_cpu_keeps_what_the_run_asks_for():
    from codeexecutor.training.precision import choose_precision

    assert choose_precision(None, "torch", {}, None).autocast is None
    assert choose_precision(None, "torch", {}, "bf16").autocast == "bf16"
    assert not choose_precision(None, "torch", {}, "bf16").tf32


@pytest.mark.parametrize("cap,path", [((7, 0), "tiles"), ((8, 0), "flex"), ((9, 0), "flex")])
def test_flex_attention_only_where_triton_has_tensor_cores(monkeypatch, cap, path):
    import torch

    from codeexecutor.training.step import attention_path

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cap)
    chosen, fallback = attention_path("flex", torch.device("cuda", 0))
    assert chosen == path and (fallback is None) == (path == "flex")
    assert attention_path("sdpa", torch.device("cuda", 0)) == ("tiles", None)


@pytest.mark.parametrize(
    "cap,config,autocast,attention",
    [
        ((7, 0), "zero2_fp16.json", None, "tiles"),  # a V100: fp16 with DeepSpeed's loss scale, the tile path
        ((8, 0), "zero2_bf16.json", "bf16", "flex"),  # an A100
        ((9, 0), "zero2_bf16.json", "bf16", "flex"),  # an H100
        (None, "cpu.json", None, "tiles"),
    ],
)
def test_one_function_decides_config_precision_and_attention_by_capability(cap, config, autocast, attention):
    import json

    from codeexecutor.training.engine import choose
    from codeexecutor.training.precision import decide, resolve_ds_config

    path, note = resolve_ds_config("auto", cap)
    assert os.path.basename(path) == config and os.path.isfile(path) and config in note
    ds_cfg = json.load(open(path))
    engine = choose("auto", 1, ds_cfg)  # one process: DeepSpeed only where fp16 needs its loss scale
    assert engine == ("deepspeed" if config.endswith("fp16.json") else "torch")
    choice = decide(cap, engine, ds_cfg, None, "flex")
    assert (choice.precision.autocast, choice.attention) == (autocast, attention)
    assert choice.precision.tf32 == (cap is not None and cap >= (8, 0))
    assert (choice.fallback is None) == (attention == "flex")
    if cap == (7, 0):
        assert choice.precision.label.startswith("fp16 weights (DeepSpeed)")
    named = str(ROOT / "ds_configs" / "single.json")
    assert resolve_ds_config(named, cap) == (named, None)  # a config the user names wins


@pytest.mark.parametrize(
    "given,printed",
    [
        ("7.0", "zero2_fp16.json"),
        ("7.5", "zero2_fp16.json"),
        ("8.0", "zero2_bf16.json"),
        ("9.0", "zero2_bf16.json"),
        ("cpu", "cpu.json"),
    ],
)
def test_run_pretrain_sh_asks_the_same_function_for_its_default_config(given, printed):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "codeexecutor.training.precision", "--capability", given],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stdout.strip() == f"ds_configs/{printed}"
    assert "codeexecutor.training.precision" in (ROOT / "run_pretrain.sh").read_text()


def test_fp16_on_the_cpu_and_a_capability_not_read_are_one_line_each():
    import subprocess
    import sys

    from codeexecutor.training.precision import choose_precision

    with pytest.raises(ConfigError, match="cpu.json"):
        choose_precision(None, "deepspeed", FP16, None)
    done = subprocess.run(
        [sys.executable, "-m", "codeexecutor.training.precision", "--capability", "seven"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "MAJOR.MINOR" in done.stderr


def test_a_torch_without_kernels_for_the_gpu_is_refused_in_one_line_naming_the_build():
    from codeexecutor.training.precision import check_kernels, has_kernels

    cu130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]  # no Volta
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert not has_kernels((7, 0), cu130) and has_kernels((7, 0), cu126)
    assert has_kernels((8, 9), cu130)  # sm_86 machine code runs on 8.9
    assert has_kernels((9, 0), ["sm_80", "compute_80"]) and not has_kernels((9, 0), ["sm_80"])  # PTX is compiled up
    with pytest.raises(ConfigError, match="TORCH_INDEX=https://download.pytorch.org/whl/cu126") as err:
        check_kernels((7, 0), cu130, "2.13.0+cu130")
    assert "7.0" in str(err.value) and "\n" not in str(err.value)
    check_kernels((7, 0), cu126, "2.13.0+cu126")
    check_kernels(None, [], "2.13.0+cpu")


def test_a_config_the_device_cannot_train_is_refused_before_anything_is_built(tmp_path, demo_data):
    """fp16 on the CPU, through the training's command line: exit 2, one line naming the
    fix, and no tokenizer trained or written (the refusal comes before the set-up)."""
    import subprocess
    import sys

    import yaml

    out = tmp_path / "run"
    cur = {
        "model": {"preset": "tiny", "vocab_size": 600, "max_code_length": 128, "max_trace_length": 256},
        "train": {"output_dir": str(out), "max_tokens": 1024, "eval_examples": 0},
        "stages": [
            {
                "name": "s",
                "steps": 2,
                "lr": 1e-3,
                "warmup": 1,
                "sources": [{"path": str(demo_data / "singleline" / "singleline"), "task": "singleline"}],
            }
        ],
    }
    path = tmp_path / "cur.yaml"
    path.write_text(yaml.safe_dump(cur))
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor.training",
            "--curriculum",
            str(path),
            "--ds-config",
            str(ROOT / "ds_configs" / "zero2_fp16.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("codeexecutor.training:")]
    assert done.returncode == 2 and len(lines) == 1 and "cpu.json" in lines[0], done.stderr[-2000:]
    assert not (out / "tokenizer").exists() and not (out / "curriculum.json").exists()


def test_the_torch_engine_is_one_process_and_fp16_needs_deepspeeds_scale():
    from codeexecutor.training.engine import choose
    from codeexecutor.training.precision import choose_precision

    with pytest.raises(ConfigError, match="DeepSpeed"):
        choose("torch", 2, {})
    assert choose("auto", 2, {}) == "deepspeed" and choose("torch", 1, {}) == "torch"
    with pytest.raises(ConfigError, match="train.engine to deepspeed"):
        choose_precision((8, 0), "torch", FP16, None)
