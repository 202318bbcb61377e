"""Benchmark: the CodeNetMut build end to end (read, filter, inline stdin, trace the
original, mutate, execute and journal the mutants, write the datasets) on the real
programs of ../shared/data with 2 workers; executed mutants per second, extrapolated to
the paper's 3.2 M mutants on one 16-core node (assuming throughput scales with cores,
which the fork-per-program pool does up to memory bandwidth).

    .venv/bin/python benchmarks/bench_build.py [--programs 200] [--mutants 20]

Writes benchmarks/results/bench_build.json (and the build itself to a temp folder).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import DATA, write_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--mutants", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", help="build folder (default: a temp folder)")
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"bench_build: {DATA} not found")
    from curricula.codenet import CodeNetBuilder
    from curricula.common import BuildSetup

    out = args.out or tempfile.mkdtemp(prefix="bench_build_")
    start = time.perf_counter()
    stats = CodeNetBuilder(
        str(DATA), out, mutants=args.mutants, setup=BuildSetup(workers=args.workers, limit=args.programs)
    ).run(progress=False)
    seconds = time.perf_counter() - start
    executed = stats["mutants_executed_this_run"]
    rate = executed / seconds
    per_core = rate / args.workers
    hours = 3.2e6 / (per_core * 16) / 3600
    report = {
        "programs": args.programs,
        "mutants_attempted_per_program": args.mutants,
        "workers": args.workers,
        "seconds": seconds,
        "mutants_executed": executed,
        "executed_per_s": rate,
        "hours_for_3_2M_on_16_cores": hours,
        "counts": stats["counts"],
        "datasets": stats["datasets"],
        "out": out,
    }
    print(
        f"end to end: {executed} mutants executed in {seconds:.1f} s with {args.workers} workers = {rate:.0f}/s "
        f"({per_core:.0f}/s per core); 3.2 M mutants on a 16-core node: {hours:.1f} h"
    )
    print(f"datasets: {stats['datasets']}")
    write_report("bench_build", report)


if __name__ == "__main__":
    main()
