"""`codeexecutor evaluate --model DIR --data DIR`: Table 3 (and more) for built test sets.

For every dataset found under DIR (folders written by `codeexecutor build`: codenetmut,
tutorial, singleline and the error-trace set), the model generates a trace for each
example of the chosen split; the report has, per dataset: the official (positional)
metrics, the aligned variant, ORCA's trace metrics, and a per-category breakdown in
the spirit of the paper's Table 4 (loops, conditionals, lists, strings, function
calls, by the constructs the code uses). Runtime-error metrics are computed over the
error-trace test set together with the codenetmut test programs (the negatives); with
`--resource-descriptions problems.jsonl` once more with each problem's input
specification prepended as a docstring (Bieber et al.). The report is written as JSON
(`--out`, default DIR/evaluation.json) with a PNG of the per-category accuracy.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict

from eval.trace_metrics import TraceRecord, error_metrics, orca_metrics, trace_metrics

PAPER_TABLE3 = {  # output acc, trace acc, line F1, identifier F1 (CodeExecutor)
    "singleline": (None, 94.03, 94.03, 97.23),
    "tutorial": (76.42, 80.09, 84.70, 80.36),
    "codenetmut": (48.06, 33.38, 49.96, 54.31),
}
CATEGORIES = ("loops", "conditionals", "lists", "strings", "function_calls")


def categories(code: str) -> list[str]:
    """The Table-4-style categories a program belongs to, from its syntax."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.While, ast.comprehension)):
            found.add("loops")
        elif isinstance(n, (ast.If, ast.IfExp)):
            found.add("conditionals")
        elif isinstance(n, (ast.List, ast.ListComp, ast.Tuple, ast.Subscript)):
            found.add("lists")
        elif isinstance(n, (ast.JoinedStr,)) or (isinstance(n, ast.Constant) and isinstance(n.value, str)):
            found.add("strings")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defined:
            found.add("function_calls")
    return [c for c in CATEGORIES if c in found]


def find_datasets(root: str) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if "dataset_dict.json" in filenames:
            out[os.path.basename(dirpath)] = dirpath
            dirnames[:] = []
    return dict(sorted(out.items()))


def _docstrings(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    from eval.rerank import read_jsonl

    out = {}
    for rec in read_jsonl(path):
        spec = "\n".join(x for x in (rec.get("input_spec"), rec.get("constraints")) if x)
        if spec:
            out[rec["problem_id"]] = spec
    return out


def _shift(rec: TraceRecord, offset: int) -> TraceRecord:
    steps = tuple((line - offset, state, out) for line, state, out in rec.steps if line > offset)
    line = rec.exception_line - offset if rec.exception_line else None
    return TraceRecord(steps, rec.exception, line)


def evaluate_model(model: str, data: str, split: str = "test", limit: int | None = 200, beam: int = 10,
                   max_length: int = 768, batch_size: int = 8, resource_descriptions: str | None = None,
                   progress: bool = True) -> dict:
    import datasets

    from codeexecutor.format import format_code
    from codeexecutor.generation import TraceGenerator

    found = find_datasets(data)
    if not found:
        from codeexecutor.errors import UsageError

        raise UsageError(f"no built datasets under {data} (run `codeexecutor build ...` first)")
    gen = TraceGenerator(model)
    docs = _docstrings(resource_descriptions)
    report: dict = {"model": model, "data": data, "split": split, "beam": beam, "datasets": {}}
    error_pairs: dict[str, list] = {"plain": [], "described": []}

    def predict(rows, with_docs=False):
        inputs, offsets = [], []
        for r in rows:
            code, offset = r["code"], 0
            if with_docs and r["problem_id"] in docs:
                doc = '"""' + docs[r["problem_id"]].replace('"""', "'''") + '\n"""\n'
                code, offset = doc + code, doc.count("\n")
            inputs.append(format_code(code, r["task"]) if len(code.splitlines()) <= 200 else format_code(r["code"], r["task"]))
            offsets.append(offset if len(code.splitlines()) <= 200 else 0)
        outs = []
        it = range(0, len(inputs), batch_size)
        if progress:
            from tqdm import tqdm

            it = tqdm(it, desc="generating", unit="batch")
        for i in it:
            outs += gen.generate(inputs[i : i + batch_size], beam=beam, max_length=max_length, batch_size=batch_size)
        return [_shift(TraceRecord.from_text(o.text), k) for o, k in zip(outs, offsets)]

    for name, path in found.items():
        dd = datasets.load_from_disk(path)
        use = split if split in dd else ("valid" if "valid" in dd else None)
        if use is None:
            continue
        rows = list(dd[use])[: limit or None]
        if not rows:
            continue
        preds = predict(rows)
        refs = [TraceRecord.from_text(r["target"]) for r in rows]
        entry = {
            "split": use,
            "official": trace_metrics(preds, refs),
            "aligned": trace_metrics(preds, refs, aligned=True),
            "orca": orca_metrics(preds, refs),
            "categories": {},
        }
        by_cat = defaultdict(list)
        for i, r in enumerate(rows):
            for c in categories(r["code"]):
                by_cat[c].append(i)
        for c, idx in by_cat.items():
            m = trace_metrics([preds[i] for i in idx], [refs[i] for i in idx])
            entry["categories"][c] = {"programs": len(idx), "trace_accuracy": m["trace_accuracy"], "output_accuracy": m["output_accuracy"]}
        report["datasets"][name] = entry
        if name in ("errors", "codenetmut"):
            error_pairs["plain"] += list(zip(preds, refs))
            if docs:
                error_pairs["described"] += list(zip(predict(rows, with_docs=True), refs))
    if error_pairs["plain"]:
        p, r = zip(*error_pairs["plain"])
        report["runtime_errors"] = error_metrics(p, r)
        if error_pairs["described"]:
            p, r = zip(*error_pairs["described"])
            report["runtime_errors_with_resource_descriptions"] = error_metrics(p, r)
    return report


def table3(report: dict) -> str:
    head = f"{'test set':12} {'split':6} {'n':>5} {'output acc':>10} {'trace acc':>10} {'line F1':>8} {'ident F1':>9}   paper (out/trace/line/ident)"
    lines = [head]
    for name, e in report["datasets"].items():
        m = e["official"]
        paper = PAPER_TABLE3.get(name)
        ref = " / ".join("-" if v is None else f"{v:.2f}" for v in paper) if paper else ""
        out = "-" if m["output_accuracy"] is None else f"{m['output_accuracy']:.2f}"
        lines.append(f"{name:12} {e['split']:6} {m['programs']:5d} {out:>10} {m['trace_accuracy']:10.2f} {m['line_f1']:8.2f} {m['identifier_f1']:9.2f}   {ref}")
        a = e["aligned"]
        lines.append(f"{'  aligned':12} {'':6} {'':5} {'':>10} {'':>10} {a['line_f1']:8.2f} {a['identifier_f1']:9.2f}")
    for key in ("runtime_errors", "runtime_errors_with_resource_descriptions"):
        if key in report:
            r = report[key]
            fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
            lines.append(f"{key}: detection {fmt(r['detection_accuracy'])}% (TP {r['tp']} FP {r['fp']} FN {r['fn']} TN {r['tn']}), "
                         f"localisation {fmt(r['localisation_accuracy'])}%, kind acc {fmt(r['kind_accuracy'])}%, weighted F1 {fmt(r['kind_weighted_f1'])}")
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
