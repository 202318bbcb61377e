"""Benchmark: the same ground truth on every interpreter (3.11, 3.12, 3.13).

Traces real programs under each interpreter found (codeexecutor.execution.interpreters:
the light environments `.venv-3.X` first) through `ExecutorPool` and compares every
program's steps, status, output and error with the run of this interpreter:

- contest: both CodeNet-layout corpora (../shared/data/atcoder-python, atcoder-python-2),
  every program on every sample input of its problem;
- functions: the doctest and test calls of both function corpora (thealgorithms-python,
  keon-algorithms) as the functions builder assembles them (originals, no mutants).

It also runs every program that finished without the tracer, to check that tracing did
not change what it printed or how it ended, and measures traced executions per second of
each interpreter on a sample, in rounds that take the interpreters in turn (2 workers).
A program that ran into the time limit under one interpreter and not the other is
counted apart: its status depends on the machine's speed, not on the tracer.

    .venv/bin/python benchmarks/bench_versions.py [--limit N] [--pythons P ...]

Writes benchmarks/results/bench_versions.json: per corpus the share of programs identical
to this interpreter's trace, per field the programs that differ, examples of each
difference (the first differing step), and the speeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter

from _common import ROOT, write_report

from codeexecutor.execution import interpreters
from codeexecutor.execution.crosscheck import first_difference, run_under

SHARED = ROOT.parent / "shared" / "data"
CONTEST = ("atcoder-python", "atcoder-python-2")
FUNCTIONS = ("thealgorithms-python", "keon-algorithms")


def contest_programs(limit: int | None) -> list[dict]:
    out = []
    for name in CONTEST:
        root = SHARED / name
        records = [json.loads(line) for line in (root / "index.jsonl").open()]
        for rec in records[:limit]:
            pid, sid = rec["problem_id"], rec["submission_id"]
            src = (root / "data" / pid / "Python" / f"{sid}.py").read_text(encoding="utf-8", errors="replace")
            inputs = sorted((root / "derived" / "input_output" / "data" / pid).glob("input_*.txt"))
            for inp in inputs or [None]:
                stdin = inp.read_text(encoding="utf-8", errors="replace") if inp else ""
                out.append(
                    {
                        "id": f"{name}/{pid}/{sid}/{inp.name if inp else '-'}",
                        "corpus": "contest",
                        "source": src,
                        "stdin": stdin,
                    }
                )
    return out


def function_programs(limit: int | None) -> list[dict]:
    from curricula.function_calls import (
        Corpus,
        Skip,
        assemble,
        assertion_calls,
        doctest_calls,
        driver_statements,
        is_test_file,
        uses_locals,
    )

    out = []
    for name in FUNCTIONS:
        corpus = Corpus(str(SHARED / name))
        for relpath in corpus.files[:limit]:
            mod = corpus.parse(relpath)
            if mod is None:
                continue
            calls = assertion_calls(mod) if is_test_file(relpath) else doctest_calls(mod)
            for call in calls:
                try:
                    if call.origin == "test" and uses_locals(corpus, mod, call):
                        continue
                    program = assemble(corpus, mod, driver_statements(call))
                except (Skip, RecursionError):
                    continue
                out.append(
                    {"id": f"{name}/{relpath}:{call.line}", "corpus": "functions", "source": program, "stdin": ""}
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="programs per contest corpus and files per function corpus")
    ap.add_argument("--pythons", nargs="*", help="interpreters to compare (default: every supported one found)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--examples", type=int, default=8, help="differences kept per corpus and interpreter")
    ap.add_argument("--speed-programs", type=int, default=2000, help="programs of the timed rounds")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (the interpreters in turn in each)")
    ap.add_argument(
        "--speed-only",
        action="store_true",
        help="time the interpreters again and replace only the speeds of the committed report (its comparison kept)",
    )
    args = ap.parse_args()
    if not SHARED.exists():
        sys.exit(f"bench_versions: {SHARED} not found: the benchmark runs on the shared corpora")
    pythons = args.pythons or [p for p in (interpreters.find(v) for v in interpreters.VERSIONS) if p]
    versions = {p: interpreters.version_of(p) for p in pythons}
    broken = [p for p, v in versions.items() if v is None]
    if broken or not pythons:
        print(
            f"bench_versions: {', '.join(broken) or 'no interpreter'} does not run; "
            "pass working interpreters to --pythons",
            file=sys.stderr,
        )
        sys.exit(2)
    reference = next((p for p in pythons if versions[p] == interpreters.current()), pythons[0])
    programs = contest_programs(args.limit) + function_programs(args.limit)
    corpus_of = {p["id"]: p["corpus"] for p in programs}
    print(
        f"{len(programs)} programs ({Counter(corpus_of.values())}); interpreters: "
        + ", ".join(f"{versions[p]} ({p})" for p in pythons),
        flush=True,
    )
    report: dict = {"programs": dict(Counter(corpus_of.values())), "reference": versions[reference], "interpreters": {}}
    if args.speed_only:
        from _common import RESULTS

        report = json.loads((RESULTS / "bench_versions.json").read_text())
        pythons_to_compare = []
    else:
        pythons_to_compare = pythons
    results = {}
    for py in pythons_to_compare:
        results[py], summary = run_under(py, programs, args.workers, untraced=True, warm_numpy=True)
        rows = results[py].values()
        changed = [r["id"] for r in rows if r.get("untraced_same") is False]
        summary.update(
            statuses=dict(Counter(r["status"] for r in rows)),
            tracing_changed_behaviour=len(changed),
            tracing_changed_examples=changed[: args.examples],
            tracer_warnings=sum("assigning None to unbound local" in r["stderr"] for r in rows),
        )
        report["interpreters"][versions[py]] = summary
        print(
            f"{versions[py]}: {summary['traced_per_s']} traced runs/s; tracing changed {len(changed)} programs",
            flush=True,
        )
    ref = results.get(reference, {})
    for py in pythons_to_compare:
        if py == reference:
            continue
        by_corpus: dict = {}
        for key, a in ref.items():
            b = results[py][key]
            c = by_corpus.setdefault(
                corpus_of[key],
                {
                    "programs": 0,
                    "identical": 0,
                    "timing": 0,
                    "differ_by": Counter(),
                    "examples": [],
                    "timing_examples": [],
                },
            )
            c["programs"] += 1
            diff = first_difference(a, b)
            if not diff:
                c["identical"] += 1
            elif "timeout" in (a["status"], b["status"]):  # ran into the time limit on one: speed, not semantics
                c["timing"] += 1
                if len(c["timing_examples"]) < args.examples:
                    c["timing_examples"].append({"id": key, **diff})
            else:
                c["differ_by"][diff["field"]] += 1
                if len(c["examples"]) < args.examples:
                    c["examples"].append({"id": key, **diff})
        for name, c in by_corpus.items():
            decided = c["programs"] - c["timing"]
            c["identical_share"] = round(c["identical"] / max(decided, 1), 5)
            c["differ_by"] = dict(c["differ_by"])
            print(
                f"{versions[py]} vs {versions[reference]}, {name}: {c['identical']}/{decided} identical "
                f"({100 * c['identical_share']:.2f}%), differ by {c['differ_by']}; "
                f"{c['timing']} more at the time limit on one of the two"
            )
        report["interpreters"][versions[py]]["against_reference"] = by_corpus
    # Speed: the same programs, the interpreters in turn, in rounds (a shared VM drifts).
    sample = programs[:: max(1, len(programs) // args.speed_programs)][: args.speed_programs]
    rates: dict[str, list[float]] = {versions[p]: [] for p in pythons}
    for k in range(args.rounds):
        for py in pythons:
            _, summary = run_under(py, sample, args.workers, warm_numpy=True)
            rates[versions[py]].append(summary["traced_per_s"])
        print(f"round {k + 1}: " + ", ".join(f"{v} {r[-1]} runs/s" for v, r in rates.items()), flush=True)
    for v, r in rates.items():
        report["interpreters"].setdefault(v, {})["speed"] = {
            "programs": len(sample),
            "traced_per_s_rounds": r,
            "traced_per_s": statistics.median(r),
        }
    base = statistics.median(rates[versions[reference]])
    for v, r in rates.items():
        report["interpreters"][v]["speed"]["ratio_to_reference"] = round(statistics.median(r) / base, 3)
        print(
            f"{v}: {statistics.median(r):.1f} traced runs/s, {statistics.median(r) / base:.2f}x {versions[reference]}"
        )
    report["command" if not args.speed_only else "speed_command"] = (
        "benchmarks/bench_versions.py"
        + (f" --limit {args.limit}" if args.limit else "")
        + (" --speed-only" if args.speed_only else "")
    )
    write_report("bench_versions", report)


if __name__ == "__main__":
    main()
