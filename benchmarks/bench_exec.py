"""Benchmark: traced executions per second of the warm fork-per-program pool.

On real contest programs (../shared/data/atcoder-python, first sample input each),
with 2 workers, against a baseline measured in the same run: a new `python3` process
per program running the same settrace tracer (2 at a time). The pool is warm (its
workers, a numpy-flavored one included, started before timing) and timed over 5 passes
(the median is the figure; every pass is printed). Also reports the tracing overhead
in-process (traced vs untraced time of the same programs).

    .venv/bin/python benchmarks/bench_exec.py [--programs 300] [--workers 2]

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


def bench_pool(programs, workers: int, passes: int = 5) -> tuple[float, dict, list[float]]:
    """Seconds of the median of `passes` timed passes over `programs` (a pass takes under
    a second, so one pass is at the mercy of where a slow program lands), the statuses of
    one pass, and every pass's seconds."""
    statuses: dict[str, int] = {}
    times = []
    with ExecutorPool(workers, prestart=("numpy",)) as pool:
        pool.execute("pass\n")  # warm
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
                out = subprocess.run([sys.executable, str(helper), "one", str(pair[0]), str(pair[1])], env=env, capture_output=True, timeout=10)
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
    out = subprocess.run([sys.executable, str(helper), "many", f.name], env=env, capture_output=True, text=True, timeout=600)
    os.unlink(f.name)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"bench_exec: {DATA} not found: the benchmark runs on the shared real programs")
    programs = load_programs(args.programs)
    pool_s, statuses, passes = bench_pool(programs, args.workers)
    pool_rate = len(programs) / pool_s
    base_s = bench_per_process(programs, args.workers)  # the same programs
    base_rate = len(programs) / base_s
    # Fixed cost per run, on a trivial program: what the architecture itself costs.
    trivial = [("x = 1\nprint(x)\n", "")] * 200
    triv_pool_s, _, _ = bench_pool(trivial, args.workers)
    triv_base_s = bench_per_process(trivial[:60], args.workers)
    triv_ratio = (len(trivial) / triv_pool_s) / (60 / triv_base_s)
    # only programs that finish quickly, so the overhead measures tracing, not timeouts
    fast = [p for p in programs if "sleep" not in p[0]][:200]
    overhead = bench_overhead(fast)
    report = {
        "programs": len(programs),
        "workers": args.workers,
        "pool_traced_per_s": round(pool_rate, 1),
        "pool_passes_per_s": [round(len(programs) / t, 1) for t in passes],
        "per_process_baseline_per_s": round(base_rate, 1),
        "ratio_vs_per_process": round(pool_rate / base_rate, 2),
        "statuses": statuses,
        "trivial_program_ratio": round(triv_ratio, 1),
        "in_process_untraced_s": round(overhead["untraced_s"], 4),
        "in_process_traced_s": round(overhead["traced_s"], 4),
        "tracing_overhead_x": round(overhead["traced_s"] / max(overhead["untraced_s"], 1e-9), 2),
    }
    spread = ", ".join(f"{len(programs) / t:.0f}" for t in passes)
    print(f"pool (warm fork per program, {args.workers} workers): {pool_rate:8.1f} traced runs/s (median of passes: {spread})")
    print(f"baseline (new python3 per program, {args.workers} at a time): {base_rate:8.1f} traced runs/s")
    print(f"ratio: {report['ratio_vs_per_process']:.1f}x")
    print(f"fixed cost per run (trivial program): pool {len(trivial) / triv_pool_s:.0f}/s vs per-process {60 / triv_base_s:.0f}/s = {triv_ratio:.1f}x")
    print(f"tracing overhead in-process: {report['tracing_overhead_x']:.2f}x "
          f"({overhead['untraced_s']:.3f} s untraced vs {overhead['traced_s']:.3f} s traced, best of 3, "
          f"over the {overhead['programs']} programs under the step limit)")
    print(f"statuses: {statuses}")
    write_report("bench_exec", report)


if __name__ == "__main__":
    main()
