"""Value-use events of real runs: what each read of a name, an attribute or a call gave.

The data guided execution learns from (`codeexecutor build values`). The parent compiles
an instrumented copy of the program (`instrument`): each recorded read `e` becomes
`__cx_v__(e, i)`, where `i` indexes the read's *site* (its span, the kind of use, the
name read); line numbers are the program's own, so the trace is unchanged. In the child
(`install`), `__cx_v__` returns its value unchanged and records `[site, kind, literal]`
once per distinct (site, kind, literal), at most `PER_SITE` times a site; the literal is
the value's exact repr for plain values (numbers, strings, small containers of them) and
None otherwise (repr of a program's object would run program code).

Reads of builtins (`len`, `print`) and calls of them are not recorded: a snippet never
lacks them.
"""

from __future__ import annotations

import ast
import builtins

from codeexecutor.execution.values import kind_of

HELPER = "__cx_v__"
PER_SITE = 4  # distinct (kind, literal) kept for one site: a loop's reads are mostly the same
MAX_EVENTS = 20_000
MAX_LITERAL = 80
_BUILTIN_NAMES = frozenset(dir(builtins))
_PLAIN = (int, float, str, bool, type(None))


class _Instrument(ast.NodeTransformer):
    def __init__(self, bound: set[str]) -> None:
        self.sites: list[tuple] = []
        self.bound = bound

    def _wrap(self, node: ast.expr, use: str, name: str) -> ast.expr:
        site = len(self.sites)
        self.sites.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, use, name))
        call = ast.Call(ast.Name(HELPER, ast.Load()), [node, ast.Constant(site)], [])
        return ast.copy_location(call, node)

    def visit_match_case(self, node: ast.match_case) -> ast.match_case:
        # a pattern's names and attributes are matched, not read: only the guard and the body are
        if node.guard is not None:
            node.guard = self.visit(node.guard)
        node.body = [self.visit(stmt) for stmt in node.body]
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if not isinstance(node.ctx, ast.Load) or (node.id in _BUILTIN_NAMES and node.id not in self.bound):
            return node
        return self._wrap(node, "name", node.id)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        return self._wrap(node, "attribute", node.attr)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        self.generic_visit(node)
        if name is None or (isinstance(func, ast.Name) and name in _BUILTIN_NAMES and name not in self.bound):
            return node
        if name == "super":
            return node
        return self._wrap(node, "call", name)


def _bound_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def instrument(source: str, filename: str):
    """(code, sites) of the instrumented program; raises SyntaxError as `compile` does."""
    tree = ast.parse(source, filename)
    transformer = _Instrument(_bound_names(tree))
    tree = ast.fix_missing_locations(transformer.visit(tree))
    return compile(tree, filename, "exec", dont_inherit=True), transformer.sites


def plain_literal(value: object, depth: int = 0) -> str | None:
    """`repr(value)` when it is a plain value of at most MAX_LITERAL characters, else None."""
    if not _plain(value, depth):
        return None
    text = repr(value)
    return text if len(text) <= MAX_LITERAL else None


def _plain(value: object, depth: int) -> bool:
    t = type(value)
    if t in _PLAIN:
        return t is not str or len(value) <= MAX_LITERAL
    if t in (list, tuple, set, frozenset) and depth < 2 and len(value) <= 8:
        return all(_plain(v, depth + 1) for v in value)
    if t is dict and depth < 2 and len(value) <= 8:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


class Recorder:
    def __init__(self) -> None:
        self.events: list[list] = []
        self.seen: dict[int, set] = {}

    def __call__(self, value, site: int):
        seen = self.seen.get(site)
        if seen is None:
            seen = self.seen[site] = set()
        if len(seen) < PER_SITE and len(self.events) < MAX_EVENTS:
            try:
                event = (kind_of(value), plain_literal(value))
            except Exception:  # a program's object whose len() or comparison raises
                event = ("object", None)
            if event not in seen:
                seen.add(event)
                self.events.append([site, *event])
        return value


def install() -> Recorder:
    """In the child: the helper the instrumented program calls."""
    recorder = Recorder()
    setattr(builtins, HELPER, recorder)
    return recorder
