"""Static stdin inlining: the reads a program would make, found from its syntax alone.

`codeexecutor trace` predicts a trace *without running the program*, so it cannot
record the reads as the dataset builders do (inline.py). This module finds the read
sites in the syntax tree, works out which run once and in which order, hands each the
input it would get, and lets inline.py make the edits, so the result has the same form
as the builders' (a literal per read site that runs once, `__inputs__.pop(0)` over the
ordered literal list for the others).

Read sites: `input()` (the builtin), `<stdin>.readline()/.read()/.readlines()` on
`sys.stdin`, `sys.stdin.buffer`, `stdin` imported from sys, `open(0)` or
`open('/dev/stdin')`, names bound once at module level to one of those methods
(`input = sys.stdin.readline`), and iteration over a stream (`for line in sys.stdin`,
`list(open(0))`, `n, *a = open(0)`), which reads every remaining line.

What runs once: module-level statements outside loops, conditionals and function
bodies; `if __name__ == "__main__":` blocks; the iterable of a `for` statement and
of a comprehension's first loop; the body of a function called exactly once from code
that runs once (`main()`). Sites are taken in source order within a statement.
Everything else may run any number of times: from the first such site on, the
remaining input becomes the literal list, which needs those sites to read lines of one
kind (all `input()`, or all `readline()`), or a single site that reads the rest.
Anything else raises InlineError("static_ambiguous").
"""

from __future__ import annotations

import ast

from codeexecutor.execution.inline import InlineError, InlineResult, _is_stream, inline_reads, syntax_error
from codeexecutor.source import parse_quietly

_METHODS = {"readline": "readline", "read": "read", "readlines": "readlines"}


def _stream(node: ast.AST, stdin_names: set[str]) -> tuple[bool, bool]:
    """(is a stdin stream, is binary)."""
    binary = isinstance(node, ast.Attribute) and node.attr == "buffer"
    inner = node.value if binary else node
    if isinstance(inner, ast.Name) and inner.id in stdin_names:
        return True, binary
    return _is_stream(node), binary


class _Finder:
    """Read sites in execution order, each marked as running once or not."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.stdin_names: set[str] = set()
        self.aliases: dict[str, tuple[str, bool]] = {}  # name -> (kind, binary)
        self.functions: dict[str, ast.AST] = {}
        self.calls: dict[str, int] = {}
        self.sites: list[tuple[str, bool, ast.AST, bool]] = []  # (kind, binary, node, once)
        self.expanded: set[str] = set()
        self._scan(tree)

    def _scan(self, tree: ast.Module) -> None:
        builtin_input = True
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "sys":
                self.stdin_names |= {a.asname or a.name for a in node.names if a.name == "stdin"}
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                self.calls[node.func.id] = self.calls.get(node.func.id, 0) + 1
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.calls.setdefault(node.id, 0)
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
        for node in ast.walk(tree):  # aliases may be bound in a function too (`def main(): input = ...`)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "input":
                builtin_input = False
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            name, value = node.targets[0].id, node.value
            if name == "input":
                builtin_input = False
            if isinstance(value, ast.Attribute) and value.attr in _METHODS:
                is_stream, binary = _stream(value.value, self.stdin_names)
                if is_stream:
                    self.aliases[name] = (_METHODS[value.attr], binary)
        self.builtin_input = builtin_input
        # A name used other than by a plain call (passed around, re-bound) is not expanded.
        self.plain_calls = {name for name, n in self.calls.items() if n == 1 and self._only_called(name)}

    def _only_called(self, name: str) -> bool:
        loads = sum(
            1 for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        )
        return loads == 1

    # -- execution order --------------------------------------------------------------
    def run(self) -> list[tuple[str, bool, ast.AST, bool]]:
        self._body(self.tree.body, True)
        return self.sites

    def _body(self, body: list[ast.stmt], once: bool) -> None:
        for stmt in body:
            self._stmt(stmt, once)

    def _stmt(self, stmt: ast.stmt, once: bool) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in stmt.decorator_list:
                self._expr(d, once)
            if isinstance(stmt, ast.ClassDef):
                self._body(stmt.body, once)
            elif stmt.name not in self.plain_calls:  # runs when called, how often unknown
                self._body(stmt.body, False)
            return
        if isinstance(stmt, ast.If):
            self._expr(stmt.test, once)
            if _is_main_guard(stmt.test):  # __name__ is "__main__" in the sandbox: the else never runs
                self._body(stmt.body, once)
            else:
                self._body(stmt.body, False)
                self._body(stmt.orelse, False)
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._expr(stmt.iter, once, iteration=True)
            self._body(stmt.body, False)
            self._body(stmt.orelse, False)
            return
        if isinstance(stmt, ast.While):
            self._expr(stmt.test, False)
            self._body(stmt.body, False)
            self._body(stmt.orelse, False)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._expr(item.context_expr, once)
            self._body(stmt.body, once)
            return
        if isinstance(stmt, ast.Try):
            self._body(stmt.body, once)
            for handler in stmt.handlers:
                self._body(handler.body, False)
            self._body(stmt.orelse, False)
            self._body(stmt.finalbody, once)
            return
        if isinstance(stmt, ast.Match):
            self._expr(stmt.subject, once)
            for case in stmt.cases:
                self._body(case.body, False)
            return
        starred = isinstance(stmt, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) for t in stmt.targets)
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self._expr(child, once, iteration=starred and child is getattr(stmt, "value", None))

    def _expr(self, node: ast.expr, once: bool, iteration: bool = False) -> None:
        """Sites of an expression in source order; `iteration`: the node is iterated."""
        if iteration:
            is_stream, binary = _stream(node, self.stdin_names)
            if is_stream:
                self.sites.append(("next", binary, node, once))
                return
        if isinstance(node, ast.Lambda):
            self._expr(node.body, False)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            first, *rest = node.generators
            self._expr(first.iter, once, iteration=True)
            for cond in first.ifs:
                self._expr(cond, False)
            for gen in rest:
                self._expr(gen.iter, False, iteration=True)
                for cond in gen.ifs:
                    self._expr(cond, False)
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                self._expr(part, False)
            return
        if isinstance(node, ast.Call):
            kind = self._read_kind(node)
            if kind is not None:
                self.sites.append((kind[0], kind[1], node, once))
                return
            self._expr(node.func, once)
            consumers = isinstance(node.func, ast.Name) and node.func.id in (
                "list",
                "tuple",
                "map",
                "sorted",
                "set",
                "enumerate",
                "zip",
                "iter",
            )
            for arg in node.args:
                self._expr(
                    arg.value if isinstance(arg, ast.Starred) else arg,
                    once,
                    iteration=consumers or isinstance(arg, ast.Starred),
                )
            for kw in node.keywords:
                self._expr(kw.value, once)
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in self.plain_calls
                and node.func.id in self.functions
                and node.func.id not in self.expanded
            ):
                self.expanded.add(node.func.id)
                self._body(self.functions[node.func.id].body, once)
            return
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for elt in node.elts:
                self._expr(
                    elt.value if isinstance(elt, ast.Starred) else elt, once, iteration=isinstance(elt, ast.Starred)
                )
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, once)

    def _read_kind(self, call: ast.Call) -> tuple[str, bool] | None:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in self.aliases:
                return self.aliases[func.id]
            if func.id == "input" and self.builtin_input:
                return ("input", False)
        if isinstance(func, ast.Attribute) and func.attr in _METHODS:
            is_stream, binary = _stream(func.value, self.stdin_names)
            if is_stream:
                return (_METHODS[func.attr], binary)
        return None


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def inline_static(source: str, stdin: str) -> InlineResult:
    """`source` with its stdin reads replaced by what they would read, without running it."""
    try:
        tree = parse_quietly(source)
    except SyntaxError as exc:
        raise syntax_error(source, exc) from exc
    sites = _Finder(tree).run()
    if not sites:
        return InlineResult(source, 0, 0, 0)
    reads: list[list] = []
    rest = stdin
    sequence_sites: set = set()
    first_unknown = next((i for i, s in enumerate(sites) if not s[3]), len(sites))

    def span(node: ast.AST) -> tuple:
        return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)

    for kind, binary, node, _ in sites[:first_unknown]:
        if kind in ("input", "readline"):
            if not rest and kind == "input":
                raise InlineError("eof_read", "input() would be called past the end of the input (EOFError)")
            line, _, tail = rest.partition("\n")
            value = line if kind == "input" else line + ("\n" if _ or tail else "")
            if kind == "readline" and not rest:
                value = ""
            rest = tail if _ else ""
            reads.append([kind, value, binary, *span(node)])
        elif kind == "read":
            reads.append([kind, rest, binary, *span(node)])
            rest = ""
        elif kind == "readlines":
            reads.append([kind, _lines(rest), binary, *span(node)])
            rest = ""
        else:  # iteration: every remaining line
            reads += [["next", line, binary, *span(node)] for line in _lines(rest)] or [
                ["eof", "", binary, *span(node)]
            ]
            rest = ""
    sequence = None
    unknown = sites[first_unknown:]
    if unknown:
        kinds = {(kind, binary) for kind, binary, _, _ in unknown}
        if len(unknown) == 1 and unknown[0][0] in ("read", "readlines", "next"):
            kind, binary, node, _ = unknown[0]
            value = rest if kind == "read" else _lines(rest)
            if kind == "next":
                reads += [["next", line, binary, *span(node)] for line in _lines(rest)] or [
                    ["eof", "", binary, *span(node)]
                ]
            else:
                reads.append([kind, value, binary, *span(node)])
        elif len(kinds) == 1 and next(iter(kinds))[0] in ("input", "readline"):
            kind, binary = next(iter(kinds))
            lines = rest.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            sequence = [line if kind == "input" else line + "\n" for line in lines]
            if binary:
                sequence = [v.encode("utf-8", "surrogateescape") for v in sequence]
            for _, _, node, _ in unknown:
                sequence_sites.add(span(node))
                reads.append([kind, "", binary, *span(node)])
        else:
            raise InlineError(
                "static_ambiguous",
                "reads that may run several times are of different kinds: " + ", ".join(sorted(k for k, _ in kinds)),
            )
    return inline_reads(source, tree, reads, frozenset(sequence_sites), sequence)
