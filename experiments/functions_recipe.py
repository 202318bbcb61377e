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
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _stage3 import differences, stage3_curriculum, stage_eval, train_arm, write_json  # noqa: E402


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
        train = [
            i
            for i, (c, s, g) in enumerate(zip(corpus, rows["split"], rows["problem_id"]))
            if s == "train" and c != args.hold_out and g not in held
        ]
        out = [i for i, c in enumerate(corpus) if c == args.hold_out]
        datasets.DatasetDict({"train": rows.select(train)}).save_to_disk(str(work / "larger" / name))
        if out:
            datasets.DatasetDict({"test": rows.select(out)}).save_to_disk(str(work / "heldout" / name))
        sizes[name] = {
            "train_rows_kept": len(train),
            "held_out_package_rows": len(out),
            "dropped_as_held_out_by_today": sum(
                1 for s, g in zip(rows["split"], rows["problem_id"]) if s == "train" and g in held
            ),
        }
    return {"held_out_modules_of_today": len(held), "sizes": sizes}


def curriculum(args, work: pathlib.Path, arm: str) -> pathlib.Path:
    def larger(cur: dict) -> None:  # the functions weights split between today's set and BUILD's rows
        stage = cur["stages"][0]
        extra = []
        for src in stage["sources"]:
            name = os.path.basename(src["path"])
            if name in ("functions", "functions_errors") and "larger" not in src["path"]:
                src["weight"] = src.get("weight", 1.0) / 2
                extra.append({**src, "path": str(work / "larger" / name)})
        stage["sources"] += extra

    return stage3_curriculum(
        args.run, args.root, work, arm, args.steps, args.loss_examples, larger if arm == "larger" else None
    )


def heldout_loss(work: pathlib.Path, arm: str, examples: int) -> dict:
    from codeexecutor.generation import TraceGenerator
    from codeexecutor.training.config import Source, Stage
    from codeexecutor.training.evaluation import StageEvaluator

    gen = TraceGenerator(str(work / arm / "run" / "final"))
    sources = [
        Source(str(work / "heldout" / n), "codenet")
        for n in ("functions", "functions_errors")
        if (work / "heldout" / n).is_dir()
    ]
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
        seconds = train_arm(curriculum(args, work, arm), work, arm)
        report["arms"][arm] = {
            "train_seconds": round(seconds, 1),
            "valid_loss": stage_eval(work, arm, args.root),
            "held_out_package_loss": heldout_loss(work, arm, args.loss_examples),
        }
        print(arm, json.dumps(report["arms"][arm]), flush=True)
    a, b = report["arms"]["today"], report["arms"]["larger"]
    report["larger_minus_today"] = {
        "valid_loss": differences(a["valid_loss"], b["valid_loss"]),
        "held_out_package_loss": differences(a["held_out_package_loss"], b["held_out_package_loss"]),
    }
    write_json(args.out, report)
    print(json.dumps(report["larger_minus_today"], indent=1))


if __name__ == "__main__":
    main()
