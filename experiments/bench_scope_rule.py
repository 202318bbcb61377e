"""The name rule's parts measured apart on one model: identifiers only (the rule before
scopes), scopes (a frame's names), and scopes with parameters first (the default), each
decoding the same test sample greedily with the value rule on; the release's metric and
our aligned variant, traces cut at the cap, outputs equal to the real ones, and where the
traces first go wrong (experiments/first_error.py).

    .venv/bin/python experiments/bench_scope_rule.py --run runs/qd/run --data runs/quality/data-depth \\
        --sets codenetmut/codenetmut functions/functions
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "experiments"))

VARIANTS = {
    "identifiers": {"scopes": False},
    "scopes": {"scopes": True, "params": False},
    "scopes_params": {"scopes": True, "params": True},
}


def outputs_right(rows: list[dict], data: str, name: str) -> int:
    """Predictions whose printed output equals the example's real stdout."""
    import datasets

    from codeexecutor.modeling.format import parse_trace

    test = datasets.load_from_disk(os.path.join(data, name))["test"]
    real = dict(zip(test["id"], test["stdout"]))
    return sum(parse_trace(r["prediction"]).output == real[r["id"]] for r in rows)


def main() -> None:
    from first_error import first_errors

    from codeexecutor.atomic import write_json
    from codeexecutor.generation import constraints, search
    from codeexecutor.generation.decoding import Decoding
    from codeexecutor.modeling.loading import load_model
    from codeexecutor.modeling.profiles import profile_of
    from eval.evaluate import EvalOptions, evaluate_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a bench_quality run folder (final/ is scored)")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sets", nargs="+", default=["codenetmut/codenetmut"], help="dataset folders under --data")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "scope-rule-cpu.json"))
    args = ap.parse_args()
    model = os.path.join(args.run, "final")
    profile = profile_of(load_model(model).config)
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": platform.processor() or platform.machine(),
        "model": model,
        "command": " ".join(sys.argv),
        "limit": args.limit,
        "decoding": "greedy, value rule on",
        "variants": {},
    }
    if os.path.exists(args.out):
        report["variants"] = json.load(open(args.out)).get("variants", {})  # a rerun adds to what is there
    original = constraints.StateRule
    for variant in args.variants:
        search.StateRule = functools.partial(original, **VARIANTS[variant])
        try:
            for name in args.sets:
                ev = evaluate_model(
                    model,
                    os.path.join(args.data, name),
                    limit=args.limit,
                    decoding=Decoding(beam=1, names=True, values=True),
                    progress=False,
                    options=EvalOptions(batch_size=args.batch_size),
                )
                rows = ev.pop("predictions", None) or []
                (figures,) = ev["datasets"].values()
                entry = {
                    "release": figures["table3"],
                    "aligned": figures["aligned"],
                    "unfinished": figures["unfinished"],
                }
                if rows:
                    entry["outputs_right"] = outputs_right(rows, args.data, name)
                    entry["first_error"] = first_errors(rows, args.data, profile)
                report["variants"].setdefault(variant, {})[name] = entry
                print(
                    variant,
                    name,
                    {k: entry["release"][k] for k in ("trace_accuracy", "line_f1", "identifier_f1")},
                    "cut",
                    entry["unfinished"]["share"],
                    "outputs right",
                    entry.get("outputs_right"),
                    flush=True,
                )
        finally:
            search.StateRule = original
        write_json(args.out, report, ensure_ascii=False)
    print("written", args.out)


if __name__ == "__main__":
    main()
