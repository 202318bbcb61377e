"""The debugger's tasks scored on held-out test splits: from a real run's event, where does
`step`, `next`, `out` and `continue` land, and in what state?

For each program of a sample, `positions` events of its real trace are taken: the start
(before any event) and others drawn at random. From each, the model is given the real events up to
there (codeexecutor/debugger, generation/forced.py) and decodes until every action has
landed; the landing event is scored against the real one:

* `state`: the frame's variables at the landing equal the real ones, or where the program
  raised, the same exception on the same line (the headline);
* `event`: line, state, output and exception all equal;
* `taught`: the landing's state where the action is asked as a trained task (the real
  events, the action's marker, one step decoded without the state rules:
  codeexecutor/debugger/taught.py); only for a model trained on them (`debugger_actions`);
* beside them two baselines: `unchanged` ("nothing changes": the state at the position, for
  `out` the caller's last state, taken for the landing's; never a crash) and `full_trace`
  (the model's own trace from the start, not given the real events, walked by the same
  action from the same position).

`continue` breaks on the line of an event drawn from those after the position. A decoding
stops at twice the tokens of the real walk to the farthest landing, and 32 more: a cap on
the cost that can only turn a late answer into a miss. An action
whose real walk ends with the program (an `out` from module level) is not scored. Scores
are percentages over the scored (program, position) pairs of each action.
"""

from __future__ import annotations

import random

from codeexecutor.debugger.events import ACTIONS, Event, Frames, row_events, stack_at, target, trace_text
from codeexecutor.debugger.session import landing, predict
from codeexecutor.debugger.taught import taught

MEASURES = ("state", "event", "taught", "unchanged", "full_trace")


def _tasks(events: list[Event], position: int, rng: random.Random) -> list[tuple]:
    """(action, depth, lines, real landing index) of each action from `position`; `out` from
    module level is left out (its walk is the program's end)."""
    depth = events[position].depth if position >= 0 else 0
    later = [e.line for e in events[position + 1 :] if not e.exception]
    out = []
    for action in ACTIONS:
        if action == "out" and depth == 0:
            continue
        lines = {rng.choice(later)} if action == "continue" and later else None
        if action == "continue" and lines is None:
            continue
        j = target(events, position, depth, action, next(iter(lines)) if lines else None)
        if j is not None:
            out.append((action, depth, lines, j))
    return out


def _right(guess: Event | None, real: Event) -> bool:
    """The landing's state is right: the same variables and values, or, where the program
    raised, the same exception on the same line (a crash has no state to compare)."""
    if guess is None:
        return False
    if real.exception or guess.exception:
        return guess.exception == real.exception and guess.line == real.line
    return guess.state == real.state


def _unchanged(events: list[Event], position: int, action: str) -> dict | None:
    """ "Nothing changes": the state at the position (for `out`, the caller's last state
    before it); None where the landing could not be guessed so (nothing is there yet)."""
    if position < 0:
        return {}
    if action != "out":
        return events[position].state
    depth = events[position].depth
    return next((e.state for e in reversed(events[:position]) if e.depth < depth and not e.exception), {})


def score_program(gen, row: dict, positions: int, rng: random.Random) -> list[dict]:
    """One program's scored tasks: a dict per (position, action). The start (before any
    event) is always one of the positions."""
    code, model_input = row["code"], gen.code_input(row["code"], row["task"])
    events = row_events(row, gen.profile.order)
    if not events:
        return []
    starts = [-1] + sorted(rng.sample(range(len(events) - 1), min(positions - 1, len(events) - 1)))
    free = predict(gen, code, model_input, [], Frames(code), [])[0]  # the model's own trace, from the start
    teach = getattr(gen.model.config, "debugger_actions", None) == "taught"
    scored = []
    for position in starts:
        tasks = _tasks(events, position, rng)
        if not tasks:
            continue
        frames = stack_at(code, events, position)
        scoped = len(frames.stack) - 1
        wanted = [(a, scoped, lines) for a, _, lines, _ in tasks]
        # decoding stops at twice the real walk's length (in tokens) and 32 more: an answer
        # further off than that has left the real path anyway, and the cap bounds the cost
        far = max(j for *_, j in tasks)
        budget = 2 * len(gen.encoder.ids(trace_text(gen.profile, events[position + 1 : far + 1], code))) + 32
        predicted = predict(gen, code, model_input, events[: position + 1], frames, wanted, budget)[0]
        free_depth = free[position].depth if 0 <= position < len(free) else 0
        for action, _, lines, j in tasks:
            real = events[j]
            k = landing(predicted, action, scoped, lines)
            guess = predicted[k] if k is not None else None
            f = landing(free, action, free_depth, lines, start=position) if position < len(free) else None
            stay = _unchanged(events, position, action)
            asked = None
            if teach:  # a model trained on the actions as tasks: ask it so too
                breakpoint_line = min(lines) if lines else None
                asked = taught(gen, code, model_input, events[: position + 1], action, breakpoint_line, budget)[0]
            scored.append(
                {
                    "action": action,
                    "state": _right(guess, real),
                    "event": real.same(guess),
                    "taught": _right(asked, real) if teach else None,
                    "unchanged": not real.exception and stay == real.state,
                    "full_trace": _right(free[f] if f is not None else None, real),
                }
            )
    return scored


def debugger_tasks(
    model: str, data: str, split: str = "test", limit: int | None = 100, positions: int = 3, seed: int = 0
):
    """The debugger's tasks on the contest programs (codenetmut) and functions of a folder of
    built datasets: per dataset and action, each measure's percentage and the count."""

    from codeexecutor.generation.api import cached_generator
    from codeexecutor.progress import bar
    from eval.report import sampled_sets, task_header

    gen = cached_generator(model)
    metric = "exact match of the landing event's state (state), of the whole event (event), and the two baselines"
    report = task_header(model, split, limit, seed, metric, positions=positions)
    for name, rows in sampled_sets(data, split, limit, seed):
        rng = random.Random(seed)
        results = []
        for row in bar(rows, desc=f"debugger {name}", unit="program"):
            results += score_program(gen, row, positions, rng)
        report["datasets"][name] = summarize(results)
    return report


def summarize(results: list[dict]) -> dict:
    out = {}
    for action in ACTIONS:
        mine = [r for r in results if r["action"] == action]
        if mine:
            out[action] = {"scored": len(mine)} | {
                m: round(100 * sum(r[m] for r in mine) / len(mine), 2) for m in MEASURES if mine[0][m] is not None
            }
    return out


def table(report: dict) -> str:
    """The report as a table: per dataset and action, each measure's percentage."""
    rows = [f"{'dataset':<18}{'action':<10}{'scored':>7}" + "".join(f"{m:>12}" for m in MEASURES)]
    for name, actions in report["datasets"].items():
        for action, f in actions.items():
            rows.append(
                f"{name:<18}{action:<10}{f['scored']:>7}"
                + "".join(f"{f[m]:>12.2f}" if m in f else f"{'-':>12}" for m in MEASURES)
            )
    return "\n".join(rows)
