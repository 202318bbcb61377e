"""Where a compact model's trace first goes wrong: the first step of its prediction that
differs from the gold trace, by what differs.

A step is compared in the compact form the model wrote (`compact` of a run's
test_predictions.jsonl) against the gold's compact form, serialized from the dataset row
by the model's own profile; the first differing step is put in one of the classes of
codeexecutor/modeling/divergence.py (line, form, names, arguments, value, recall,
output, exception, end), counted per test set with its median relative position.

    .venv/bin/python experiments/first_error.py --run runs/qd/run --data runs/quality/data-depth \
        [--predictions free=runs/qd/run/test_predictions.jsonl --predictions rules=EVAL.predictions.jsonl ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from codeexecutor.modeling.divergence import classify, steps  # noqa: E402  (after the path above)

SETS = {
    "codenetmut": "codenetmut/codenetmut",
    "errors": "codenetmut/errors",
    "functions": "functions/functions",
    "functions_errors": "functions/functions_errors",
}


def first_errors(rows: list[dict], data: str, profile) -> dict:
    """Per test set of `rows` (predictions JSONL records): the first error's class counts,
    shares and median relative position."""
    import datasets

    out = {}
    for name, path in SETS.items():
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        test = datasets.load_from_disk(os.path.join(data, path))["test"]
        index = {i: j for j, i in enumerate(test["id"])}
        classes, where = Counter(), defaultdict(list)
        for r in mine:
            row = test[index[r["id"]]]
            gold = steps(profile.example(row)[1])
            found = classify(steps(r.get("compact") or r["prediction"]), gold, row["code"])
            key = found[0] if found else "right"
            classes[key] += 1
            if found:
                where[key].append(found[1] / max(1, len(gold)))
        out[name] = {
            "examples": len(mine),
            "first_error": dict(classes.most_common()),
            "share": {k: round(100 * v / len(mine), 1) for k, v in classes.most_common()},
            "median_position": {k: round(sorted(v)[len(v) // 2], 3) for k, v in where.items()},
        }
    return out


def main() -> None:
    from codeexecutor.atomic import write_json
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.modeling.profiles import profile_of

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a bench_quality run folder (test_predictions.jsonl, final/)")
    ap.add_argument("--data", required=True, help="the data folder the run trained on")
    ap.add_argument(
        "--predictions",
        action="append",
        metavar="LABEL=JSONL",
        help="predictions of the run's model other than its test_predictions.jsonl (repeatable)",
    )
    ap.add_argument("--out", help="JSON report (default: first_error.json in the run folder)")
    args = ap.parse_args()
    profile = profile_of(load_model(os.path.join(args.run, "final")).config)
    if not profile.delta:
        sys.exit("first_error: the model writes whole states; the classes need its compact form")
    sources = dict(p.split("=", 1) for p in args.predictions or []) or {
        "free": os.path.join(args.run, "test_predictions.jsonl")
    }
    report = {"run": args.run, "data": args.data, "command": " ".join(sys.argv), "decodings": {}}
    for label, path in sources.items():
        rows = [json.loads(line) for line in open(path)]
        report["decodings"][label] = first_errors(rows, args.data, profile)
        for name, figures in report["decodings"][label].items():
            print(label, name, figures["share"])
    out = args.out or os.path.join(args.run, "first_error.json")
    write_json(out, report, ensure_ascii=False)
    print("written", out)


if __name__ == "__main__":
    main()
