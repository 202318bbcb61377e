"""Does the packed, fixed-shape row step train as well as the step it replaced? The CPU-hour
recipe at equal steps, both ways.

    .venv/bin/python experiments/step_parity.py --data runs/quality/data-aug3 [--scale 0.25] [--baseline 67272cb]
        [--limit 300] [--work runs/step-parity] [--out benchmarks/results/step-parity-cpu.json]

Two arms train the same curriculum (curricula/recipes/cpu-hour.yaml, every stage's steps
times `--scale`) on the same data with the same tokenizer (trained once, on a bounded
sample, `codeexecutor tokenizer`) and seed, each with its own checkout's training loop:

- `padded`: the commit before rows (`--baseline`, a git worktree under runs/): batches of
  similar-length examples padded together, DeepSpeed's engine;
- `rows`: this checkout: the same examples back to back in rows of `train.max_tokens`
  tokens, the torch engine, the tile attention of a CPU.

The sampler picks the same examples in both (tests/test_train.py pins it), so they see
the same data in the same order; only the step's arithmetic differs. Both models are then
decoded by this checkout (greedy, the release's metric) on the first `--limit` examples
of the seeded sample of every set's **valid** split, never the test split, and their
held-out losses and step times are set side by side. A trained arm is kept and a killed
one resumes (each trains through its loop's own checkpoints); decoded answers are
journaled.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # _common: the baseline's worktree
from _common import worktree  # noqa: E402

RECIPE = ROOT / "curricula" / "recipes" / "cpu-hour.yaml"
RECIPE_DATA = "runs/quality/data-aug3"  # the recipe's data.dir


def curriculum(data: pathlib.Path, work: pathlib.Path, arm: str, scale: float, tokenizer: pathlib.Path) -> pathlib.Path:
    import yaml

    cur = yaml.safe_load(RECIPE.read_text())
    for section in ("data", "tokenizer", "score"):  # the recipe's own; both loops read a plain curriculum
        cur.pop(section, None)
    cur["model"]["tokenizer"] = str(tokenizer)
    cur["train"].update(output_dir=str(work / arm / "run"), save_every=500)
    for stage in cur["stages"]:
        stage.pop("share", None)
        stage["steps"] = max(1, round(stage["steps"] * scale))
        stage["warmup"] = max(1, min(stage["warmup"], stage["steps"] // 10))
        for src in stage["sources"]:
            src["path"] = str(data / src["path"])  # the recipe's paths are relative to its data.dir
            if "hardest" in src:
                src["mine_from"] = max(1, round(src["mine_from"] * scale))
                src["hardest"] = max(1, round(src["hardest"] * scale))
    path = work / arm / "curriculum.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cur, sort_keys=False))
    return path


def train(arm: str, cur: pathlib.Path, tree: pathlib.Path, ds_config: str) -> dict:
    run = cur.parent / "run"
    if not (run / "final" / "config.json").exists():
        env = {**os.environ, "PYTHONPATH": str(tree), "DS_ACCELERATOR": "cpu"}
        t = time.time()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "codeexecutor.training",
                "--curriculum",
                str(cur),
                "--ds-config",
                str(ROOT / "ds_configs" / ds_config),
            ],
            cwd=tree,
            env=env,
            check=True,
        )
        print(f"[step_parity] {arm} trained in {time.time() - t:.0f} s", flush=True)
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    ends = {}
    for row in log:
        if "loss" in row:
            ends[row["stage"]] = row
    return {
        "final": str(run / "final"),
        "stages": {
            name: {
                "global_step": r["step"],
                "loss": round(r["loss"], 4),
                "seconds": round(r["stage_seconds"], 1),
                "tokens": r["stage_tokens"],
            }
            for name, r in ends.items()
        },
        "stage_end_eval": [r["eval"] for r in log if "eval" in r],
    }


def decode(model: str, data: pathlib.Path, answers: pathlib.Path, limit: int) -> dict:
    from codeexecutor.generation.decoding import GREEDY
    from eval.evaluate import EvalOptions, evaluate_model

    out = {}
    for build in ("singleline", "tutorial", "codenetmut", "functions"):
        if not (data / build).is_dir():
            continue
        report = evaluate_model(
            model,
            str(data / build),
            split="valid",
            limit=limit,
            decoding=GREEDY,
            progress=False,
            options=EvalOptions(answers=str(answers.with_name(f"{answers.stem}-{build}.jsonl"))),
        )
        for name, e in report["datasets"].items():
            out[name] = {
                "examples": e["examples"],
                **{k: e["table3"].get(k) for k in ("trace_accuracy", "output_accuracy")},
                "unfinished": (e.get("unfinished") or {}).get("share"),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / RECIPE_DATA))
    ap.add_argument("--scale", type=float, default=0.25, help="each stage's steps are the recipe's times this")
    ap.add_argument("--baseline", default="67272cb")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--work", default=str(ROOT / "runs" / "step-parity"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "step-parity-cpu.json"))
    args = ap.parse_args()
    data, work = pathlib.Path(args.data).resolve(), pathlib.Path(args.work).resolve()
    tokenizer = work / "tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        cur = curriculum(data, work, "tokenizer-source", args.scale, tokenizer)
        subprocess.run(
            [sys.executable, "-m", "codeexecutor", "tokenizer", "--curriculum", str(cur), "--out", str(tokenizer)],
            cwd=ROOT,
            check=True,
        )
    arms = {"padded": (worktree(args.baseline), "single.json"), "rows": (ROOT, "single.json")}
    report = {
        "recipe": str(RECIPE.relative_to(ROOT)),
        "scale": args.scale,
        "baseline": args.baseline,
        "split": "valid",
        "limit": args.limit,
        "metric": "release",
        "decoding": "greedy",
        "arms": {},
    }
    for arm, (tree, ds) in arms.items():
        cur = curriculum(data, work, arm, args.scale, tokenizer)
        entry = train(arm, cur, tree, ds)
        entry["valid"] = decode(entry["final"], data, work / arm / "answers.jsonl", args.limit)
        report["arms"][arm] = entry
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps({arm: entry["valid"]}), flush=True)
    print(args.out)


if __name__ == "__main__":
    main()
