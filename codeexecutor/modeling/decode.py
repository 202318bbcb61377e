"""One decoding step over a key/value cache allocated once (generation/device_search.py).

`StaticCache` holds every layer's keys and values for N rows (hypotheses) at their
final size, code then trace, with an additive key mask beside them; a step writes the
new token's keys, values and mask entry at the cache's next column (a device tensor,
advanced in place: the host never tells the device where it is), then attends. On the
CPU a step attends over the columns written so far (`window`: shapes change every
step, which eager code does not mind); on CUDA over the whole cache, masked, so every
step has one shape and can be captured in a CUDA graph.

The step is the Hugging Face forward's arithmetic in the same order (embeddings, then
per layer the projections, rotary turn, SDPA with the additive mask, output and feed-
forward blocks), so a model decodes through it the tokens it decodes through
`RobertaModel` with a cache.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from codeexecutor.modeling.rotary import rotary_tables, rotate

POSITION_OFFSET = 2  # RoBERTa positions start after padding_idx (1), as model.POSITION_OFFSET


class StaticCache:
    """Keys and values of every layer for `rows` rows and `capacity` columns, the code's
    `S` first (copied from the encoder's cache), and `bias` (rows, 1, 1, capacity): 0
    where a row may attend, the dtype's minimum where not (padding, unwritten columns).
    Unwritten columns hold zeros: a step over the whole cache multiplies them by weight 0."""

    def __init__(self, encoded, code_mask: torch.Tensor, capacity: int, dtype: torch.dtype) -> None:
        N, S = code_mask.shape
        layers = encoded.layers
        H, D = layers[0].keys.shape[1], layers[0].keys.shape[3]
        device = code_mask.device
        self.keys, self.values = [], []
        for layer in layers:
            # zeros, not empty: a masked column's weight is 0, and 0 x NaN left in unwritten memory is NaN
            k = torch.zeros((N, H, capacity, D), dtype=layer.keys.dtype, device=device)
            v = torch.zeros_like(k)
            k[:, :, :S], v[:, :, :S] = layer.keys, layer.values
            self.keys.append(k)
            self.values.append(v)
        self.minimum = torch.finfo(dtype).min
        self.bias = torch.full((N, 1, 1, capacity), self.minimum, dtype=dtype, device=device)
        self.bias[:, 0, 0, :S] = torch.zeros((N, S), dtype=dtype, device=device).masked_fill(
            ~code_mask.bool(), self.minimum
        )
        self.code, self.capacity = S, capacity
        self.column = torch.full((1,), S, dtype=torch.long, device=device)  # the next column a step writes

    def keep_rows(self, rows: torch.Tensor, written: int) -> None:
        """Only these rows from now on (programs whose search is done leave); the
        `written` columns are copied, the rest of each new buffer zeros."""

        def kept(buf: torch.Tensor) -> torch.Tensor:
            out = buf.new_zeros((len(rows), *buf.shape[1:]))
            out[..., :written, :] = buf[..., :written, :].index_select(0, rows)
            return out

        self.keys = [kept(k) for k in self.keys]
        self.values = [kept(v) for v in self.values]
        bias = self.bias.new_full((len(rows), *self.bias.shape[1:]), self.minimum)
        bias[..., :written] = self.bias[..., :written].index_select(0, rows)
        self.bias = bias

    def reorder(self, order: torch.Tensor, written: int) -> None:
        """Row i now continues row order[i] (beam search): the trace columns written so
        far follow; the code columns are the same for every row of a program."""
        S = self.code
        for k, v in zip(self.keys, self.values):
            k[:, :, S:written] = k[:, :, S:written].index_select(0, order)
            v[:, :, S:written] = v[:, :, S:written].index_select(0, order)
        self.bias[..., S:written] = self.bias[..., S:written].index_select(0, order)


def decode_step(
    model, cache: StaticCache, tokens: torch.Tensor, positions: torch.Tensor, real: torch.Tensor, window: int | None
) -> torch.Tensor:
    """(N, V) float32 log-probabilities of the next token for N rows, each fed `tokens`
    at `positions` (-1: a generated `<pad>`, placed as RoBERTa places padding); `real`:
    which of them are keys later tokens may see. Writes the cache's next column and
    advances it. `window`: the columns to attend over (None: all of them)."""
    cfg = model.config
    rob = model.roberta
    emb = rob.embeddings
    col = cache.column
    entry = torch.zeros(real.shape, dtype=cache.bias.dtype, device=real.device).masked_fill(~real, cache.minimum)
    cache.bias.index_copy_(3, col, entry[:, None, None, None])
    pos = positions.clamp(max=cfg.max_position_embeddings - POSITION_OFFSET - 1)[:, None] + POSITION_OFFSET  # (N, 1)
    ids = tokens[:, None]  # (N, 1)
    x = emb.word_embeddings(ids) + emb.token_type_embeddings(torch.zeros_like(ids))
    rotary = cfg.positions == "rotary"
    if not rotary:
        x = x + emb.position_embeddings(pos)
    x = emb.dropout(emb.LayerNorm(x))  # (N, 1, hidden)
    bias = cache.bias if window is None else cache.bias[..., :window]
    tables = None
    N = ids.shape[0]
    for i, layer in enumerate(rob.encoder.layer):
        att = layer.attention.self
        H, D = att.num_attention_heads, att.attention_head_size
        q = att.query(x).view(N, 1, H, D).transpose(1, 2)  # (N, H, 1, D)
        k = att.key(x).view(N, 1, H, D).transpose(1, 2)
        v = att.value(x).view(N, 1, H, D).transpose(1, 2)
        if rotary:
            if tables is None:  # once per step, for every layer
                tables = rotary_tables(pos, D, cfg.rotary_base, q.dtype)
            q, k = rotate(q, *tables), rotate(k, *tables)
        keys, values = cache.keys[i], cache.values[i]
        keys.index_copy_(2, col, k)
        values.index_copy_(2, col, v)
        if window is not None:
            keys, values = keys[:, :, :window], values[:, :, :window]
        o = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, scale=att.scaling)  # (N, H, 1, D)
        o = o.transpose(1, 2).contiguous().reshape(N, 1, H * D)
        x = layer.attention.output(o, x)
        x = layer.output(layer.intermediate(x), x)
    col.add_(1)
    return model.log_probs(model.logits(x[:, -1]))  # (N, V)
