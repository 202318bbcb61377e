"""Decodings of one model compared on the examples they share: the prediction files of
several `codeexecutor evaluate` runs (or a bench_quality run's test_predictions.jsonl),
scored again on the intersection of their (dataset, id) pairs so that a greedy run over
300 examples and a beam run over 100 of them meet on the same 100.

Per decoding and test set: the release's trace accuracy and line F1, traces cut at the
cap, outputs equal to the gold's (the last printed text, our count, over examples that
print), steps per trace against the gold's, and, per crash family (CodeNetMut with its
crashing programs, functions with theirs), detection, false alarms, localisation and
kind accuracy as `evaluate` scores them.

    .venv/bin/python experiments/compare_decoding.py --model runs/qd/run/final --data runs/quality/data-depth \\
        --predictions greedy=runs/qd/run/test_predictions.jsonl \\
        --predictions beam10=runs/beam/cnm-free-300.predictions.jsonl \\
        --out benchmarks/results/beam-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SETS = {
    "codenetmut": "codenetmut/codenetmut",
    "errors": "codenetmut/errors",
    "tutorial": "tutorial/tutorial",
    "functions": "functions/functions",
    "functions_errors": "functions/functions_errors",
}
FAMILIES = {"codenetmut": ("codenetmut", "errors"), "functions": ("functions", "functions_errors")}


def read_predictions(path: str) -> dict[tuple[str, str], dict]:
    with open(path, encoding="utf-8") as f:
        return {(r["dataset"], r["id"]): r for r in map(json.loads, f) if r.get("dataset") in SETS}


def gold_crashes(data: str, profile, keys: set[tuple[str, str]], split: str = "test") -> dict[tuple[str, str], tuple]:
    """(exception, line) of each example's uncut gold trace; (None, None) where it ends cleanly."""
    import datasets

    from codeexecutor.modeling.format import parse_trace
    from codeexecutor.modeling.trace_metrics import TraceRecord

    out = {}
    for name in sorted({d for d, _ in keys}):
        test = datasets.load_from_disk(os.path.join(data, SETS[name]))[split]
        wanted = {i for d, i in keys if d == name}
        for idx, row_id in enumerate(test["id"]):
            if row_id in wanted:
                rec = TraceRecord.from_parsed(parse_trace(profile.full.example(test[idx])[1]))
                out[(name, row_id)] = (rec.exception, rec.exception_line)
    return out


def steps_of(text: str) -> int:
    return text.count("<line> ")


def score(rows: list[dict], scored) -> dict:
    """Figures of one decoding over one test set's shared examples; `scored` cuts a
    prediction as `evaluate` does before the metric reads it."""
    from codeexecutor.modeling.format import parse_trace
    from codeexecutor.modeling.trace_metrics import table3_metrics

    preds, golds = [scored(r["prediction"]) for r in rows], [r["gold"] for r in rows]
    release = table3_metrics(preds, golds)
    printing = [(parse_trace(p).output, parse_trace(g).output) for p, g in zip(preds, golds)]
    printing = [(p, g) for p, g in printing if g]
    return {
        "examples": len(rows),
        "trace_accuracy": release["trace_accuracy"],
        "line_f1": release["line_f1"],
        "cut": round(100 * sum(not r["finished"] for r in rows) / len(rows), 2),
        "outputs_right": sum(p == g for p, g in printing),
        "printing": len(printing),
        "steps": round(sum(map(steps_of, preds)) / len(rows), 1),
        "gold_steps": round(sum(map(steps_of, golds)) / len(rows), 1),
    }


def crash_figures(rows: list[dict], crashes: dict) -> dict:
    """Detection over a family's clean and crashing examples; localisation and kind over
    the crashing (`error_metrics`, as `evaluate` scores them)."""
    from codeexecutor.modeling.format import parse_trace
    from codeexecutor.modeling.trace_metrics import TraceRecord, error_metrics

    preds = [TraceRecord.from_parsed(parse_trace(r["prediction"])) for r in rows]
    refs = [TraceRecord((), *crashes[(r["dataset"], r["id"])]) for r in rows]
    m = error_metrics(preds, refs)
    pct = lambda x: round(x, 2) if x is not None else None  # noqa: E731
    return {
        "programs": len(rows),
        "detection": pct(m["detection_accuracy"]),
        "tp": m["tp"],
        "fp": m["fp"],
        "localisation": pct(m["localisation_accuracy"]),
        "kind_accuracy": pct(m["kind_accuracy"]),
    }


def shared(decodings: dict[str, dict]) -> set[tuple[str, str]]:
    """The (dataset, id) pairs every decoding has."""
    return set.intersection(*(set(d) for d in decodings.values()))


def compare(decodings: dict[str, dict], crashes: dict, scored) -> dict:
    keys = shared(decodings)
    report = {"shared_examples": len(keys), "sets": defaultdict(dict), "crashes": defaultdict(dict)}
    for label, preds in decodings.items():
        by_set = defaultdict(list)
        for key in sorted(keys):
            by_set[key[0]].append(preds[key])
        for name, rows in sorted(by_set.items()):
            report["sets"][name][label] = score(rows, scored)
        for family, members in FAMILIES.items():
            rows = [r for m in members for r in by_set.get(m, [])]
            if all(by_set.get(m) for m in members):
                report["crashes"][family][label] = crash_figures(rows, crashes)
    return {k: dict(v) if isinstance(v, defaultdict) else v for k, v in report.items()}


def main() -> None:
    from codeexecutor.atomic import write_json
    from codeexecutor.generation import TraceGenerator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model the predictions came from (its trace profile)")
    ap.add_argument("--data", required=True, help="the data folder the predictions were scored on")
    ap.add_argument("--split", default="test", help="the split the predictions were made on")
    ap.add_argument("--predictions", action="append", required=True, metavar="LABEL=JSONL")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    decodings = {}
    for item in args.predictions:
        label, _, path = item.partition("=")
        decodings[label] = read_predictions(path)
    gen = TraceGenerator(args.model)
    keys = shared(decodings)
    report = {
        "model": args.model,
        "data": args.data,
        "split": args.split,
        "command": " ".join(sys.argv),
        "predictions": dict(p.partition("=")[::2] for p in args.predictions),
        **compare(decodings, gold_crashes(args.data, gen.profile, keys, args.split), gen.encoder.scored),
    }
    write_json(args.out, report, ensure_ascii=False)
    for name, labels in report["sets"].items():
        for label, f in labels.items():
            print(
                f"{name:17} {label:10} n {f['examples']:3}  trace {f['trace_accuracy']:6.2f}  "
                f"line F1 {f['line_f1']:6.2f}  "
                f"cut {f['cut']:5.1f}%  outputs {f['outputs_right']}/{f['printing']}  "
                f"steps {f['steps']} (gold {f['gold_steps']})"
            )
    for family, labels in report["crashes"].items():
        for label, f in labels.items():
            print(
                f"crashes {family:9} {label:10} detection {f['detection']:6.2f} (TP {f['tp']}, FP {f['fp']})  "
                f"localisation {f['localisation']}  kind {f['kind_accuracy']}"
            )
    print("written", args.out)


if __name__ == "__main__":
    main()
