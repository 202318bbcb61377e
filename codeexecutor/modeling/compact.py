"""Compact traces: a step writes only the names that changed, and one expansion back.

In the full format every step writes the whole state of its frame, although a line
changes one or two names; most of a long trace is copies. The compact format (a model's
`trace_state: delta`) writes a step in one of two forms:

    <line> <k> <state> a : 1 <dictsep> b : 2 </state>   the whole state (as in the full format)
    <line> <k> <delta> b : 3 </state>                     only what changed since the step before

A step is a delta when the names of the previous step's state are, in the same order, the
start of this step's names (nothing disappeared, new names came last) and the line is in
the same function (or class body, or module level) as the previous step's line; it then
lists the names that are new or whose rendered value changed, in state order (`<delta>
</state>` when nothing changed). Everything else writes the whole state: the first step,
a call and a return (the frame changes), a `del`, and a new local that a function's frame
lists before older ones (CPython orders locals by their slot, not by assignment).
Output and exception steps are as in the full format.

The rule is checked on the states themselves, so `expand` gives back every step's state
exactly, names, values and order (tests/test_compact.py checks this over every example
of a corpus build). A recursive call whose frame holds the same names as its caller's may
be written as a delta; the expansion is exact all the same.

`expand(text)` turns compact text (generated or serialized) into full-format text, which
is what every consumer of a trace reads: the metrics, `trace`, reranking, search. It never
raises: a delta before any whole state, a pair it cannot read or a state left open is
expanded as far as it goes and listed in `problems`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from codeexecutor.source import parse_quietly

DELTA = "<delta>"  # opens a step that lists only the changed names; closed by </state>
STATE_KINDS = ("full", "delta")  # a model's `trace_state`: the format of its trace steps


def frames(code: str) -> dict[int, tuple[int, str]]:
    """1-based line -> (first line of the innermost function or class body holding it, its
    qualified name, e.g. `Tree.insert`); module-level lines are absent. A `def` or `class`
    header belongs to the scope around it. Code that does not parse (a snippet) gives {}."""
    out: dict[int, tuple[int, str]] = {}
    if "def" not in code and "class" not in code:  # no function or class: nothing to parse for (most contest programs)
        return out
    try:
        tree = parse_quietly(code)
    except (SyntaxError, ValueError):
        return out

    def visit(body: list, prefix: str) -> None:
        # Only statement lists are walked: a def or class is a statement, never part of an
        # expression, and the expressions are most of a tree's nodes.
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.body:
                inner, name = stmt.body[0].lineno, prefix + stmt.name
                for line in range(inner, (stmt.end_lineno or inner) + 1):
                    out[line] = (inner, name)
                visit(stmt.body, name + ".")
                continue
            # the bodies of if, for, while, with, try (its handlers), match (its cases); the name
            # `field` stays: this module's syntax tree is in data_format.ID_MODULES' digest
            for field in stmt._fields:  # noqa: F402
                value = getattr(stmt, field, None)
                if isinstance(value, list) and value:
                    if isinstance(value[0], ast.stmt):
                        visit(value, prefix)
                    elif isinstance(value[0], (ast.excepthandler, ast.match_case)):
                        for part in value:
                            visit(part.body, prefix)

    visit(tree.body, "")
    return out


def line_scopes(code: str) -> dict[int, int]:
    """1-based line -> the first line of the body of the function or class it runs in
    (module-level lines absent, i.e. scope 0)."""
    return {line: first for line, (first, _) in frames(code).items()}


def delta_names(
    previous: Mapping[str, str] | None, state: Mapping[str, str], same_frame: bool = True
) -> list[str] | None:
    """The names a compact step writes after `previous` (None: the whole state)."""
    if previous is None or not same_frame:
        return None
    names = list(state)
    if names[: len(previous)] != list(previous):  # a name disappeared or the order moved
        return None
    return [n for n in names if n not in previous or previous[n] != state[n]]


def compact_plan(steps: Sequence, code: str | None = None) -> list[list[str] | None]:
    """Per step, the names its compact form writes (None: the whole state)."""
    scopes = line_scopes(code) if code else {}
    plan, previous, scope = [], None, None
    for step in steps:
        here = scopes.get(step.line, 0)
        plan.append(delta_names(previous, step.state, here == scope))
        previous, scope = step.state, here
    return plan


# -- expansion ------------------------------------------------------------------------------


@dataclass
class Expansion:
    text: str  # full-format text
    problems: list[str] = field(default_factory=list)
    deltas: int = 0  # steps written as deltas
    wholes: int = 0  # steps written whole

    @property
    def malformed(self) -> bool:
        return bool(self.problems)


_STEP = re.compile(r"<line>|<exception>|<output>")
_HEAD = re.compile(r"<line>\s*(<\d+>)?\s*")


def read_pairs(inner: str, problems: list[str], where: str) -> list[tuple[str, str]]:
    """The (name, value) pairs between a state's opener and `</state>`; what cannot be read
    is described in `problems`."""
    out = []
    for pair in inner.split("<dictsep>"):
        # Only the one space on each side that the format writes goes: a value may itself
        # begin or end with spaces (an object whose repr is ' - 3').
        pair = pair[1:] if pair.startswith(" ") else pair
        pair = pair[:-1] if pair.endswith(" ") else pair
        if not pair.strip():
            continue
        name, sep, value = pair.partition(" : ")
        if not sep:
            name, sep, value = pair.partition(":")
            value = value.strip()
        if not sep or not name.strip():
            problems.append(f"{where}: unreadable pair {pair.strip()[:30]!r}")
            continue
        out.append((name.strip(), value))
    return out


def state_text(pairs: Sequence[tuple[str, str]]) -> str:
    """A whole state as the full format writes it (modeling/format.py `format_state`)."""
    items = [f"{n} : {v}" for n, v in pairs]
    return "<state> " + " <dictsep> ".join(items) + (" </state>" if items else "</state>")


def expand(text: str) -> Expansion:
    """Full-format text of compact trace text; text without deltas comes back unchanged.
    Everything but a delta's state is kept as written, spacing included."""
    if DELTA not in text:
        return Expansion(text)
    result = Expansion("")
    current: dict[str, str] | None = None
    starts = [m.start() for m in _STEP.finditer(text)]
    parts = [text[: starts[0]] if starts else text]
    for i, start in enumerate(starts):
        segment = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        head = _HEAD.match(segment) if segment.startswith("<line>") else None
        body = segment[head.end() :] if head else ""
        opener = DELTA if body.startswith(DELTA) else "<state>" if body.startswith("<state>") else None
        end = body.find("</state>")
        if opener is None or end < 0:  # output, exception, no state, or one left open (a cut generation)
            parts.append(segment)
            continue
        pairs = read_pairs(body[len(opener) : end], result.problems, f"step {i}")
        if opener == "<state>":
            current = dict(pairs)
            result.wholes += 1
            parts.append(segment)
            continue
        result.deltas += 1
        if current is None:
            result.problems.append(f"step {i}: a delta before any whole state")
            current = {}
        current.update(pairs)  # a changed name keeps its place, a new one goes last
        parts.append(head.group(0) + state_text(list(current.items())) + body[end + len("</state>") :])
    result.text = "".join(parts)
    return result
