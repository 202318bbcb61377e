"""Batched greedy and beam search with its state on the device (generation/search.py's engine).

The search follows the release's beam rules (generation/beam.py) for every program of a
batch at once, with no per-program Python inside a step: each hypothesis' token, back-
pointer, finished flag and crash margins, and each program's best finished hypothesis,
are tensors updated by a few batched operations; the tokens and back-pointers of every
step go into two (steps, rows) buffers that the host walks once, at the end. The
key/value cache is allocated once at its final size (modeling/decode.py).

How often the host looks: every `check_every` steps it reads which programs are still
searching (one small copy) and stops when none is. On the CPU that is every step, and
programs that are done leave the batch as they finish, as in one program's beam
(generation/beam.py), so a batch decodes the same tokens through the same arithmetic;
on CUDA every 8 steps, and a greedy step runs as one captured CUDA graph over the
whole cache (its shapes never change). A step the device will not capture leaves the
search stepping eagerly (the same arithmetic, one launch per operator), the reason in
`graph_fallback` and the log.

A program's answer is its best finished hypothesis (highest summed log-probability, or
per length with `length_penalty`; ties to the earliest), else its top hypothesis when
the step budget ran out. The state rules of generation/constraints.py read the tokens
on the host, so with rules a step copies its choices back (the rules are per-program
Python by nature; `trace` uses them, `evaluate` does not).
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import torch

from codeexecutor.generation.beam import NO_CHILDREN
from codeexecutor.modeling.decode import StaticCache, decode_step

log = logging.getLogger("codeexecutor.generation")


class Guides(NamedTuple):
    """What steers the search beyond the model's scores: the state rules (per program,
    generation/constraints.py) and the step-end reader that tracks each beam's exception
    margin (`StepEnds`); each optional."""

    rules: list | None = None
    ends: object | None = None


class Launch(NamedTuple):
    """How a search uses its device, not what it finds: the host reads which programs are
    still running every `check_every` steps (default 8 on CUDA without rules, else every
    step), and on CUDA one program's steps replay a captured graph (`graphs`, default on
    where there is one beam and no rules)."""

    check_every: int | None = None
    graphs: bool | None = None


class DeviceSearch:
    """The search of one batch of programs: `run()` gives each program's (score, token
    ids, finished, exception peak, exception end)."""

    def __init__(
        self,
        model,
        encoder,
        codes: list[list[int]],
        size: int,
        max_length: int,
        guides: Guides | None = None,
        length_penalty: float = 0.0,
        launch: Launch | None = None,
    ) -> None:
        from codeexecutor.modeling.tokenizer import pad

        check_every, graphs = launch or Launch()
        rules, ends = guides or Guides()

        self.model, self.enc, self.size, self.max_length = model, encoder, size, max_length
        self.rules, self.ends, self.alpha = rules, ends, length_penalty
        dev = next(model.parameters()).device
        cuda = dev.type == "cuda"
        self.check_every = check_every or (8 if cuda and rules is None else 1)
        self.graphs = (cuda and size == 1 and rules is None) if graphs is None else graphs
        self.graph_fallback: str | None = None  # why a capture failed, where one did
        self.full_cache = (
            cuda and size == 1
        )  # each step attends over the whole cache (fixed shapes), not the written part
        batch = pad(codes, encoder.pad, "code")
        code_ids, code_mask = batch["code_ids"].to(dev), batch["code_mask"].to(dev)
        B, S = code_ids.shape
        encoded, code_len = model.encode(code_ids, code_mask)
        encoded.batch_repeat_interleave(size)
        self.cache = StaticCache(encoded, code_mask.repeat_interleave(size, 0), S + max_length + 2, model.dtype)
        N = B * size
        self.B, self.N, self.dev = B, N, dev
        long = dict(dtype=torch.long, device=dev)
        self.code_len = code_len.repeat_interleave(size, 0)
        self.fed = torch.zeros(N, **long)  # target tokens fed so far that are not <pad>
        self.tokens = torch.full((N,), encoder.mask0, **long)
        self.scores = torch.full((B, size), -math.inf, device=dev)
        self.scores[:, 0] = 0.0  # the first step expands hypothesis 0 only
        self.ended = torch.zeros(B, size, dtype=torch.bool, device=dev)
        self.back_hist = torch.zeros(max_length, N, **long)
        self.token_hist = torch.zeros(max_length, N, **long)
        self.step = torch.zeros((), **long)
        self.alive = torch.ones(B, dtype=torch.bool, device=dev)
        self.steps_taken = torch.zeros(B, **long)  # steps recorded while the program searched
        self.n_finished = torch.zeros(B, **long)
        self.eos_top = torch.zeros(B, dtype=torch.bool, device=dev)
        self.best_key = torch.full((B,), -math.inf, device=dev)
        self.best_score = torch.zeros(B, device=dev)
        self.best_step = torch.zeros(B, **long)
        self.best_slot = torch.zeros(B, **long)
        self.top_score = torch.zeros(B, device=dev)
        self.peak = torch.full((N,), -math.inf, device=dev)  # each hypothesis' highest crash margin on its path
        self.end = torch.full((N,), -math.inf, device=dev)  # and its margin at its latest step end
        self.best_peak, self.best_end = torch.full((B,), -math.inf, device=dev), torch.full((B,), -math.inf, device=dev)
        self.programs = list(range(B))  # the original index of each program still in the batch
        self.rows_base = torch.arange(B, device=dev)[:, None] * size  # (B, 1) each program's first row
        self.results: dict[int, tuple] = {}

    # -- one step, all on the device ---------------------------------------------------------
    def _step(self, window: int | None, logp_hook=None) -> None:
        B, size, enc = self.alive.shape[0], self.size, self.enc
        real = self.tokens.ne(enc.pad)  # a generated <pad> is masked as a key and placed as padding (the release)
        self.fed += real
        positions = torch.where(real, self.code_len + self.fed - 1, -1)
        logp = decode_step(self.model, self.cache, self.tokens, positions, real, window)  # (N, V)
        if logp_hook is not None:
            logp = logp_hook(logp)
        margin = None
        if self.ends is not None:
            logp, margin = self.ends(logp)
        V = logp.shape[-1]
        total = (logp.view(B, size, V) + self.scores[..., None]).masked_fill(self.ended[..., None], NO_CHILDREN)
        best, idx = total.reshape(B, -1).topk(size, 1, True, True)  # (B, size)
        back = idx // V
        token = idx - back * V
        rows = (back + self.rows_base[:B]).reshape(-1)  # (N,) the row each survivor extends
        if margin is not None:
            self.peak = torch.maximum(self.peak, margin)[rows]
            self.end = torch.where(torch.isfinite(margin), margin, self.end)[rows]
        self.back_hist.index_copy_(0, self.step[None], back.reshape(1, -1))
        self.token_hist.index_copy_(0, self.step[None], token.reshape(1, -1))
        self.step += 1
        alive = self.alive
        eos = token.eq(enc.eos)  # (B, size)
        key = best / ((5 + self.step) / 6) ** self.alpha if self.alpha else best
        cand, slot = torch.where(eos, key, -math.inf).max(1)  # the first slot of the best finished this step
        better = eos.any(1) & alive & (cand > self.best_key)
        self.best_key = torch.where(better, cand, self.best_key)
        self.best_score = torch.where(better, best.gather(1, slot[:, None])[:, 0], self.best_score)
        self.best_step = torch.where(better, self.step, self.best_step)
        self.best_slot = torch.where(better, slot, self.best_slot)
        if margin is not None:
            at = slot + self.rows_base[:B, 0]
            self.best_peak = torch.where(better, self.peak[at], self.best_peak)
            self.best_end = torch.where(better, self.end[at], self.best_end)
        self.n_finished += eos.sum(1) * alive
        self.eos_top |= eos[:, 0] & alive
        self.steps_taken += alive
        self.top_score = torch.where(alive, best[:, 0], self.top_score)
        self.alive = alive & ~(self.eos_top & (self.n_finished >= size))
        self.scores, self.ended = best, eos
        if size > 1:  # greedy search keeps every row where it is
            self.fed = self.fed[rows]
            self._reorder = rows
        self.tokens = token.reshape(-1)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> list[tuple]:
        graph = self._capture() if self.graphs else None
        constraint = None
        if self.rules:
            from codeexecutor.generation.constraints import RowConstraints

            constraint = RowConstraints(self.rules, self.size)
        for t in range(self.max_length):
            if graph is not None:
                graph.replay()
            else:
                window = None if self.full_cache else self.cache.code + t + 1
                self._step(window, constraint.mask if constraint else None)
                if self.size > 1:
                    self.cache.reorder(self._reorder, self.cache.code + t + 1)
            if constraint:
                host = torch.stack([self.back_hist[t], self.token_hist[t]]).cpu()
                backs = host[0].view(-1, self.size)
                constraint.advance(
                    [int(o) + a * self.size for a in range(backs.shape[0]) for o in backs[a]], host[1].tolist()
                )
            if (t + 1) % self.check_every == 0 or t + 1 == self.max_length:
                alive = self.alive.cpu()
                if not bool(alive.any()):
                    break
                if graph is None and not bool(alive.all()) and not self.full_cache and self.dev.type != "cuda":
                    self._leave(alive, constraint, self.cache.code + t + 1)
        self._finish(torch.arange(len(self.programs)))
        return [self.results[b] for b in range(self.B)]

    def _capture(self):
        """One greedy step as a CUDA graph over the whole cache (after a warm-up step on a
        side stream, as capture requires); the step state is updated in place. None, with
        the state as it was and the reason in `graph_fallback`, where the capture fails."""
        snapshot = {n: getattr(self, n).clone() for n in _STATE}
        cache_col = self.cache.column.clone()
        try:
            state = {}
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                self._step(None)
            torch.cuda.current_stream().wait_stream(s)
            for n in _STATE:  # undo the warm-up step
                getattr(self, n).copy_(snapshot[n])
            self.cache.column.copy_(cache_col)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                state.update({n: getattr(self, n) for n in _STATE})
                self._step(None)
                for n in _STATE:  # the graph's outputs become the inputs of its next replay
                    state[n].copy_(getattr(self, n))
        except Exception as exc:  # noqa: BLE001 - any capture failure: the eager step computes the same
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            self.graph_fallback = f"CUDA graph capture failed ({type(exc).__name__}: {first}); decoding steps eagerly"
            log.warning("%s", self.graph_fallback)
            for n in _STATE:  # a failed capture may have rebound them to tensors it never computed
                setattr(self, n, snapshot[n])
            self.cache.column = cache_col
            return None
        for n in _STATE:
            setattr(self, n, state[n])
        return graph

    def _leave(self, alive: torch.Tensor, constraint, written: int) -> None:
        """Finish the programs that are done and drop their rows (the CPU's eager path)."""
        keep = alive.nonzero()[:, 0]
        gone = (~alive).nonzero()[:, 0]
        self._finish(gone)
        rows = (keep[:, None] * self.size + torch.arange(self.size)).reshape(-1).to(self.dev)
        k = keep.to(self.dev)
        self.cache.keep_rows(rows, written)
        for n in _ROWS:
            setattr(self, n, getattr(self, n)[rows])
        for n in _HIST:
            setattr(self, n, getattr(self, n)[:, rows])
        for n in _PROGRAMS:
            setattr(self, n, getattr(self, n)[k])
        if constraint:
            constraint.keep(rows.tolist())
        self.programs = [self.programs[i] for i in keep.tolist()]

    def _finish(self, which: torch.Tensor) -> None:
        """Each program's answer, from the buffers, for programs `which` (batch positions)."""
        if len(which) == 0:
            return
        size = self.size
        fields = [
            self.best_score,
            self.best_step,
            self.best_slot,
            self.top_score,
            self.steps_taken,
            self.n_finished,
            self.best_peak,
            self.best_end,
        ]
        cols = (which[:, None] * size + torch.arange(size)).reshape(-1).to(self.dev)
        host = [f.index_select(0, which.to(self.dev)).cpu().tolist() for f in fields]
        back = self.back_hist[:, cols].cpu()
        tok = self.token_hist[:, cols].cpu()
        peak, end = self.peak[cols].cpu(), self.end[cols].cpu()
        for i, b in enumerate(which.tolist()):
            score, step, slot, top, taken, n_fin, bpeak, bend = (h[i] for h in host)
            if n_fin:
                ended = True
            else:  # the budget ran out first: the top hypothesis at its last step
                score, step, slot, ended = top, taken, 0, False
                bpeak, bend = float(peak[i * size]), float(end[i * size])
            ids = []
            for j in range(step - 1, -1, -1):  # walk the back-pointers from the end
                ids.append(int(tok[j, i * size + slot]))
                slot = int(back[j, i * size + slot])
            ids.reverse()
            if self.enc.eos in ids:
                ids = ids[: ids.index(self.enc.eos)]
            tracked = self.ends is not None
            self.results[self.programs[b]] = (score, ids, ended, bpeak if tracked else None, bend if tracked else None)


_ROWS = ("fed", "tokens", "code_len", "peak", "end")  # per hypothesis
_HIST = ("back_hist", "token_hist")  # per step and hypothesis
_PROGRAMS = (
    "scores",
    "ended",
    "alive",
    "steps_taken",
    "n_finished",
    "eos_top",
    "best_key",
    "best_score",
    "best_step",
    "best_slot",
    "top_score",
    "best_peak",
    "best_end",
)  # per program
_STATE = _ROWS + _PROGRAMS + ("back_hist", "token_hist", "step")
