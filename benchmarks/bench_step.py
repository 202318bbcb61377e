"""Benchmark: the training step and the decoder, against the step of an earlier commit in the same run.

    .venv/bin/python benchmarks/bench_step.py [--baseline 67272cb] [--data DIR] [--steps 20]

On the CPU, at toy width (6 layers of width 16: compute near zero, so what is left is the
host's work), each arm runs the real training loop of its checkout for a stage of
CodeNetMut-like rows (`_step_probe.py`; the baseline's checkout is a git worktree of that
commit under runs/) and reports per optimizer step: the host's waits for the device
(`.item()`, `bool()`, `nonzero`, boolean indexing, `synchronize`, ...), the operators that
do work on a device, host milliseconds, the distinct batch shapes per stage, and the
compiler's graph breaks. The arms:

* `baseline`: the earlier commit under the draw's ZeRO-2 bf16 DeepSpeed config (its own);
* `eager`: this checkout as it trains on a CPU (rows narrowed to the data);
* `fixed`: this checkout's GPU layout (one shape) before compiling;
* `compiled`: the same, compiled whole (`train.compile: true`);
* `deepspeed`: the GPU layout through the DeepSpeed engine, ZeRO-2 bf16 (the multi-GPU path).

    .venv/bin/python benchmarks/bench_step.py --speed [--runs small:49152 ...] [--decode 300] \\
        [--curriculum C] [--out FILE]

on a CUDA machine: tokens/s and MFU of `small` and `base` at 48 k and 192 k tokens a step
between steps 20 and 40 (the compiled row step with FlexAttention, fused AdamW, bf16
autocast; rows drawn from the curriculum's last stage when given, else synthetic rows of
CodeNetMut-like lengths), the compile seconds, DeepSpeed's step beside the torch one, and
greedy decoding's milliseconds per step at a batch of 300 (CUDA graph against eager)
(`_step_speed.py`). A GPU lease's second call runs it (gpu_run/measure.py); on a CPU it runs
the same code at the sizes given (its rehearsal). Writes
benchmarks/results/bench_step-<device>.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import ROOT, device_label, machine, worktree, write_report  # noqa: E402

BASELINE = "67272cb"  # the last commit before the packed, compiled step: host-bound on the H100 draws
ARMS = {  # name: (checkout, ds config, train options, probe flags)
    "baseline": ("baseline", "zero2_bf16.json", {}, ["--count"]),
    "eager": ("current", "zero2_bf16.json", {}, ["--count"]),
    "fixed": ("current", "zero2_bf16.json", {}, ["--count", "--fixed"]),
    "compiled": ("current", "zero2_bf16.json", {"compile": True}, []),
    "deepspeed": ("current", "zero2_bf16.json", {"engine": "deepspeed"}, ["--count", "--fixed"]),
}


# The two stages each arm trains: `codenet`, rows of 4096 tokens of CodeNetMut programs and
# crashes, where operators, waits and batch shapes are counted; `host`, rows of 256 tokens
# of SingleLine examples (code cut at 64 tokens, traces at 128), whose kernels cost next to
# nothing at toy width, so that a step's milliseconds are the host's (Python, autograd,
# dispatching operators), not the CPU's arithmetic.
# The `codenet` stage runs under each arm's DeepSpeed config (the draw's ZeRO-2 bf16), the
# `host` stage under ZeRO-2 in float32 (ds_configs/cpu.json): this CPU has no bf16
# arithmetic, and emulating it would time kernels, not the host.
CONFIGS = {
    "codenet": (
        4096,
        [("codenetmut/codenetmut", "codenet", 0.7), ("codenetmut/errors", "codenet", 0.3)],
        None,
        (256, 768),
    ),
    "host": (256, [("singleline/singleline", "singleline", 1.0)], "cpu.json", (64, 128)),
}


def probe_curriculum(data: pathlib.Path, run: pathlib.Path, steps: int, train: dict, config: str) -> pathlib.Path:
    import yaml

    tokens, sources, _, (code, trace) = CONFIGS[config]
    cur = {
        "model": {
            "preset": "toy",
            "vocab_size": 600,
            "max_code_length": code,
            "max_trace_length": trace,
            "dropout": 0.0,
            "positions": "rotary",
        },
        "train": {
            "output_dir": str(run),
            "max_tokens": tokens,
            "log_every": 1000,
            "checkpoints": False,
            "eval_examples": 0,
            **train,
        },
        "stages": [
            {
                "name": config,
                "steps": steps,
                "lr": 5e-4,
                "warmup": 2,
                "sources": [
                    {"path": str(data / path), "task": task, "weight": weight} for path, task, weight in sources
                ],
            }
        ],
    }
    path = run.with_suffix(".yaml")
    run.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cur))
    return path


def cpu_arms(data: pathlib.Path, baseline: str, steps: int, arms: list[str]) -> dict:
    return {config: _arms(data, baseline, steps, arms, config) for config in CONFIGS}


def _arms(data: pathlib.Path, baseline: str, steps: int, arms: list[str], config: str) -> dict:
    work = ROOT / "runs" / "bench_step" / config
    trees = {"current": ROOT, "baseline": worktree(baseline)}
    out = {}
    print(f"-- {config}: rows of {CONFIGS[config][0]} tokens", flush=True)
    for name in arms:
        tree, ds, train, flags = ARMS[name]
        ds = CONFIGS[config][2] or ds
        run = work / name
        cur = probe_curriculum(data, run, 2 * steps + 5, train, config)
        result = work / f"{name}.json"
        result.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            str(ROOT / "benchmarks" / "_step_probe.py"),
            "--curriculum",
            str(cur),
            "--ds-config",
            str(trees[tree] / "ds_configs" / ds),
            "--run",
            str(run),
            "--first",
            str(steps),
            "--last",
            str(2 * steps),
            "--out",
            str(result),
            *flags,
        ]
        env = {"PYTHONPATH": str(trees[tree]), "DS_ACCELERATOR": "cpu", "PATH": "/usr/bin:/bin"}
        import os

        env = {**os.environ, **env}
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=trees[tree], env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            out[name] = {"error": (proc.stderr or proc.stdout)[-2000:]}
            print(f"{name}: failed\n{out[name]['error']}", flush=True)
            continue
        out[name] = {**json.loads(result.read_text()), "seconds": round(time.perf_counter() - t, 1)}
        r = out[name]
        print(
            f"{name:10} waits/step {r.get('waits_per_step', '-'):>6}  ops/step {r.get('ops_per_step', '-'):>7}  "
            f"host ms/step {r['wall_ms_per_step']:>7}  shapes {r['shapes_per_stage']}  "
            f"graph breaks {r.get('graph_breaks', '-')}",
            flush=True,
        )
    base = out.get("baseline", {})
    ratios = {}
    for name, r in out.items():
        if name == "baseline" or "error" in r or "error" in base or not base:
            continue
        ratios[name] = {
            k: round(r[k] / base[k], 3)
            for k in ("wall_ms_per_step", "cpu_ms_per_step", "ops_per_step")
            if r.get(k) is not None and base.get(k)
        }
    return {"arms": out, "against_baseline": ratios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=BASELINE, help="the commit whose step the CPU arms are measured against")
    ap.add_argument(
        "--data",
        default=str(ROOT / "demo_out" / "data"),
        help="built datasets with codenetmut/{codenetmut,errors} (default: the demo's, built if missing)",
    )
    ap.add_argument("--steps", type=int, default=20, help="measured optimizer steps, after as many warm-up steps")
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--speed", action="store_true", help="the speed measurements instead (made for a CUDA device)")
    ap.add_argument(
        "--runs",
        nargs="+",
        metavar="PRESET:TOKENS",
        help="--speed: the steps measured, in order (default small:49152 base:49152 small:196608 base:196608)",
    )
    ap.add_argument(
        "--decode", type=int, default=300, metavar="BATCH", help="--speed: greedy decoding's batch (0: none)"
    )
    ap.add_argument("--no-deepspeed", action="store_true", help="--speed: leave out DeepSpeed's step")
    ap.add_argument(
        "--curriculum", help="--speed: rows drawn from this curriculum's last stage (default: synthetic rows)"
    )
    ap.add_argument("--budget", type=float, default=400, help="--speed: seconds the measurements may take in all")
    ap.add_argument("--out", help="the report's path (default benchmarks/results/bench_step-<device>.json)")
    args = ap.parse_args()
    report = {"machine": machine(), "command": " ".join(sys.argv)}
    if args.speed:
        from _step_speed import RUNS, speed_report

        runs = [(r.split(":")[0], int(r.split(":")[1])) for r in args.runs] if args.runs else RUNS
        report.update(speed_report(args.curriculum, args.budget, args.out, runs, args.decode, not args.no_deepspeed))
    else:
        data = pathlib.Path(args.data)
        if not (data / "codenetmut" / "codenetmut").is_dir():
            subprocess.run([sys.executable, "-m", "codeexecutor.demo", "--only", "data"], cwd=ROOT, check=True)
        report.update(
            baseline_commit=args.baseline,
            data=str(data),
            steps=args.steps,
            **cpu_arms(data, args.baseline, args.steps, args.arms),
        )
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    else:
        print(write_report(f"bench_step-{device_label()}", report))


if __name__ == "__main__":
    main()
