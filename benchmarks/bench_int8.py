"""A shipped model (bf16) against its int8 copy (modeling/int8.py): bytes, load seconds, and each
test set's scores and identical answers, both copies scored here on the same examples.

    .venv/bin/python benchmarks/bench_int8.py --model models/codeexecutor-mini-cpu \
        --data runs/quality/data-aug3 [--limit 300] [--builds singleline codenetmut]

Writes benchmarks/results/int8-NAME.json. The int8 copy goes to runs/int8/NAME (--work); answers
are journaled beside it, so a stopped run resumes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from _common import ROOT, write_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "codeexecutor-mini-cpu"))
    ap.add_argument("--data", required=True, help="built datasets whose test sets score both copies")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--builds", nargs="+", help="the builds of --data to score (default: every one)")
    ap.add_argument("--work", default=str(ROOT / "runs" / "int8"), help="where the int8 copy and the answers go")
    args = ap.parse_args()

    from safetensors import safe_open

    from codeexecutor.generation.decoding import GREEDY
    from codeexecutor.modeling.int8 import INT8_FILE
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.progress import quiet_libraries
    from codeexecutor.training.export import save_shipped
    from eval.agreement import agreement
    from eval.evaluate import EvalOptions, evaluate_model

    quiet_libraries()
    model = pathlib.Path(args.model)
    work = pathlib.Path(args.work) / model.name
    copy = work / "model"
    if not (copy / INT8_FILE).exists():
        save_shipped(str(model), str(copy), "int8")
    with safe_open(str(model / "model.safetensors"), "pt") as f:
        dtype = str(f.get_slice(next(iter(f.keys()))).get_dtype())
    out = {
        "model": str(model),
        "data": args.data,
        "limit": args.limit,
        "reference_dtype": dtype,
        "bytes": {},
        "command": " ".join(["benchmarks/bench_int8.py"] + sys.argv[1:]),
        "load_seconds": {},
        "sets": {},
    }
    data = pathlib.Path(args.data)
    builds = [data / b for b in args.builds] if args.builds else sorted(p for p in data.iterdir() if p.is_dir())
    reports = {}
    for label, folder, weights in (("reference", model, "model.safetensors"), ("int8", copy, INT8_FILE)):
        out["bytes"][label] = (folder / weights).stat().st_size
        start = time.perf_counter()
        load_model(str(folder))
        out["load_seconds"][label] = round(time.perf_counter() - start, 2)
        reports[label] = [
            evaluate_model(
                str(folder),
                str(build),
                split="test",
                limit=args.limit,
                decoding=GREEDY,
                progress=True,
                options=EvalOptions(batch_size=64, answers=str(work / f"{label}-{build.name}.answers.jsonl")),
            )
            for build in builds
        ]
    same = agreement(*([p for r in reports[label] for p in r["predictions"]] for label in ("reference", "int8")))
    for i, _build in enumerate(builds):
        for name in reports["reference"][i]["datasets"]:
            out["sets"][name] = {
                label: {
                    k: reports[label][i]["datasets"][name]["table3"].get(k)
                    for k in ("trace_accuracy", "output_accuracy", "line_f1")
                }
                for label in reports
            }
            out["sets"][name]["identical"] = same.get(name, {}).get("identical")
        if reports["reference"][i].get("runtime_errors"):
            out["runtime_errors"] = {
                label: {k: r[i]["runtime_errors"].get(k) for k in ("detection_accuracy", "localisation_accuracy")}
                for label, r in reports.items()
            }
    path = write_report(f"int8-{model.name}", out)
    for name, s in out["sets"].items():
        print(
            f"{name:<18} {dtype} {s['reference']['trace_accuracy']!s:>6}  int8 {s['int8']['trace_accuracy']!s:>6}  "
            f"identical {s['identical']}%"
        )
    print(f"bytes {out['bytes']}  report: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
