"""Benchmark: the mutation engine on the real contest programs of ../shared/data.

1. Mutants generated per second on one core (parse + sites + edits + re-parse + compile
   + dedup), with the paper's procedure (n=20 attempts, p=0.5, all operators).
2. Executed mutants per second through the sandbox pool with 2 workers (each mutant on
   its problem's first sample input, traced).
3. Yield per operator: mutants made with that operator alone, executed, as shares of
   ok / error / timeout / trace_limit / other; and the overall yield of executable
   (status ok) deduplicated mutants per 20 attempts, beside the paper's
   3.2 M / (387 k x 20) = 41%.

    .venv/bin/python benchmarks/bench_mutation.py [--programs 300] [--yield-programs 120]

Writes benchmarks/results/bench_mutation.json.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from collections import Counter

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import DATA, load_programs, write_report  # noqa: E402

from codeexecutor.execution import ExecutorPool, Program  # noqa: E402
from mutation import OPERATORS, MutationError, MutationStats, mutate  # noqa: E402

PAPER_YIELD = 3.2e6 / (387e3 * 20)


def generation_rate(programs) -> dict:
    stats = MutationStats()
    start = time.process_time()
    made = []
    for i, (src, stdin) in enumerate(programs):
        try:
            for m in mutate(src, n=20, seed=0, stats=stats):
                made.append((m.code, stdin, i))
        except MutationError:
            pass
    cpu = time.process_time() - start
    return {
        "cpu_s": cpu,
        "mutants": len(made),
        "attempts": stats.attempts,
        "mutants_per_s_per_core": len(made) / cpu,
        "attempts_per_s_per_core": stats.attempts / cpu,
        "stats": stats.to_json(),
    }, made


def execute(mutants, workers: int) -> tuple[float, Counter]:
    statuses = Counter()
    with ExecutorPool(workers, prestart=("numpy",)) as pool:
        start = time.perf_counter()
        for _, r in pool.execute_many(Program(code, stdin) for code, stdin, _ in mutants):
            statuses[r.status.value] += 1
        return time.perf_counter() - start, statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--yield-programs", type=int, default=120)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"bench_mutation: {DATA} not found: the benchmark runs on the shared real programs")
    programs = load_programs(args.programs, seed=1)
    gen, made = generation_rate(programs)
    print(
        f"generation: {gen['mutants']} mutants ({gen['attempts']} attempts) from {len(programs)} programs "
        f"in {gen['cpu_s']:.2f} CPU s = {gen['mutants_per_s_per_core']:.0f} mutants/s/core "
        f"({gen['attempts_per_s_per_core']:.0f} attempts/s/core)"
    )
    wall, statuses = execute(made, args.workers)
    exec_rate = len(made) / wall
    print(
        f"execution: {len(made)} mutants in {wall:.1f} s with {args.workers} workers "
        f"= {exec_rate:.0f} executed mutants/s"
    )
    ok_share = statuses["ok"] / max(1, len(made))
    overall_yield = statuses["ok"] / (len(programs) * 20)
    print(
        f"all operators: {dict(statuses)}; ok {ok_share:.1%} of mutants; executable deduplicated mutants per attempt "
        f"{overall_yield:.1%} (paper: {PAPER_YIELD:.1%})"
    )

    table = {}
    subset = programs[: args.yield_programs]
    print(f"\nyield per operator ({len(subset)} programs, n=20, that operator alone):")
    print(f"{'op':5} {'mutants':>8} {'ok':>7} {'error':>7} {'timeout':>8} {'trace_lim':>9} {'other':>6}")
    for name in OPERATORS:
        ms = []
        for src, stdin in subset:
            try:
                ms += [(m.code, stdin, 0) for m in mutate(src, n=20, seed=0, operators=[name])]
            except MutationError:
                pass
        _, st = execute(ms, args.workers) if ms else (0, Counter())
        total = max(1, len(ms))
        other = len(ms) - st["ok"] - st["error"] - st["timeout"] - st["trace_limit"]
        row = {
            "mutants": len(ms),
            **{k: st[k] / total for k in ("ok", "error", "timeout", "trace_limit")},
            "other": other / total,
        }
        table[name] = row
        print(
            f"{name:5} {len(ms):8d} {row['ok']:7.1%} {row['error']:7.1%} {row['timeout']:8.1%} "
            f"{row['trace_limit']:9.1%} {row['other']:6.1%}"
        )
    report = {
        "programs": len(programs),
        "generation": gen,
        "executed_per_s": exec_rate,
        "workers": args.workers,
        "statuses_all_operators": dict(statuses),
        "ok_share": ok_share,
        "yield_per_attempt": overall_yield,
        "paper_yield_per_attempt": PAPER_YIELD,
        "per_operator": table,
    }
    write_report("bench_mutation", report)


if __name__ == "__main__":
    main()
