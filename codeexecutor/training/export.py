"""What a run writes: Hugging Face exports and resumable DeepSpeed checkpoints (the newest kept)."""

from __future__ import annotations

import os
import shutil


def export_model(engine, tok, path: str, rank: int, zero_stage: int) -> None:
    """Save a Hugging Face model (save_pretrained) of the current weights."""
    import deepspeed
    import torch.distributed as dist

    module = engine.module
    if zero_stage == 3:
        with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
            if rank == 0:
                save_export(module, tok, path)
    elif rank == 0:
        save_export(module, tok, path)
    dist.barrier()


def save_export(module, tok, path: str) -> None:
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    module.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def save_checkpoint(engine, ckpt: str, step: int, keep: int, rank: int) -> None:
    """Save a resumable checkpoint, then delete all but the newest `keep` ones."""
    import torch.distributed as dist

    engine.save_checkpoint(ckpt, tag=f"step{step}", client_state={"global_step": step})
    if keep and rank == 0:
        tags = sorted((d for d in os.listdir(ckpt) if d.startswith("step") and d[4:].isdigit()), key=lambda d: int(d[4:]))
        for old in tags[:-keep]:
            shutil.rmtree(os.path.join(ckpt, old), ignore_errors=True)
    dist.barrier()
