"""The process group of a training run: one process or several (the DeepSpeed launcher,
torchrun, srun), each rank on its own GPU, and the values rank 0 decides for all."""

from __future__ import annotations

import os
import socket
import sys

from codeexecutor.errors import ConfigError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_distributed():
    """Initialise torch.distributed through DeepSpeed; works with the deepspeed launcher,
    torchrun, or a single process started without any launcher. A single process where
    DeepSpeed is not installed (a GPU lease that carries no DeepSpeed wheel) starts its
    process group with torch alone: its torch engine needs nothing of DeepSpeed."""
    import torch

    if "RANK" not in os.environ:  # one process, no launcher
        os.environ.update(
            RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
        )
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # before NCCL starts: each rank on its own GPU
    else:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # DeepSpeed JIT-compiles its CPU shared-memory comm op (~35 s) into this folder: keep it
    # inside the virtualenv so it is built once per environment, not once per machine user.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if has_deepspeed():
        import deepspeed

        deepspeed.init_distributed(dist_backend=backend)
    elif os.environ.get("WORLD_SIZE", "1") == "1":
        dist.init_process_group(backend=backend, init_method="env://")
    else:
        raise ConfigError("several processes need DeepSpeed (pip install deepspeed; requirements.txt pins it)")
    return dist.get_rank(), dist.get_world_size()


def has_deepspeed() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


def device_of_rank():
    """This process's device: its GPU (setup_distributed chose it) or the CPU."""
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def agreed(value: int) -> int:
    """Rank 0's value, on every rank (a budgeted stage's steps)."""
    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return int(value)
    t = torch.tensor([int(value)], dtype=torch.long, device="cuda" if torch.cuda.is_available() else "cpu")
    dist.broadcast(t, 0)
    return int(t.item())


def agreed_fixed(budget, stage) -> bool:
    """Whether rank 0 has fixed this stage's steps already (a resumed run)."""
    return bool(agreed(1 if budget is not None and budget.is_fixed(stage) else 0))
