"""How each stage of a curriculum run leaves the earlier tasks: every stage export of a run
scored on the same fixed test sample of each dataset asked for.

    .venv/bin/python benchmarks/stage_exports.py --run runs/quality/run [--datasets singleline] [--limit 300]

A later stage can undo an earlier one (its learning rate warms up again, its data mix
changes); the final model alone does not show where. One line per (export, dataset) goes
to benchmarks/results/stage-exports-<device>.jsonl: the release's metric, greedy.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

from _common import RESULTS, ROOT, device_label


def stage_exports(run: str) -> list[str]:
    """The run's stage exports in stage order (`stage1-singleline`, `stage2-tutorial`, ...),
    `-best` copies left out."""
    found = [p for p in glob.glob(os.path.join(run, "stage*-*")) if os.path.isdir(p) and not p.endswith("-best")
             and os.path.exists(os.path.join(p, "config.json"))]
    return sorted(found, key=lambda p: int(os.path.basename(p)[5:].split("-")[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a training run's folder (with stageN-NAME exports)")
    ap.add_argument("--data", help="the datasets' folder (default: the one its curriculum trained on)")
    ap.add_argument("--datasets", nargs="+", default=["singleline"], help="datasets to score (folder names)")
    ap.add_argument("--limit", type=int, default=300, help="test examples per dataset (a fixed sample)")
    ap.add_argument("--note", default="", help="a remark kept with each line")
    args = ap.parse_args()
    exports = stage_exports(args.run)
    if not exports:
        sys.exit(f"stage_exports: no stage exports under {args.run} (a run's folder holds stage1-NAME/ etc.)")
    data = args.data
    if data is None:
        with open(os.path.join(args.run, "curriculum.json")) as f:
            first = json.load(f)["stages"][0]["sources"][0]["path"]  # DATA/singleline/singleline
        data = os.path.dirname(os.path.dirname(first))
    from eval.evaluate import evaluate_model, find_datasets

    device = device_label()
    folders = find_datasets(data)
    missing = [d for d in args.datasets if d not in folders]
    if missing:
        sys.exit(f"stage_exports: no dataset {', '.join(missing)} under {data} (found: {', '.join(folders) or 'none'})")
    out = RESULTS / f"stage-exports-{device}.jsonl"
    for model in exports:
        for name in args.datasets:
            start = time.perf_counter()
            report = evaluate_model(model, os.path.dirname(folders[name]), split="test", limit=args.limit, beam=1,
                                    batch_size=16, progress=False)
            scores = report["datasets"][name]
            line = {"run": os.path.relpath(os.path.abspath(args.run), ROOT), "export": os.path.basename(model),
                    "dataset": name, "device": device, "examples": scores["examples"], "metric": report["metric"],
                    "decoding": "greedy (beam 1)", **scores["table3"], "seconds": round(time.perf_counter() - start, 1),
                    **({"note": args.note} if args.note else {})}
            print(f"{line['export']:<22} {name:<12} trace {line['trace_accuracy']}  output {line['output_accuracy']}", flush=True)
            with open(out, "a") as f:
                f.write(json.dumps(line) + "\n")
    print(f"report: {out}")


if __name__ == "__main__":
    main()
