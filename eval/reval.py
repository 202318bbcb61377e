"""REval's four questions of a run, answered from the model's own trace of each held-out program.

REval (Chen et al., 2024) asks of a program run on an input: is line k executed (coverage),
what is variable v after line k runs (state), which line runs next after line k (path), and
what does the program print (output). Here the questions come from each test row's real run
and the model answers all four from one greedy trace of the program from its start, decoded
as `evaluate` decodes (no real events given; the debugger's actions are scored apart, by
eval/debugger.py):

* coverage: a line that can produce an event (one with code the interpreter runs, not an
  `else:` or a docstring); the answer is whether the predicted trace has an event at it
  (half the questions ask of a line the real run reaches, half of one it does not, where
  the program has such a line);
* state: an event drawn from the real run and a variable of its state whose value is data
  (not a function, class or module); the answer is that variable's value at the same
  occurrence (the n-th event at that line) of the predicted trace;
* path: the same event; the answer is the line of the next event. Events are in the order
  the model writes them, which for this project's models is the order lines finish (a
  call's steps before the line that called), so this asks which line finishes next,
  REval's "runs next" wherever no call sits between;
* output: the printed output, whole.

Beside the model, answers that need none: coverage "every line runs", state "nothing
changes" (the variable's value at the event before, where it had one), path "the next line
of the source", output "prints nothing" (REval's own baselines are the models it compares).
Scores are percentages of the questions asked, per dataset.
"""

from __future__ import annotations

import random

from codeexecutor.generation.decoding import Decoding

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


def event_lines(code: str) -> set[int] | None:
    """The lines that can produce an event: those the compiled program has code at, in every
    function and class too (None where it does not compile here)."""
    import types

    try:
        stack = [compile(code, "<program>", "exec")]
    except (SyntaxError, ValueError):
        return None
    lines = set()
    while stack:
        co = stack.pop()
        lines |= {line for _, _, line in co.co_lines() if line}
        stack += [c for c in co.co_consts if isinstance(c, types.CodeType)]
    return lines


def _data(value: str) -> bool:
    return not value.startswith(("<function", "<class", "<module", "<built-in"))


def ask(code: str, real: list, stdout: str, rng: random.Random) -> list[dict]:
    """The questions of one program's real run: each with its real answer and what it needs."""
    lines = [e.line for e in real if not e.exception]
    states = [e for e in real if not e.exception]
    out = []
    runnable = event_lines(code)
    if runnable is None:
        runnable = {i + 1 for i, t in enumerate(code.splitlines()) if t.strip() and not t.strip().startswith("#")}
    reached, missed = sorted(set(lines)), sorted(runnable - set(lines))
    pool = missed if (missed and rng.random() < 0.5) else reached
    if pool:
        k = rng.choice(pool)
        out.append({"q": "coverage", "line": k, "real": k in set(lines)})
    with_data = [i for i, e in enumerate(states) if any(_data(v) for v in e.state.values())]
    if with_data:
        i = rng.choice(with_data)
        name = rng.choice(sorted(n for n, v in states[i].state.items() if _data(v)))
        n = occurrence(lines, i)
        before = states[i - 1].state.get(name) if i > 0 else None
        out.append(
            {"q": "state", "line": lines[i], "n": n, "name": name, "real": states[i].state[name], "before": before}
        )
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
    """The answer that needs no model (see the module's docstring)."""
    return {
        "coverage": True,
        "state": question.get("before"),
        "path": question.get("line", 0) + 1,
        "output": "",
    }[question["q"]]


def reval_tasks(model: str, data: str, split: str = "test", limit: int | None = 100, seed: int = 0) -> dict:
    """Per dataset and question: the share the model's trace answers right, and the baselines'."""

    from codeexecutor.debugger.events import Event
    from codeexecutor.generation.api import cached_generator
    from eval.debugger import row_events
    from eval.report import sampled_sets, task_header

    gen = cached_generator(model)
    metric = "share of questions answered right from the model's greedy trace from the program's start"
    report = task_header(model, split, limit, seed, metric)
    for name, rows in sampled_sets(data, split, limit, seed):
        rng = random.Random(seed)
        inputs = [gen.profile.example(r)[0] for r in rows]
        rules = gen.rules_apply()
        decoded = gen.generate(inputs, Decoding(beam=1, names=rules, values=rules), batch_size=64)
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
    if not report["datasets"]:
        from codeexecutor.errors import UsageError

        raise UsageError(f"--reval needs contest programs, functions or the Tutorial, and {data} holds none of them")
    return report


def summarize(results: list[dict]) -> dict:
    out = {}
    for q in QUESTIONS:
        mine = [r for r in results if r["q"] == q]
        if mine:
            out[q] = {
                "asked": len(mine),
                "model": round(100 * sum(r["model"] for r in mine) / len(mine), 2),
                "baseline": round(100 * sum(r["baseline"] for r in mine) / len(mine), 2),
            }
    return out


def table(report: dict) -> str:
    rows = [f"{'dataset':<18}{'question':<10}{'asked':>7}{'model':>10}{'baseline':>10}"]
    for name, qs in report["datasets"].items():
        for q, f in qs.items():
            rows.append(f"{name:<18}{q:<10}{f['asked']:>7}{f['model']:>10.2f}{f['baseline']:>10.2f}")
    return "\n".join(rows)
