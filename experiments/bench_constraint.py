"""State-rule decoding against the release's free decoding: the same model scored on the
same fixed test sample of each dataset, the release's metric, greedy.

    .venv/bin/python experiments/bench_constraint.py --run runs/quality/run [--decodings free names values both]

A small model sometimes fails to copy a variable's name and loops inside it
(`MyCgolfgolf…`), or lets a value grow (`'atcoderatcoder…'`), until the length cap; the
rules (generation/constraints.py) let a state name only the program's identifiers
(`names`) and end a value at the tracer's length limit (`values`; `both`: the two). One
line per (model, decoding, dataset) goes to benchmarks/results/decoding-rules-<device>.jsonl
(the file's name is from its first rule); the table at the end compares them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, bench_quality

from _common import RESULTS, ROOT, chosen_model, dataset_folders, device_label, model_arguments, score_test

DECODINGS = ("free", "names", "values", "both")


def compare(lines: list[dict]) -> str:
    """Trace accuracy and the share cut at the length cap, per dataset and decoding."""
    shown = [d for d in DECODINGS if any(x.get("decoding_rule") == d for x in lines)]
    rows = [f"{'dataset':<12} " + "  ".join(f"{d + ' trace':>12} {d + ' cut':>10}" for d in shown)]
    for name in dict.fromkeys(line["dataset"] for line in lines):
        cells = []
        for d in shown:
            got = [x for x in lines if x["dataset"] == name and x.get("decoding_rule") == d]
            share = got[0]["unfinished_share"] if got else None
            cells.append(
                f"{got[0]['trace_accuracy']:>12} {'-' if share is None else f'{share:.1f}%':>10}"
                if got
                else f"{'-':>12} {'-':>10}"
            )
        rows.append(f"{name:<12} " + "  ".join(cells))
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    model_arguments(ap, "datasets to score (folder names; the crashing programs come with codenetmut)")
    ap.add_argument("--decodings", nargs="+", choices=DECODINGS, default=list(DECODINGS))
    ap.add_argument("--limit", type=int, default=300, help="test examples per dataset (a fixed sample)")
    args = ap.parse_args()
    model = chosen_model("bench_constraint", args)
    folders = dataset_folders("bench_constraint", args.run, args.data, args.datasets)
    out = RESULTS / f"decoding-rules-{device_label()}.jsonl"
    start = sum(1 for _ in open(out)) if out.exists() else 0
    fields = {"model": os.path.relpath(os.path.abspath(model), ROOT)}
    for decoding in args.decodings:
        score_test(
            model,
            folders,
            args.limit,
            out,
            {**fields, "decoding_rule": decoding},
            names=decoding in ("names", "both"),
            values=decoding in ("values", "both"),
        )
    with open(out) as f:
        lines = [json.loads(x) for x in f][start:]
    print(compare(lines))
    print(f"report: {out}")


if __name__ == "__main__":
    main()
