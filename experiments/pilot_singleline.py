"""A SingleLine-only pilot: how do batch size, data and tokenizer choices compare at equal cost?

    .venv/bin/python experiments/pilot_singleline.py --name p4 --steps 2400 --max-tokens 1024

Trains stage 1 of the quality recipe (curricula/recipes/cpu-hour.yaml, alone, through
`codeexecutor pretrain --set`: preset, learning rate, warm-up and decay as there) for a fixed
number of steps on `--data`'s SingleLine split,
then scores greedy decoding on a fixed sample of the *unaugmented* SingleLine test split
(`--test-data`; the release's metric, copy vs computed answers apart). Appends one JSON
line to benchmarks/results/pilots-<device>.jsonl, so pilots of several sessions sit
side by side; compare pilots by their wall-clock `train_seconds` as well as their steps.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, bench_quality

import bench_quality as bq
from _common import RESULTS, ROOT, device_label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the pilot's name (its run folder: runs/pilots/NAME)")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=6144, help="token budget per micro-batch")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--preset", default="mini")
    ap.add_argument("--split-digits", action="store_true")
    recipe = bq.load_recipe()["model"]
    ap.add_argument("--vocab-size", type=int, default=recipe["vocab_size"], help="the trained tokenizer's vocabulary")
    ap.add_argument(
        "--positions",
        choices=bq.POSITION_KINDS,
        default=recipe["positions"],
        help="the release's learned absolute positions, or rotary ones (modeling/rotary.py)",
    )
    ap.add_argument(
        "--dropout",
        type=float,
        default=recipe["dropout"],
        help=f"hidden and attention dropout (default {recipe['dropout']})",
    )
    ap.add_argument(
        "--autocast",
        choices=["bf16", "none"],
        default=bq.AUTOCAST or "none",
        help=f"forward passes under bfloat16 autocast (default, as in the quality run: {bq.AUTOCAST or 'none'})",
    )
    ap.add_argument("--data", default=str(ROOT / "runs" / "quality" / "data"), help="built datasets to train on")
    ap.add_argument("--test-data", default=str(ROOT / "runs" / "quality" / "data"), help="built datasets to test on")
    ap.add_argument("--eval-limit", type=int, default=200)
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.data, "singleline", "singleline")):
        sys.exit(
            f"pilot_singleline: no SingleLine dataset under {args.data} (build it with bench_quality.py --build-only)"
        )

    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    device = device_label()
    run = str(ROOT / "runs" / "pilots" / args.name)
    model = {
        "preset": args.preset,
        "split_digits": args.split_digits,
        "dropout": args.dropout,
        "positions": args.positions,
        "vocab_size": args.vocab_size,
    }
    train = {
        "max_tokens": args.max_tokens,
        "eval_examples": 0,
        **({"autocast": args.autocast} if args.autocast != "none" else {}),
    }
    stage = dict(bq.load_recipe()["stages"][0], steps=args.steps, warmup=max(1, min(200, args.steps // 10)), lr=args.lr)
    fields = {
        **{f"model.{k}": v for k, v in model.items()},
        **{f"train.{k}": v for k, v in train.items()},
        "data.dir": args.data,
        "data.builds": {},  # the SingleLine build is there (checked above)
        "stages": [stage],
    }  # stage 1 alone
    os.makedirs(run, exist_ok=True)
    with open(run + ".log", "w") as log:
        bq.pretrain(str(bq.RECIPE), [f"{k}={json.dumps(v)}" for k, v in fields.items()], run, None, log, "--no-score")
    run = os.path.join(run, "run")
    train_s = sum(s["seconds"] for s in bq.stage_summary(run).values())
    from codeexecutor.generation.decoding import GREEDY
    from curricula.singleline import built_params
    from eval.evaluate import EvalOptions, evaluate_model

    t0 = time.perf_counter()
    report = evaluate_model(
        os.path.join(run, "final"),
        os.path.join(args.test_data, "singleline"),
        split="test",
        limit=args.eval_limit,
        decoding=GREEDY,
        progress=False,
        options=EvalOptions(batch_size=16),
    )
    predictions = report.pop("predictions")
    result = {
        "name": args.name,
        "device": device,
        "preset": args.preset,
        "steps": args.steps,
        "max_tokens": args.max_tokens,
        "lr": args.lr,
        "dropout": args.dropout,
        "positions": args.positions,
        "vocab_size": args.vocab_size,
        "autocast": args.autocast,
        "split_digits": args.split_digits,
        "data": args.data,
        "singleline_augment": built_params(os.path.join(args.data, "singleline")).get("augment", 0),
        "train_seconds": round(train_s, 1),
        "eval_seconds": round(time.perf_counter() - t0, 1),
        "stage": bq.stage_summary(run).get("singleline"),
        "metric": report["metric"],
        "decoding": "greedy (beam 1)",
        "test": report["datasets"]["singleline"]["table3"],
        "singleline_by_answer": bq.singleline_breakdown(predictions, args.test_data),
    }
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"pilots-{device}.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
