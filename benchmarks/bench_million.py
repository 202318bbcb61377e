"""Benchmark: a build of a million executed examples through the cluster path, and a run that starts from it.

    .venv/bin/python benchmarks/bench_million.py [--work runs/million] [--shards 4] [--mutants 230] \
        [--curriculum curricula/recipes/million.yaml]

Where bench_scale.py times the data path on journals made by repeating a small build, this
executes the rows for real: both contest corpora, every program mutated `--mutants` times
(deduplicated, each mutant traced on the program's sample input), as a cluster would:

1. `shard I`: `codeexecutor build codenetmut --shard I/N`, one task per shard (here one
   after another, each on every core);
2. `merge`: `codeexecutor build merge` of the N shards;
3. `tokenizer`: `codeexecutor tokenizer`, trained on a bounded sample of the curriculum's
   sources;
4. `tokenize`: `codeexecutor tokenize`, every source's training rows once, into ids and a
   curriculum that reads them;
5. `first step`: `run_pretrain.sh --max-steps 1` on that curriculum in a folder of its
   own, twice: a new run, and the same again;
6. `train`: the curriculum's run, 100 steps, through `run_pretrain.sh`.

The curriculum names the functions set beside the build (`runs/million/functions`), which
this does not build. Each phase runs under GNU time, whose figures (wall and CPU seconds,
the largest process's peak RSS, which also counts memory-mapped Arrow pages) are kept in
WORK/time-PHASE*.txt; a phase with a finished record is not run again, and a killed shard
goes on from its journal when this is started again (its time is summed over the tries).
Writes WORK/million.json and benchmarks/results/million-build.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from _common import ROOT, write_report  # noqa: E402  (puts ROOT on sys.path)

CORPORA = ("atcoder-python", "atcoder-python-2")
GNU_TIME = "/usr/bin/time"
FIELDS = {
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall",
    "User time (seconds)": "user",
    "System time (seconds)": "system",
    "Maximum resident set size (kbytes)": "max_rss_kib",
    "Exit status": "exit",
}


def parse_time(path: str) -> dict:
    """GNU time's verbose report: wall and CPU seconds, the peak RSS, the exit status."""
    out = {}
    for line in open(path, encoding="utf-8"):
        key, _, value = line.strip().rpartition(": ")
        if key in FIELDS:
            out[FIELDS[key]] = value
    if "exit" not in out:
        return {}
    parts = [float(p) for p in out["wall"].split(":")]
    wall = sum(p * 60**k for k, p in enumerate(reversed(parts)))
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(float(out["user"]) + float(out["system"]), 1),
        "max_rss_mib": round(int(out["max_rss_kib"]) / 1024, 1),
        "exit": int(out["exit"]),
    }


def records(work: pathlib.Path, phase: str) -> list[str]:
    """The GNU time files of a phase's tries (`time-PHASE.txt`, then `time-PHASE.K.txt`), in order."""
    later = [p for p in glob.glob(str(work / f"time-{phase}.*.txt")) if re.fullmatch(r"\d+", p.split(".")[-2])]
    return glob.glob(str(work / f"time-{phase}.txt")) + sorted(later, key=lambda p: int(p.split(".")[-2]))


def tries(work: pathlib.Path, phase: str) -> list[dict]:
    """Every finished try of a phase, in order."""
    return [t for t in (parse_time(p) for p in records(work, phase)) if t]


def summed(work: pathlib.Path, phase: str) -> dict | None:
    runs = tries(work, phase)
    if not runs or runs[-1]["exit"] != 0:
        return None
    return {
        "wall_s": round(sum(r["wall_s"] for r in runs), 1),
        "cpu_s": round(sum(r["cpu_s"] for r in runs), 1),
        "max_rss_mib": max(r["max_rss_mib"] for r in runs),
        "tries": len(runs),
    }


def run_phase(work: pathlib.Path, phase: str, cmd: list[str], env: dict | None = None) -> dict:
    """Runs one phase under GNU time (unless it has finished before); its summed figures."""
    done = summed(work, phase)
    if done is not None:
        print(f"{phase}: done before ({done['wall_s']} s)", flush=True)
        return done
    k = len(records(work, phase))
    record = work / (f"time-{phase}.txt" if k == 0 else f"time-{phase}.{k}.txt")
    print(f"{phase}: {' '.join(cmd)}", flush=True)
    with open(work / f"{phase}.out", "a") as log:
        proc = subprocess.run(
            [GNU_TIME, "-v", "-o", str(record), *cmd],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_million: {phase} failed (exit {proc.returncode}); see {work / (phase + '.out')}, "
            "then run this again: finished phases are kept"
        )
    return summed(work, phase)


def disk_mib(path: pathlib.Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def build_figures(work: pathlib.Path, shards: int, mutants: int) -> dict:
    """Rows, mutants per program against attempts, and disk, from the shards' stats and folders."""
    stats = [json.load(open(work / f"shard{i}" / "stats.json")) for i in range(shards)]
    counts: dict[str, int] = {}
    for s in stats:
        for k, v in s["counts"].items():
            counts[k] = counts.get(k, 0) + v
    programs = counts.get("programs_used", 0)
    merged = json.load(open(work / "merged" / "stats.json"))
    rows = {name: sum(splits.values()) for name, splits in merged["datasets"].items()}
    executed = counts.get("mutants", 0) + programs  # every mutant ran, and every program's original
    return {
        "programs_used": programs,
        "attempts_per_program": mutants,
        "unique_mutants_per_program": round(counts.get("mutants", 0) / max(programs, 1), 1),
        "running_mutants_per_program": round(counts.get("mutant:ok", 0) / max(programs, 1), 1),
        "executed": executed,
        "rows": rows,
        "examples": sum(rows.values()),
        "statuses": {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("mutant:")},
        "splits": merged["datasets"],
        "disk_mib": {
            "shards": sum(disk_mib(work / f"shard{i}") for i in range(shards)),
            "shard_journals": round(
                sum((work / f"shard{i}" / "journal.jsonl").stat().st_size for i in range(shards)) / 2**20, 1
            ),
            "merged": disk_mib(work / "merged"),
            "merged_datasets": round(sum(disk_mib(work / "merged" / n) for n in rows), 1),
        },
    }


def train_figures(run: pathlib.Path) -> dict:
    rows = [json.loads(line) for line in open(run / "train_log.jsonl")]
    steps = [r for r in rows if "loss" in r and "eval" not in r]
    evals = [r["eval"] for r in rows if "eval" in r]
    return {
        "steps": steps[-1]["step"] if steps else 0,
        "losses": [(r["step"], round(r["loss"], 4)) for r in steps],
        "tokens_per_s": [round(r["tokens_per_s"], 1) for r in steps],
        "valid_loss": {os.path.basename(k): round(v["loss"], 4) for k, v in (evals[-1] if evals else {}).items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(ROOT / "runs" / "million"))
    ap.add_argument(
        "--data", default=str(ROOT.parent / "shared" / "data"), help="the folder holding the contest corpora"
    )
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--mutants", type=int, default=230, help="mutation attempts per program")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--curriculum", default="curricula/recipes/million.yaml")
    args = ap.parse_args()
    if not os.path.exists(GNU_TIME):
        raise SystemExit(f"bench_million: {GNU_TIME} not found; install GNU time (apt-get install time)")
    work = pathlib.Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "codeexecutor"]
    phases = {}
    for i in range(args.shards):
        phases[f"shard{i}"] = run_phase(
            work,
            f"shard{i}",
            [
                *cli,
                "build",
                "codenetmut",
                "--codenet",
                *[os.path.join(args.data, c) for c in CORPORA],
                "--out",
                str(work / f"shard{i}"),
                "--mutants",
                str(args.mutants),
                "--shard",
                f"{i}/{args.shards}",
                "--workers",
                str(args.workers),
            ],
        )
    phases["merge"] = run_phase(
        work,
        "merge",
        [*cli, "build", "merge", "--out", str(work / "merged"), *[str(work / f"shard{i}") for i in range(args.shards)]],
    )
    phases["tokenizer"] = run_phase(
        work, "tokenizer", [*cli, "tokenizer", "--curriculum", args.curriculum, "--out", str(work / "tokenizer")]
    )
    phases["tokenize"] = run_phase(
        work,
        "tokenize",
        [
            *cli,
            "tokenize",
            "--curriculum",
            args.curriculum,
            "--tokenizer",
            str(work / "tokenizer"),
            "--out",
            str(work / "tokenized"),
            "--workers",
            str(args.workers),
        ],
    )
    pretrain = ["bash", "run_pretrain.sh"]
    env = {"CURRICULUM": str(work / "tokenized" / "curriculum.yaml"), "DS_CONFIG": "ds_configs/cpu.json"}
    for phase in ("first_step", "first_step_again"):  # a run of one step in a folder of its own
        if summed(work, phase) is None:
            shutil.rmtree(work / "probe", ignore_errors=True)
        phases[phase] = run_phase(
            work, phase, [*pretrain, "--max-steps", "1"], {**env, "OUTPUT_DIR": str(work / "probe")}
        )
    phases["train"] = run_phase(work, "train", pretrain, {**env, "OUTPUT_DIR": str(work / "run")})
    report = {
        "command": " ".join(["benchmarks/bench_million.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "phases": phases,
        "build": build_figures(work, args.shards, args.mutants),
        "build_wall_s": round(sum(phases[f"shard{i}"]["wall_s"] for i in range(args.shards)), 1),
        "run": train_figures(work / "run"),
    }
    report["executed_per_s"] = round(report["build"]["executed"] / report["build_wall_s"], 1)
    (work / "million.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {work / 'million.json'} and {write_report('million-build', report)}")


if __name__ == "__main__":
    main()
