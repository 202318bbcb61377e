"""How much of the HumanEval rerank programs' real traces fits the tokens `rerank` decodes,
in each step order: run the candidates in the sandbox, write their traces as a compact
model would (start and end order) and count BPE tokens of a run's tokenizer.

    .venv/bin/python experiments/rerank_lengths.py --tokenizer runs/qd/calibration/tokenizer
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from eval.cli import HUMANEVAL  # noqa: E402

SAMPLES = os.path.join(
    HUMANEVAL, "codet_generated", "HumanEval_codegen16B_temp0.8_topp0.95_num100_max300_code_solution.jsonl.gz"
)


def main() -> None:
    from codeexecutor.execution import ExecStatus, ExecutorPool, Limits, Program
    from codeexecutor.modeling.profiles import Profile
    from codeexecutor.modeling.tokenizer import load_tokenizer
    from curricula.function_calls import plain_source
    from eval.rerank import load_problems

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="a run's tokenizer folder (or a model folder)")
    ap.add_argument("--per-problem", type=int, default=20, help="the first K samples of each problem, deduplicated")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "rerank-lengths-cpu.json"))
    args = ap.parse_args()
    problems = [
        p
        for p in load_problems(
            os.path.join(HUMANEVAL, "HumanEval.jsonl.gz"),
            SAMPLES,
            os.path.join(HUMANEVAL, "codet_dataset", "HumanEval_for_code_generation.jsonl"),
        )
        if p.examples
    ]
    tok = load_tokenizer(args.tokenizer, exception=True, delta=True)
    programs = []
    for p in problems:  # as `rerank` builds them: the calls printed, docstrings dropped
        calls = "".join(f"print(repr({c}))\n" for c, _ in p.examples)
        programs += [plain_source(p.prompt + s + "\n\n" + calls) for s in dict.fromkeys(p.samples[: args.per_problem])]
    with ExecutorPool(2, Limits(timeout=3.0)) as pool:
        results = dict(pool.execute_many(Program(c, "", i) for i, c in enumerate(programs)))
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    report = {"tokenizer": args.tokenizer, "problems": len(problems), "programs": len(programs), "orders": {}}
    for order in ("start", "end"):
        profile = Profile("exact", state="delta", order=order)
        lengths, first_output = [], []
        for i, code in enumerate(programs):
            r = results[i]
            if r.status not in (ExecStatus.OK, ExecStatus.ERROR):
                continue
            text = profile.trace(r.steps, r.error if r.status is ExecStatus.ERROR else None, code)
            lengths.append(count(text))
            k = text.find("<output>")
            first_output.append(count(text[:k]) if k >= 0 else None)
        n = len(lengths)
        share = lambda hits, n=n: round(100 * hits / n, 1)  # noqa: E731
        report["orders"][order] = {
            "traced": n,
            "median_tokens": statistics.median(lengths),
            "whole_within": {str(cap): share(sum(x <= cap - 2 for x in lengths)) for cap in (256, 512, 768)},
            "first_output_within_256": share(sum(f is not None and f <= 250 for f in first_output)),
        }
        print(order, json.dumps(report["orders"][order]), flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
