"""How sure the interpreter check is: its findings against the runs of a bugs build.

    python benchmarks/bench_interpreter_check.py --data runs/bugs

For each split of a `codeexecutor build bugs` folder: how many programs the check
(codeexecutor/modeling/interpreter_check.py) flags, how many of those crash, crash with
its type, and crash at its line; and the same for the originals (the submissions as
they were, no bug put in). The train split's shares are the probabilities the check's
verdict carries (modeling/detector.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import machine, write_report  # noqa: E402
from codeexecutor.modeling.interpreter_check import first_missing  # noqa: E402
from codeexecutor.training.crash_data import read_rows  # noqa: E402


def tally(rows: list[dict]) -> dict:
    c: Counter = Counter()
    problems = set()
    for r in rows:
        found = first_missing(r["code"])
        c["programs"] += 1
        c["crashes"] += r["crashed"]
        if found is None:
            continue
        problems.add(r.get("problem_id"))
        c["flagged"] += 1
        c["flagged_crash"] += r["crashed"]
        c["flagged_type"] += r["type"] == found[0]
        c["flagged_type_and_line"] += (r["type"], r["line"]) == found
    return dict(c) | {"flagged_problems": len(problems)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="runs/bugs", help="a codeexecutor build bugs folder")
    args = ap.parse_args(argv)
    report = {"data": args.data, "machine": machine(), "python": sys.version.split()[0], "splits": {}}
    report["command"] = "python benchmarks/bench_interpreter_check.py " + " ".join(argv or sys.argv[1:])
    for split in ("train", "valid", "test"):
        rows = read_rows(args.data, split)
        report["splits"][split] = {
            "all": tally(rows),
            "originals": tally([r for r in rows if r["kind"] == "original"]),
        }
        print(split, report["splits"][split], flush=True)
    print(f"wrote {write_report('interpreter-check', report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
