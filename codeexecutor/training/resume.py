"""Resuming a DeepSpeed run on another number of processes.

A ZeRO-1/2/3 checkpoint holds the optimizer's state cut into one piece per data-parallel
rank, and DeepSpeed refuses to load it with another world size. A run stopped on two GPUs
and carried on with one (a node lost, a smaller allocation), or the reverse, goes through
DeepSpeed's own universal format instead: rank 0 converts the newest checkpoint once
(`deepspeed.checkpoint.ds_to_universal`, into `<tag>-universal`), and every rank loads it
with `checkpoint.load_universal`. The global step, and with it the stage and the learning
rate schedule, come back as they were; each step's batch is micro-batch x accumulation x
the new world size. Each checkpoint records the world size that wrote it (`world.json`
in its folder); one without that record is taken to be of the present world size.
"""

from __future__ import annotations

import json
import os
import sys

from codeexecutor.atomic import replacing, write_json

WORLD_FILE = "world.json"


def record_world(ckpt: str, tag: str, world: int) -> None:
    """Write the world size beside a checkpoint just saved (rank 0)."""
    path = os.path.join(ckpt, tag, WORLD_FILE)
    write_json(path, {"world_size": world}, indent=None)


def latest(ckpt: str) -> str | None:
    path = os.path.join(ckpt, "latest")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return f.read().strip() or None


def saved_world(ckpt: str, tag: str) -> int | None:
    path = os.path.join(ckpt, tag, WORLD_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return int(json.load(f)["world_size"])


def universal_tag(ckpt: str, world: int, rank: int) -> str | None:
    """The tag to load the newest DeepSpeed checkpoint of `ckpt` from when it was written
    by another world size: its universal conversion, made here by rank 0 when missing
    (every rank waits for it). None where the sizes agree or nothing is saved."""
    import torch.distributed as dist

    tag = latest(ckpt)
    before = saved_world(ckpt, tag) if tag else None
    if before is None or before == world:
        return None
    out = f"{tag}-universal"
    if rank == 0 and not os.path.isdir(os.path.join(ckpt, out)):
        print(
            f"resuming a checkpoint of {before} process(es) with {world}: converting {tag} to DeepSpeed's universal "
            "format",
            file=sys.stderr,
            flush=True,
        )
        _convert(os.path.join(ckpt, tag), os.path.join(ckpt, out))
    dist.barrier()
    return out


def _convert(src: str, dst: str) -> None:
    """DeepSpeed's converter, in this process; written to a temporary folder, then moved."""
    from argparse import Namespace

    from deepspeed.checkpoint.ds_to_universal import main as to_universal

    with replacing(dst) as tmp:
        to_universal(
            Namespace(
                input_folder=src,
                output_folder=tmp,
                num_extract_workers=1,
                num_merge_workers=1,
                keep_temp_folder=False,
                strict=True,
                inject_missing_state=True,
            )
        )
    stray = os.path.join(
        os.path.dirname(dst), "latest_universal"
    )  # the converter's pointer to `tmp`: this run names its tag
    if os.path.exists(stray):
        os.remove(stray)
