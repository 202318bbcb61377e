"""The batched cached beam search as it was before the search moved onto the device
(commit 67272cb, `TraceGenerator._beam` with its `_BeamLayer` cache): the reference the
device search (generation/device_search.py) must match token for token on the CPU."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

from codeexecutor.generation.beam import Beam, select
from codeexecutor.generation.constraints import RowConstraints
from codeexecutor.generation.search import Generated


class _BeamLayer(DynamicLayer):
    """A key/value cache layer for beam search over a fixed code prefix.

    Buffers are preallocated for code + trace length, so a step writes in place instead
    of concatenating the whole cache; and reordering beams touches only the trace part:
    beams are only ever permuted among the beams of one program, whose code keys/values
    are identical, so positions before `frozen` never need to move.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int, frozen: int) -> None:
        super().__init__()
        N, H, L, D = keys.shape
        self.kbuf = keys.new_empty((N, H, capacity, D))
        self.vbuf = values.new_empty((N, H, capacity, D))
        self.kbuf[:, :, :L] = keys
        self.vbuf[:, :, :L] = values
        self.length, self.frozen = L, frozen
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.keys, self.values = self.kbuf[:, :, :L], self.vbuf[:, :, :L]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        self.kbuf[:, :, self.length : end] = key_states
        self.vbuf[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self.kbuf[:, :, :end], self.vbuf[:, :, :end]
        return self.keys, self.values

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        f, L = self.frozen, self.length
        if L > f:
            self.kbuf[:, :, f:L] = self.kbuf[:, :, f:L].index_select(0, beam_idx)
            self.vbuf[:, :, f:L] = self.vbuf[:, :, f:L].index_select(0, beam_idx)

    def keep_rows(self, rows: torch.LongTensor) -> None:
        """Drop the rows of programs whose search is done (the code part too)."""
        self.kbuf, self.vbuf = self.kbuf.index_select(0, rows), self.vbuf.index_select(0, rows)
        self.keys, self.values = self.kbuf[:, :, : self.length], self.vbuf[:, :, : self.length]


def reference_beam(
    self, codes: list[list[int]], size: int, max_length: int, rules=None, ends=None, length_penalty: float = 0.0
) -> list[Generated]:
    """`self`: a TraceGenerator; its answers for model-format code ids, as its `_beam` gave them."""
    from codeexecutor.modeling.tokenizer import pad

    m, enc, dev = self.model, self.encoder, self.device
    batch = pad(codes, enc.pad, "code")
    code_ids, code_mask = batch["code_ids"].to(dev), batch["code_mask"].to(dev)
    B, S = code_ids.shape
    kv, code_len = m.encode(code_ids, code_mask)
    kv.batch_repeat_interleave(size)  # (B*size, ...)
    kv.layers = [_BeamLayer(layer.keys, layer.values, S + max_length + 2, S) for layer in kv.layers]
    key_mask = code_mask.bool().repeat_interleave(size, 0)  # (B*size, S)
    code_len = code_len.repeat_interleave(size, 0)  # (B*size,)
    fed = torch.zeros_like(code_len)  # target tokens fed so far that are not <pad>
    tokens = torch.full((B * size,), enc.mask0, dtype=torch.long, device=dev)
    beams = [Beam(size, enc.eos, length_penalty) for _ in range(B)]
    alive = list(range(B))  # programs in the batch, in row order
    scores = None  # (A, size) the hypotheses' summed log-probabilities, on the device
    constraint = RowConstraints(rules, size) if rules else None
    for _ in range(max_length):
        # As the release: a generated <pad> is masked out as a key (ids.ne(1)) and gets
        # RoBERTa's padding position; later tokens' positions do not count it.
        real = tokens.ne(enc.pad)
        fed = fed + real
        positions = torch.where(real, code_len + fed - 1, -1)  # + 2 in decode_step: n+2, n+3, ...; <pad>: 1
        key_mask = torch.cat([key_mask, real[:, None]], 1)  # (A*size, S+step+1)
        logp = m.decode_step(tokens, kv, key_mask, positions)  # (A*size, V)
        if constraint:
            logp = constraint.mask(logp)
        margin = None
        if ends:
            logp, margin = ends(logp)
            margin = margin.view(len(alive), size).cpu()
        A = len(alive)
        ended = None if scores is None else tokens.view(A, size).eq(enc.eos)
        scores, back, token = select(logp.view(A, size, -1), scores, ended)
        host = torch.stack([back, token]).cpu()  # with the scores, the step's two copies to the host
        backs, toks, best = host[0].tolist(), host[1].tolist(), scores.cpu().tolist()
        for a, b in enumerate(alive):
            beams[b].record(best[a], backs[a], toks[a], None if margin is None else margin[a], host[0, a])
        if constraint:
            constraint.advance([o + a * size for a in range(A) for o in backs[a]], [t for row in toks for t in row])
        if size > 1:  # greedy search keeps every row where it is: nothing to reorder
            order = (back + torch.arange(A, device=dev)[:, None] * size).reshape(-1)
            kv.reorder_cache(order)
            key_mask, fed = key_mask[order], fed[order]
        tokens = token.reshape(-1)
        keep = [a for a, b in enumerate(alive) if not beams[b].done()]
        if len(keep) < len(alive):  # finished programs leave the batch
            if not keep:
                break
            rows = torch.tensor([a * size + k for a in keep for k in range(size)], device=dev)
            for layer in kv.layers:
                layer.keep_rows(rows)
            key_mask, code_len, fed, tokens = key_mask[rows], code_len[rows], fed[rows], tokens[rows]
            scores = scores[torch.tensor(keep, device=dev)]
            if constraint:
                constraint.keep(rows.tolist())
            alive = [alive[a] for a in keep]
    results = []
    for b in range(B):
        score, ids = beams[b].best()
        results.append(
            Generated(enc.decode(ids), float(score), len(ids), beams[b].ended(), beams[b].peak(), beams[b].end())
        )
    return results
