"""Runtime errors measured as Bieber et al. and ORCA measure them (`codeexecutor evaluate --crashes`).

Sets, from a `codeexecutor build bugs` folder's split (by problem):

* `bugs`: every program of the split, the originals and their one-bug variants;
* `real`: the submissions of the split's problems that crashed on their own sample input,
  beside the split's accepted originals (no bug put in by us on either side);
* `real_every_split`: the same with the crashing submissions of every split's problems
  (the detector's training leaves the programs out, not their problems: other
  submissions of a train problem, bugs put in, are trained on);
* `incomplete`: the split's originals that import something, with every import removed
  (run again: most now crash with a NameError), beside the same programs complete;

and from a CodeNetMut or functions build, `mutants` (the crashing mutants of the twelve
operators beside the clean programs) and `functions` (crashing function calls beside clean ones).

For each: detection accuracy with the true/false positive rates, the balanced accuracy
(the mean of the two rates' right answers, what a set's crash share cannot lift) and the
majority answer's detection (always "crash", or always "no crash"), localisation (the
crash line, of the crashing programs), kind accuracy and weighted F1, for

* `detector`: the model folder's crash detector (modeling/detector.py), at its threshold,
  with the interpreter's check of what the program imports (modeling/interpreter_check.py),
  as the product answers; `detector_unchecked`: the detector alone;
* `static`: a baseline without a model: the interpreter's check, a name read that nothing
  binds is a `NameError` at its first line, an `input()` left in the code an `EOFError`
  at its line (the first of these), else no crash;
* `trace` (with `trace=True`): the trace model's own `<exception>`, greedy.
"""

from __future__ import annotations

import ast
import builtins
import os
import random

from codeexecutor.modeling.interpreter_check import first_missing

_BUILTINS = frozenset(dir(builtins))


def static_verdict(code: str) -> tuple[str | None, int | None]:
    """(type, line) of the crash a reading without a model predicts, or (None, None)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None, None
    bound = set(_BUILTINS)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    first = None
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            first = min(first or (1 << 30, ""), (line, "NameError"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "input":
            first = min(first or (1 << 30, ""), (line, "EOFError"))
    checked = first_missing(code)
    if checked is not None and (first is None or checked[1] <= first[0]):
        return checked
    return (first[1], first[0]) if first else (None, None)


def figures(predicted: list[tuple[str | None, int | None]], rows: list[dict]) -> dict:
    """Detection, localisation and kind of (type, line) answers (None: no crash) against
    the runs (modeling/trace_metrics.py error_metrics, as the traces are scored)."""
    from codeexecutor.modeling.trace_metrics import verdict_metrics

    out = verdict_metrics(predicted, [(r["type"], r["line"]) for r in rows])
    crashes = sum(r["crashed"] for r in rows)
    tpr, fpr = out.get("true_positive_rate"), out.get("false_positive_rate")
    balanced = None if tpr is None or fpr is None else round((tpr + 100 - fpr) / 2, 2)
    majority = round(100 * max(crashes, len(rows) - crashes) / len(rows), 2) if rows else None
    return {
        "programs": len(rows),
        "crashes": crashes,
        **out,
        "balanced_accuracy": balanced,
        "majority_detection": majority,
    }


def crash_sets(folder: str, split: str, limit: int | None = None, seed: int = 0) -> dict[str, list[dict]]:
    """The three sets of a bugs build's split (module doc); `limit`: a fixed random sample of
    each set, crashing and clean programs sampled apart so the mix stays."""
    from codeexecutor.training.crash_data import read_rows

    sets = {}
    if os.path.isdir(os.path.join(folder, "bugs")):
        rows = read_rows(folder, split)
        originals = [r for r in rows if r["kind"] == "original"]
        sets["bugs"] = rows
        clean = [r for r in originals if not r["crashed"]]
        sets["real"] = [r for r in originals if r["crashed"]] + clean
        everywhere = [r for r in read_rows(folder) if r["kind"] == "original" and r["crashed"]]
        sets["real_every_split"] = everywhere + clean
        sets["incomplete"] = _incomplete([r for r in originals if not r["crashed"]])
    for name, crashing, clean in (("mutants", "errors", "codenetmut"), ("functions", "functions_errors", "functions")):
        if os.path.isdir(os.path.join(folder, crashing)) and os.path.isdir(os.path.join(folder, clean)):
            sets[name] = read_rows(folder, split, crashing) + read_rows(folder, split, clean)
    return {name: _sample(s, limit, seed) for name, s in sets.items()}


def _sample(rows: list[dict], limit: int | None, seed: int) -> list[dict]:
    if not limit or len(rows) <= limit:
        return rows
    rng = random.Random(seed)
    crash = [r for r in rows if r["crashed"]]
    clean = [r for r in rows if not r["crashed"]]
    k = round(limit * len(crash) / len(rows))
    return rng.sample(crash, k) + rng.sample(clean, limit - k)


def _incomplete(originals: list[dict]) -> list[dict]:
    """Programs with every import removed, run again, beside the same programs complete."""
    from codeexecutor.execution import ExecutorPool, Program

    stripped = []
    for r in originals:
        code = _without_imports(r["code"])
        if code is not None:
            stripped.append({**r, "id": r["id"] + "_noimport", "code": code, "kind": "incomplete"})
    with ExecutorPool(workers=2) as pool:
        results = dict(pool.execute_many(Program(r["code"], "", i) for i, r in enumerate(stripped)))
    out = []
    for i, r in enumerate(stripped):
        res = results[i]
        crashed = res.error is not None and res.status.value == "error"
        if res.status.value == "ok" or crashed:
            out.append(
                {
                    **r,
                    "crashed": crashed,
                    "type": res.error.type if crashed else None,
                    "line": res.error.line if crashed else None,
                }
            )
    complete = {r["id"] for r in out}
    return out + [r for r in originals if r["id"] + "_noimport" in complete]


def _without_imports(code: str) -> str | None:
    """The module's top-level import lines blanked (line numbers kept), or None without any."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = code.splitlines(keepends=True)
    hit = False
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno == node.end_lineno:
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                lines[node.lineno - 1] = "\n"
                hit = True
    return "".join(lines) if hit else None


def evaluate_crashes(
    model: str, folder: str, split: str, limit: int | None = None, descriptions=None, trace: bool = False
) -> dict:
    """The report: for each set, the detector's, the static baseline's (and the trace's) figures."""
    from codeexecutor.generation.api import cached_generator

    generator = cached_generator(model)
    detector = generator.detector
    describe = None
    if descriptions:
        from codeexecutor.training.crash_data import described, read_descriptions

        docs = read_descriptions(descriptions)
        describe = lambda r: described(r["code"], docs.get(r["problem_id"]))  # noqa: E731
    from eval.report import run_facts

    report: dict = {"model": model, "data": folder, "split": split, "limit": limit, **run_facts(), "sets": {}}
    for name, rows in crash_sets(folder, split, limit).items():
        entry = {"static": figures([static_verdict(r["code"]) for r in rows], rows)}
        if detector is not None:
            entry["detector"] = figures(_detector_answers(generator, detector, rows), rows)
            entry["detector_unchecked"] = figures(_detector_answers(generator, detector, rows, check=False), rows)
            if describe is not None:
                entry["detector_described"] = figures(_detector_answers(generator, detector, rows, describe), rows)
        if trace:
            entry["trace"] = figures(_trace_answers(model, rows), rows)
        report["sets"][name] = entry
    return report


def _detector_answers(generator, detector, rows, describe=None, check=True) -> list[tuple[str | None, int | None]]:
    codes, offsets = [], []
    for r in rows:
        code, offset = describe(r) if describe else (r["code"], 0)
        codes.append(code)
        offsets.append(offset)
    out = []
    for v, offset in zip(detector.predict(codes, offsets, check=check), offsets):
        out.append((v.type, v.line - offset if v.line else None) if v.crashed else (None, None))
    return out


def _trace_answers(model: str, rows: list[dict]) -> list[tuple[str | None, int | None]]:
    from codeexecutor.generation.api import trace_programs

    reports = trace_programs([{"code": r["code"]} for r in rows], model)
    out = []
    for rep in reports:
        err = rep.get("trace_error")
        out.append((err["type"], err["line"]) if err else (None, None))
    return out


def table(report: dict) -> str:
    lines = [
        "set               answer             programs  detection  balanced  majority  TPR    FPR    "
        "localisation  kind F1"
    ]
    for name, entry in report["sets"].items():
        for who, f in entry.items():
            lines.append(
                f"{name:<17} {who:<18} {f['programs']:>8}  {f['detection_accuracy'] or 0:>9.1f}  "
                f"{f.get('balanced_accuracy') or 0:>8.1f}  {f.get('majority_detection') or 0:>8.1f}  "
                f"{f['true_positive_rate'] or 0:>5.1f}  {f['false_positive_rate'] or 0:>5.1f}  "
                f"{f['localisation_accuracy'] or 0:>12.1f}  {f['kind_weighted_f1'] or 0:>7.1f}"
            )
    return "\n".join(lines)
