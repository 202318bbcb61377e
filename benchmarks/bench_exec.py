"""Benchmark: traced executions per second of the warm fork-per-program pool.

On real contest programs (../shared/data/atcoder-python, first sample input each),
with 2 workers, against a baseline measured in the same run: a new `python3` process
per program running the same settrace tracer (2 at a time). The pool is warm (its
workers, a numpy-flavored one included, started before timing).

The speed of a shared VM drifts by 10-20% over tens of seconds, so the two are measured
in paired rounds: each round times the pool (the median of 3 passes over the programs;
a pass takes under a second, so one pass is at the mercy of where a slow program lands)
and then the baseline over the same programs. The ratio is the median of the rounds'
ratios; every pass and round is printed. Also reports the tracing overhead in-process
(traced vs untraced time of the same programs).

    .venv/bin/python benchmarks/bench_exec.py [--programs 300] [--workers 2] [--rounds 5]

Writes benchmarks/results/bench_exec.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from _common import DATA, ROOT, load_programs, write_report  # noqa: E402  (puts ROOT on sys.path)

from codeexecutor.execution import ExecutorPool, Program  # noqa: E402


def time_pool(pool: ExecutorPool, programs, passes: int = 3) -> tuple[float, dict, list[float]]:
    """Seconds of the median of `passes` timed passes over `programs`, the statuses of one
    pass, and every pass's seconds."""
    statuses: dict[str, int] = {}
    times = []
    for k in range(passes):
        start = time.perf_counter()
        for _, r in pool.execute_many(Program(s, i) for s, i in programs):
            if k == 0:
                statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
        times.append(time.perf_counter() - start)
    return statistics.median(times), statuses, times


def bench_per_process(programs, workers: int) -> float:
    helper = ROOT / "benchmarks" / "_trace_inprocess.py"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, (src, inp) in enumerate(programs):
            p, i = pathlib.Path(tmp, f"{k}.py"), pathlib.Path(tmp, f"{k}.in")
            p.write_text(src)
            i.write_text(inp)
            paths.append((p, i))

        def one(pair):
            try:
                out = subprocess.run(
                    [sys.executable, str(helper), "one", str(pair[0]), str(pair[1])],
                    env=env,
                    capture_output=True,
                    timeout=10,
                )
                json.loads(out.stdout or b"{}")  # the caller gets the trace, as from the pool
            except (subprocess.TimeoutExpired, ValueError):
                pass

        start = time.perf_counter()
        with cf.ThreadPoolExecutor(workers) as ex:
            list(ex.map(one, paths))
        return time.perf_counter() - start


def bench_overhead(programs) -> dict:
    helper = ROOT / "benchmarks" / "_trace_inprocess.py"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(programs, f)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(helper), "many", f.name], env=env, capture_output=True, text=True, timeout=600
    )
    os.unlink(f.name)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="paired pool/baseline rounds (the ratio is their median)")
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"bench_exec: {DATA} not found: the benchmark runs on the shared real programs")
    if args.rounds < 1:
        sys.exit("bench_exec: --rounds must be >= 1")
    programs = load_programs(args.programs)
    n = len(programs)
    trivial = [("x = 1\nprint(x)\n", "")] * 200
    rounds = []
    with ExecutorPool(args.workers, prestart=("numpy",)) as pool:
        pool.execute("pass\n")  # warm
        for k in range(args.rounds):
            pool_s, statuses, passes = time_pool(pool, programs)
            base_s = bench_per_process(programs, args.workers)  # the same programs, right after
            rounds.append(
                {"pool_per_s": n / pool_s, "pool_passes_per_s": [n / t for t in passes], "baseline_per_s": n / base_s}
            )
            r = rounds[-1]
            spread = ", ".join(f"{x:.0f}" for x in r["pool_passes_per_s"])
            print(
                f"round {k + 1}: pool {r['pool_per_s']:.1f} runs/s (median of {spread}), "
                f"baseline {r['baseline_per_s']:.1f} runs/s, ratio {r['pool_per_s'] / r['baseline_per_s']:.1f}x",
                flush=True,
            )
        # Fixed cost per run, on a trivial program: what the architecture itself costs.
        triv_pool_s, _, _ = time_pool(pool, trivial)
    triv_base_s = bench_per_process(trivial[:60], args.workers)
    triv_ratio = (len(trivial) / triv_pool_s) / (60 / triv_base_s)
    # only programs that finish quickly, so the overhead measures tracing, not timeouts
    fast = [p for p in programs if "sleep" not in p[0]][:200]
    overhead = bench_overhead(fast)
    ratios = [r["pool_per_s"] / r["baseline_per_s"] for r in rounds]
    pool_rate = statistics.median(r["pool_per_s"] for r in rounds)
    base_rate = statistics.median(r["baseline_per_s"] for r in rounds)
    report = {
        "programs": n,
        "workers": args.workers,
        "pool_traced_per_s": round(pool_rate, 1),
        "per_process_baseline_per_s": round(base_rate, 1),
        "ratio_vs_per_process": round(statistics.median(ratios), 2),
        "rounds": [
            {
                "pool_per_s": round(r["pool_per_s"], 1),
                "pool_passes_per_s": [round(x, 1) for x in r["pool_passes_per_s"]],
                "baseline_per_s": round(r["baseline_per_s"], 1),
                "ratio": round(q, 2),
            }
            for r, q in zip(rounds, ratios)
        ],
        "statuses": statuses,
        "trivial_program_ratio": round(triv_ratio, 1),
        "in_process_untraced_s": round(overhead["untraced_s"], 4),
        "in_process_traced_s": round(overhead["traced_s"], 4),
        "tracing_overhead_x": round(overhead["traced_s"] / max(overhead["untraced_s"], 1e-9), 2),
    }
    print(
        f"pool (warm fork per program, {args.workers} workers): {pool_rate:8.1f} traced runs/s (median of the rounds)"
    )
    print(f"baseline (new python3 per program, {args.workers} at a time): {base_rate:8.1f} traced runs/s")
    print(
        f"ratio: {report['ratio_vs_per_process']:.1f}x (median of the rounds: {', '.join(f'{q:.1f}' for q in ratios)})"
    )
    print(
        f"fixed cost per run (trivial program): pool {len(trivial) / triv_pool_s:.0f}/s "
        f"vs per-process {60 / triv_base_s:.0f}/s = {triv_ratio:.1f}x"
    )
    print(
        f"tracing overhead in-process: {report['tracing_overhead_x']:.2f}x "
        f"({overhead['untraced_s']:.3f} s untraced vs {overhead['traced_s']:.3f} s traced, best of 3, "
        f"over the {overhead['programs']} programs under the step limit)"
    )
    print(f"statuses: {statuses}")
    write_report("bench_exec", report)


if __name__ == "__main__":
    main()
