"""Table 2 statistics of built datasets (count, average code lines, trace steps and
maximum states per step, per dataset and split), the per-operator yield from the build
stats, a JSON file and a PNG of the distributions; with a tokenizer, the trace length of
every example in both trace formats (whole states and compact), which also checks that
every compact trace expands back to the full one."""

from __future__ import annotations

import json
import os

from codeexecutor.atomic import write_json

PAPER_TABLE2 = {  # the paper's Table 2 (docs/curriculum.md): avg code lines, avg trace steps, avg states
    "singleline": (3.28, 1.00, 2.44),
    "tutorial": (4.90, 11.89, 1.34),
    "codenetmut": (8.26, 22.80, 3.67),
    "codenet": (8.26, 22.80, 3.67),
}


def trace_lengths(table, tok=None, cap: int = 766, chunk: int = 1024) -> dict:
    """Per example trace length in both formats (modeling/compact.py): BPE tokens of `tok`
    (a model's tokenizer) or, without one, whitespace-separated pieces; the mean, median,
    the share over `cap` tokens (the release's gold cut) and the full/compact ratio;
    `not_lossless`: examples whose compact target does not expand to the full one; and
    with `tok`, the code's tokens and the share longer than a model reads. Rows are read
    `chunk` at a time and only their lengths kept: memory does not grow with the texts.
    `table`: a datasets.Dataset or a list of rows."""
    import statistics
    from array import array

    from codeexecutor.modeling.profiles import Profile

    full, delta = Profile("exact"), Profile("exact", state="delta")
    lengths = {"full": array("i"), "delta": array("i"), "code": array("i")}
    broken = 0

    def count(batch: list[str]) -> list[int]:
        if tok is not None:
            return [len(ids) for ids in tok(batch, add_special_tokens=False)["input_ids"]]
        return [len(t.split()) for t in batch]

    for start in range(0, len(table), chunk):
        stop = min(start + chunk, len(table))
        rows = table[start:stop] if isinstance(table, list) else table.select(range(start, stop))
        codes, wants, gots = [], [], []
        for row in rows:
            if row["task"] == "singleline":  # one state: no step before it to differ from
                return {}
            (code, want), got = full.example(row), delta.example(row)[1]
            broken += delta.expand(got).text != want
            codes.append(code)
            wants.append(want)
            gots.append(got)
        lengths["full"].extend(count(wants))
        lengths["delta"].extend(count(gots))
        if tok is not None:
            lengths["code"].extend(count(codes))
    if not lengths["full"]:
        return {}
    out: dict = {"unit": "bpe_tokens" if tok is not None else "pieces", "not_lossless": broken}
    for kind in ("full", "delta"):
        n = lengths[kind]
        out[kind] = {
            "mean": round(sum(n) / len(n), 1),
            "median": statistics.median(n),
            "over_cap_share": round(sum(x > cap for x in n) / len(n), 4),
            "total": sum(n),
        }
    out["ratio"] = round(out["full"]["total"] / max(1, out["delta"]["total"]), 2)
    if tok is not None:  # code tokens against what a model of the default code length reads
        from codeexecutor.modeling.tokenizer import Encoder

        window = Encoder(tok).code_body
        n = lengths["code"]
        out["code"] = {
            "mean": round(sum(n) / len(n), 1),
            "median": statistics.median(n),
            "over_window_share": round(sum(x > window for x in n) / len(n), 4),
        }
    return out


def dataset_stats(folder: str, tokenizer: str | None = None) -> dict:
    """`tokenizer`: a model or tokenizer folder; the trace lengths are then counted in its
    BPE tokens (`trace_lengths`)."""
    import datasets

    tok = None
    if tokenizer:
        from codeexecutor.modeling.tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer, delta=True)
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
            lengths = trace_lengths(ds, tok) if n else {}
            if lengths:
                report["datasets"][name][split]["trace_lengths"] = lengths
            distributions[f"{name}/{split}"] = (lines, steps, states)
    build = os.path.join(folder, "stats.json")
    if os.path.exists(build):
        with open(build) as f:
            built = json.load(f)
        per_op = built.get("per_operator_status")
        if per_op:
            report["operator_yield"] = {
                op: {"ok_share": round(v.get("ok", 0) / max(1, sum(v.values())), 3), **v}
                for op, v in sorted(per_op.items())
            }
    write_json(os.path.join(folder, "table2.json"), report, ensure_ascii=False)
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
    print(
        f"  {'dataset':12} {'split':6} {'count':>8} {'code lines':>11} {'trace steps':>12} {'max states':>11}   "
        "paper (lines/steps/states)"
    )
    for name, splits in report["datasets"].items():
        paper = PAPER_TABLE2.get(name)
        for split, s in splits.items():
            ref = f"{paper[0]:.2f} / {paper[1]:.2f} / {paper[2]:.2f}" if paper else ""
            print(
                f"  {name:12} {split:6} {s['count']:8d} {s['avg_code_lines']:11.2f} "
                f"{s['avg_trace_steps']:12.2f} {s['avg_max_states']:11.2f}   {ref}"
            )
    lengths = [
        (name, split, s["trace_lengths"])
        for name, splits in report["datasets"].items()
        for split, s in splits.items()
        if s.get("trace_lengths")
    ]
    if lengths:
        unit = lengths[0][2]["unit"].replace("_", " ")
        print(f"  trace length in {unit}: full states / compact (mean, median, share over 766), ratio, not lossless")
    for name, split, t in lengths:
        f, d = t["full"], t["delta"]
        print(
            f"  {name:12} {split:6} {f['mean']:8.1f} {f['median']:7.1f} {100 * f['over_cap_share']:5.1f}%  /"
            f" {d['mean']:7.1f} {d['median']:7.1f} {100 * d['over_cap_share']:5.1f}%   "
            f"{t['ratio']:.2f}x  {t['not_lossless']}"
        )
    for op, y in report.get("operator_yield", {}).items():
        print(
            f"  yield {op:4} ok {y['ok_share']:.1%}  " + " ".join(f"{k}={v}" for k, v in y.items() if k != "ok_share")
        )
