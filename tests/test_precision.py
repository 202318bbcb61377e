"""The precision and attention path a run takes, by the device's compute capability
(simulated on the CPU: 7.0 a V100, 8.0 an A100, 9.0 an H100)."""

import pytest

from codeexecutor.errors import ConfigError

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
