"""Weight interpolation between two exports of one run (WiSE-FT, Wortsman et al. 2022):
each weight at (1 - a) of model A plus a of model B, scored on the test splits.

    .venv/bin/python experiments/interpolate.py --a RUN/stage1-singleline --b RUN/final \
        --alphas 0 0.25 0.5 0.75 1 [--datasets singleline tutorial codenetmut] [--limit 300]

A later curriculum stage takes back some of what an earlier one taught (its data mix
changes); two exports of one run share their start, so the points between them are
models too. a = 1 is B itself, a = 0 is A. One line per (alpha, dataset) goes to
benchmarks/results/interpolation-<device>.jsonl: the release's metric, greedy. The
interpolated exports are written under --out (default: beside B) for the CLI to load.
What it found is in experiments/NOTEBOOK.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys

from codeexecutor.atomic import replacing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, bench_quality

from _common import RESULTS, ROOT, dataset_folders, device_label, score_test

WEIGHTS = "model.safetensors"


def interpolate(a: str, b: str, alpha: float, out: str) -> str:
    """Write B's folder to `out` with every floating-point weight (1 - alpha) * A + alpha * B."""
    from safetensors.torch import load_file, save_file

    for folder in (a, b):
        if not os.path.isfile(os.path.join(folder, WEIGHTS)):
            sys.exit(f"interpolate: {folder} has no {WEIGHTS}: pass two exports of one run (save_pretrained folders)")
    with open(os.path.join(a, "config.json")) as fa, open(os.path.join(b, "config.json")) as fb:
        ca, cb = json.load(fa), json.load(fb)
    shape = ("hidden_size", "num_hidden_layers", "vocab_size", "positions")
    if any(ca.get(k) != cb.get(k) for k in shape):
        sys.exit(
            f"interpolate: {a} and {b} differ in shape ({', '.join(k for k in shape if ca.get(k) != cb.get(k))}); "
            "only exports of one model can be interpolated"
        )
    wa, wb = load_file(os.path.join(a, WEIGHTS)), load_file(os.path.join(b, WEIGHTS))
    if wa.keys() != wb.keys():
        sys.exit(f"interpolate: {a} and {b} hold different weights ({len(wa.keys() ^ wb.keys())} names differ)")
    mixed = {
        k: (wa[k].float() * (1 - alpha) + wb[k].float() * alpha).to(wb[k].dtype) if wb[k].is_floating_point() else wb[k]
        for k in wb
    }
    with replacing(out) as tmp:
        shutil.copytree(b, tmp)
        save_file(mixed, os.path.join(tmp, WEIGHTS), metadata={"format": "pt"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="the earlier export (alpha 0), e.g. RUN/stage1-singleline")
    ap.add_argument("--b", required=True, help="the later export (alpha 1), e.g. RUN/final")
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument("--data", help="the datasets' folder (default: the one B's run trained on)")
    ap.add_argument("--datasets", nargs="+", default=["singleline"], help="datasets to score (folder names)")
    ap.add_argument("--limit", type=int, default=300, help="test examples per dataset (a fixed sample)")
    ap.add_argument("--out", help="where the interpolated exports go (default: beside B, interp-A-ALPHA)")
    args = ap.parse_args()
    if any(not 0 <= x <= 1 for x in args.alphas):
        sys.exit(f"interpolate: --alphas lie in [0, 1] (got {args.alphas})")
    run = os.path.dirname(os.path.abspath(args.b))
    folders = dataset_folders("interpolate", run, args.data, args.datasets)
    results = RESULTS / f"interpolation-{device_label()}.jsonl"
    for alpha in args.alphas:
        model = interpolate(
            args.a, args.b, alpha, os.path.join(args.out or run, f"interp-{os.path.basename(args.a)}-{alpha:g}")
        )
        score_test(
            model,
            folders,
            args.limit,
            results,
            {
                "run": os.path.relpath(run, ROOT),
                "a": os.path.basename(args.a),
                "b": os.path.basename(args.b),
                "alpha": alpha,
            },
        )
    print(f"report: {results}")


if __name__ == "__main__":
    main()
