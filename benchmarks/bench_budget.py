"""Benchmark: how well `codeexecutor pretrain --minutes` keeps its budget when the machine's
speed changes during the run, against the budget of an earlier commit in the same run.

Today's budget fixes a stage's steps after its warm-up and fits them again at its log
steps to the moment that fix planned (training/budget.py); the baseline (a git worktree,
default 599d765) fixed them once. Each arm trains the same toy run (the demo's contest
programs, `tiny`, three stages of shares 0.5 / 0.25 / 0.25, prepared once by `pretrain
--until tokenize`) in the same budget, in each scenario of a CPU hog (one busy process a
core) started and stopped at fractions of the budget, counted from the run's first
logged step:

  quiet       no hog: what a quiet machine gets
  slows       a hog from 0.3 of the budget to the end: the draw's danger, a stage planned
              fast that runs slow and pushes the end past the call's limit
  busy-start  a hog over the first 0.2: a warm-up measured on a busy machine, which
              leaves the stage fewer steps than its share buys once the machine is quiet

Per arm and scenario: the training's seconds on the budget's clock at its last step
against the budget (`overrun_s`), each stage's planned and trained steps and its seconds
against its share, and the refits.

    .venv/bin/python benchmarks/bench_budget.py [--minutes 1.5] [--baseline 599d765]

writes results/bench_budget.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import yaml
from _common import ROOT, machine, worktree, write_report  # noqa: E402

WORK = ROOT / "runs" / "bench-budget"
SCENARIOS = {"quiet": None, "slows": (0.3, None), "busy-start": (0.0, 0.2)}
SHARES = (0.5, 0.25, 0.25)


def recipe(path) -> str:
    src = {"path": "codenetmut/codenetmut", "task": "codenet"}
    raw = {
        "model": {"preset": "tiny", "vocab_size": 400, "max_code_length": 128, "max_trace_length": 256, "dropout": 0.0},
        "train": {
            "output_dir": str(WORK / "unused"),
            "max_tokens": 1024,
            "log_every": 10,
            "save_every": 1000,
            "eval_examples": 0,
        },
        "data": {
            "dir": str(WORK / "data"),
            "builds": {
                "codenetmut": {"kind": "codenetmut", "codenet": [str(ROOT / "curricula" / "demo")], "mutants": 2}
            },
        },
        "tokenizer": {"sample": 400},
        "score": {"limit": 0},
        "stages": [
            {"name": f"s{i + 1}", "steps": 100, "share": share, "lr": 1e-3, "warmup": 5, "sources": [src]}
            for i, share in enumerate(SHARES)
        ],
    }
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _env(tree) -> dict:
    return {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": str(os.cpu_count()), "PYTHONPATH": str(tree)}


class Hog:
    """One busy Python process a core while on."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def on(self) -> None:
        if not self.procs:
            self.procs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)
            ]

    def off(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []


def run(tree, cfg: str, prep, minutes: float, scenario) -> dict:
    out = WORK / "runs" / f"{tree.name}-{scenario}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(prep, out)
    hog, budget = Hog(), minutes * 60
    window = SCENARIOS[scenario]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "pretrain",
            "--recipe",
            cfg,
            "--out",
            str(out),
            "--resume",
            "--minutes",
            str(minutes),
            "--no-score",
        ],
        cwd=tree,
        env=_env(tree),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    log = out / "run" / "train_log.jsonl"
    while proc.poll() is None and not (log.exists() and log.stat().st_size):  # the first logged step
        time.sleep(0.05)
    t0 = time.time()
    while proc.poll() is None:
        now = (time.time() - t0) / budget
        if window and window[0] <= now and (window[1] is None or now < window[1]):
            hog.on()
        else:
            hog.off()
        time.sleep(0.1)
    hog.off()
    reader.join()
    if proc.returncode:
        raise SystemExit(f"bench_budget: {tree.name} failed in {scenario}:\n{''.join(err[-30:])}")
    plan = json.loads((out / "run" / "plan.json").read_text())
    rows = [json.loads(line) for line in log.read_text().splitlines() if '"loss"' in line]
    ends = {}
    for r in rows:
        ends[r["stage"]] = r
    stages = {}
    for (name, fixed), share in zip(plan["stages"].items(), SHARES):
        stages[name] = {
            "planned": fixed.get("planned", fixed["steps"]),
            "trained": ends[name]["step"] - sum(s["trained"] for s in stages.values()),
            "seconds": round(ends[name]["stage_seconds"], 1),
            "share_seconds": round(share * budget, 1),
            "refits": fixed.get("refits", 0),
        }
    return {
        "budget_s": budget,
        "spent_s": round(plan["spent"], 1),
        "overrun_s": round(plan["spent"] - budget, 1),
        "stages": stages,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=1.5, help="each run's budget")
    ap.add_argument("--baseline", default="599d765", help="the commit whose budget fixed the steps once")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    cfg = recipe(WORK / "recipe.yaml")
    prep = WORK / "prep"
    if not (prep / "tokenized" / "curriculum.yaml").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "codeexecutor",
                "pretrain",
                "--recipe",
                cfg,
                "--out",
                str(prep),
                "--until",
                "tokenize",
                "--resume",
            ],
            cwd=ROOT,
            env=_env(ROOT),
            check=True,
            capture_output=True,
        )
    trees = {"current": ROOT, "baseline": worktree(args.baseline)}
    report = {
        "machine": machine(),
        "minutes": args.minutes,
        "baseline": args.baseline,
        "shares": SHARES,
        "scenarios": {s: SCENARIOS[s] for s in args.scenarios},
        "arms": {},
    }
    for scenario in args.scenarios:
        for arm, tree in trees.items():  # the arms in turn, each scenario on the same machine state
            result = run(tree, cfg, prep, args.minutes, scenario)
            report["arms"].setdefault(scenario, {})[arm] = result
            print(
                f"{scenario:<11} {arm:<9} spent {result['spent_s']:>6} s of {result['budget_s']:.0f} "
                f"(overrun {result['overrun_s']:+.1f}) "
                + " ".join(
                    f"{n} {s['trained']}/{s['planned']} {s['seconds']}s/{s['share_seconds']}s"
                    for n, s in result["stages"].items()
                ),
                flush=True,
            )
    print(write_report("bench_budget", report))


if __name__ == "__main__":
    main()
