"""The training forward of a packed row (modeling/rows.py) over the model's own modules.

The same RoBERTa layers as the Hugging Face forward, called module by module (so that
DeepSpeed's ZeRO-3 hooks still gather each one's parameters), written so that a
compiler sees one graph: no mask utilities, no attention-implementation switch, no
shape that depends on the data, nothing read back to the host. Rotary tables are made
once per row and shared by every layer; attention follows the row's rule through
FlexAttention's block mask on a GPU or `tile_attention` elsewhere
(modeling/attention.py); the loss is the chunked weighted cross-entropy of
modeling/loss.py, averaged over the row's weights as the padded forward averages its
batch.

`masked_row_loss(model, row)` is the function `torch.compile` takes whole
(`CodeExecutorModel.compile_rows`): the row's attention mask (`row_mask`) is made inside
it, from the row's tensors, so that no object made anew each step (FlexAttention's
BlockMask holds a closure over the row's columns) crosses into the compiled function,
where a torch that guards on it would recompile every row.
"""

from __future__ import annotations

import torch

from codeexecutor.modeling.attention import TileMask, flex_block_mask, tile_attention, tile_mask
from codeexecutor.modeling.loss import weighted_ce
from codeexecutor.modeling.rotary import rotary_tables, rotate

POSITION_OFFSET = 2  # RoBERTa positions start after padding_idx (1), as model.POSITION_OFFSET


def row_mask(model, row: dict):
    """The attention mask of a row on its device: FlexAttention's BlockMask where the
    row carries block lists (`kv_num`...), else the CPU path's `TileMask`."""
    if "kv_num" in row:
        return flex_block_mask(
            row["doc"], row["code"], row["kv_num"], row["kv_index"], row["full_num"], row["full_index"], row["block"]
        )
    device = row["ids"].device
    dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else model.dtype
    return tile_mask(row["doc"], row["code"], row["kv_lo"], row["kv_span"], row["tile"], dtype)


def _attend(q, k, v, mask, scale: float, dropout: float, training: bool) -> torch.Tensor:
    """q, k, v: (T, H, D) -> (T, H * D) under the row's rule."""
    if isinstance(mask, TileMask):
        return tile_attention(q, k, v, mask, scale, dropout, training)
    from torch.nn.attention.flex_attention import flex_attention

    T, H, D = q.shape
    q, k, v = (t.transpose(0, 1)[None].contiguous() for t in (q, k, v))  # (1, H, T, D) laid out so: inductor's CPU
    # template reads its input's storage as 4-D; on a GPU the copy fuses into the kernel that makes q and k
    out = flex_attention(q, k, v, block_mask=mask, scale=scale)  # (1, H, T, D)
    return out[0].transpose(0, 1).reshape(T, H * D)


def row_hidden(model, row: dict, mask) -> torch.Tensor:
    """(T, hidden) last hidden states of a row's tokens."""
    cfg = model.config
    rob = model.roberta
    emb = rob.embeddings
    ids, positions = row["ids"], row["positions"]
    x = emb.word_embeddings(ids) + emb.token_type_embeddings(ids.new_zeros(1))  # (T, hidden); token type 0 everywhere
    rotary = cfg.positions == "rotary"
    if rotary:
        H = cfg.num_attention_heads
        cos, sin = rotary_tables(positions[None], cfg.hidden_size // H, cfg.rotary_base, x.dtype)  # (1, 1, T, D)
        cos, sin = cos[0, 0, :, None], sin[0, 0, :, None]  # (T, 1, D): one table for every layer and head
    else:
        pos = positions.clamp(max=cfg.max_position_embeddings - POSITION_OFFSET - 1) + POSITION_OFFSET
        x = x + emb.position_embeddings(pos)
    x = emb.dropout(emb.LayerNorm(x))
    T = ids.shape[0]
    for layer in rob.encoder.layer:
        att = layer.attention.self
        H, D = att.num_attention_heads, att.attention_head_size
        q = att.query(x).view(T, H, D)  # (T, H, D)
        k = att.key(x).view(T, H, D)
        v = att.value(x).view(T, H, D)
        if rotary:
            if cos.dtype != q.dtype:  # the projections' dtype (bfloat16 under autocast): converted once
                cos, sin = cos.to(q.dtype), sin.to(q.dtype)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        o = _attend(q, k, v, mask, att.scaling, att.dropout.p, model.training)  # (T, hidden)
        out = layer.attention.output
        x = out.LayerNorm(out.dropout(out.dense(o)) + x)
        ff = layer.output
        x = ff.LayerNorm(ff.dropout(ff.dense(layer.intermediate(x))) + x)
    return x


def row_loss(model, row: dict, mask) -> torch.Tensor:
    """The row's loss: sum of weight x cross-entropy over its positions / sum of weights."""
    hidden = row_hidden(model, row, mask)
    if "head" in row:  # an eager step: only the positions that bear a loss are projected (rows.head_positions)
        hidden = hidden.index_select(0, row["head"])
    total = weighted_ce(hidden, model.lm_head.weight, row["labels"], row["weights"])
    return total / row["weights"].sum().clamp(min=1e-9)


def masked_row_loss(model, row: dict) -> torch.Tensor:
    """`row_loss` under the row's own mask, made here (inside the compiled function)."""
    return row_loss(model, row, row_mask(model, row))


def check_flex_dropout(model) -> None:
    """FlexAttention has no attention dropout: refuse a model that asks for it in training."""
    p = model.config.attention_probs_dropout_prob
    if model.training and p > 0:
        raise ValueError(
            f"FlexAttention takes no attention dropout and this model's is {p}: train with model.dropout: 0, "
            "or with model.attention: sdpa"
        )
