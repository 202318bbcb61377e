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

Contest programs (the held-out problems' original submissions) are asked for a stdin: the
problem's first sample input is the example, whose tokens the candidates vary, and the
program's real output on its second sample is wanted (read from the CodeNet root the build
came from); a question whose two samples print the same is left out.

pass@k is the share of programs whose first k inputs include one whose real return value (or
printed output) is the wanted one (any such input counts). Functions rows whose value is not
a literal, whose last call is not of a function the program defines (`str(...)`, a method),
or whose run takes more than `max_steps` events (CRUXEval's functions are short), are left
out and counted.
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


def contest_question(row: dict, roots: list[str]) -> tuple[str, str, str] | None:
    """(program, example stdin, wanted output) of an original contest program of a held-out
    problem, read from its CodeNet root: the problem's first sample input is the example,
    and the program's real output on its second is wanted; None where either is missing,
    the program does not run, or both inputs print the same (the example would answer)."""
    import os

    from codeexecutor.execution import ExecStatus, execute

    if row.get("kind") != "original":
        return None
    for root in roots:
        program = os.path.join(root, "data", row["problem_id"], "Python", f"{row['source_id']}.py")
        samples = os.path.join(root, "derived", "input_output", "data", row["problem_id"])
        if os.path.isfile(program) and all(os.path.isfile(os.path.join(samples, f"input_{k}.txt")) for k in (0, 1)):
            break
    else:
        return None
    with open(program, encoding="utf-8", errors="replace") as f:
        source = f.read()
    example, other = (open(os.path.join(samples, f"input_{k}.txt")).read() for k in (0, 1))
    runs = [execute(source, stdin) for stdin in (example, other)]
    if any(r.status != ExecStatus.OK for r in runs) or runs[0].stdout == runs[1].stdout or not runs[1].stdout.strip():
        return None
    return source, example, runs[1].stdout


def score_question(gen, source: str, name: str | None, value: str, candidates: int, stdin: str | None = None) -> dict:
    """The three orders of one question: a call of `name` that returns `value`, or (`stdin`
    the example) a stdin that makes the program print `value`."""
    from codeexecutor.debugger.inverse import Tries, inputs_for, run_candidate

    found = inputs_for(gen, source, value, name, stdin, Tries(max(KS), candidates, check=False))
    runs = {}
    for c in found["ranked"]:
        if stdin is None:
            program = source.rstrip("\n") + f"\nprint(repr({c['input']}))\n"
            runs[c["input"]] = run_candidate(program, "", found["wanted"], "call")[1]
        else:
            runs[c["input"]] = run_candidate(source, c["input"], found["wanted"], "stdin")[1]
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
    codenet: list[str] | None = None,
) -> dict:
    """pass@1 and pass@5 of the model's ranking, of the proposals' order and the coverage,
    on the functions and contest sets of a folder of built datasets (`codenet`: the CodeNet
    roots the contest programs and their sample inputs are read from; default the shared
    data's `atcoder-python*` folders beside the checkout)."""
    import glob
    import os

    import datasets

    from codeexecutor.generation.api import cached_generator
    from codeexecutor.progress import bar
    from eval.evaluate import find_datasets, sample
    from eval.report import task_header

    gen = cached_generator(model)
    metric = "pass@k, execution-checked: a program passes when one of its first k inputs returns the value"
    report = task_header(model, split, limit, seed, metric, candidates=candidates, max_steps=max_steps)
    roots = (
        codenet if codenet is not None else sorted(glob.glob(os.path.join("..", "shared", "data", "atcoder-python*")))
    )
    report["codenet"] = [os.path.abspath(r) for r in roots]
    for name, path in find_datasets(data).items():
        if name not in ("functions", "codenetmut"):
            continue
        rows = datasets.load_from_disk(path)[split]
        if name == "functions":
            questions = [(s, f, v, None) for s, f, _, v in filter(None, (question(r, max_steps) for r in rows))]
        else:  # contest programs: a stdin from the output; each question runs the program twice to be posed
            originals = rows.filter(lambda r: r["kind"] == "original")
            found = [contest_question(r, roots) for r in bar(originals, desc="contest questions", unit="program")]
            questions = [(s, None, v, x) for s, x, v in filter(None, found)]
        picked = [questions[i] for i in sample(len(questions), limit, seed)]
        results = [
            score_question(gen, s, f, v, candidates, stdin=x)
            for s, f, v, x in bar(picked, desc=f"inverse {name}", unit="program")
        ]
        report["datasets"][name] = summarize(results) | {"rows": len(rows), "questions": len(questions)}
    if not report["datasets"]:
        from codeexecutor.errors import UsageError

        raise UsageError(
            f"--inverse scores the functions and contest sets and {data} has none (codeexecutor build functions, "
            "codeexecutor build codenetmut)"
        )
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
