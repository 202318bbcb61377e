"""What a run writes: Hugging Face exports and resumable DeepSpeed checkpoints (the newest kept)."""

from __future__ import annotations

import os
import shutil

from codeexecutor.atomic import replacing


def export_model(engine, tok, path: str, rank: int, zero_stage: int) -> None:
    """Save a Hugging Face model (save_pretrained) of the current weights."""
    import torch.distributed as dist

    module = engine.module
    if zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
            if rank == 0:
                save_export(module, tok, path)
    elif rank == 0:
        save_export(module, tok, path)
    dist.barrier()


def save_export(module, tok, path: str) -> None:
    with replacing(path) as tmp:
        module.save_pretrained(tmp)
        tok.save_pretrained(tmp)


def save_checkpoint(engine, ckpt: str, step: int, keep: int, rank: int) -> None:
    """Save a resumable checkpoint, then delete all but the newest `keep` ones."""
    import torch.distributed as dist

    from codeexecutor.training.resume import record_world

    engine.save_checkpoint(ckpt, tag=f"step{step}", client_state={"global_step": step})
    if rank == 0:
        record_world(ckpt, f"step{step}", dist.get_world_size())
    if keep and rank == 0:
        tags = sorted(
            (d for d in os.listdir(ckpt) if d.startswith("step") and d[4:].isdigit()), key=lambda d: int(d[4:])
        )
        for old in tags[:-keep]:
            for folder in (old, f"{old}-universal"):  # and its conversion for another world size, if one was made
                shutil.rmtree(os.path.join(ckpt, folder), ignore_errors=True)
    dist.barrier()


def export_pieces(model_dir: str, out_dir: str, piece_bytes: int = 16 * 2**20, name: str = "model") -> dict:
    """A saved model's weights in bfloat16 (one safetensors file's bytes; a shipped int8
    folder's `model.int8.safetensors` as it is), cut into pieces of at most `piece_bytes`
    (`NAME.safetensors.partK`), and `NAME-meta.tar`: its config.json, tokenizer files and
    `manifest.json` (each piece's size and sha256, the whole file's, its name). What a
    machine that returns files of limited size can bring back; `join_pieces` checks and
    reassembles it. Returns the manifest."""
    import hashlib
    import io
    import json
    import tarfile

    import torch
    from safetensors.torch import load_file, save

    from codeexecutor.modeling.int8 import INT8_FILE, SCALE

    weights = INT8_FILE if os.path.isfile(os.path.join(model_dir, INT8_FILE)) else "model.safetensors"
    if weights == INT8_FILE:  # codes and their scales, exactly as the loader reads them
        with open(os.path.join(model_dir, weights), "rb") as f:
            blob = f.read()
        tensors = load_file(os.path.join(model_dir, weights))
    else:
        tensors = {
            k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
            for k, v in load_file(os.path.join(model_dir, weights)).items()
        }
        blob = save(tensors, metadata={"format": "pt"})
    os.makedirs(out_dir, exist_ok=True)
    pieces = []
    for k, start in enumerate(range(0, len(blob), piece_bytes), 1):
        part = blob[start : start + piece_bytes]
        path = os.path.join(out_dir, f"{name}.safetensors.part{k}")
        with replacing(path) as tmp, open(tmp, "wb") as f:
            f.write(part)
        pieces.append({"file": os.path.basename(path), "bytes": len(part), "sha256": hashlib.sha256(part).hexdigest()})
    manifest = {
        "file": weights,
        "dtype": "int8" if weights == INT8_FILE else "bfloat16",
        "bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "pieces": pieces,
        "parameters": sum(v.numel() for k, v in tensors.items() if not k.endswith(SCALE)),  # an int8 row's scale aside
    }
    meta = os.path.join(out_dir, f"{name}-meta.tar")
    with replacing(meta) as tmp, tarfile.open(tmp, "w") as tar:
        for f in sorted(os.listdir(model_dir)):
            if f != weights and os.path.isfile(os.path.join(model_dir, f)):
                tar.add(os.path.join(model_dir, f), arcname=f)
        data = json.dumps(manifest, indent=2).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return manifest


def join_pieces(pieces_dir: str, out_model: str, name: str = "model") -> dict:
    """Reassemble `export_pieces`' output into a loadable model folder, after checking every
    piece's size and hash and the whole file's (UsageError naming what is wrong: a piece
    missing, cut short or changed). A folder that already holds the whole file (its hash
    the manifest's) is kept as it is, so that what was keyed to it, an evaluation's
    answers journal, still holds. Returns the manifest."""
    import hashlib
    import json
    import tarfile

    from codeexecutor.errors import UsageError

    meta = os.path.join(pieces_dir, f"{name}-meta.tar")
    if not os.path.isfile(meta):
        raise UsageError(f"no {name}-meta.tar in {pieces_dir}: give the folder the pieces came back to")
    with tarfile.open(meta) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        joined = os.path.join(out_model, manifest.get("file", "model.safetensors"))
        if os.path.isfile(joined):
            with open(joined, "rb") as f:
                if hashlib.file_digest(f, "sha256").hexdigest() == manifest["sha256"]:
                    return manifest
        with replacing(out_model) as tmp:  # a folder that fails the check is removed, never kept
            tar.extractall(tmp, filter="data")
            _check_pieces(pieces_dir, manifest, tmp)
    return manifest


def _check_pieces(pieces_dir: str, manifest: dict, tmp: str) -> None:
    """Write the pieces' concatenation into `tmp` under the manifest's file name (model.safetensors,
    or the int8 layout's), after their checks."""
    import hashlib
    import json

    from codeexecutor.errors import UsageError

    blob = bytearray()
    for piece in manifest["pieces"]:
        path = os.path.join(pieces_dir, piece["file"])
        if not os.path.isfile(path):
            raise UsageError(
                f"piece {piece['file']} is missing from {pieces_dir} ({len(manifest['pieces'])} pieces expected)"
            )
        with open(path, "rb") as f:
            data = f.read()
        if len(data) != piece["bytes"] or hashlib.sha256(data).hexdigest() != piece["sha256"]:
            raise UsageError(
                f"piece {piece['file']} is {len(data)} bytes, expected {piece['bytes']} with sha256 "
                f"{piece['sha256'][:12]}: it was cut short or changed in transfer; fetch it again"
            )
        blob += data
    if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
        raise UsageError(
            f"the pieces in {pieces_dir} do not make the exported file (sha256 mismatch); fetch them again"
        )
    with open(os.path.join(tmp, manifest.get("file", "model.safetensors")), "wb") as f:
        f.write(blob)
    os.remove(os.path.join(tmp, "manifest.json"))
    with open(os.path.join(tmp, "pieces.json"), "w") as f:
        json.dump(manifest, f, indent=2)


def save_shipped(model_dir: str, dest: str, weights: str = "bf16") -> int:
    """A saved model as one weights file beside its config and tokenizer files, in bfloat16
    (`model.safetensors`, half the bytes of float32) or int8 codes a row
    (`model.int8.safetensors`, about 0.3 of float32: modeling/int8.py); the loader reads either back
    into float32 on a CPU. Returns the parameters."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from codeexecutor.modeling.int8 import INT8_FILE, save_int8

    if weights not in ("bf16", "int8"):
        raise ValueError(f"weights {weights!r}: bf16 or int8")
    source = os.path.join(model_dir, "model.safetensors")
    with replacing(dest.rstrip("/")) as tmp:
        os.makedirs(tmp)
        if weights == "int8":
            params = save_int8(load_file(source), os.path.join(tmp, INT8_FILE))
        else:
            tensors = {
                k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
                for k, v in load_file(source).items()
            }
            save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
            params = sum(v.numel() for v in tensors.values())
        for f in sorted(os.listdir(model_dir)):
            if f not in ("model.safetensors", INT8_FILE) and os.path.isfile(os.path.join(model_dir, f)):
                shutil.copy(os.path.join(model_dir, f), os.path.join(tmp, f))
    return params
