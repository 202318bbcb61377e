"""Weights stored as int8 with one scale a row: about 0.6 of bfloat16's bytes, for shipping.

A model the repository ships travels twice: in every clone, and in every GPU lease's
64 MiB working tree, where each of its bytes displaces training data. Each matrix with at
least `MIN_ELEMENTS` values (the embeddings, the attention and feed-forward projections) is
stored as int8 codes `round(w / s)` with `s = max|row| / 127`, one float32 `s` per output
row, under the tensor's own name and `NAME.int8_scale`; vectors (norms, biases), small
matrices and the word embeddings stay bfloat16. The embeddings are also the output layer
(tied): in int8 they turned a quarter of the shipped model's long traces somewhere, in
bf16 a tenth, for 2 MB more (RESULTS.md). The error of a value is at most half a step,
1/254 of its row's largest magnitude. Loading multiplies the codes back into float32 (`dequantize`): the
model then runs exactly as a float model would with those weights.

The file is `model.int8.safetensors`, not `model.safetensors`, so that a loader that does
not know the scheme (`from_pretrained` alone) fails to find weights instead of reading
codes as values; `load_model` reads both. How far int8 moves scores is measured on the
shipped model (RESULTS.md); `codeexecutor ship --weights` chooses it, and a GPU
lease ships its model so (gpu_run/).
"""

from __future__ import annotations

import os

INT8_FILE = "model.int8.safetensors"
SCALE = ".int8_scale"
MIN_ELEMENTS = 4096  # smaller matrices save too little to be worth a scale a row
KEEP = ("word_embeddings.weight", "lm_head.weight")  # the tied output layer: the logits, kept bf16
SCHEME = "int8-rows"  # the safetensors metadata a file of this scheme carries


def quantize(tensors: dict) -> dict:
    """Codes and scales for every float matrix of at least MIN_ELEMENTS values but the
    output layer (KEEP); other float tensors in bfloat16, integer tensors as they are."""
    import torch

    out = {}
    for name, value in tensors.items():
        if not value.is_floating_point():
            out[name] = value.contiguous()
        elif value.dim() == 2 and value.numel() >= MIN_ELEMENTS and not name.endswith(KEEP):
            w = value.float()
            scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
            out[name] = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8).contiguous()
            out[name + SCALE] = scale.contiguous()
        else:
            out[name] = value.to(torch.bfloat16).contiguous()
    return out


def dequantize(tensors: dict) -> dict:
    """The float32 weights back from `quantize`'s output."""
    out = {}
    for name, value in tensors.items():
        if name.endswith(SCALE):
            continue
        scale = tensors.get(name + SCALE)
        if scale is not None:
            out[name] = value.float() * scale.float()[:, None]
        else:
            out[name] = value.float() if value.is_floating_point() else value
    return out


def save_int8(tensors: dict, path: str) -> int:
    """Write `tensors` (float weights by name) quantized into `path`; returns the parameters."""
    from safetensors.torch import save_file

    save_file(quantize(tensors), path, metadata={"format": "pt", "quantization": SCHEME})
    return sum(v.numel() for v in tensors.values())


def load_int8(path: str) -> dict:
    """The float32 weights of an int8 file (ValueError naming the scheme where it is not one)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, "pt") as f:
        scheme = (f.metadata() or {}).get("quantization")
    if scheme != SCHEME:
        raise ValueError(f"{os.path.basename(path)} says quantization {scheme!r}, expected {SCHEME!r}")
    return dequantize(load_file(path))
