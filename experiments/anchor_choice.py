"""Which anchor rule should the token-budget sampler use? Stage 3 of a finished run, trained twice at equal steps.

    .venv/bin/python experiments/anchor_choice.py --run RUN --root ROOT --work DIR \
        [--steps 3083] [--limit 300] [--out benchmarks/results/anchor-choice-cpu.json]

RUN is a finished run of the CPU-hour recipe (its `curriculum.yaml`, `stage2-tutorial/`
export); ROOT the folder its data paths are relative to. Both arms start from RUN's stage-2
export and train only its last stage (CodeNetMut with SingleLine, Tutorial and the
functions set) with the same steps, seed, learning rate and token budget per micro-batch,
so they cost the same compute; they differ only in `train.anchor`:

- example (the default so far): a batch's first example drawn uniformly over examples,
  which trains short examples far more often than long ones (sampler_bias.py);
- token: drawn in proportion to its length, so lengths are trained on as the data has them.

Each arm is scored on the valid split, never the test split: the held-out loss per source
at the stage's end, and greedy decoding of the first `--limit` examples of the seeded
sample of each CodeNetMut build's sets (`codenetmut`, `errors`) with the release's metric.
The decoded examples are also split at the median length of their reference trace (the
same halves for both arms), since what the anchor changes is how often long traces are
trained on. Writes one JSON; resumes (a trained arm is kept, decoded answers are journaled).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _stage3 import differences, last_log, stage3_curriculum, stage_eval, train_arm, write_json  # noqa: E402

ARMS = ("example", "token")


def halves(preds: list[str], golds: list[str]) -> dict:
    """The release's metric on the shorter and the longer half of the references (by characters)."""
    from codeexecutor.modeling.trace_metrics import table3_metrics

    order = sorted(range(len(golds)), key=lambda i: (len(golds[i]), i))
    cut = len(order) // 2
    out = {}
    for name, idx in (("short", order[:cut]), ("long", order[cut:])):
        m = table3_metrics([preds[i] for i in idx], [golds[i] for i in idx])
        out[name] = {
            "examples": len(idx),
            "max_reference_chars": max((len(golds[i]) for i in idx), default=0),
            "output_accuracy": m["output_accuracy"],
            "trace_accuracy": m["trace_accuracy"],
        }
    return out


def decode(model: str, build: str, answers: str, limit: int) -> dict:
    """Greedy answers of the valid split's sample, scored whole and by halves, per dataset of BUILD."""
    from codeexecutor.generation import TraceGenerator
    from codeexecutor.generation.decoding import GREEDY
    from eval.evaluate import EvalOptions, evaluate_model

    report = evaluate_model(
        model, build, split="valid", limit=limit, decoding=GREEDY, progress=False, options=EvalOptions(answers=answers)
    )
    enc = TraceGenerator(model).encoder
    out = {}
    for name, entry in report["datasets"].items():
        rows = [p for p in report["predictions"] if p["dataset"] == name]
        preds, golds = [enc.scored(p["prediction"]) for p in rows], [p["gold"] for p in rows]
        out[name] = {
            "examples": entry["examples"],
            "output_accuracy": entry["table3"]["output_accuracy"],
            "trace_accuracy": entry["table3"]["trace_accuracy"],
            "cut_at_cap_percent": entry["unfinished"]["share"],
            "by_length": halves(preds, golds),
        }
    return out


def builds(run: str, root: str) -> list[str]:
    """The CodeNetMut build folders the run's last stage trains on."""
    import yaml

    stage = yaml.safe_load(open(os.path.join(run, "curriculum.yaml")))["stages"][-1]
    return sorted(
        {
            str(pathlib.Path(root) / os.path.dirname(s["path"]))
            for s in stage["sources"]
            if os.path.basename(s["path"]) == "codenetmut"
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--root", required=True, help="the folder RUN's data paths are relative to")
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, help="stage steps (default: RUN's)")
    ap.add_argument("--loss-examples", type=int, default=1024)
    ap.add_argument("--limit", type=int, default=300, help="valid examples decoded per dataset")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "anchor-choice-cpu.json"))
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    report = {
        "command": " ".join(["experiments/anchor_choice.py", *sys.argv[1:]]),
        "split": "valid",
        "metric": "release (table 3), greedy",
        "arms": {},
    }
    for arm in ARMS:

        def anchor(cur: dict, arm=arm) -> None:
            cur["train"]["anchor"] = arm

        seconds = train_arm(
            stage3_curriculum(args.run, args.root, work, arm, args.steps, args.loss_examples, anchor), work, arm
        )
        last, _ = last_log(work, arm)
        final = str(work / arm / "run" / "final")
        report["arms"][arm] = {
            "train_seconds": round(seconds, 1),
            "steps": last.get("step"),
            "stage_tokens": last.get("stage_tokens"),
            "stage_examples": last.get("stage_examples"),
            "tokens_per_example_trained": round(last["stage_tokens"] / last["stage_examples"], 1)
            if last.get("stage_examples")
            else None,
            "padding_share": last.get("padding_share"),
            "valid_loss": stage_eval(work, arm, args.root),
            "decoded": {
                os.path.relpath(b, args.root): decode(final, b, str(work / arm / f"answers-{i}.jsonl"), args.limit)
                for i, b in enumerate(builds(args.run, args.root))
            },
        }
        print(arm, json.dumps(report["arms"][arm]), flush=True)
    a, b = report["arms"]["example"], report["arms"]["token"]
    report["token_minus_example"] = {
        "valid_loss": differences(a["valid_loss"], b["valid_loss"]),
        "decoded": {
            f"{build}/{name}": differences(
                {k: v[k] for k in ("output_accuracy", "trace_accuracy")}, b["decoded"][build][name], 2
            )
            for build, sets in a["decoded"].items()
            for name, v in sets.items()
        },
    }
    write_json(args.out, report)
    print(json.dumps(report["token_minus_example"], indent=1))


if __name__ == "__main__":
    main()
