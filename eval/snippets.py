"""Incomplete code to run: function bodies lifted out of their project, as LExecutor lifts them.

`function_bodies` takes each (non-async) function of a module and gives its body alone:
dedented, with its comments and layout kept (LibCST rewrites it), every `return x` and
`yield x` of the function itself (not of a function nested in it) turned into `exit(x)`,
and nothing else of its project — no imports, no other definitions. Bodies that do not
compile on their own (a `nonlocal`, say) are left out.

`fidelity` compares a guided run of a body with the real run of the same function
called by its package's own tests: the lines the body executes in order, the branch
taken at each `if`, and the kind of value returned.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Body:
    path: str
    function: str  # qualified: Class.method, outer.inner
    source: str  # the body, runnable on its own
    first_line: int  # the line of the module where the body's first statement is


class _Exits(cst.CSTTransformer):
    """`return x` / `yield x` of the function being lifted (depth 0) -> `exit(x)`."""

    def __init__(self) -> None:
        self.depth = 0

    def _enter(self, node) -> bool:
        self.depth += 1
        return True

    def _leave(self, original, updated):
        self.depth -= 1
        return updated

    # a nested function, lambda or class returns for itself
    visit_FunctionDef = visit_Lambda = visit_ClassDef = _enter
    leave_FunctionDef = leave_Lambda = leave_ClassDef = _leave

    def leave_Return(self, original, updated):
        if self.depth:
            return updated
        return cst.Expr(_exit_call(updated.value))

    def leave_Yield(self, original, updated):
        if self.depth:
            return updated
        value = updated.value.item if isinstance(updated.value, cst.From) else updated.value
        return _exit_call(value)


def _exit_call(value) -> cst.Call:
    if value is None:
        return cst.Call(cst.Name("exit"))
    if isinstance(value, cst.Tuple) and not value.lpar:  # `return a, b` -> exit((a, b)), one value
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Name("exit"), [cst.Arg(value)])


class _Collect(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[str, cst.FunctionDef, int]] = []

    def visit_ClassDef(self, node) -> bool:
        self.scope.append(node.name.value)
        return True

    def leave_ClassDef(self, node) -> None:
        self.scope.pop()

    def visit_FunctionDef(self, node) -> bool:
        name = ".".join([*self.scope, node.name.value])
        if node.asynchronous is None and isinstance(node.body, cst.IndentedBlock):
            first = self.get_metadata(cst.metadata.PositionProvider, node.body.body[0]).start.line
            self.found.append((name, node, first))
        self.scope.append(node.name.value)
        return True

    def leave_FunctionDef(self, node) -> None:
        self.scope.pop()


def function_bodies(source: str, path: str = "<module>") -> list[Body]:
    """Every non-async function's body of a module, lifted (module order)."""
    try:
        wrapper = cst.MetadataWrapper(cst.parse_module(source))
    except (cst.ParserSyntaxError, RecursionError):
        return []
    collect = _Collect()
    wrapper.visit(collect)
    bodies = []
    for name, node, first in collect.found:
        lifted = node.body.visit(_Exits())
        text = cst.Module(body=list(lifted.body)).code
        try:
            compile(text, "<body>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError):
            continue
        bodies.append(Body(path, name, text, first))
    return bodies


# -- fidelity -------------------------------------------------------------------------
def call_segment(steps, first: int, last: int) -> list[int] | None:
    """The lines (first..last) one call of a function ran, at its own depth: the last call
    made at the shallowest depth any call of it was made."""
    segments: list[tuple[int, list[int]]] = []
    current = None
    for step in steps:
        inside = first <= step.line <= last
        if current is not None:
            depth, lines = current
            if step.depth == depth and inside:
                lines.append(step.line)
                continue
            if step.depth > depth:
                continue
            segments.append(current)
            current = None
        if inside:
            current = (step.depth, [step.line])
    if current is not None:
        segments.append(current)
    if not segments:
        return None
    shallow = min(d for d, _ in segments)
    return [lines for d, lines in segments if d == shallow][-1]


def branches(body: str, lines: list[int]) -> dict[int, str]:
    """The way each `if` of `body` went the first time it ran: then, else, or neither."""
    taken: dict[int, str] = {}
    for node in ast.walk(ast.parse(body)):
        if not isinstance(node, ast.If) or node.lineno not in lines:
            continue
        at = lines.index(node.lineno)
        after = lines[at + 1] if at + 1 < len(lines) else None
        then = range(node.body[0].lineno, node.body[-1].end_lineno + 1)
        orelse = range(node.orelse[0].lineno, node.orelse[-1].end_lineno + 1) if node.orelse else range(0)
        taken[node.lineno] = "then" if after in then else "else" if after in orelse else "neither"
    return taken


def compare(body: str, real: list[int], real_kind: str | None, guided: list[int], guided_kind: str | None) -> dict:
    """How a guided run of a body follows the real run (both as lines of `body`)."""
    want, got = branches(body, real), branches(body, guided)
    same = sum(1 for line, way in want.items() if got.get(line) == way)
    return {
        "lines_same": real == guided,
        "kind_same": real_kind == guided_kind,
        "exact": real == guided and real_kind == guided_kind,
        "branches": len(want),
        "branches_same": same,
    }
