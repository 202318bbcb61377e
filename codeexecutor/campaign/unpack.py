"""Back from a GPU draw: check and join the model, load it here, score it again on the CPU.

    codeexecutor draw unpack DRAW_DIR [--limit 50] [--install models/NAME]

DRAW_DIR holds what the draw brought back (checks.json, scores.json, model-meta.tar,
model.safetensors.partK, ...). Its pieces are checked (sizes and hashes) before they are
joined (training/export.py join_pieces); the model is loaded here and scored on the first
`--limit` examples of the same fixed test samples (`evaluate --limit`; the pack's data,
or --data), and each set's scores are set beside the draw's: a model that lost something
in transfer, or that scores differently on this machine, shows there. `--install` copies
the joined model to models/NAME (bf16, or int8 with --weights int8) with a model card (README.md, Hugging Face layout).
Writes DRAW_DIR/unpacked.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil

from codeexecutor.atomic import write_json
from codeexecutor.errors import UsageError
from codeexecutor.generation.decoding import GREEDY

ROOT = pathlib.Path(__file__).resolve().parents[2]


def refuse(message: str) -> None:
    raise UsageError(message)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("draw", help="the folder the draw's files came back to")
    ap.add_argument(
        "--data", help="built datasets to score on (default: the pack's test samples, .campaign/data.tar.xz)"
    )
    ap.add_argument("--pack", default=str(ROOT / ".campaign"), help="the pack the draw ran on (its test samples)")
    ap.add_argument(
        "--limit",
        type=int,
        default=50,
        help="test examples per set scored here (the draw scored 100; shipping compares the 300-example samples)",
    )
    ap.add_argument("--install", metavar="models/NAME", help="copy the model there, with a model card")
    ap.add_argument(
        "--weights",
        choices=("bf16", "int8"),
        default="bf16",
        help="how --install stores the weights: "
        "bfloat16, or int8 codes a row at about 0.6 of the bytes (modeling/int8.py; score the copy before shipping it)",
    )
    ap.add_argument(
        "--record",
        metavar="FILE.json",
        help="also write the draw's JSON files and this scoring into one "
        "result file (benchmarks/results/...), the logs' tails cut to 600 characters",
    )


def run(args: argparse.Namespace) -> int:
    from codeexecutor.progress import quiet_libraries
    from codeexecutor.training.export import join_pieces

    quiet_libraries()

    draw = pathlib.Path(args.draw)
    scores_path = draw / "scores.json"
    if not scores_path.is_file():
        refuse(f"no scores.json in {draw}: give the folder a draw's files came back to")
    model = draw / "model"
    try:
        manifest = join_pieces(str(draw), str(model))
    except UsageError as exc:
        refuse(str(exc))
    data = args.data or unpack_test_samples(draw, pathlib.Path(args.pack))
    from eval.agreement import agreement
    from eval.evaluate import evaluate_model

    theirs = json.loads(scores_path.read_text())
    ours, predictions = score_here(evaluate_model, model, pathlib.Path(data), args.limit, draw, "here")
    keys = ("examples", "trace_accuracy", "output_accuracy")
    drawn = theirs.get("sets", {})
    compared = {
        name: {
            "draw": {k: drawn[name].get(k) for k in keys} if name in drawn else None,  # None: not scored there
            "here": ours[name],
        }
        for name in ours
    }
    out = {
        "model": str(model),
        "pieces": len(manifest["pieces"]),
        "bytes": manifest["bytes"],
        "parameters": manifest["parameters"],
        "limit_here": args.limit,
        "sets": compared,
    }
    for name, c in compared.items():
        there = c["draw"] or {"trace_accuracy": "-", "examples": 0}
        print(
            f"{name:<18} draw {there['trace_accuracy']!s:>6} ({there['examples']})   "
            f"here {c['here']['trace_accuracy']!s:>6} ({c['here']['examples']})"
        )
    if args.install:
        dest = pathlib.Path(args.install)
        install(model, dest, draw, args.weights)
        if args.weights != "bf16":  # the copy that ships, scored on the same examples: what the new precision moved
            copy, copy_predictions = score_here(
                evaluate_model, dest, pathlib.Path(data), args.limit, draw, args.weights
            )
            same = agreement(predictions, copy_predictions)
            out["installed"] = {
                "model": str(dest),
                "weights": args.weights,
                "sets": {
                    name: {
                        "trace_accuracy": copy[name]["trace_accuracy"],
                        "output_accuracy": copy[name]["output_accuracy"],
                        "identical_to_bf16": same.get(name, {}).get("identical"),
                    }
                    for name in copy
                },
            }
            for name, c in out["installed"]["sets"].items():
                print(
                    f"{name:<18} {args.weights} {c['trace_accuracy']!s:>6}  "
                    f"identical to bf16: {c['identical_to_bf16']}%"
                )
    (draw / "unpacked.json").write_text(json.dumps(out, indent=2) + "\n")
    if args.record:
        record(draw, pathlib.Path(args.record))
    print(f"report: {draw / 'unpacked.json'}")
    return 0


def score_here(
    evaluate_model, model: pathlib.Path, data: pathlib.Path, limit: int, draw: pathlib.Path, label: str
) -> tuple[dict, list]:
    """Each test set's scores of `model` on the first `limit` examples of every build in
    `data`, and the predictions; answers journaled beside the draw (DRAW/LABEL-BUILD), so a
    scoring run stopped here resumes where it was."""
    from eval.evaluate import EvalOptions

    scores: dict = {}
    predictions: list = []
    for build in sorted(p for p in data.iterdir() if p.is_dir()):
        report = evaluate_model(
            str(model),
            str(build),
            split="test",
            limit=limit,
            decoding=GREEDY,
            progress=False,
            options=EvalOptions(batch_size=64, answers=str(draw / f"{label}-{build.name}.answers.jsonl")),
        )
        predictions += report["predictions"]
        for name, e in report["datasets"].items():
            scores[name] = {
                "examples": e["examples"],
                **e["table3"],
                "aligned": e.get("aligned"),
                "unfinished": (e.get("unfinished") or {}).get("share"),
            }
    return scores, predictions


def record(draw: pathlib.Path, path: pathlib.Path) -> None:
    """Every JSON file the draw brought back, and unpacked.json, in one result file."""

    def cut(obj):
        if isinstance(obj, dict):
            return {k: (v[-600:] if k == "log_tail" and isinstance(v, str) else cut(v)) for k, v in obj.items()}
        return [cut(v) for v in obj] if isinstance(obj, list) else obj

    joined = {f.stem: cut(json.loads(f.read_text())) for f in sorted(draw.glob("*.json"))}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, joined, indent=1)
    print(f"record: {path}")


def unpack_test_samples(draw: pathlib.Path, pack_dir: pathlib.Path) -> str:
    import tarfile

    pack = pack_dir / "data.tar.xz"
    if not pack.is_file():
        refuse(f"no {pack} to score on: pass --pack (the draw's pack) or --data (a folder of built datasets)")
    target = draw / "pack"
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(pack) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("data/test/")]
        tar.extractall(target, members=members, filter="data")
    return str(target / "data" / "test")


def install(model: pathlib.Path, dest: pathlib.Path, draw: pathlib.Path, weights: str = "bf16") -> None:
    """The model under models/NAME, its weights stored as `weights`, with its card from the
    draw's own records."""
    from codeexecutor.training.card import Training, write_card
    from codeexecutor.training.export import save_shipped

    save_shipped(str(model), str(dest), weights)
    checks = json.loads((draw / "checks.json").read_text())
    training = json.loads((draw / "training.json").read_text())
    scores = json.loads((draw / "scores.json").read_text())
    pieces = json.loads((model / "pieces.json").read_text())
    write_card(
        dest,
        scores=scores,
        training=Training(
            device=checks.get("preflight", {}).get("device", "?"),
            recipe=checks.get("pack", {}).get("recipe"),
            steps=training.get("steps"),
            minutes=round(training.get("seconds", 0) / 60, 1),
            command="bash run_draw.sh",
        ),
        parameters=pieces.get("parameters"),
    )
    print(f"installed: {dest}")
