"""Contest programs that import scipy or sympy, traced under the default limits: routed to a
worker that pre-imported only numpy (as before the `science` flavor) against the `science`
worker that pre-imported scipy's common submodules and sympy (execution/worker.FLAVORS).
Counts how each arm's runs end, the CPU-limit stops among them, and the wall seconds; the
two arms run one after the other in this process, two workers each (both cores busy).

    .venv/bin/python benchmarks/bench_science.py [--limit N]
"""

from __future__ import annotations

import argparse
import collections
import time

from _common import ROOT, device_label, write_report


def science_programs(limit: int | None) -> list[tuple[str, str, str]]:
    """(id, source, stdin) of every program of the shared AtCoder corpora that the pool
    sends to the science worker."""
    from codeexecutor.execution.pool import _compile, flavor_of

    out = []
    for corpus in ("atcoder-python", "atcoder-python-2"):
        data = ROOT.parent / "shared" / "data" / corpus
        for path in sorted((data / "data").glob("p*/Python/*.py")):
            source = path.read_text(encoding="utf-8", errors="replace")
            if "scipy" not in source and "sympy" not in source:
                continue
            code = _compile(source)
            if not hasattr(code, "co_names") or flavor_of(source, code) != "science":
                continue
            stdin = data / "derived" / "input_output" / "data" / path.parts[-3] / "input_0.txt"
            out.append((f"{corpus}/{path.stem}", source, stdin.read_text() if stdin.exists() else ""))
    return out[:limit] if limit else out


def run_arm(programs, routing) -> dict:
    import codeexecutor.execution.pool as pool_module
    from codeexecutor.execution import ExecutorPool, Program

    original = pool_module.flavor_of
    if routing == "numpy":  # the routing before the science flavor
        pool_module.flavor_of = lambda source, code: "numpy" if original(source, code) != "base" else "base"
    try:
        start = time.perf_counter()
        with ExecutorPool(2) as pool:
            results = dict(pool.execute_many(Program(src, stdin, key) for key, src, stdin in programs))
        wall = time.perf_counter() - start
    finally:
        pool_module.flavor_of = original
    statuses = collections.Counter(str(r.status) for r in results.values())
    return {
        "programs": len(results),
        "statuses": dict(statuses),
        "cpu_limit_stops": statuses.get("timeout", 0),
        "wall_seconds": round(wall, 1),
        "stopped": sorted(k for k, r in results.items() if str(r.status) == "timeout"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N programs")
    args = parser.parse_args()
    programs = science_programs(args.limit)
    report = {"device": device_label(), "limits": "default (1 s CPU)", "workers": 2}
    for routing in ("numpy", "science"):
        report[routing] = run_arm(programs, routing)
        print(routing, {k: v for k, v in report[routing].items() if k != "stopped"}, flush=True)
    print("report:", write_report("science-imports", report))


if __name__ == "__main__":
    main()
