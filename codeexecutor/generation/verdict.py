"""The crash verdict at a step's end: a bias on `<exception>`, and how near it came.

A trace predicts a crash when the decoder writes `<exception>` where a step could end;
there its rivals are `<line>` (another step) and `</s>` (the program finished). A model
trained on few crashing programs ranks `<exception>` second there and never writes it
(the committed 60-minute model predicts no crash at all), although its probability
still tells crashing programs from the others. Two things follow from one rule:

* **Margin.** Where the decoder's first choice is `<line>`, `</s>` or `<exception>` (a
  step end), the margin is log p(`<exception>`) minus the best rival's log-probability;
  elsewhere it is -inf. A hypothesis carries the highest margin along its path (`peak`):
  a crash score for the program, from one free decode.
* **Bias.** `bias` is added to `<exception>`'s log-probability at step ends only, so
  values, names and outputs are untouched. For greedy search the prefix is the free
  decode's up to the first step end whose margin exceeds `-bias`, where `<exception>`
  is written: the biased verdict is exactly `peak > -bias` of the free decode, so a
  bias can be chosen on a validation split from free decodes alone (benchmarks/
  bench_exception_bias.py), and the biased decode then gives the line and the kind.

With `at="end"` both act only where the first choice is `</s>` (or `<exception>`): where
the model ends the program, does it end normally or crash? A trace's other step ends are
left alone, so the bias never cuts a trace short, and the biased verdict is "finished,
with its margin at `</s>` above -bias" of the free decode.

The release has no `<exception>` step, so neither applies to its model; bias 0 leaves
the search exactly as the release's.
"""

from __future__ import annotations

import math

import torch

AT = ("step", "end")  # every step end, or only where the trace would end


class StepEnds:
    """Margin and bias of `<exception>` at step ends, for rows of log-probabilities."""

    def __init__(self, tok, bias: float = 0.0, at: str = "step") -> None:
        vocab = tok.get_vocab()
        if "<exception>" not in vocab:
            raise ValueError("this model's vocabulary has no <exception> step")
        if not math.isfinite(bias):
            raise ValueError(f"the exception bias must be a finite number, not {bias}")
        if at not in AT:
            raise ValueError(f"the exception bias acts at {' or '.join(AT)}, not {at!r}")
        self.exc, self.bias = vocab["<exception>"], float(bias)
        self.ends = torch.tensor(([vocab["<line>"]] if at == "step" else []) + [tok.eos_token_id, self.exc])
        self._on: dict = {}  # the step-end ids on each device, copied there once

    def __call__(self, logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """logp: (rows, V). Returns (logp with the bias at step ends, (rows,) margins)."""
        two, top = logp.topk(2, -1)
        ends = self._on.get(logp.device)
        if ends is None:
            ends = self._on[logp.device] = self.ends.to(logp.device)
        at_end = torch.isin(top[:, 0], ends)
        exc = logp[:, self.exc]
        rival = torch.where(top[:, 0] == self.exc, two[:, 1], two[:, 0])
        margin = torch.where(at_end, exc - rival, torch.full_like(exc, -math.inf))
        if self.bias:  # no test of whether any row is at a step end: nothing is read back to the host
            logp = logp.clone()
            logp[:, self.exc] += at_end.to(logp.dtype) * self.bias
        return logp, margin


def finite_margin(x: float | None) -> float | None:
    """A margin for JSON: None where there is none (no step end reached: -inf; or the
    model has no `<exception>` step)."""
    return float(x) if x is not None and math.isfinite(x) else None
