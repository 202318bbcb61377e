"""One table of the product benchmarks' latest results (benchmarks/results/bench_*.json):
what each measured, against which baseline of the same run, and the ratio.

    .venv/bin/python benchmarks/summary.py      (the last step of `make bench`)
"""

from __future__ import annotations

import json
import sys

from _common import RESULTS

# (file, what, figure, baseline, ratio): each a function of the report, None where absent
ROWS = [
    (
        "bench_exec",
        "traced programs/s, warm pool",
        lambda r: r["pool_traced_per_s"],
        lambda r: f"{r['per_process_baseline_per_s']:.1f}/s, an interpreter per program",
        lambda r: r["ratio_vs_per_process"],
    ),
    (
        "bench_mutation",
        "share of attempts that give a running mutant",
        lambda r: r["yield_per_attempt"],
        lambda r: f"{r['paper_yield_per_attempt']:.2f} in the paper",
        lambda r: r["yield_per_attempt"] / r["paper_yield_per_attempt"],
    ),
    (
        "bench_build",
        "executed mutants/s, CodeNetMut build",
        lambda r: r["executed_per_s"],
        lambda r: f"{r['hours_for_3_2M_on_16_cores']:.2f} h for 3.2 M on 16 cores",
        lambda r: None,
    ),
    (
        "bench_inline",
        "stdin inlined statically, identical to recorded",
        lambda r: r["identical_share"],
        lambda r: "the recorded (run) inlining",
        lambda r: r["static_coverage_of_recorded"] / 100,
    ),
    (
        "bench_generate",
        "traces/s, cached batched beam search",
        lambda r: r["cpu"]["cached_batched_traces_per_s"],
        lambda r: f"{r['cpu']['recompute_one_at_a_time_traces_per_s']:.2f}/s recomputed one at a time",
        lambda r: r["cpu"]["ratio"],
    ),
    (
        "bench_generate-trace-batch",
        "seconds, trace --batch",
        lambda r: r["trace_batch_seconds"],
        lambda r: f"{r['one_at_a_time_seconds']:.1f} s one program at a time",
        lambda r: r["speedup"],
    ),
    (
        "bench_generate-compact",
        "traces/s, compact model",
        lambda r: r["models"]["delta"]["traces_per_s"],
        lambda r: f"{r['models']['full']['traces_per_s']:.2f}/s full-state model",
        lambda r: r["speedup_delta_over_full"],
    ),
    (
        "bench_train",
        "real tokens/s, token-budget batches",
        lambda r: r["batching"]["token_budget_real_tokens_per_s"],
        lambda r: f"{r['batching']['fixed_real_tokens_per_s']:.0f}/s fixed batches",
        lambda r: r["batching"]["real_tokens_per_s_ratio"],
    ),
]


def table() -> list[tuple[str, str, str, str, str]]:
    out = []
    for name, what, figure, baseline, ratio in ROWS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            out.append((name, what, "not run", "", ""))
            continue
        report = json.loads(path.read_text())
        try:
            value, base, x = figure(report), baseline(report), ratio(report)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            out.append((name, what, f"unreadable ({exc!r})", "", ""))
            continue
        out.append((name, what, f"{value:,.2f}", base, "" if x is None else f"{x:.2f}x"))
    return out


def main() -> int:
    rows = table()
    widths = [
        max(len(r[i]) for r in rows + [("benchmark", "measure", "figure", "baseline (same run)", "ratio")])
        for i in range(5)
    ]
    head = ("benchmark", "measure", "figure", "baseline (same run)", "ratio")
    for row in [head, tuple("-" * w for w in widths)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    return 0 if all(r[2] != "not run" for r in rows[:5]) else 1


if __name__ == "__main__":
    sys.exit(main())
