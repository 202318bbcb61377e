"""Metrics over traces (SPEC §7), as pure functions on parsed steps.

Official (as the CodeExecutor release computes them): step i of the prediction is
compared with step i of the reference (positional); a state is an unordered
name -> value dict; counts are summed over all programs before dividing (micro);
output accuracy counts only programs whose reference printed something; a generated
final segment without `</state>` is dropped by the parser before scoring.

  output accuracy   predicted outputs (in order) == reference outputs
  trace accuracy    every step equal (line and state), same number of steps
  line P/R/F1       positions whose line numbers agree / predicted (P) or reference (R) steps
  identifier P/R/F1 (name, value) pairs agreeing at the same position / predicted (P) or
                    reference (R) pairs

`aligned=True` is our variant: predicted and reference steps are first aligned by
their line sequences (longest matching blocks, difflib), so one missing step does not
shift every later comparison; then the same counts are taken over aligned pairs.

Runtime errors (program level): detection accuracy with TP/FP/FN/TN (a crash predicted
<=> the predicted trace ends with an <exception> step), localisation accuracy (among
real crashes detected, the predicted line equals the real one), error-kind accuracy
and support-weighted F1 over exception types. ORCA's trace metrics: exact match,
prefix-match P/R (the longest common prefix of the line sequences) and coverage P/R
(the sets of executed lines).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence


@dataclass(frozen=True)
class TraceRecord:
    """One program's steps as (line, {name: value}, output) plus its exception, if any."""

    steps: tuple[tuple[int, Mapping[str, str], str], ...]
    exception: str | None = None
    exception_line: int | None = None

    @classmethod
    def from_parsed(cls, parsed) -> "TraceRecord":
        return cls(tuple((s.line, dict(s.state), s.output) for s in parsed.steps), parsed.exception, parsed.exception_line)

    @classmethod
    def from_text(cls, text: str) -> "TraceRecord":
        from codeexecutor.format import parse_trace

        return cls.from_parsed(parse_trace(text))

    @property
    def outputs(self) -> list[str]:
        return [o for _, _, o in self.steps if o]


def _prf(correct: int, predicted: int, reference: int) -> tuple[float, float, float]:
    p = correct / predicted if predicted else 0.0
    r = correct / reference if reference else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _pairs(pred: TraceRecord, ref: TraceRecord, aligned: bool) -> list[tuple[int, int]]:
    if not aligned:
        return [(i, i) for i in range(min(len(pred.steps), len(ref.steps)))]
    a = [s[0] for s in pred.steps]
    b = [s[0] for s in ref.steps]
    out = []
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        out += [(block.a + k, block.b + k) for k in range(block.size)]
    return out


def trace_metrics(predictions: Sequence[TraceRecord], references: Sequence[TraceRecord], aligned: bool = False) -> dict:
    """Table-3 metrics (in %, as the paper reports them)."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    out_total = out_ok = trace_ok = 0
    line_ok = line_pred = line_ref = 0
    id_ok = id_pred = id_ref = 0
    for pred, ref in zip(predictions, references):
        if ref.outputs:
            out_total += 1
            out_ok += pred.outputs == ref.outputs
        trace_ok += len(pred.steps) == len(ref.steps) and all(
            p[0] == r[0] and dict(p[1]) == dict(r[1]) for p, r in zip(pred.steps, ref.steps)
        )
        line_pred += len(pred.steps)
        line_ref += len(ref.steps)
        id_pred += sum(len(s[1]) for s in pred.steps)
        id_ref += sum(len(s[1]) for s in ref.steps)
        for i, j in _pairs(pred, ref, aligned):
            p, r = pred.steps[i], ref.steps[j]
            line_ok += p[0] == r[0]
            id_ok += len(set(dict(p[1]).items()) & set(dict(r[1]).items()))
    lp, lr, lf = _prf(line_ok, line_pred, line_ref)
    ip, ir, i_f = _prf(id_ok, id_pred, id_ref)
    n = len(references)
    return {
        "output_accuracy": 100 * out_ok / out_total if out_total else None,
        "trace_accuracy": 100 * trace_ok / n if n else 0.0,
        "line_precision": 100 * lp, "line_recall": 100 * lr, "line_f1": 100 * lf,
        "identifier_precision": 100 * ip, "identifier_recall": 100 * ir, "identifier_f1": 100 * i_f,
        "programs": n, "programs_with_output": out_total,
    }


def error_metrics(predictions: Sequence[TraceRecord], references: Sequence[TraceRecord]) -> dict:
    """Runtime-error detection, localisation and classification from traces."""
    tp = fp = fn = tn = 0
    located = kinds_ok = 0
    true_kinds, pred_kinds = [], []
    for pred, ref in zip(predictions, references):
        crashed, predicted = ref.exception is not None, pred.exception is not None
        if crashed and predicted:
            tp += 1
            pred_line = pred.exception_line if pred.exception_line is not None else (pred.steps[-1][0] if pred.steps else None)
            located += pred_line == ref.exception_line
            kinds_ok += pred.exception == ref.exception
        elif crashed:
            fn += 1
        elif predicted:
            fp += 1
        else:
            tn += 1
        if crashed:
            true_kinds.append(ref.exception)
            pred_kinds.append(pred.exception or "<none>")
    n = tp + fp + fn + tn
    crashes = tp + fn
    return {
        "detection_accuracy": 100 * (tp + tn) / n if n else 0.0,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "true_positive_rate": 100 * tp / crashes if crashes else None,
        "false_positive_rate": 100 * fp / (fp + tn) if fp + tn else None,
        "localisation_accuracy": 100 * located / crashes if crashes else None,
        "localisation_accuracy_detected": 100 * located / tp if tp else None,
        "kind_accuracy": 100 * kinds_ok / crashes if crashes else None,
        "kind_weighted_f1": 100 * weighted_f1(true_kinds, pred_kinds) if crashes else None,
    }


def weighted_f1(truth: Sequence[str], pred: Sequence[str]) -> float:
    """Support-weighted F1 over the classes present in `truth`."""
    support = Counter(truth)
    total = 0.0
    for label, count in support.items():
        tp = sum(t == p == label for t, p in zip(truth, pred))
        n_pred = sum(p == label for p in pred)
        p = tp / n_pred if n_pred else 0.0
        r = tp / count
        total += count * (2 * p * r / (p + r) if p + r else 0.0)
    return total / len(truth) if truth else 0.0


def orca_metrics(predictions: Sequence[TraceRecord], references: Sequence[TraceRecord]) -> dict:
    """ORCA's trace metrics over line sequences: exact match, prefix match, coverage."""
    exact = 0
    pre_ok = pre_pred = pre_ref = 0
    cov_ok = cov_pred = cov_ref = 0
    for pred, ref in zip(predictions, references):
        a = [s[0] for s in pred.steps]
        b = [s[0] for s in ref.steps]
        exact += a == b
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        pre_ok, pre_pred, pre_ref = pre_ok + k, pre_pred + len(a), pre_ref + len(b)
        sa, sb = set(a), set(b)
        cov_ok, cov_pred, cov_ref = cov_ok + len(sa & sb), cov_pred + len(sa), cov_ref + len(sb)
    n = len(references)
    return {
        "exact_match": 100 * exact / n if n else 0.0,
        "prefix_precision": 100 * pre_ok / pre_pred if pre_pred else 0.0,
        "prefix_recall": 100 * pre_ok / pre_ref if pre_ref else 0.0,
        "coverage_precision": 100 * cov_ok / cov_pred if cov_pred else 0.0,
        "coverage_recall": 100 * cov_ok / cov_ref if cov_ref else 0.0,
    }


def records(texts: Iterable[str]) -> list[TraceRecord]:
    return [TraceRecord.from_text(t) for t in texts]
