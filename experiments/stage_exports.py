"""How each stage of a curriculum run leaves the earlier tasks: every stage export of a run
scored on the same fixed test sample of each dataset asked for.

    .venv/bin/python experiments/stage_exports.py --run runs/quality/run [--datasets singleline] [--limit 300]

A later stage can undo an earlier one (its learning rate warms up again, its data mix
changes); the final model alone does not show where. One line per (export, dataset) goes
to benchmarks/results/stage-exports-<device>.jsonl: the release's metric, greedy.
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, bench_quality

from _common import RESULTS, ROOT, dataset_folders, device_label, score_test


def stage_exports(run: str) -> list[str]:
    """The run's stage exports in stage order (`stage1-singleline`, `stage2-tutorial`, ...),
    `-best` copies left out."""
    found = [
        p
        for p in glob.glob(os.path.join(run, "stage*-*"))
        if os.path.isdir(p) and not p.endswith("-best") and os.path.exists(os.path.join(p, "config.json"))
    ]
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
    folders = dataset_folders("stage_exports", args.run, args.data, args.datasets)
    out = RESULTS / f"stage-exports-{device_label()}.jsonl"
    for model in exports:
        score_test(
            model,
            folders,
            args.limit,
            out,
            {
                "run": os.path.relpath(os.path.abspath(args.run), ROOT),
                "export": os.path.basename(model),
                **({"note": args.note} if args.note else {}),
            },
        )
    print(f"report: {out}")


if __name__ == "__main__":
    main()
