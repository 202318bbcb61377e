"""The precision a run computes in, chosen once from the device and the user's settings.

No GPU run of `pretrain` takes a slow path without saying so: on a GPU that computes
bfloat16 natively (compute capability 8.0 and up: A100, H100, H200), a run that asks for
no precision trains under bfloat16 autocast over float32 weights, and float32 matmuls
(the optimizer's, the loss head's) use TF32. On an older GPU (a V100 is 7.0) bfloat16
is emulated, many times slower: asking for it there is refused in one line naming the
fp16 config, and a run that asks for nothing stays in float32. The CPU keeps what the
run asks for (bf16 autocast helps where the CPU has bf16 instructions). One log line
names the choice (`label`).
"""

from __future__ import annotations

from dataclasses import dataclass

from codeexecutor.errors import ConfigError

NATIVE_BF16 = (8, 0)  # the first compute capability with bfloat16 tensor cores (Ampere)


@dataclass(frozen=True)
class Precision:
    autocast: str | None  # "bf16": the forward under torch.autocast(bfloat16); None: as the weights are
    tf32: bool  # float32 matmuls and convolutions in TF32
    label: str  # the log's words for it
    chosen_by: str  # "config" (the user's) or "device" (this module's default)


def capability(device) -> tuple[int, int] | None:
    """The CUDA compute capability of `device`, None on the CPU."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    return tuple(torch.cuda.get_device_capability(device))


def choose_precision(cap: tuple[int, int] | None, engine: str, ds_cfg: dict, requested: str | None) -> Precision:
    """The run's precision from the device's capability (None: the CPU), the engine, the
    DeepSpeed config's half-precision section and `train.autocast`."""
    half = next((k for k in ("bf16", "fp16") if ds_cfg.get(k, {}).get("enabled")), None)
    asks_bf16 = requested == "bf16" or half == "bf16"
    if cap is not None and cap < NATIVE_BF16 and asks_bf16:
        raise ConfigError(f"this GPU (compute capability {cap[0]}.{cap[1]}) has no native bfloat16 and emulates it many "
                          "times slower: train in fp16 with a loss scale (--ds-config ds_configs/zero2_fp16.json, "
                          "train.engine deepspeed) or float32 (leave out train.autocast and the config's bf16)")
    tf32 = cap is not None and cap >= NATIVE_BF16
    if requested or (engine == "torch" and half == "bf16"):
        auto = requested or "bf16"  # the torch engine turns a DeepSpeed bf16 section into autocast
        return Precision(auto, tf32, f"{auto} autocast over float32 weights" + (", TF32 matmuls" if tf32 else ""),
                         "config")
    if engine == "deepspeed" and half:
        return Precision(None, tf32, f"{half} weights (DeepSpeed)" + (", TF32 matmuls" if tf32 else ""), "config")
    if tf32:
        return Precision("bf16", True, "bf16 autocast over float32 weights, TF32 matmuls (the GPU computes bf16 "
                         "natively; set train.autocast or a config's fp16 to choose otherwise)", "device")
    where = "the CPU" if cap is None else f"a GPU of compute capability {cap[0]}.{cap[1]}, without native bf16"
    return Precision(None, False, f"float32 on {where}", "device")


def apply(choice: Precision) -> None:
    """Set the process-wide matmul precision the choice asks for."""
    import torch

    if choice.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
