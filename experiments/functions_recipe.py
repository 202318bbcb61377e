"""Does the larger functions set help or hurt? Stage 3 of a finished run, trained twice at equal steps.

    .venv/bin/python experiments/functions_recipe.py --run RUN --root ROOT --functions BUILD \
        --hold-out toolz-1.2.0 --work DIR [--steps 3083] [--out benchmarks/results/functions-recipe-cpu.json]

RUN is a finished run of the CPU-hour recipe (its `curriculum.yaml`, `stage2-tutorial/`
export); ROOT the folder its data paths are relative to; BUILD a `build functions` output
over the larger set of roots. Both arms start from RUN's stage-2 export (`model.init`) and
train only its last stage (CodeNetMut with SingleLine, Tutorial and the functions set),
the same steps, seed and batches:

- A, today's: the stage as RUN trained it;
- B, larger: the functions weights split in half between today's set and BUILD's training
  rows. BUILD's rows are first cut to what cannot leak: no row of the held-out package
  (`--hold-out`, a corpus name of BUILD), no row of a module that today's set holds out
  (its valid or test split), by module path.

Each arm ends with the stage's own evaluation (held-out loss per source on up to
`--loss-examples` valid examples: today's sources, so both arms are scored on the same
rows); then both final models get the held-out loss on the held-out package's programs,
which neither trained on. Writes a JSON with both arms' figures and the differences.
Resumes: an arm whose `final/` exists is not trained again.
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


def _module_path(problem_id: str) -> str:
    """The module path of one of today's split groups (CORPUS/PATH; a --lineage build's are PATH already)."""
    return problem_id.split("/", 1)[1]


def prepare(args, work: pathlib.Path) -> dict:
    """BUILD's training rows that cannot leak, and the held-out package's rows, as datasets."""
    import datasets

    today = pathlib.Path(args.root) / pathlib.Path(args.today)
    held = set()
    for name in ("functions", "functions_errors"):
        dd = datasets.load_from_disk(str(today / name))
        for split in ("valid", "test"):
            if split in dd:
                held |= {_module_path(p) for p in dd[split]["problem_id"]}  # --functions is a --lineage build: PATH
    sizes = {}
    for name in ("functions", "functions_errors"):
        dd = datasets.load_from_disk(os.path.join(args.functions, name))
        rows = datasets.concatenate_datasets([dd[s] for s in dd])
        corpus = [json.loads(p)["corpus"] for p in rows["provenance"]]
        train = [i for i, (c, s, g) in enumerate(zip(corpus, rows["split"], rows["problem_id"]))
                 if s == "train" and c != args.hold_out and g not in held]
        out = [i for i, c in enumerate(corpus) if c == args.hold_out]
        datasets.DatasetDict({"train": rows.select(train)}).save_to_disk(str(work / "larger" / name))
        if out:
            datasets.DatasetDict({"test": rows.select(out)}).save_to_disk(str(work / "heldout" / name))
        sizes[name] = {"train_rows_kept": len(train), "held_out_package_rows": len(out),
                       "dropped_as_held_out_by_today": sum(1 for s, g in zip(rows["split"], rows["problem_id"])
                                                          if s == "train" and g in held)}
    return {"held_out_modules_of_today": len(held), "sizes": sizes}


def curriculum(args, work: pathlib.Path, arm: str) -> pathlib.Path:
    import yaml

    cur = yaml.safe_load(open(os.path.join(args.run, "curriculum.yaml")))
    stage = cur["stages"][-1]
    root = pathlib.Path(args.root)
    for src in stage["sources"]:
        src["path"] = str(root / src["path"])
    if arm == "larger":
        extra = []
        for src in stage["sources"]:
            name = os.path.basename(src["path"])
            if name in ("functions", "functions_errors") and "larger" not in src["path"]:
                src["weight"] = src.get("weight", 1.0) / 2
                extra.append({**src, "path": str(work / "larger" / name)})
        stage["sources"] += extra
    stage["steps"] = args.steps or stage["steps"]
    cur["stages"] = [stage]
    cur["model"]["init"] = os.path.join(args.run, "stage2-tutorial")
    cur["model"].pop("tokenizer", None)  # the init's
    cur["train"].update(output_dir=str(work / arm / "run"), eval_examples=args.loss_examples, eval_decode_examples=0,
                        save_every=100000)
    path = work / arm / "curriculum.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cur, sort_keys=False))
    return path


def train(path: pathlib.Path, work: pathlib.Path, arm: str) -> float:
    """Trains one arm (unless it has its final model); its wall seconds, kept beside it."""
    seconds = work / arm / "train_seconds.txt"
    if (work / arm / "run" / "final").is_dir():
        return float(seconds.read_text()) if seconds.exists() else 0.0
    start = time.perf_counter()
    with open(work / arm / "train.log", "a") as log:
        subprocess.run([sys.executable, "-m", "codeexecutor.training", "--curriculum", str(path), "--ds-config",
                        str(ROOT / "ds_configs" / "single.json")], check=True, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu"})
    seconds.write_text(f"{time.perf_counter() - start:.1f}")
    return float(seconds.read_text())


def stage_eval(work: pathlib.Path, arm: str, root: str) -> dict:
    """Held-out loss per source at the stage's end (its valid split), named relative to ROOT or the work folder."""
    last = {}
    with open(work / arm / "run" / "train_log.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if "eval" in row:
                last = row["eval"]
    return {os.path.relpath(k, root if k.startswith(os.path.abspath(root)) else work): v["loss"] for k, v in last.items()}


def heldout_loss(work: pathlib.Path, arm: str, examples: int) -> dict:
    from codeexecutor.generation import TraceGenerator
    from codeexecutor.training.config import Source, Stage
    from codeexecutor.training.evaluation import StageEvaluator

    gen = TraceGenerator(str(work / arm / "run" / "final"))
    sources = [Source(str(work / "heldout" / n), "codenet") for n in ("functions", "functions_errors")
               if (work / "heldout" / n).is_dir()]
    ev = StageEvaluator(Stage("heldout", sources, 1), gen.encoder, "/", loss_examples=examples, decode_examples=0)
    return {os.path.basename(k): v["loss"] for k, v in ev.evaluate(gen.model, gen.device).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--root", required=True, help="the folder RUN's data paths are relative to")
    ap.add_argument("--today", default="runs/quality/data-depth/functions", help="today's functions build, under ROOT")
    ap.add_argument("--functions", required=True, help="the larger functions build")
    ap.add_argument("--hold-out", required=True, help="a corpus of BUILD neither arm trains on")
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, help="stage steps (default: RUN's)")
    ap.add_argument("--loss-examples", type=int, default=1024)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "functions-recipe-cpu.json"))
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join(["experiments/functions_recipe.py", *sys.argv[1:]])}
    if not (work / "larger" / "functions").exists():
        report["data"] = prepare(args, work)
        (work / "data.json").write_text(json.dumps(report["data"]))
    report["data"] = json.loads((work / "data.json").read_text())
    report["arms"] = {}
    for arm in ("today", "larger"):
        seconds = train(curriculum(args, work, arm), work, arm)
        report["arms"][arm] = {"train_seconds": round(seconds, 1), "valid_loss": stage_eval(work, arm, args.root),
                               "held_out_package_loss": heldout_loss(work, arm, args.loss_examples)}
        print(arm, json.dumps(report["arms"][arm]), flush=True)
    a, b = report["arms"]["today"], report["arms"]["larger"]
    report["larger_minus_today"] = {
        "valid_loss": {k: round(b["valid_loss"][k] - v, 4) for k, v in a["valid_loss"].items()
                       if v is not None and b["valid_loss"].get(k) is not None},
        "held_out_package_loss": {k: round(b["held_out_package_loss"][k] - v, 4)
                                  for k, v in a["held_out_package_loss"].items()
                                  if v is not None and b["held_out_package_loss"].get(k) is not None}}
    with open(args.out + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(json.dumps(report["larger_minus_today"], indent=1))


if __name__ == "__main__":
    main()
