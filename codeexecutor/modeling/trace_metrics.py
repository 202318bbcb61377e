"""Metrics over traces (docs/metrics.md).

The release's metric (CodeExecutor `inference/metric.py`), on trace *texts*, reported
under the names `output_accuracy, trace_accuracy, line_precision, line_recall, line_f1,
identifier_precision, identifier_recall, identifier_f1` (percent, rounded to 2 places
as the release prints them):

* A text is cut into segments at every `<line>` and every `<output>` (text before the
  first marker is a segment of its own); the last segment is dropped when it has no
  `</state>`, in the prediction and in the gold alike, so a trailing `<output>` is
  never scored.
* Two segments are equal when: either holds `<output>` or lacks `<state>`: the same
  string; otherwise the text before `<state>` (the line info) is the same and the
  states, split on `<dictsep>` and each item on its first `:` (both sides stripped),
  are the same dict.
* output accuracy: over programs whose gold has output; right when the list of outputs
  (text after `<output> `, up to the next marker, non-empty) is equal.
* trace accuracy: every gold segment equal to the predicted one at its position, and as
  many segments (outputs included).
* line P/R/F1: positionally equal *whole segments* over predicted / gold segments,
  micro-averaged over all programs.
* identifier P/R/F1: equal name=value pairs at the same position, counted only where
  the line info matches, over predicted / gold pairs, micro-averaged.
* SingleLine (`release_singleline_metrics`): the whole text is one state (split on
  `<dictsep>`, each item's name and value the first and second `:`-separated fields);
  trace accuracy (dict equality) and identifier P/R/F1.

The release divides by zero where a count is zero (no gold output, nothing predicted);
we report None (output accuracy) or 0 there instead.

Our variant, `aligned_metrics`, works on parsed steps (TraceRecord): predicted and
reference steps are first aligned by their line sequences (longest matching blocks,
difflib), so one missing step does not shift every later comparison; its names all
start with `aligned_`.

Runtime errors (program level): detection accuracy with TP/FP/FN/TN (a crash predicted
<=> the predicted trace ends with an <exception> step), localisation accuracy (among
real crashes, the predicted line equals the real one), error-kind accuracy and
support-weighted F1 over exception types. ORCA's trace metrics: exact match,
prefix-match P/R (the longest common prefix of the line sequences) and coverage P/R
(the sets of executed lines).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceRecord:
    """One program's steps as (line, {name: value}, output) plus its exception, if any."""

    steps: tuple[tuple[int, Mapping[str, str], str], ...]
    exception: str | None = None
    exception_line: int | None = None

    @classmethod
    def from_parsed(cls, parsed) -> TraceRecord:
        return cls(
            tuple((s.line, dict(s.state), s.output) for s in parsed.steps), parsed.exception, parsed.exception_line
        )

    @classmethod
    def from_text(cls, text: str) -> TraceRecord:
        from codeexecutor.modeling.format import parse_trace

        return cls.from_parsed(parse_trace(text))

    @property
    def outputs(self) -> list[str]:
        return [o for _, _, o in self.steps if o]


# -- the release's metric, on texts ----------------------------------------------------------------


def _markers(text: str, marker: str) -> list[int]:
    out, at = [], text.find(marker)
    while at != -1:
        out.append(at)
        at = text.find(marker, at + 1)
    return out


def release_segments(text: str) -> list[str]:
    """`parse_text_into_sent`: segments at every <line> and <output>; a last segment
    without </state> dropped."""
    cuts = sorted({0, len(text), *_markers(text, "<line>"), *_markers(text, "<output>")})
    segments = []
    for i in range(1, len(cuts)):
        segment = text[cuts[i - 1] : cuts[i]]
        if i == len(cuts) - 1 and "</state>" not in segment:
            continue
        segments.append(segment)
    return segments


def release_outputs(segments: Sequence[str]) -> list[str]:
    """`get_output_from_trace`: the non-empty text after `<output> ` of output segments."""
    out = []
    for segment in segments:
        if "<output>" in segment:
            text = segment[len("<output> ") :].strip()
            if "_____event" in text:
                text = text[: text.find("_____event")].strip()
            if text:
                out.append(text)
    return out


def _line_and_state(segment: str) -> tuple[str, dict[str, str]]:
    """The line info and the state dict of a segment, exactly as the release slices them
    (including its slicing of segments without <state>)."""
    at = segment.find("<state>")
    state = {}
    for item in _unwrap(segment[at:].strip()).split("<dictsep>"):
        if ":" in item:
            k = item.index(":")
            state[item[:k].strip()] = item[k + 1 :].strip()
    return segment[0:at].strip(), state


def _unwrap(text: str) -> str:
    if text.startswith("<state>"):
        text = text[len("<state>") :]
    if text.endswith("</state>"):
        text = text[: -len("</state>")]
    return text


def _same_pairs(a: Mapping[str, str], b: Mapping[str, str]) -> int:
    return sum(1 for k in a.keys() & b.keys() if a[k] == b[k])


def _compare(pred: str, gold: str) -> tuple[bool, int]:
    """`same_sent`: (segments equal, identifiers credited)."""
    if "<output>" in pred or "<output>" in gold or "<state>" not in pred or "<state>" not in gold:
        return pred == gold, 0
    p_line, p_state = _line_and_state(pred)
    g_line, g_state = _line_and_state(gold)
    if p_line != g_line:
        return False, 0
    return p_state == g_state, _same_pairs(p_state, g_state)


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 2)


def release_metrics(predictions: Sequence[str], references: Sequence[str]) -> dict:
    """`compute_metrics` (Tutorial, CodeNetMut): Table-3 numbers from trace texts."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    exact = with_output = output_ok = 0
    right = n_pred = n_gold = 0
    id_right = id_pred = id_gold = 0
    for pred, gold in zip(predictions, references):
        pred, gold = pred.strip(), gold.strip()
        p_segs, g_segs = release_segments(pred), release_segments(gold)
        gold_out = release_outputs(g_segs)
        with_output += bool(gold_out)
        output_ok += bool(gold_out) and gold_out == release_outputs(p_segs)
        same = credited = 0
        for i in range(min(len(g_segs), len(p_segs))):
            equal, ids = _compare(p_segs[i], g_segs[i])
            same += equal
            credited += ids
        right, n_pred, n_gold = right + same, n_pred + len(p_segs), n_gold + len(g_segs)
        id_right += credited
        id_pred += sum(len(_line_and_state(s)[1]) for s in p_segs)
        id_gold += sum(len(_line_and_state(s)[1]) for s in g_segs)
        exact += same == len(g_segs) and len(p_segs) == len(g_segs)
    n = len(references)
    lp, lr = _ratio(right, n_pred), _ratio(right, n_gold)
    ip, ir = _ratio(id_right, id_pred), _ratio(id_right, id_gold)
    return {
        "output_accuracy": _pct(output_ok / with_output) if with_output else None,
        "trace_accuracy": _pct(_ratio(exact, n)),
        "line_precision": _pct(lp),
        "line_recall": _pct(lr),
        "line_f1": _pct(_f1(lp, lr)),
        "identifier_precision": _pct(ip),
        "identifier_recall": _pct(ir),
        "identifier_f1": _pct(_f1(ip, ir)),
        "programs": n,
        "programs_with_output": with_output,
    }


def _singleline_state(text: str) -> dict[str, str]:
    state = {}
    for item in _unwrap(text).split("<dictsep>"):
        if ":" in item:
            fields = item.split(":")
            state[fields[0].strip()] = fields[1].strip()
    return state


def release_singleline_metrics(predictions: Sequence[str], references: Sequence[str]) -> dict:
    """`compute_singleline_metrics`: trace accuracy and identifier P/R/F1 of one-state texts."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    exact = id_right = id_pred = id_gold = 0
    for pred, gold in zip(predictions, references):
        p, g = _singleline_state(pred.strip()), _singleline_state(gold.strip())
        id_right += _same_pairs(p, g)
        id_pred, id_gold = id_pred + len(p), id_gold + len(g)
        exact += p == g
    ip, ir = _ratio(id_right, id_pred), _ratio(id_right, id_gold)
    return {
        "output_accuracy": None,
        "trace_accuracy": _pct(_ratio(exact, len(references))),
        "line_precision": None,
        "line_recall": None,
        "line_f1": None,
        "identifier_precision": _pct(ip),
        "identifier_recall": _pct(ir),
        "identifier_f1": _pct(_f1(ip, ir)),
        "programs": len(references),
        "programs_with_output": 0,
    }


def table3_metrics(predictions: Sequence[str], references: Sequence[str], singleline: bool = False) -> dict:
    """The release's metric for a test set (its SingleLine variant for SingleLine)."""
    return (release_singleline_metrics if singleline else release_metrics)(predictions, references)


# -- our aligned variant, on parsed steps ---------------------------------------------------------


def _aligned_pairs(pred: TraceRecord, ref: TraceRecord) -> list[tuple[int, int]]:
    a = [s[0] for s in pred.steps]
    b = [s[0] for s in ref.steps]
    out = []
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        out += [(block.a + k, block.b + k) for k in range(block.size)]
    return out


def aligned_metrics(predictions: Sequence[TraceRecord], references: Sequence[TraceRecord]) -> dict:
    """Our variant (percent): steps aligned by line sequence, then line and (name, value)
    agreement over aligned pairs; output and trace accuracy on whole programs."""
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
        for i, j in _aligned_pairs(pred, ref):
            p, r = pred.steps[i], ref.steps[j]
            line_ok += p[0] == r[0]
            id_ok += len(set(dict(p[1]).items()) & set(dict(r[1]).items()))
    lp, lr = _ratio(line_ok, line_pred), _ratio(line_ok, line_ref)
    ip, ir = _ratio(id_ok, id_pred), _ratio(id_ok, id_ref)
    n = len(references)
    return {
        "aligned_output_accuracy": 100 * out_ok / out_total if out_total else None,
        "aligned_trace_accuracy": 100 * _ratio(trace_ok, n),
        "aligned_line_precision": 100 * lp,
        "aligned_line_recall": 100 * lr,
        "aligned_line_f1": 100 * _f1(lp, lr),
        "aligned_identifier_precision": 100 * ip,
        "aligned_identifier_recall": 100 * ir,
        "aligned_identifier_f1": 100 * _f1(ip, ir),
        "programs": n,
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
            pred_line = (
                pred.exception_line if pred.exception_line is not None else (pred.steps[-1][0] if pred.steps else None)
            )
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
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "true_positive_rate": 100 * tp / crashes if crashes else None,
        "false_positive_rate": 100 * fp / (fp + tn) if fp + tn else None,
        "localisation_accuracy": 100 * located / crashes if crashes else None,
        "localisation_accuracy_detected": 100 * located / tp if tp else None,
        "kind_accuracy": 100 * kinds_ok / crashes if crashes else None,
        "kind_weighted_f1": 100 * weighted_f1(true_kinds, pred_kinds) if crashes else None,
    }


def verdict_metrics(predicted, truth) -> dict:
    """`error_metrics` of (type, line) verdicts (type None: no crash) against the runs'
    (type, line): a crash detector's answers, scored as the traces' are."""
    return error_metrics([TraceRecord((), t, ln) for t, ln in predicted], [TraceRecord((), t, ln) for t, ln in truth])


def crash_score_auroc(scores: Sequence[float], crashed: Sequence[bool]) -> float | None:
    """Area under the ROC curve of a crash score (e.g. generation/verdict.py's peak
    margin) against whether each program crashed: the chance that a crashing program
    scores above a clean one, ties counting half; threshold-free, so it measures what
    the model knows even where its greedy trace never writes `<exception>`."""
    pos = [s for s, c in zip(scores, crashed) if c]
    neg = [s for s, c in zip(scores, crashed) if not c]
    if not pos or not neg:
        return None
    neg_sorted = sorted(neg)
    from bisect import bisect_left, bisect_right

    wins = sum(
        bisect_left(neg_sorted, s) + 0.5 * (bisect_right(neg_sorted, s) - bisect_left(neg_sorted, s)) for s in pos
    )
    return 100 * wins / (len(pos) * len(neg))


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
