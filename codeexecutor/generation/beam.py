"""One program's beam, with the released CodeExecutor's search rules.

The release decodes with an OpenNMT-style `Beam` (CodeExecutor `inference/model.py`);
we follow its rules so that a released checkpoint generates through our code exactly
what it generates through the release's:

* The first step expands only hypothesis 0 (all hypotheses start as `<mask0>`).
* Later steps add each hypothesis' summed log-probability to its next-token
  log-probabilities; a hypothesis that has just ended (`</s>`) gets no children
  (its row is -1e20), and the `size` best (hypothesis, token) pairs survive.
* Every `</s>` among the survivors is recorded as finished (score, step, slot); no
  length penalty.
* The search is done once `</s>` has been the top survivor at some step and at least
  `size` hypotheses have finished; or when the step budget is spent.
* The answer is the best finished hypothesis (stable order on ties); with none
  finished, the current top hypothesis.

Our option, off by default and never the release's: `length_penalty` (alpha) ranks the
finished hypotheses by their summed log-probability divided by ((5 + length) / 6) ** alpha
(Wu et al., 2016) instead, so that a trace is not preferred for stopping early. The
search itself and its stopping rule stay as above.

The caller runs the model; `advance` takes the (size, V) log-probabilities of the
current hypotheses and returns which hypothesis each survivor extends, so the caller can
reorder its key/value cache. Given each hypothesis' `margin` at this step
(generation/verdict.py), a hypothesis also carries the highest margin along its path
and the margin at its latest step end; `peak()` and `end()` are the answer's. A batched
search calls `select` once for all its programs and hands each beam its row through
`record`: two small copies to the host a step, not three for every program.
"""

from __future__ import annotations

import math

import torch

NO_CHILDREN = -1e20  # Beam.advance: "Don't let EOS have children."


def select(logp: torch.Tensor, scores: torch.Tensor | None, ended: torch.Tensor | None):
    """One search step for A programs at once. logp: (A, size, V) next-token
    log-probabilities; scores: (A, size) the hypotheses' summed log-probabilities, None at
    the first step (then only hypothesis 0 expands); ended: (A, size) which hypotheses
    have just produced `</s>` (they get no children). Returns (best, back, token), each
    (A, size): the survivors' summed log-probabilities, the hypothesis each extends and
    its new token."""
    A, size, V = logp.shape
    if scores is None:
        total = logp[:, 0]  # (A, V): every hypothesis is the start token
    else:
        total = (logp + scores[..., None]).masked_fill(ended[..., None], NO_CHILDREN).reshape(A, -1)
    best, idx = total.topk(size, 1, True, True)
    back = idx // V
    return best, back, idx - back * V


class Beam:
    def __init__(self, size: int, eos: int, length_penalty: float = 0.0) -> None:
        self.size = size
        self.eos = eos
        self.length_penalty = length_penalty  # alpha; 0 ranks by summed log-probability, as the release
        self.scores: torch.Tensor | None = None  # (size,), kept by `advance` (a batched search keeps its own)
        self.top = 0.0  # the top survivor's summed log-probability at the latest step
        self.back: list[list[int]] = []  # per step: the hypothesis each survivor extends
        self.tokens: list[list[int]] = []  # per step: each survivor's new token
        self.finished: list[tuple[float, int, int]] = []  # (score, step, slot)
        self.eos_top = False
        self.peaks: list[torch.Tensor] = []  # per step: each survivor's highest margin so far, (size,)
        self.ends: list[torch.Tensor] = []  # per step: each survivor's margin at its latest step end

    def done(self) -> bool:
        return self.eos_top and len(self.finished) >= self.size

    def advance(self, logp: torch.Tensor, margin: torch.Tensor | None = None) -> torch.Tensor:
        """logp: (size, V) next-token log-probabilities of the current hypotheses;
        margin: their (size,) crash margins here, if tracked.
        Returns (size,) the hypothesis index each survivor extends."""
        last = torch.tensor([[t == self.eos for t in self.tokens[-1]]], device=logp.device) if self.tokens else None
        best, back, token = select(logp[None], self.scores[None] if self.tokens else None, last)
        self.scores = best[0]
        self.record(best[0].tolist(), back[0].tolist(), token[0].tolist(), margin, back[0])
        return back[0]

    def record(
        self,
        scores: list[float],
        back: list[int],
        tokens: list[int],
        margin: torch.Tensor | None = None,
        back_t: torch.Tensor | None = None,
    ) -> None:
        """Take one step's survivors as `select` chose them: their summed log-probabilities,
        the hypothesis each extends, their new tokens; `margin` (size,) and `back_t`, the
        same back-pointers as a tensor on margin's device, when margins are tracked."""
        self.back.append(back)
        self.tokens.append(tokens)
        self.top = scores[0]
        if margin is not None:
            start = torch.full_like(margin, -math.inf)
            peak, end = (self.peaks[-1], self.ends[-1]) if self.peaks else (start, start)
            self.peaks.append(torch.maximum(peak, margin)[back_t])
            self.ends.append(torch.where(torch.isfinite(margin), margin, end)[back_t])
        step = len(self.tokens)
        for slot, t in enumerate(tokens):
            if t == self.eos:
                self.finished.append((scores[slot], step, slot))
        if tokens[0] == self.eos:
            self.eos_top = True

    def ended(self) -> bool:
        """Whether `best` is a finished hypothesis; False: the step budget ran out first."""
        return bool(self.finished)

    def last_tokens(self) -> list[int]:
        return self.tokens[-1]

    def _answer(self) -> tuple[float, int, int]:
        if self.finished:
            a = self.length_penalty
            return sorted(self.finished, key=lambda f: -f[0] / ((5 + f[1]) / 6) ** a if a else -f[0])[0]
        return self.top, len(self.tokens), 0

    def peak(self) -> float | None:
        """The answer's highest crash margin (None: margins were not tracked)."""
        if not self.peaks:
            return None
        _, step, slot = self._answer()
        return float(self.peaks[step - 1][slot])

    def end(self) -> float | None:
        """The answer's crash margin at its last step end: for a finished trace, where it
        chose `</s>` (or `<exception>`) over the other (None: not tracked)."""
        if not self.ends:
            return None
        _, step, slot = self._answer()
        return float(self.ends[step - 1][slot])

    def best(self) -> tuple[float, list[int]]:
        """(summed log-probability, token ids up to and without `</s>`) of the answer."""
        score, step, slot = self._answer()
        ids = []
        for j in range(step - 1, -1, -1):  # walk the back-pointers from the end
            ids.append(self.tokens[j][slot])
            slot = self.back[j][slot]
        ids.reverse()
        if self.eos in ids:
            ids = ids[: ids.index(self.eos)]
        return score, ids
