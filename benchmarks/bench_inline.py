"""Static vs recorded stdin inlining on the shared contest corpora.

`codeexecutor trace` inlines stdin statically (execution/inline_static.py: no run); the
dataset builders record the reads in a sandboxed run (execution/inline.py). On every
program with a sample input this reports how often each applies, and, where both do,
the share whose inlined sources are identical (and, of the rest, the share whose
static version still runs to the same output). Writes benchmarks/results/bench_inline.json.
"""

from __future__ import annotations

import argparse
import collections
import time

from _common import ROOT, load_programs, write_report  # noqa: F401  (ROOT puts the project on sys.path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=100_000, help="at most this many programs (a fixed sample)")
    args = ap.parse_args()
    from codeexecutor.execution import ExecutorPool
    from codeexecutor.execution.inline import InlineError, inline_stdin
    from codeexecutor.execution.inline_static import inline_static

    programs = [(s, i) for s, i in load_programs(args.programs) if i]
    counts: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    start = time.perf_counter()
    with ExecutorPool(2) as pool:
        for src, stdin in programs:
            try:
                recorded = inline_stdin(src, stdin, pool=pool).source
            except InlineError:
                recorded = None
            try:
                static = inline_static(src, stdin).source
            except InlineError as exc:
                static = None
                reasons[exc.reason] += 1
            counts["recorded_applies"] += recorded is not None
            counts["static_applies"] += static is not None
            if recorded is not None and static is not None:
                counts["both_apply"] += 1
                if recorded == static:
                    counts["identical"] += 1
                else:
                    a, b = pool.execute(recorded, ""), pool.execute(static, "")
                    counts["same_output"] += a.stdout == b.stdout and a.status == b.status
    both = counts["both_apply"]
    report = {
        "programs": len(programs),
        **counts,
        "static_failure_reasons": dict(reasons),
        "identical_share": round(100 * counts["identical"] / both, 2) if both else None,
        "same_output_share_of_different": round(100 * counts["same_output"] / (both - counts["identical"]), 2)
        if both > counts["identical"]
        else None,
        "static_coverage_of_recorded": round(100 * both / counts["recorded_applies"], 2)
        if counts["recorded_applies"]
        else None,
        "seconds": round(time.perf_counter() - start, 1),
    }
    for key, value in report.items():
        print(f"{key}: {value}")
    print(f"report: {write_report('bench_inline', report)}")


if __name__ == "__main__":
    main()
