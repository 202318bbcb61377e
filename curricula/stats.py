"""Table 2 statistics of built datasets (count, average code lines, trace steps and
maximum states per step, per dataset and split), the per-operator yield from the build
stats, a JSON file and a PNG of the distributions."""

from __future__ import annotations

import json
import os

from curricula.common import write_json_atomic

PAPER_TABLE2 = {  # SPEC §5 / paper Table 2: avg code lines, avg trace steps, avg states
    "singleline": (3.28, 1.00, 2.44),
    "tutorial": (4.90, 11.89, 1.34),
    "codenetmut": (8.26, 22.80, 3.67),
    "codenet": (8.26, 22.80, 3.67),
}


def dataset_stats(folder: str) -> dict:
    import datasets

    report = {"folder": folder, "datasets": {}}
    distributions = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(os.path.join(path, "dataset_dict.json")):
            continue
        dd = datasets.load_from_disk(path)
        report["datasets"][name] = {}
        for split in dd:
            ds = dd[split]
            n = len(ds)
            lines, steps, states = ds["n_lines"], ds["n_steps"], ds["max_states"]
            report["datasets"][name][split] = {
                "count": n,
                "avg_code_lines": round(sum(lines) / n, 2) if n else 0.0,
                "avg_trace_steps": round(sum(steps) / n, 2) if n else 0.0,
                "avg_max_states": round(sum(states) / n, 2) if n else 0.0,
            }
            distributions[f"{name}/{split}"] = (lines, steps, states)
    build = os.path.join(folder, "stats.json")
    if os.path.exists(build):
        with open(build) as f:
            built = json.load(f)
        per_op = built.get("per_operator_status")
        if per_op:
            report["operator_yield"] = {
                op: {"ok_share": round(v.get("ok", 0) / max(1, sum(v.values())), 3), **v} for op, v in sorted(per_op.items())
            }
    write_json_atomic(report, os.path.join(folder, "table2.json"))
    if distributions:
        _plot(distributions, os.path.join(folder, "table2.png"))
    return report


def _plot(distributions: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for label, (lines, steps, states) in distributions.items():
        for ax, values in zip(axes, (lines, steps, states)):
            if values:
                ax.hist(values, bins=30, alpha=0.5, label=f"{label} (n={len(values)})")
    for ax, title in zip(axes, ("code lines", "trace steps", "max states per step")):
        ax.set_title(title)
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_table(report: dict) -> None:
    print(f"{report['folder']}")
    print(f"  {'dataset':12} {'split':6} {'count':>8} {'code lines':>11} {'trace steps':>12} {'max states':>11}   paper (lines/steps/states)")
    for name, splits in report["datasets"].items():
        paper = PAPER_TABLE2.get(name)
        for split, s in splits.items():
            ref = f"{paper[0]:.2f} / {paper[1]:.2f} / {paper[2]:.2f}" if paper else ""
            print(f"  {name:12} {split:6} {s['count']:8d} {s['avg_code_lines']:11.2f} {s['avg_trace_steps']:12.2f} {s['avg_max_states']:11.2f}   {ref}")
    for op, y in report.get("operator_yield", {}).items():
        print(f"  yield {op:4} ok {y['ok_share']:.1%}  " + " ".join(f"{k}={v}" for k, v in y.items() if k != "ok_share"))
