"""`codeexecutor evaluate`'s report as people read it: Table 3 beside the paper's figures,
and the trace accuracy per program category as a plot."""

from __future__ import annotations

import json
import os

from codeexecutor.atomic import write_text
from eval.evaluate import CATEGORIES, METRIC_NAME

PAPER_TABLE3 = {  # output acc, trace acc, line F1, identifier F1 (CodeExecutor)
    "singleline": (None, 94.03, 94.03, 97.23),
    "tutorial": (76.42, 80.09, 84.70, 80.36),
    "codenetmut": (48.06, 33.38, 49.96, 54.31),
}


def task_header(model: str, split: str, limit: int | None, seed: int, metric: str, **settings) -> dict:
    """The head of a task's report (the debugger's, inverse execution's, REval's): what was
    scored and how, on which device and torch; its `datasets` filled by the task."""
    import torch

    return {
        "model": model,
        "split": split,
        "limit": limit,
        **settings,
        "seed": seed,
        "metric": metric,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "datasets": {},
    }


def run_facts() -> dict:
    """What made a report, as its figures must say: the device (the GPU, or the CPU with
        the widest instructions torch uses on it), torch, Python, the commit (`-dirty` with
    changes not committed) and the command."""
    import platform
    import subprocess
    import sys

    import torch

    cpu = f"CPU ({torch.backends.cpu.get_cpu_capability()})"
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        commit = subprocess.run(
            ["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=7"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else cpu,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "commit": commit or None,
        "command": " ".join(["codeexecutor", *sys.argv[1:]]),
    }


TRACE_SETS = ("codenetmut", "errors", "functions", "functions_errors", "tutorial")  # the sets with whole runs


def sampled_sets(data: str, split: str, limit: int | None, seed: int):
    """(name, rows) of each trace set under `data`: the fixed sample `evaluate` scores."""
    import datasets

    from eval.evaluate import find_datasets, sample

    for name, path in find_datasets(data).items():
        if name in TRACE_SETS:
            rows = datasets.load_from_disk(path)[split]
            yield name, rows.select(sample(len(rows), limit, seed))


def table3(report: dict) -> str:
    lines = [
        f"metric: {report.get('metric', METRIC_NAME)}; format profile {report.get('format_profile', '?')}",
        f"{'test set':12} {'split':10} {'n':>6} {'output acc':>10} {'trace acc':>10} {'line F1':>8} {'ident F1':>9}"
        "   paper (out/trace/line/ident)",
    ]
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    for name, e in report["datasets"].items():
        m = e["table3"]
        paper = PAPER_TABLE3.get(name)
        ref = " / ".join(fmt(v) for v in paper) if paper else ""
        lines.append(
            f"{name:12} {e['split']:10} {e['examples']:6d} "
            f"{fmt(m['output_accuracy']):>10} {fmt(m['trace_accuracy']):>10} "
            f"{fmt(m['line_f1']):>8} {fmt(m['identifier_f1']):>9}   {ref}"
        )
        a = e["aligned"]
        lines.append(
            f"{'  (ours: aligned)':30} {fmt(a['aligned_output_accuracy']):>10} {fmt(a['aligned_trace_accuracy']):>10} "
            f"{fmt(a['aligned_line_f1']):>8} {fmt(a['aligned_identifier_f1']):>9}"
        )
        cut = e.get("unfinished") or {}
        if cut.get("predictions"):
            lines.append(
                f"  {cut['predictions']} predictions ({cut['share']:.1f}%) hit the length cap before </s>; "
                f"trace acc of the finished ones {fmt(cut['trace_accuracy_of_finished'])}"
            )
    for key in ("runtime_errors", "runtime_errors_with_resource_descriptions", "runtime_errors_functions"):
        if key in report:
            r = report[key]
            f1 = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
            lines.append(
                f"{key}: detection {f1(r['detection_accuracy'])}% "
                f"(TP {r['tp']} FP {r['fp']} FN {r['fn']} TN {r['tn']}), "
                f"localisation {f1(r['localisation_accuracy'])}%, kind acc {f1(r['kind_accuracy'])}%, "
                f"weighted F1 {f1(r['kind_weighted_f1'])}"
                + (
                    f", crash-score AUROC {f1(r['crash_score_auroc'])}"
                    if r.get("crash_score_auroc") is not None
                    else ""
                )
            )
            if r.get("unfinished_share"):
                done = r.get("finished_only")
                lines.append(
                    f"  {r['unfinished_share']:.1f}% of these traces hit the length cap (no verdict); "
                    + (
                        f"detection over the finished ones {f1(done['detection_accuracy'])}% "
                        f"(TP {done['tp']} FP {done['fp']} FN {done['fn']} TN {done['tn']})"
                        if done
                        else "none finished"
                    )
                )
    return "\n".join(lines)


def plot(report: dict, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["datasets"])
    if not names:
        return
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        cats = report["datasets"][name]["categories"]
        vals = [cats.get(c, {}).get("trace_accuracy") or 0.0 for c in CATEGORIES]
        ax.bar([i + k * width for i in range(len(CATEGORIES))], vals, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(CATEGORIES))], CATEGORIES)
    ax.set_ylabel("trace accuracy (%)")
    ax.set_title("trace accuracy by program category")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def save(report: dict, out: str) -> dict:
    """Write an evaluation where people and tools read it: the report as JSON at `out`, its
    predictions beside it as JSON Lines (OUT.predictions.jsonl) and the per-category plot
    (OUT.png), each file written whole or not at all. The report without its predictions."""
    report = dict(report)
    stem = os.path.splitext(out)[0]
    rows = report.pop("predictions")
    _atomic(stem + ".predictions.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    _atomic(out, json.dumps(report, indent=2))
    plot(report, stem + ".png")
    return report


def _atomic(path: str, text: str) -> None:
    write_text(path, text)
