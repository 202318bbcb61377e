"""Which programs of a finished functions build also appear in the benchmarks and the contest corpora.

    codeexecutor build decontaminate BUILD_DIR [--references ../shared/data] [--out BUILD_DIR/decontamination.json]

BUILD_DIR is a `codeexecutor build functions` output (its `functions/` and
`functions_errors/` datasets). References, read from `--references` where present:
HumanEval's solutions (prompt + canonical solution), the LLM samples reranked against
HumanEval (CodeT's codegen-16B set), MBPP's solutions, and the contest programs of both
AtCoder corpora. Reports, per reference, rows equal as whole programs and rows sharing a
normalised definition of 4 lines or more (curricula/overlap.py), by split; and whether any
module or program is in two splits.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import pathlib
import time

from codeexecutor.atomic import write_json

SHARED = os.path.join("..", "shared", "data")  # where the benchmarks and the contest corpora are gathered


def _jsonl(path: pathlib.Path):
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def references(shared: str = SHARED):
    """The reference corpora found under `shared` (those missing are left out)."""
    from curricula.overlap import Reference

    shared = pathlib.Path(shared)
    he = shared / "humaneval"
    out = []
    if (he / "HumanEval.jsonl.gz").exists():
        out.append(
            Reference(
                "humaneval_solutions",
                (p["prompt"] + p["canonical_solution"] for p in _jsonl(he / "HumanEval.jsonl.gz")),
            )
        )
    samples = sorted((he / "codet_generated").glob("*code_solution.jsonl.gz"))
    if samples:
        out.append(
            Reference("humaneval_llm_samples", (p["prompt"] + s for p in _jsonl(samples[0]) for s in p["samples"]))
        )
    mbpp = he / "codet_dataset" / "mbpp_sanitized_for_code_generation.jsonl"
    if mbpp.exists():
        out.append(Reference("mbpp_solutions", (p["prompt"] + p["canonical_solution"] for p in _jsonl(mbpp))))
    contest = sorted(glob.glob(str(shared / "atcoder-python*" / "data" / "*" / "Python" / "*.py")))
    if contest:
        out.append(Reference("contest_programs", (open(p, encoding="utf-8", errors="replace").read() for p in contest)))
    return out


def decontaminate(build: str, shared: str = SHARED, out: str | None = None) -> dict:
    """The overlap report of a functions build against the references under `shared`,
    written to `out` (default BUILD/decontamination.json) atomically."""
    import datasets

    from codeexecutor.errors import UsageError
    from curricula.overlap import overlap_report

    start = time.perf_counter()
    refs = references(shared)
    if not refs:
        raise UsageError(
            f"--references {shared} holds none of the corpora compared against (humaneval/HumanEval.jsonl.gz, "
            "humaneval/codet_generated/, humaneval/codet_dataset/, atcoder-python*/): nothing would be checked"
        )
    parts = [
        datasets.load_from_disk(os.path.join(build, name))
        for name in ("functions", "functions_errors")
        if os.path.isdir(os.path.join(build, name))
    ]

    def rows():
        for dd in parts:
            for split in dd.values():
                yield from split.select_columns(["id", "code", "split", "kind", "problem_id"])

    report = overlap_report(rows(), refs)
    report["build"] = os.path.abspath(build)
    report["command"] = f"codeexecutor build decontaminate {build} --references {shared}"
    report["seconds"] = round(time.perf_counter() - start, 1)
    out = out or os.path.join(build, "decontamination.json")
    write_json(out, report, indent=1)
    return report
