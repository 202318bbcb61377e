"""How many function calls of real packages become programs, before anything runs.

    .venv/bin/python experiments/function_yield.py [ROOT ...] [--out benchmarks/results/function-yield.json]

Runs the functions builder's extraction (curricula/function_calls.py) over package roots
(default: every function corpus in ../shared/data, each package or snapshot its own root)
without executing anything, twice: as it was (8 calls per module, a test's locals never
kept) and as it is (8 calls per called function, a test function's earlier statements kept
as the program's setup where the call reads them). Per root: calls found, programs
assembled, and every skip by reason.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
OLD_MODULE_CAP = 8


def roots() -> list[pathlib.Path]:
    out = [SHARED / "thealgorithms-python", SHARED / "keon-algorithms"]
    out += sorted(p for p in (SHARED / "pypi-pure-python").iterdir() if p.is_dir())
    history = SHARED / "thealgorithms-python-history" / "snapshots"
    if history.is_dir():
        out += sorted(p for p in history.iterdir() if p.is_dir())
    return [p for p in out if p.is_dir()]


def extract(root: pathlib.Path, new: bool) -> Counter:
    from curricula.function_calls import (
        Corpus,
        Skip,
        assemble,
        assertion_calls,
        capped,
        doctest_calls,
        driver_statements,
        is_test_file,
        uses_locals,
    )

    corpus = Corpus(str(root))
    counts: Counter = Counter()
    for relpath in corpus.files:
        mod = corpus.parse(relpath)
        if mod is None:
            counts[f"skip_module:{corpus.unparsed.get(relpath, 'not_python3_or_not_utf8')}"] += 1
            continue
        test = is_test_file(relpath)
        calls = assertion_calls(mod, setup=new) if test else doctest_calls(mod)
        counts["calls_found"] += len(calls)
        counts[f"found:{'test' if test else 'doctest'}"] += len(calls)
        if new:
            calls = capped(calls, 8, 300, counts)
        elif len(calls) > OLD_MODULE_CAP:
            counts["skip:over_calls_per_module"] += len(calls) - OLD_MODULE_CAP
            calls = calls[:OLD_MODULE_CAP]
        for call in calls:
            try:
                if call.origin == "test" and uses_locals(corpus, mod, call):
                    raise Skip("test_call_uses_locals")
                assemble(corpus, mod, driver_statements(call))
            except Skip as exc:
                counts[f"skip:{exc.reason.split(':')[0]}"] += 1
                continue
            except (RecursionError, SyntaxError):
                counts["skip:extraction_error"] += 1
                continue
            counts["programs"] += 1
            counts[f"programs:{call.origin}"] += 1
            counts["programs_with_test_setup"] += bool(call.origin == "test" and call.setup)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", help="package roots (default: the shared function corpora)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "function-yield.json"))
    args = ap.parse_args()
    chosen = [pathlib.Path(r) for r in args.roots] or roots()
    report: dict = {"roots": {}, "command": "experiments/function_yield.py" + "".join(f" {r}" for r in args.roots)}
    totals = {"before": Counter(), "after": Counter()}
    for root in chosen:
        before, after = extract(root, new=False), extract(root, new=True)
        totals["before"].update(before)
        totals["after"].update(after)
        name = str(root.relative_to(SHARED)) if root.is_relative_to(SHARED) else str(root)
        report["roots"][name] = {"before": dict(sorted(before.items())), "after": dict(sorted(after.items()))}
        print(
            f"{name:<60} calls {after['calls_found']:>6}  programs {before['programs']:>6} -> {after['programs']:>6}",
            flush=True,
        )
    report["total"] = {k: dict(sorted(v.items())) for k, v in totals.items()}
    for reason in ("skip:over_calls_per_module", "skip:package_module_import", "skip:test_call_uses_locals"):
        b, a = (
            totals["before"][reason],
            totals["after"][reason]
            + (totals["after"]["skip:over_calls_per_function"] if reason == "skip:over_calls_per_module" else 0),
        )
        report.setdefault("cuts", {})[reason] = {"before": b, "after": a, "cut": round(1 - a / b, 3) if b else None}
    pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["cuts"], indent=1))
    print(f"programs: {totals['before']['programs']} -> {totals['after']['programs']}; report: {args.out}")


if __name__ == "__main__":
    main()
