"""How a run computes on its device, chosen once from the device and the user's settings:
the DeepSpeed config where the user names none, the precision, TF32, the attention path.

No GPU run of `pretrain` takes a slow path without saying so: on a GPU that computes
bfloat16 natively (compute capability 8.0 and up: A100, H100, H200), a run that asks for
no precision trains under bfloat16 autocast over float32 weights, and float32 matmuls
(the optimizer's, the loss head's) use TF32. On an older GPU (a V100 is 7.0) bfloat16
is emulated, many times slower: asking for it there is refused in one line naming the
fp16 config; a run that names no config trains there in fp16 with DeepSpeed's loss scale
(below), one that names a float32 config stays in float32. The CPU keeps what the
run asks for (bf16 autocast helps where the CPU has bf16 instructions). One log line
names the choice (`label`).

The DeepSpeed config a run takes when none is named (`--ds-config auto`, the default of
`run_pretrain.sh`, `pretrain` and `python -m codeexecutor.training`) follows the same
line: ZeRO-2 in bf16 on 8.0 and up, ZeRO-2 in fp16 with DeepSpeed's dynamic loss scale
below it, the gloo CPU config without a GPU. FlexAttention runs only on 8.0 and up: below
it Triton has no tensor-core kernels and Inductor would run small float32 tiles, so the
run attends through the tile path (the same rule), and says so in its log.

    python -m codeexecutor.training.precision [--capability 7.0|cpu]   # the config `auto` takes here
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from codeexecutor.errors import ConfigError

NATIVE_BF16 = (8, 0)  # the first compute capability with bfloat16 tensor cores (Ampere)
AUTO = "auto"  # --ds-config's value for "the config this device should use"
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "ds_configs")


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


def ds_half(ds_cfg: dict) -> str | None:
    """The half precision a DeepSpeed config trains its weights in: "bf16", "fp16" or None."""
    return next((k for k in ("bf16", "fp16") if ds_cfg.get(k, {}).get("enabled")), None)


def choose_precision(cap: tuple[int, int] | None, engine: str, ds_cfg: dict, requested: str | None) -> Precision:
    """The run's precision from the device's capability (None: the CPU), the engine, the
    DeepSpeed config's half-precision section and `train.autocast`."""
    half = ds_half(ds_cfg)
    asks_bf16 = requested == "bf16" or half == "bf16"
    if engine == "torch" and half == "fp16":
        raise ConfigError(
            "an fp16 DeepSpeed config needs DeepSpeed's loss scale, and this run has train.engine torch: "
            "set train.engine to deepspeed (or auto), or name a bf16 or float32 config"
        )
    if cap is None and half == "fp16":
        raise ConfigError(
            "fp16 training needs a CUDA GPU (its loss scaling and kernels are the GPU's): on the CPU use "
            "--ds-config ds_configs/cpu.json, with train.autocast: bf16 where the CPU has bf16 instructions"
        )
    if cap is not None and cap < NATIVE_BF16 and asks_bf16:
        raise ConfigError(
            f"this GPU (compute capability {cap[0]}.{cap[1]}) has no native bfloat16 and emulates it many "
            "times slower: train in fp16 with a loss scale (--ds-config ds_configs/zero2_fp16.json, "
            "train.engine deepspeed) or float32 (leave out train.autocast and the config's bf16)"
        )
    tf32 = cap is not None and cap >= NATIVE_BF16
    if requested or (engine == "torch" and half == "bf16"):
        auto = requested or "bf16"  # the torch engine turns a DeepSpeed bf16 section into autocast
        return Precision(
            auto, tf32, f"{auto} autocast over float32 weights" + (", TF32 matmuls" if tf32 else ""), "config"
        )
    if engine == "deepspeed" and half:
        return Precision(None, tf32, f"{half} weights (DeepSpeed)" + (", TF32 matmuls" if tf32 else ""), "config")
    if tf32:
        return Precision(
            "bf16",
            True,
            "bf16 autocast over float32 weights, TF32 matmuls (the GPU computes bf16 "
            "natively; set train.autocast or a config's fp16 to choose otherwise)",
            "device",
        )
    where = "the CPU" if cap is None else f"a GPU of compute capability {cap[0]}.{cap[1]}, without native bf16"
    return Precision(None, False, f"float32 on {where}", "device")


def apply(choice: Precision) -> None:
    """Set the process-wide matmul precision the choice asks for."""
    import torch

    if choice.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def default_ds_config(cap: tuple[int, int] | None) -> str:
    """The file of ds_configs/ a run takes when the user names none: by the device's
    compute capability (None: the CPU). One process trains on the loop's own torch engine
    whatever the ZeRO stage (training/engine.py), except in fp16, which needs DeepSpeed's
    loss scale."""
    if cap is None:
        return "cpu.json"
    return "zero2_bf16.json" if cap >= NATIVE_BF16 else "zero2_fp16.json"


def resolve_ds_config(path: str | None, cap: tuple[int, int] | None) -> tuple[str, str | None]:
    """(the DeepSpeed config's path, the log's words for a choice made here or None)."""
    if path not in (None, AUTO):
        return path, None
    name = default_ds_config(cap)
    where = "the CPU" if cap is None else f"compute capability {cap[0]}.{cap[1]}"
    return os.path.join(
        CONFIGS, name
    ), f"DeepSpeed config ds_configs/{name}, chosen for {where} (name one with --ds-config)"


def has_kernels(cap: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a torch build compiled for `arch_list` (torch.cuda.get_arch_list(): "sm_80",
    "compute_90"...) runs on a GPU of capability `cap`: machine code for the same major
    version at a minor version no higher, or PTX of a capability no higher to compile from."""
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit():
            continue
        major, minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and major == cap[0] and minor <= cap[1]:
            return True
        if kind == "compute" and (major, minor) <= cap:
            return True
    return False


def check_kernels(cap: tuple[int, int] | None, arch_list: list[str], torch_version: str) -> None:
    """One line naming the fix where this torch has no kernels for the GPU (torch's CUDA 13
    builds carry none for a V100)."""
    if cap is None or not arch_list or has_kernels(cap, arch_list):
        return
    raise ConfigError(
        f"torch {torch_version} has no CUDA kernels for this GPU (compute capability {cap[0]}.{cap[1]}; "
        f"it has {' '.join(arch_list)}): install a build that does, e.g. make venv "
        "TORCH_INDEX=https://download.pytorch.org/whl/cu126 (docs/cluster.md)"
    )


def attention_for(requested: str, cap: tuple[int, int] | None) -> tuple[str, str | None]:
    """(row attention "flex" or "tiles", the fallback taken or None) on a device of
    compute capability `cap` (None: the CPU)."""
    if requested != "flex":
        return "tiles", None
    if cap is None:
        return "tiles", (
            "model.attention flex needs a CUDA device (FlexAttention has no backward pass on the CPU): this "
            "run attends through the tile path, the same rule"
        )
    if cap < NATIVE_BF16:  # Triton has no tensor-core kernels there: FlexAttention would run small fp32 tiles
        return "tiles", (
            f"model.attention flex needs a GPU of compute capability 8.0 or more (this one is "
            f"{cap[0]}.{cap[1]}): this run attends through the tile path, the same rule"
        )
    return "flex", None


@dataclass(frozen=True)
class DeviceChoice:
    precision: Precision
    attention: str  # "flex" or "tiles"
    fallback: str | None  # the attention fallback taken, in the log's words


def decide(
    cap: tuple[int, int] | None, engine: str, ds_cfg: dict, autocast: str | None, attention: str
) -> DeviceChoice:
    """Everything a run's device decides, in one place: its precision (and TF32) and its
    row attention, from the capability, the engine, the DeepSpeed config and the
    curriculum's `train.autocast` and `model.attention`."""
    path, fallback = attention_for(attention, cap)
    return DeviceChoice(choose_precision(cap, engine, ds_cfg, autocast), path, fallback)


def main(argv: list[str] | None = None) -> int:
    """Print the DeepSpeed config `auto` takes on this machine (or a given capability),
    relative to the checkout: what run_pretrain.sh launches with when DS_CONFIG is unset."""
    ap = argparse.ArgumentParser(prog="codeexecutor.training.precision", description=main.__doc__)
    ap.add_argument("--capability", help="a compute capability (7.0, 8.0, 9.0) or cpu, instead of this machine's GPU")
    args = ap.parse_args(argv)
    if args.capability is None:
        import torch

        cap = capability("cuda") if torch.cuda.is_available() else None
    elif args.capability == "cpu":
        cap = None
    else:
        try:
            major, minor = (int(x) for x in args.capability.split("."))
        except ValueError:
            print(
                f"codeexecutor.training.precision: --capability {args.capability!r} is not MAJOR.MINOR (7.0) or cpu",
                file=sys.stderr,
            )
            return 2
        cap = (major, minor)
    print(f"ds_configs/{default_ds_config(cap)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
