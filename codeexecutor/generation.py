"""Trace generation: batched beam search that reuses the code's cached keys/values.

`TraceGenerator(model_dir)` loads a `save_pretrained` model + tokenizer (a local folder,
or a hub id when the user has network access) and turns model-format code (SPEC §3)
into generated trace text with its sequence log-probability.

The code of every program in a batch is encoded once; the cache is expanded to
`beam` rows per program and reordered as beams are chosen, so each step runs the model
on one new token per live beam. `cache=False` is the slow reference (the whole prefix
recomputed at every step, one program at a time), kept for the benchmark and tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicLayer


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


@dataclass
class Generated:
    text: str
    logprob: float
    tokens: int


class TraceGenerator:
    def __init__(self, model_dir: str, device: str | None = None, dtype: torch.dtype | None = None) -> None:
        from codeexecutor.model import CodeExecutorModel
        from codeexecutor.tokenizer import Encoder, load_tokenizer

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tok = load_tokenizer(model_dir)
        self.model = CodeExecutorModel.from_pretrained(model_dir, torch_dtype=dtype).to(self.device).eval()
        cfg = self.model.config
        self.encoder = Encoder(self.tok, cfg.max_code_length, cfg.max_trace_length)

    @torch.no_grad()
    def generate(self, inputs: list[str], beam: int = 10, max_length: int = 768, batch_size: int = 8,
                 cache: bool = True) -> list[Generated]:
        """Best beam for each model-format code string, in input order."""
        out: list[Generated] = []
        max_length = min(max_length, self.model.config.max_trace_length)
        if not cache:
            return [self._beam_no_cache(self.encoder.code(text), beam, max_length) for text in inputs]
        for i in range(0, len(inputs), batch_size):
            codes = [self.encoder.code(t) for t in inputs[i : i + batch_size]]
            out += self._beam(codes, beam, max_length)
        return out

    # -- cached, batched -------------------------------------------------------------------
    def _beam(self, codes: list[list[int]], beam: int, max_length: int) -> list[Generated]:
        from codeexecutor.tokenizer import pad

        m, enc = self.model, self.encoder
        batch = pad(codes, enc.pad, "code")
        code_ids, code_mask = batch["code_ids"].to(self.device), batch["code_mask"].to(self.device)
        B = code_ids.shape[0]
        kv, code_len = m.encode(code_ids, code_mask)
        kv.batch_repeat_interleave(beam)  # (B*beam, ...)
        S = code_ids.shape[1]
        kv.layers = [_BeamLayer(layer.keys, layer.values, S + max_length + 2, S) for layer in kv.layers]
        key_mask = code_mask.bool().repeat_interleave(beam, 0)  # (B*beam, S)
        positions = code_len.repeat_interleave(beam, 0)  # (B*beam,)
        tokens = torch.full((B * beam,), enc.mask0, dtype=torch.long, device=self.device)
        scores = torch.full((B, beam), float("-inf"), device=self.device)
        scores[:, 0] = 0.0  # all beams start identical: keep one
        history = torch.zeros((B * beam, 0), dtype=torch.long, device=self.device)
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
        done = torch.zeros(B, dtype=torch.bool, device=self.device)
        for step in range(max_length + 1):
            key_mask = torch.cat([key_mask, torch.ones((B * beam, 1), dtype=torch.bool, device=self.device)], dim=1)
            logp = m.decode_step(tokens, kv, key_mask, positions + step)  # (B*beam, V)
            V = logp.shape[-1]
            total = (scores.view(-1, 1) + logp).view(B, beam * V)  # (B, beam*V)
            top, idx = total.topk(2 * beam, dim=1)  # (B, 2*beam)
            src_beam, token = idx // V, idx % V
            new_scores = torch.full((B, beam), float("-inf"), device=self.device)
            new_src = torch.zeros((B, beam), dtype=torch.long, device=self.device)
            new_tok = torch.full((B, beam), enc.pad, dtype=torch.long, device=self.device)
            top_l, src_l, tok_l = top.tolist(), src_beam.tolist(), token.tolist()
            for b in range(B):
                if done[b]:
                    continue
                k = 0
                for rank, (s, sb, t) in enumerate(zip(top_l[b], src_l[b], tok_l[b])):
                    if s == float("-inf") or k == beam:
                        break
                    if t == enc.eos or step == max_length:
                        if rank < beam:  # an ending counts only among the best `beam` candidates
                            finished[b].append((s, history[b * beam + sb].tolist() + ([] if t == enc.eos else [t])))
                    else:
                        new_scores[b, k], new_src[b, k], new_tok[b, k] = s, sb, t
                        k += 1
                best_alive = new_scores[b].max().item()
                if finished[b] and max(f[0] for f in finished[b]) >= best_alive:
                    done[b] = True  # scores only fall: nothing alive can beat the best finished
            if bool(done.all()):
                break
            order = (torch.arange(B, device=self.device)[:, None] * beam + new_src).view(-1)  # (B*beam,)
            kv.reorder_cache(order)
            key_mask = key_mask[order]
            history = torch.cat([history[order], new_tok.view(-1, 1)], dim=1)
            tokens, scores = new_tok.view(-1), new_scores
        results = []
        for b in range(B):
            if finished[b]:
                score, ids = max(finished[b], key=lambda f: f[0])
            else:
                k = int(scores[b].argmax())
                score, ids = float(scores[b, k]), history[b * beam + k].tolist()
            results.append(Generated(enc.decode(ids), float(score), len(ids)))
        return results

    # -- reference: no cache, one program at a time ---------------------------------------------
    def _beam_no_cache(self, code: list[int], beam: int, max_length: int) -> Generated:
        m, enc = self.model, self.encoder
        code_ids = torch.tensor([code], device=self.device)
        beams: list[tuple[float, list[int]]] = [(0.0, [enc.mask0])]
        finished: list[tuple[float, list[int]]] = []
        for step in range(max_length + 1):
            n = len(beams)
            trace = torch.tensor([b[1] + [enc.pad] for b in beams], device=self.device)  # one slot for the next token
            trace_mask = torch.ones_like(trace)
            out = m(code_ids.expand(n, -1), torch.ones_like(code_ids).expand(n, -1), trace, trace_mask)
            logp = out.logits[:, -1].float().log_softmax(-1)  # (n, V)
            cand = []
            for (s, ids), row in zip(beams, logp):
                vals, toks = row.topk(beam)
                cand += [(s + v, ids, t) for v, t in zip(vals.tolist(), toks.tolist())]
            cand.sort(key=lambda c: -c[0])
            beams = []
            for rank, (s, ids, t) in enumerate(cand[: 2 * beam]):
                if len(beams) == beam:
                    break
                if t == enc.eos or step == max_length:
                    if rank < beam:
                        finished.append((s, ids[1:] + ([] if t == enc.eos else [t])))
                else:
                    beams.append((s, ids + [t]))
            if not beams or (finished and max(f[0] for f in finished) >= beams[0][0]):
                break
        score, ids = max(finished, key=lambda f: f[0]) if finished else (beams[0][0], beams[0][1][1:])
        return Generated(enc.decode(ids), float(score), len(ids))
