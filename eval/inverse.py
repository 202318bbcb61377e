"""Inverse execution scored on held-out functions: given a function and the value a call of it
returned, an input that makes it return that value (CRUXEval's input prediction).

Each functions row ends with the call it traced, `print(repr(f(...)))`. The call's arguments
are hidden; the program before it (the function, and the calls of it the row makes before,
whose arguments are part of the program) and the printed value are the question. The
candidates of debugger/inverse.py are ranked by the model, and every candidate is run once in
the sandbox, so that three orders are scored on the same runs:

* `model`: the model's ranking (the predicted output's likeness to the wanted one);
* `proposed`: the proposals' own order, no model (the program's own calls' types first);
* `coverage`: whether any candidate reproduces the value, the most a ranking can reach.

pass@k is the share of programs whose first k inputs include one whose real return value is
the wanted one (any such input counts). Rows whose value is not a literal, whose last call is not of a
function the program defines (`str(...)`, a method), or whose run takes more than
`max_steps` events (CRUXEval's functions are short), are left out and counted.
"""

from __future__ import annotations

import ast

from codeexecutor.debugger.proposals import arity

KS = (1, 5)


def question(row: dict, max_steps: int) -> tuple[str, str, str, str] | None:
    """(program before the call, the function's name, the hidden call, the printed value),
    or None where the row is not such a question."""
    if row.get("status") != "ok" or row.get("n_steps", 0) > max_steps:
        return None
    lines = row["code"].rstrip("\n").splitlines()
    try:
        node = ast.parse(lines[-1]).body[0]
        value = row["stdout"].strip()
        ast.literal_eval(value)
    except (SyntaxError, ValueError, IndexError, TypeError, MemoryError, RecursionError):
        return None
    if not (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", None) == "print"
        and len(node.value.args) == 1
        and isinstance(node.value.args[0], ast.Call)
        and getattr(node.value.args[0].func, "id", None) == "repr"
        and isinstance(node.value.args[0].args[0], ast.Call)
        and isinstance(node.value.args[0].args[0].func, ast.Name)
    ):
        return None
    call = node.value.args[0].args[0]
    source = "\n".join(lines[:-1]) + "\n"
    try:
        defined = arity(ast.parse(source), call.func.id) is not None
    except SyntaxError:
        return None
    return (source, call.func.id, ast.unparse(call), value) if defined else None  # a function of the program


def score_question(gen, source: str, name: str, value: str, candidates: int) -> dict:
    from codeexecutor.debugger.inverse import inputs_for, run_candidate

    found = inputs_for(gen, source, value, call=name, k=max(KS), candidates=candidates, check=False)
    runs = {}
    for c in found["ranked"]:
        program = source.rstrip("\n") + f"\nprint(repr({c['input']}))\n"
        runs[c["input"]] = run_candidate(program, "", found["wanted"], "call")[1]
    model = [runs[c["input"]] for c in found["ranked"]]
    proposed = [runs[c["input"]] for c in sorted(found["ranked"], key=lambda c: c["proposed"])]
    out = {"candidates": len(model), "coverage": any(model)}
    for k in KS:
        out[f"model@{k}"] = any(model[:k])
        out[f"proposed@{k}"] = any(proposed[:k])
    out["predicted_match"] = bool(found["ranked"]) and found["ranked"][0]["predicted_matches"]
    return out


def inverse_tasks(
    model: str,
    data: str,
    split: str = "test",
    limit: int | None = 60,
    candidates: int = 32,
    max_steps: int = 30,
    seed: int = 0,
) -> dict:
    """pass@1 and pass@5 of the model's ranking, of the proposals' order and the coverage,
    on the functions sets of a folder of built datasets."""
    import datasets

    from codeexecutor.generation.api import cached_generator
    from codeexecutor.progress import bar
    from eval.evaluate import find_datasets, sample
    from eval.report import task_header

    gen = cached_generator(model)
    metric = "pass@k, execution-checked: a program passes when one of its first k inputs returns the value"
    report = task_header(model, split, limit, seed, metric, candidates=candidates, max_steps=max_steps)
    for name, path in find_datasets(data).items():
        if name != "functions":
            continue
        rows = datasets.load_from_disk(path)[split]
        questions = [q for q in (question(r, max_steps) for r in rows) if q]
        picked = [questions[i] for i in sample(len(questions), limit, seed)]
        results = [
            score_question(gen, s, f, v, candidates) for s, f, _, v in bar(picked, desc="inverse", unit="program")
        ]
        report["datasets"][name] = summarize(results) | {"rows": len(rows), "questions": len(questions)}
    if not report["datasets"]:
        from codeexecutor.errors import UsageError

        raise UsageError(f"--inverse scores the functions set and {data} has none (codeexecutor build functions)")
    return report


def summarize(results: list[dict]) -> dict:
    n = len(results)
    keys = ["coverage", "predicted_match"] + [f"{o}@{k}" for o in ("model", "proposed") for k in KS]
    return {"scored": n} | {key: round(100 * sum(r[key] for r in results) / max(n, 1), 2) for key in keys}


def table(report: dict) -> str:
    cols = ["model@1", "model@5", "proposed@1", "proposed@5", "coverage", "predicted_match"]
    rows = [f"{'dataset':<12}{'scored':>7}" + "".join(f"{c:>16}" for c in cols)]
    for name, f in report["datasets"].items():
        rows.append(f"{name:<12}{f['scored']:>7}" + "".join(f"{f[c]:>16.2f}" for c in cols))
    return "\n".join(rows)
