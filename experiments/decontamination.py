"""Which programs of a functions build also appear in the benchmarks and the contest corpora.

    .venv/bin/python experiments/decontamination.py BUILD_DIR [--out benchmarks/results/decontamination.json]

BUILD_DIR is a `codeexecutor build functions` output (its `functions/` and
`functions_errors/` datasets). References, read from ../shared/data where present:
HumanEval's solutions (prompt + canonical solution), the LLM samples reranked against
HumanEval (CodeT's codegen-16B set), MBPP's solutions, and the contest programs of both
AtCoder corpora. Reports, per reference, rows equal as whole programs and rows sharing a
normalised definition of 4 lines or more (curricula/overlap.py), by split; and whether any
module or program is in two splits.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def _jsonl(path: pathlib.Path):
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def references():
    from curricula.overlap import Reference

    he = SHARED / "humaneval"
    out = []
    if (he / "HumanEval.jsonl.gz").exists():
        out.append(Reference("humaneval_solutions", (p["prompt"] + p["canonical_solution"]
                                                    for p in _jsonl(he / "HumanEval.jsonl.gz"))))
    samples = sorted((he / "codet_generated").glob("*code_solution.jsonl.gz"))
    if samples:
        out.append(Reference("humaneval_llm_samples", (p["prompt"] + s for p in _jsonl(samples[0]) for s in p["samples"])))
    mbpp = he / "codet_dataset" / "mbpp_sanitized_for_code_generation.jsonl"
    if mbpp.exists():
        out.append(Reference("mbpp_solutions", (p["prompt"] + p["canonical_solution"] for p in _jsonl(mbpp))))
    contest = sorted(glob.glob(str(SHARED / "atcoder-python*" / "data" / "*" / "Python" / "*.py")))
    if contest:
        out.append(Reference("contest_programs", (open(p, encoding="utf-8", errors="replace").read() for p in contest)))
    return out


def main() -> None:
    import datasets

    from curricula.overlap import overlap_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="a functions build folder")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "decontamination.json"))
    args = ap.parse_args()
    start = time.perf_counter()
    refs = references()
    parts = [datasets.load_from_disk(os.path.join(args.build, name)) for name in ("functions", "functions_errors")
             if os.path.isdir(os.path.join(args.build, name))]

    def rows():
        for dd in parts:
            for split in dd.values():
                yield from split.select_columns(["id", "code", "split", "kind", "problem_id"])

    report = overlap_report(rows(), refs)
    report["build"] = os.path.abspath(args.build)
    report["command"] = f"experiments/decontamination.py {args.build}"
    report["seconds"] = round(time.perf_counter() - start, 1)
    with open(args.out + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(json.dumps({k: v for k, v in report.items() if k != "references"}, indent=1))
    for name, entry in report["references"].items():
        print(name, entry["reference_size"], "programs:", entry["programs"], "definitions:", entry["definitions"],
              "originals:", entry["definitions_originals"])


if __name__ == "__main__":
    main()
