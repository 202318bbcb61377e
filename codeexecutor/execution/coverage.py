"""Which lines of a program ran to their end: the coverage of a traced run.

A line counts as covered when the statement it belongs to ran to its end without
raising: every line of a simple statement (a call spread over three lines covers three),
the header lines of a compound one (`if`, `for`, `def` with its decorators), and a
clause's own line (`else:`, `try:`, `finally:`) once the first statement under it ran.
Only code lines count: blank and comment-only lines never appear. A statement's step
is taken as finished unless it is the last step of a run that stopped on an error, a
timeout or a limit; `exit()` is a normal end (the form a `return` takes in a snippet).
An exception that the program catches is not seen in the trace, so the line that raised
it counts as covered.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

FINISHED = ("ok", "exit")  # statuses whose last step ran to its end


class _Units:
    """Each code line's innermost statement (a *unit*), and the lines each unit covers."""

    def __init__(self, source: str) -> None:
        self.owner: dict[int, int] = {}
        self.lines: list[set[int]] = []
        self.clauses: dict[int, set[int]] = {}  # first unit under a clause -> the clause's own lines
        tree = ast.parse(source)
        self._block(tree.body, None)

    def _unit(self, lines: Iterable[int]) -> int:
        unit = len(self.lines)
        self.lines.append(set(lines))
        for line in self.lines[unit]:
            self.owner[line] = unit  # visited outside in: an inner statement takes its lines
        return unit

    def _block(self, body: list[ast.stmt], clause: range | None) -> None:
        for i, stmt in enumerate(body):
            unit = self._stmt(stmt)
            if i == 0 and clause is not None:
                self.clauses.setdefault(unit, set()).update(clause)

    def _stmt(self, stmt: ast.stmt) -> int:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        body = getattr(stmt, "body", None)
        if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
            return self._unit(range(start, stmt.end_lineno + 1))
        first = body[0].lineno
        header = range(start, max(first, start + 1)) if first > stmt.lineno else range(start, start + 1)
        unit = self._unit(header)
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._block(body, header)  # `try:` is covered once its first statement runs
        else:
            self._block(body, None)
        last = body[-1].end_lineno
        for handler in getattr(stmt, "handlers", []):
            self._unit(range(handler.lineno, max(handler.body[0].lineno, handler.lineno + 1)))
            self._block(handler.body, None)
            last = handler.body[-1].end_lineno
        for block in (getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])):
            if block:
                clause = range(last + 1, block[0].lineno)
                if isinstance(stmt, ast.If) and len(block) == 1 and isinstance(block[0], ast.If):
                    clause = range(0)  # `elif`: a statement of its own
                self._block(block, clause)
                last = block[-1].end_lineno
        for case in getattr(stmt, "cases", []):
            self._unit(range(case.pattern.lineno, max(case.body[0].lineno, case.pattern.lineno + 1)))
            self._block(case.body, None)
        return unit


def code_lines(source: str) -> list[int]:
    """1-based lines that are neither blank nor comment-only."""
    return [i for i, text in enumerate(source.splitlines(), 1) if text.strip() and not text.strip().startswith("#")]


def covered_lines(source: str, step_lines: list[int], status: str) -> list[int]:
    """The code lines of `source` that ran to their end in a run with these steps."""
    try:
        units = _Units(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    done = step_lines if status in FINISHED else step_lines[:-1]
    reached = {units.owner[line] for line in step_lines if line in units.owner}
    finished = {units.owner[line] for line in done if line in units.owner}
    covered: set[int] = set()
    for unit in finished:
        covered |= units.lines[unit]
    for unit, lines in units.clauses.items():
        if unit in reached:
            covered |= lines
    code = set(code_lines(source))
    return sorted(covered & code)
