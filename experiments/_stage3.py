"""Arms of a stage-3 experiment: a finished run's last stage trained again from its stage-2 export.

Used by the experiments that compare two ways of training the CodeNetMut stage at equal steps
(functions_recipe.py, anchor_choice.py): each arm starts from RUN's `stage2-tutorial/` export
(`model.init`, its tokenizer), trains only RUN's last stage with the same seed and steps, and
keeps its own folder under WORK/ARM; an arm whose `final/` exists is not trained again, and
a killed one resumes from its latest checkpoint when the experiment is started again.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

from codeexecutor import atomic

ROOT = pathlib.Path(__file__).resolve().parent.parent


def stage3_curriculum(
    run: str, root: str, work: pathlib.Path, arm: str, steps: int | None, loss_examples: int, edit=None
) -> pathlib.Path:
    """RUN's last stage alone, its data paths made absolute under ROOT, for WORK/ARM; `edit(cur)` changes the arm."""
    import yaml

    cur = yaml.safe_load(open(os.path.join(run, "curriculum.yaml")))
    stage = cur["stages"][-1]
    for src in stage["sources"]:
        src["path"] = str(pathlib.Path(root) / src["path"])
    stage["steps"] = steps or stage["steps"]
    cur["stages"] = [stage]
    cur["model"]["init"] = os.path.join(run, "stage2-tutorial")
    cur["model"].pop("tokenizer", None)  # the init's
    cur["train"].update(
        output_dir=str(work / arm / "run"), eval_examples=loss_examples, eval_decode_examples=0, save_every=500
    )  # a killed arm goes on from its last 500 steps
    if edit is not None:
        edit(cur)
    path = work / arm / "curriculum.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cur, sort_keys=False))
    return path


def train_arm(path: pathlib.Path, work: pathlib.Path, arm: str) -> float:
    """Trains one arm with `codeexecutor pretrain` (unless it has its final model); its wall
    seconds, kept beside it."""
    seconds = work / arm / "train_seconds.txt"
    if (work / arm / "run" / "final").is_dir():
        return float(seconds.read_text()) if seconds.exists() else 0.0
    start = time.perf_counter()
    with open(work / arm / "train.log", "a") as log:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "codeexecutor",
                "pretrain",
                "--recipe",
                str(path),
                "--out",
                str(work / arm),
                "--resume",
                "--no-score",
                "--ds-config",
                str(ROOT / "ds_configs" / "single.json"),
            ],
            check=True,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu"},
        )
    seconds.write_text(f"{time.perf_counter() - start:.1f}")
    return float(seconds.read_text())


def last_log(work: pathlib.Path, arm: str) -> tuple[dict, dict]:
    """The arm's last training log line and its last evaluation (held-out loss per source)."""
    last, ev = {}, {}
    with open(work / arm / "run" / "train_log.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if "eval" in row:
                ev = row["eval"]
            elif "loss" in row:
                last = row
    return last, ev


def stage_eval(work: pathlib.Path, arm: str, root: str) -> dict:
    """Held-out loss per source at the stage's end (its valid split), named relative to ROOT or the work folder."""
    _, ev = last_log(work, arm)
    return {os.path.relpath(k, root if k.startswith(os.path.abspath(root)) else work): v["loss"] for k, v in ev.items()}


def differences(a: dict, b: dict, digits: int = 4) -> dict:
    """b - a for every key both hold a number for."""
    return {k: round(b[k] - v, digits) for k, v in a.items() if v is not None and b.get(k) is not None}


def write_json(path: str, report: dict) -> None:
    atomic.write_json(path, report, indent=1)
