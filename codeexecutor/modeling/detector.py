"""The crash detector: from the trace model's encoder states, will the program crash, how, and where.

A trace predicts a crash only by writing `<exception>` at the end of a long greedy
decode, which a small model reaches only when every step before it is right. The
detector reads the program once instead, as Bieber et al. classify whole programs, and
line by line, as their IPA-GNN executes statements: the trace model's encoder (frozen,
so the traces it writes stay the same) gives each code token a state; each line becomes
the mean and the maximum of its tokens' states (its `<k>` token included) and its place
in the program; the detector's own Transformer layers read the lines, and three heads answer

* **crash**: one logit, from the mean of the lines;
* **kind**: the exception type among those it was trained on (`kinds`), from the same mean;
* **line**: a score for each line; the crash line is the argmax (a softmax over the
  program's lines), so only a line the program has can be named.

Reading lines rather than tokens makes a step about ten times cheaper (a contest program
is about 15 lines of about 10 tokens), which is what lets it train on a CPU.

The detector lives in the trace model's folder (`detector.safetensors`, int8 rows as
modeling/int8.py stores them; `detector.json`
with its kinds, layers and the threshold chosen on a validation split), trained by
`codeexecutor train-detector` (training/detector.py).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import torch
from torch import nn

WEIGHTS, CONFIG = "detector.safetensors", "detector.json"


MAX_LINES = 256  # line positions the detector tells apart (the code window is 256 tokens)


class CrashDetector(nn.Module):
    def __init__(
        self, hidden: int, kinds: list[str], layers: int = 2, heads: int = 4, dropout: float = 0.1, facts: int = 0
    ) -> None:
        super().__init__()
        self.kinds, self.facts = list(kinds), facts
        self.project = nn.Linear(2 * hidden + facts, hidden)
        self.place = nn.Embedding(MAX_LINES, hidden)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden, heads, 4 * hidden, dropout=dropout, batch_first=True, norm_first=True, activation="gelu"
            )
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(hidden)
        self.crash = nn.Linear(hidden, 1)
        self.kind = nn.Linear(hidden, len(kinds))
        self.line = nn.Linear(hidden, 1)

    def forward(self, lines: torch.Tensor, mask: torch.Tensor):
        """lines (B, L, 2H + facts): each line's mean and max token state (`line_features`) and
        its static facts (modeling/line_facts.py), mask (B, L)
        True on real lines. Returns (crash logits (B,), kind logits (B, K), line logits (B, L):
        -inf on padding)."""
        places = torch.arange(lines.shape[1], device=lines.device).clamp(max=MAX_LINES - 1)
        x = self.project(lines.float()) + self.place(places)[None]
        seen = mask.clone()
        seen[:, 0] |= ~mask.any(1)  # a program without lines reads one empty line: attention needs a key
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=~seen)
        x = self.norm(x)
        m = seen.unsqueeze(-1).float()
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        line_logits = self.line(x).squeeze(-1).masked_fill(~mask, -math.inf)
        return self.crash(pooled).squeeze(-1), self.kind(pooled), line_logits


def line_features(states: torch.Tensor, ids: list[int], encoder) -> tuple[torch.Tensor, list[int]]:
    """(L, 2H) mean and max of each line's token states, from its `<k>` token to the next
    line's, and the 1-based program line of each; tokens before the first line (the
    mode and task tokens) and after the last (`</s>`) belong to no line."""
    starts = [
        (pos, int(encoder.tok.convert_ids_to_tokens(t)[1:-1]) + 1) for pos, t in enumerate(ids) if t in encoder.line_ids
    ]
    if not starts:
        return states.new_zeros((0, 2 * states.shape[-1])), []
    ends = [p for p, _ in starts[1:]] + [len(ids) - 1]
    rows = [torch.cat([states[a:b].mean(0), states[a:b].amax(0)]) for (a, _), b in zip(starts, ends)]
    return torch.stack(rows), [k for _, k in starts]


def code_states(model, code_ids: torch.Tensor, code_mask: torch.Tensor) -> torch.Tensor:
    """The trace model's last hidden states of the code alone, read as its decoder reads
    them: every code token sees every other (the prefix of UniXcoder's prefix LM)."""
    from codeexecutor.modeling.model import POSITION_OFFSET, additive

    B, S = code_ids.shape
    mask = code_mask.bool()[:, None, :].expand(B, S, S) | torch.eye(S, dtype=torch.bool, device=code_ids.device)[None]
    positions = torch.arange(S, device=code_ids.device)[None].expand(B, S) + POSITION_OFFSET
    out = model.roberta(
        input_ids=code_ids, attention_mask=additive(mask, model.dtype), position_ids=positions, use_cache=False
    )
    return out.last_hidden_state


@dataclass(frozen=True)
class Verdict:
    """The detector's answer for one program: the crash probability, and the likeliest
    kind and line (1-based, in the model input's lines) with their probabilities."""

    probability: float
    crashed: bool
    type: str | None
    type_probability: float | None
    line: int | None
    line_probability: float | None
    source: str = "detector"  # or "interpreter": a name this interpreter lacks (interpreter_check.py)

    def to_json(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


class Detector:
    """A trained detector beside its trace model: `predict` programs to verdicts."""

    def __init__(self, model, encoder, net: CrashDetector, threshold: float, info: dict) -> None:
        self.model, self.encoder, self.net, self.threshold, self.info = model, encoder, net.eval(), threshold, info

    @classmethod
    def load(cls, folder: str, model, encoder) -> Detector | None:
        """The detector saved in a model folder, or None when it has none."""
        if not os.path.isfile(os.path.join(folder, CONFIG)):
            return None
        from codeexecutor.modeling.int8 import load_int8

        with open(os.path.join(folder, CONFIG)) as f:
            info = json.load(f)
        net = CrashDetector(
            model.config.hidden_size, info["kinds"], info["layers"], info["heads"], 0.0, info.get("facts", 0)
        )
        net.load_state_dict(load_int8(os.path.join(folder, WEIGHTS)))
        return cls(model, encoder, net, float(info["threshold"]), info)

    @torch.no_grad()
    def predict(
        self, codes: list[str], offsets: list[int] | None = None, batch_size: int = 32, check: bool = True
    ) -> list[Verdict]:
        """Verdicts of programs as the model reads them (inlined; `offsets[i]` lines of a
        description in front, which are never named as the crash line), in order; lines
        are the code's as given. With `check`, a use of a name this interpreter lacks
        (interpreter_check.py) is the verdict, unless the detector names an earlier line."""
        offsets = offsets or [0] * len(codes)
        out: list[Verdict] = []
        for i in range(0, len(codes), batch_size):
            chunk = codes[i : i + batch_size]
            ids = [self.encoder.code(self.encoder.profile.code(code, "codenet")) for code in chunk]
            feats = [
                _after(f, numbers, k)
                for (f, numbers), k in zip(encode_lines(self.model, self.encoder, ids), offsets[i:])
            ]
            if self.net.facts:
                feats = [(with_facts(f, code, numbers), numbers) for (f, numbers), code in zip(feats, chunk)]
            lines, mask = pad_lines([f for f, _ in feats])
            crash, kind, line = self.net(lines, mask)
            out += [self._verdict(c, k, ln, numbers) for c, k, ln, (_, numbers) in zip(crash, kind, line, feats)]
        return [_checked(v, code) for v, code in zip(out, codes)] if check else out

    def _verdict(self, crash, kind, line, numbers: list[int]) -> Verdict:
        p = torch.sigmoid(crash.float()).item()
        kp = torch.softmax(kind.float(), -1)
        k = int(kp.argmax())
        if not numbers:
            return Verdict(p, p >= self.threshold, self.net.kinds[k], kp[k].item(), None, None)
        lp = torch.softmax(line[: len(numbers)].float(), -1)
        best = int(lp.argmax())
        return Verdict(p, p >= self.threshold, self.net.kinds[k], kp[k].item(), numbers[best], lp[best].item())


# What the interpreter check's verdict carries: of the 594 programs it flags in the
# realistic-bugs build's train split (42 originals and their variants, 23 problems;
# benchmarks/results/interpreter-check.json), all crash (taken as 0.99, for so few
# problems), 538 with its type and 527 at its line.
CHECK_PROBABILITY, CHECK_TYPE_PROBABILITY, CHECK_LINE_PROBABILITY = 0.99, 0.91, 0.89


def _checked(v: Verdict, code: str) -> Verdict:
    from codeexecutor.modeling.interpreter_check import first_missing

    found = first_missing(code)
    if found is None or (v.crashed and v.line is not None and v.line < found[1]):
        return v
    p = max(v.probability, CHECK_PROBABILITY)
    return Verdict(p, True, found[0], CHECK_TYPE_PROBABILITY, found[1], CHECK_LINE_PROBABILITY, "interpreter")


def _after(features: torch.Tensor, numbers: list[int], offset: int) -> tuple[torch.Tensor, list[int]]:
    """The features and numbers of the lines after the first `offset` (a description's)."""
    keep = [i for i, k in enumerate(numbers) if k > offset]
    return features[keep], [numbers[i] for i in keep]


def with_facts(features: torch.Tensor, code: str, numbers: list[int]) -> torch.Tensor:
    """Line features with each line's static facts after them (modeling/line_facts.py)."""
    from codeexecutor.modeling.line_facts import FACTS, line_facts

    if not numbers:
        return features.new_zeros((0, features.shape[-1] + FACTS))

    facts = line_facts(code, max(numbers, default=0))
    extra = torch.tensor([facts[k - 1] for k in numbers], dtype=features.dtype).reshape(len(numbers), -1)
    return torch.cat([features, extra], dim=1)


def encode_lines(model, encoder, ids: list[list[int]]) -> list[tuple[torch.Tensor, list[int]]]:
    """Each program's (line features, line numbers) from the frozen trace model."""
    S = max(len(x) for x in ids)
    t = torch.full((len(ids), S), encoder.pad, dtype=torch.long)
    for r, x in enumerate(ids):
        t[r, : len(x)] = torch.tensor(x)
    t = t.to(model.device)
    states = code_states(model, t, t != encoder.pad).float().cpu()
    return [line_features(s[: len(x)], x, encoder) for s, x in zip(states, ids)]


def pad_lines(features: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L, 2H) padded line features and their (B, L) mask."""
    L = max(1, max(f.shape[0] for f in features))
    out = torch.zeros(len(features), L, features[0].shape[-1] if features else 0)
    mask = torch.zeros(len(features), L, dtype=torch.bool)
    for r, f in enumerate(features):
        out[r, : f.shape[0]] = f.float()
        mask[r, : f.shape[0]] = True
    return out, mask
