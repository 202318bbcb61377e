"""REval's four questions of a run, answered from the model's own trace of each held-out program.

REval (Chen et al., 2024) asks of a program run on an input: is line k executed (coverage),
what is variable v after line k runs (state), which line runs next after line k (path), and
what does the program print (output). Here the questions come from each test row's real run
and the model answers all four from one greedy trace of the program from its start, decoded
as `evaluate` decodes (no real events given; the debugger's actions are scored apart, by
eval/debugger.py):

* coverage: a line drawn from the program's lines that hold code; the answer is whether the
  predicted trace has an event at it (half the questions ask of a line the real run reaches,
  half of one it does not, where the program has such a line);
* state: an event drawn from the real run and a variable of its state; the answer is that
  variable's value at the same occurrence (the n-th event at that line) of the predicted trace;
* path: the same event; the answer is the line of the event after that occurrence;
* output: the printed output, whole.

Beside them two answers that need no model: coverage "every line runs" and path "the next
line of the source" (REval's own baselines are the models it compares). Scores are
percentages of the questions asked, per dataset.
"""

from __future__ import annotations

import random

QUESTIONS = ("coverage", "state", "path", "output")


def occurrence(lines: list[int], index: int) -> int:
    """How many events before `index` are at the same line as it (0 for the first)."""
    return lines[:index].count(lines[index])


def nth(lines: list[int], line: int, n: int) -> int | None:
    """The index of the n-th event at `line`, or None."""
    seen = -1
    for i, x in enumerate(lines):
        if x == line:
            seen += 1
            if seen == n:
                return i
    return None


def ask(code: str, real: list, stdout: str, rng: random.Random) -> list[dict]:
    """The questions of one program's real run: each with its real answer and what it needs."""
    lines = [e.line for e in real if not e.exception]
    states = [e for e in real if not e.exception]
    out = []
    codelines = [i + 1 for i, t in enumerate(code.splitlines()) if t.strip() and not t.strip().startswith("#")]
    reached, missed = sorted(set(lines)), [k for k in codelines if k not in set(lines)]
    pool = missed if (missed and rng.random() < 0.5) else reached
    if pool:
        k = rng.choice(pool)
        out.append({"q": "coverage", "line": k, "real": k in set(lines)})
    with_vars = [i for i, e in enumerate(states) if e.state]
    if with_vars:
        i = rng.choice(with_vars)
        name = rng.choice(sorted(states[i].state))
        n = occurrence(lines, i)
        out.append({"q": "state", "line": lines[i], "n": n, "name": name, "real": states[i].state[name]})
        if i + 1 < len(lines):
            out.append({"q": "path", "line": lines[i], "n": n, "real": lines[i + 1]})
    out.append({"q": "output", "real": stdout})
    return out


def answer(question: dict, predicted: list) -> object:
    """The predicted trace's answer to one question (None where it has none)."""
    events = [e for e in predicted if not e.exception]
    lines = [e.line for e in events]
    q = question["q"]
    if q == "coverage":
        return question["line"] in set(lines)
    if q == "output":
        return "".join(e.output for e in events)
    at = nth(lines, question["line"], question["n"])
    if at is None:
        return None
    if q == "state":
        return events[at].state.get(question["name"])
    return lines[at + 1] if at + 1 < len(lines) else None


def baseline(question: dict) -> object:
    q = question["q"]
    if q == "coverage":
        return True
    if q == "path":
        return question["line"] + 1
    return None


def reval_tasks(model: str, data: str, split: str = "test", limit: int | None = 100, seed: int = 0) -> dict:
    """Per dataset and question: the share the model's trace answers right, and the baselines'."""
    import datasets
    import torch

    from codeexecutor.debugger.events import Event
    from codeexecutor.generation.api import cached_generator
    from eval.debugger import row_events
    from eval.evaluate import find_datasets, sample

    gen = cached_generator(model)
    report = {
        "model": model,
        "split": split,
        "limit": limit,
        "seed": seed,
        "metric": "share of questions answered right from the model's greedy trace from the program's start",
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "datasets": {},
    }
    for name, path in find_datasets(data).items():
        if name not in ("codenetmut", "errors", "functions", "functions_errors", "tutorial"):
            continue
        rows = datasets.load_from_disk(path)[split]
        rows = rows.select(sample(len(rows), limit, seed))
        rng = random.Random(seed)
        inputs = [gen.profile.example(r)[0] for r in rows]
        rules = gen.rules_apply()
        decoded = gen.generate(inputs, beam=1, names=rules, values=rules, batch_size=64)
        results = []
        for row, g in zip(rows, decoded):
            parsed = gen.parse(g.text)  # whole states (a compact trace comes expanded)
            predicted = [Event(s.line, dict(s.state), s.output) for s in parsed.steps]
            for question in ask(row["code"], row_events(row, gen.profile.order), row["stdout"], rng):
                results.append(
                    {"q": question["q"], "model": answer(question, predicted) == question["real"]}
                    | {"baseline": baseline(question) == question["real"]}
                )
        report["datasets"][name] = summarize(results)
    return report


def summarize(results: list[dict]) -> dict:
    out = {}
    for q in QUESTIONS:
        mine = [r for r in results if r["q"] == q]
        if mine:
            out[q] = {"asked": len(mine), "model": round(100 * sum(r["model"] for r in mine) / len(mine), 2)}
            if q in ("coverage", "path"):
                out[q]["baseline"] = round(100 * sum(r["baseline"] for r in mine) / len(mine), 2)
    return out


def table(report: dict) -> str:
    rows = [f"{'dataset':<18}{'question':<10}{'asked':>7}{'model':>10}{'baseline':>10}"]
    for name, qs in report["datasets"].items():
        for q, f in qs.items():
            base = f"{f['baseline']:>10.2f}" if "baseline" in f else f"{'-':>10}"
            rows.append(f"{name:<18}{q:<10}{f['asked']:>7}{f['model']:>10.2f}{base}")
    return "\n".join(rows)
