"""Two quality result files side by side, as the markdown table experiments/NOTEBOOK.md shows: per test
set trace and output accuracy (the release's metric and our aligned variant), the share
of traces cut at the length cap, tokens trained and examples seen per stage, and the crash
figures.

    .venv/bin/python benchmarks/compare_quality.py results/quality-cpu.json results/quality-cpu-delta.json
"""

from __future__ import annotations

import json
import sys

SETS = ("singleline", "tutorial", "codenetmut", "errors", "functions", "functions_errors")
WITH_OUTPUT = ("tutorial", "codenetmut", "functions")


def extras(r: dict) -> str:
    """The options a column's run set apart from the defaults: code window, exception
    weight, functions in a stage of their own."""
    parts = [f"{r['code_window']} window"] if r.get("code_window", "head") != "head" else []
    parts += [f"exception weight {r['exception_weight']:g}"] if r.get("exception_weight") is not None else []
    parts += [f"a functions stage of {r['functions_stage']:g} of stage 3"] if r.get("functions_stage") else []
    return "".join(", " + p for p in parts)


def pct(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def column(r: dict) -> dict[str, str]:
    t, out = r["test"], {}
    for name in SETS:
        e = t.get(name)
        if e is None:
            continue
        cut = (e.get("unfinished") or {}).get("share")
        al = e["ours_aligned"]
        out[f"{name} trace"] = pct(e["trace_accuracy"]) + f" (aligned {pct(al['aligned_trace_accuracy'])})"
        if name in WITH_OUTPUT:
            out[f"{name} output"] = pct(e["output_accuracy"]) + f" (aligned {pct(al['aligned_output_accuracy'])})"
        out[f"{name} cut at the cap"] = pct(cut) + "%"
    re = r.get("runtime_errors") or {}
    out["crash detection"] = f"{pct(re.get('detection_accuracy'))} (TP {re.get('tp')}, FP {re.get('fp')})"
    out["crash localisation (of all crashes)"] = pct(re.get("localisation_accuracy"))
    out["crash kind accuracy"] = pct(re.get("kind_accuracy"))
    fe = r.get("runtime_errors_functions")
    if fe:
        out["functions crash detection / localisation"] = (
            f"{pct(fe.get('detection_accuracy'))} (TP {fe.get('tp')}, "
            f"FP {fe.get('fp')}) / {pct(fe.get('localisation_accuracy'))}"
        )
    for stage, s in r["stages"].items():
        seen = s.get("examples_seen")
        out[f"stage {stage}: tokens / examples"] = f"{s['real_tokens']:,} / " + (f"{seen:,}" if seen else "-")
    out["training minutes"] = f"{r['training_seconds'] / 60:.1f}"
    return out


def table(paths: list[str]) -> str:
    reports = [json.load(open(p)) for p in paths]
    cols = [column(r) for r in reports]
    keys = list(dict.fromkeys(k for c in cols for k in c))
    head = (
        "| | "
        + " | ".join(
            f"{r.get('state', 'full')}, {r.get('step_order', 'start')} order, functions "
            f"{r.get('functions_weight', 0):g}" + extras(r) + f" (`{p.rsplit('/', 1)[-1]}`)"
            for r, p in zip(reports, paths)
        )
        + " |"
    )
    lines = [head, "|---" * (len(paths) + 1) + "|"]
    lines += ["| " + k + " | " + " | ".join(c.get(k, "-") for c in cols) + " |" for k in keys]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("compare_quality: give two or more quality result files")
    print(table(sys.argv[1:]))
