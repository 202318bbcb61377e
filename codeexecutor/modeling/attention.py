"""Attention over a packed row (modeling/rows.py): the rule "same example, and the key is
that example's code or not after the query", applied tile by tile.

Two paths compute the same thing:

* `tile_attention` (any device; the CPU's): the row is cut into query tiles; each gathers
  the `span` key tiles from its first (the rows' `Tiles`: every tile a query tile may see
  lies in that range), checks the rule on the gathered (tile, span x tile) pairs only, and
  attends with a plain softmax. Its cost is T x span x tile per head instead of T x T;
  the rule's boolean for the gathered pairs is made once per micro-step and shared by
  every layer (`TileMask`).
* FlexAttention (CUDA): the same tile lists become a `BlockMask` (`flex_block_mask`),
  whose fused kernel skips the tiles of other examples and of the future and checks the
  rule only on the partial ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TileMask:
    """What `tile_attention` needs of one row, on the model's device: `index` (nq, span)
    the key tile of each slot (clamped to the row), `bias` (nq, 1, tile, span x tile) the
    rule on the gathered pairs as an additive mask (0 or -inf; -inf on slots past a tile's
    last), in the dtype attention runs in."""

    tile: int
    index: torch.Tensor
    bias: torch.Tensor


def tile_mask(
    doc: torch.Tensor,
    code: torch.Tensor,
    lo: torch.Tensor,
    span: torch.Tensor,
    tile: int,
    dtype: torch.dtype = torch.float32,
) -> TileMask:
    """The rule on the pairs `tile_attention` gathers. doc, code: (T,); lo: (nq,) each
    query tile's first key tile; span: (S,) any tensor whose length is the number of key
    tiles gathered (a shape, so that a compiled step sees it as one)."""
    T = doc.shape[0]
    nq, S = T // tile, span.shape[0]
    slots = lo[:, None] + torch.arange(S, device=doc.device)[None]  # (nq, S)
    index = slots.clamp(max=nq - 1)
    kpos = (index[:, :, None] * tile + torch.arange(tile, device=doc.device)).reshape(nq, S * tile)  # (nq, S*tile)
    qpos = torch.arange(T, device=doc.device).view(nq, tile)  # (nq, tile)
    kdoc, kcode = doc[kpos], code[kpos]  # (nq, S*tile)
    fresh = (
        (slots < nq)[:, :, None].expand(nq, S, tile).reshape(nq, S * tile)
    )  # a clamped slot repeats a tile: never seen
    ok = (doc.view(nq, tile)[:, :, None] == kdoc[:, None, :]) & (
        kcode[:, None, :] | (kpos[:, None, :] <= qpos[:, :, None])
    )
    ok = ok & fresh[:, None, :]  # (nq, tile, S*tile)
    bias = torch.zeros(ok.shape, dtype=dtype, device=doc.device).masked_fill_(~ok, float("-inf"))
    return TileMask(tile, index, bias[:, None])  # (nq, 1, tile, S*tile): one for every head


def tile_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: TileMask,
    scale: float,
    dropout: float = 0.0,
    training: bool = False,
) -> torch.Tensor:
    """q, k, v: (T, H, D) of one row -> (T, H * D). Each query tile attends to its
    gathered key tiles through SDPA with the additive rule (the fused CPU kernel, forward
    and backward: query tiles are its batch, heads its heads); `index_select` gathers, so
    the backward pass adds the key gradients back with `index_add`, not a sort."""
    T, H, D = q.shape
    tile, index = mask.tile, mask.index
    nq, S = index.shape
    flat = index.reshape(-1)
    qt = q.view(nq, tile, H, D).transpose(1, 2)  # (nq, H, tile, D)
    kt = k.view(nq, tile, H, D).index_select(0, flat).view(nq, S * tile, H, D).transpose(1, 2)  # (nq, H, S*tile, D)
    vt = v.view(nq, tile, H, D).index_select(0, flat).view(nq, S * tile, H, D).transpose(1, 2)
    bias = mask.bias if mask.bias.dtype == q.dtype else mask.bias.to(q.dtype)
    out = F.scaled_dot_product_attention(
        qt, kt, vt, attn_mask=bias, dropout_p=dropout if training else 0.0, scale=scale
    )
    return out.transpose(1, 2).reshape(T, H * D)  # (nq, tile, H, D) -> (T, H*D)


def flex_block_mask(
    doc: torch.Tensor,
    code: torch.Tensor,
    kv_num: torch.Tensor,
    kv_index: torch.Tensor,
    full_num: torch.Tensor,
    full_index: torch.Tensor,
    block: int,
):
    """A FlexAttention BlockMask from a row's tile lists (made by the data worker,
    `rows.block_lists`) and its doc/code columns on the device; only partial tiles
    evaluate the rule."""
    from torch.nn.attention.flex_attention import BlockMask

    T = doc.shape[0]

    def rule(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (code[kv_idx] | (kv_idx <= q_idx))

    return BlockMask.from_kv_blocks(
        kv_num[None, None],
        kv_index[None, None],
        full_num[None, None],
        full_index[None, None],
        BLOCK_SIZE=block,
        mask_mod=rule,
        seq_lengths=(T, T),
    )
