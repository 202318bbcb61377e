"""Ship a trained run's model in the repository: bf16 or int8, its card, its scores.

    codeexecutor ship --run runs/qd/run --data runs/quality/data-depth \
        --name codeexecutor-mini-cpu [--device "AVX512_BF16 CPU"] [--limit 300]

Saves RUN/final as one safetensors file (bf16, or int8 with --weights int8) with its config and tokenizer under
models/NAME, scores that copy (loaded as a user loads it) on the fixed test sample of
every test set of DATA (`evaluate --limit`, greedy, the release's metric), and writes the
model card (README.md) from the run's own records: its curriculum, steps and training
minutes. The scores also go to models/NAME/scores.json, which `--card-only` reads back.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from codeexecutor.errors import UsageError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--run", help="a training run's folder (its final/ model is shipped)")
    ap.add_argument("--data", help="the built datasets whose test sets score it")
    ap.add_argument("--name", required=True, help="the folder under models/")
    ap.add_argument("--device", default="cpu", help="what it was trained on, for the card")
    ap.add_argument("--command", default="", help="the command that trained it, for the card")
    ap.add_argument(
        "--recipe", default="curricula/recipes/cpu-hour.yaml", help="the recipe it was trained by, for the card"
    )
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument(
        "--weights",
        choices=("bf16", "int8"),
        default="bf16",
        help="how the weights are stored: bfloat16, or int8 codes a row at about 0.6 of the bytes (modeling/int8.py)",
    )
    ap.add_argument(
        "--trace-python",
        help="the interpreter that traced the training data, where the run's config does "
        "not say (a run from before models kept it)",
    )
    ap.add_argument("--note", default="", help="a paragraph for the card's scores section")
    ap.add_argument(
        "--card-only",
        action="store_true",
        help="rewrite models/NAME/README.md from the scores in models/NAME/scores.json (nothing evaluated again)",
    )


def _card_only(args: argparse.Namespace) -> int:
    """The card of a shipped model written again from its recorded scores."""
    from codeexecutor.training.card import Training, write_card

    saved = json.loads((ROOT / "models" / args.name / "scores.json").read_text())
    command = saved.get("training_command") or args.command
    write_card(
        ROOT / "models" / args.name,
        scores=saved,
        training=Training(saved["device"], args.recipe, saved["steps"], saved["training_minutes"], command),
        parameters=saved["parameters"],
        note=args.note,
    )
    print(f"rewrote {ROOT / 'models' / args.name / 'README.md'}")
    return 0


def _trained(run: pathlib.Path) -> tuple[dict, float]:
    """A finished run's steps a stage and its seconds of training (each stage's last log row)."""
    curriculum = json.loads((run / "curriculum.json").read_text())
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    seconds = sum(
        max((r.get("stage_seconds", 0) for r in log if r.get("stage") == st["name"]), default=0)
        for st in curriculum["stages"]
    )
    return {st["name"]: st["steps"] for st in curriculum["stages"]}, seconds


def _scores(report: dict, limit: int | None) -> dict:
    """The card's scores from an evaluation report: each set's Table 3 figures, the runtime errors."""
    return {
        "sets": {
            name: {
                "examples": e["examples"],
                **e["table3"],
                "aligned": e["aligned"],
                "unfinished": (e.get("unfinished") or {}).get("share"),
            }
            for name, e in report["datasets"].items()
        },
        "runtime_errors": report.get("runtime_errors"),
        "runtime_errors_functions": report.get("runtime_errors_functions"),
        "metric": report["metric"],
        "beam": report["beam"],
        "limit": limit,
    }


def run(args: argparse.Namespace) -> int:
    if args.card_only:
        return _card_only(args)
    if not args.run or not args.data:
        raise UsageError("--run and --data are needed (all but --card-only)")
    from codeexecutor.progress import quiet_libraries
    from codeexecutor.training.card import Training, write_card
    from codeexecutor.training.export import save_shipped
    from eval.evaluate import EvalOptions, evaluate_model

    quiet_libraries()
    run = pathlib.Path(args.run)
    if not (run / "final" / "config.json").is_file():
        raise UsageError(f"no final model in {run}: give --run a finished training run's folder")
    dest = ROOT / "models" / args.name
    params = save_shipped(str(run / "final"), str(dest), args.weights)
    config = json.loads((dest / "config.json").read_text())
    if not config.get("trace_python"):
        from codeexecutor.execution.interpreters import dataset_python

        config["trace_python"] = args.trace_python or dataset_python(
            str(pathlib.Path(args.data) / "codenetmut" / "codenetmut")
        )
        (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    start = time.perf_counter()
    report = evaluate_model(
        str(dest), args.data, split="test", limit=args.limit, progress=True, options=EvalOptions(batch_size=16)
    )
    seconds = time.perf_counter() - start
    report.pop("predictions")
    steps, train_seconds = _trained(run)
    scores = _scores(report, args.limit)
    write_card(
        dest,
        scores=scores,
        training=Training(
            args.device,
            args.recipe,
            steps,
            round(train_seconds / 60, 1),
            args.command or f"codeexecutor ship --run {args.run}",
        ),
        parameters=params,
        note=args.note,
    )
    out = {
        "model": str(dest.relative_to(ROOT)),
        "parameters": params,
        "device": args.device,
        "steps": steps,
        "training_minutes": round(train_seconds / 60, 1),
        "eval_seconds": round(seconds, 1),
        **scores,
        "training_command": args.command,
        "command": " ".join(["codeexecutor"] + sys.argv[1:]),
    }
    (dest / "scores.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: (v["trace_accuracy"], v["output_accuracy"]) for k, v in scores["sets"].items()}))
    print(f"shipped: {dest} ({sum(f.stat().st_size for f in dest.iterdir()) / 1e6:.1f} MB)")
    return 0


# The subcommand this module defines: (help, add_arguments, run); codeexecutor/cli.py lists it.
COMMANDS = {
    "ship": (
        "ship a trained run's model under models/: bf16 or int8, scored on the test samples, with its card",
        add_arguments,
        run,
    ),
}
