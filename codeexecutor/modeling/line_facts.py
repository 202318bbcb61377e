"""What a compiler's symbol table says about each line, for the crash detector.

The trace model's states say what each token is in its context, but a line's mean and
maximum state blur which names a line reads. Bieber et al.'s IPA-GNN runs on the
program's control-flow graph, a static structure of the program. The detector gets a
few such static facts per line, and learns how far to trust each:

0. reads a name that nothing in the program binds (and no builtin has);
1. reads input (`input()`, `sys.stdin`, `open(0)`): the program's input is inlined, so a
   read left in the code reads nothing;
2. calls a method no builtin type, no program definition and no imported module has
   (`s.splits()`);
3. in a function, reads a local before the function's first assignment of it, without a
   `global` (UnboundLocalError's shape);
4. subscripts a value; 5. divides by something that is not a literal; 6. unpacks into
   several targets; 7. converts with `int` or `float`.

A fact is 1.0 on each line where it holds. A program that does not parse gets none.
"""

from __future__ import annotations

import ast
import builtins

FACTS = 8
_BUILTINS = frozenset(dir(builtins))
_TYPES = (str, list, dict, set, frozenset, tuple, int, float, complex, bytes, bytearray, range)


def _known_attributes() -> frozenset[str]:
    import collections
    import heapq  # noqa: F401  (modules contest programs call into)

    names = set()
    for t in (*_TYPES, collections.deque, collections.Counter, collections.defaultdict, collections.OrderedDict):
        names.update(dir(t))
    return frozenset(names)


_ATTRIBUTES = _known_attributes()


def line_facts(code: str, lines: int) -> list[list[float]]:
    """`lines` rows of FACTS floats: the facts of lines 1..lines of `code`."""
    out = [[0.0] * FACTS for _ in range(lines)]
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return out

    def mark(node, fact):
        line = getattr(node, "lineno", 0)
        if 1 <= line <= lines:
            out[line - 1][fact] = 1.0

    bound, defined, modules = _bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            mark(node, 0)
        elif isinstance(node, ast.Call):
            func = node.func
            if _reads_input(node):
                mark(node, 1)
            if isinstance(func, ast.Attribute) and func.attr not in _ATTRIBUTES and func.attr not in defined:
                if not (isinstance(func.value, ast.Name) and func.value.id in modules):
                    mark(node, 2)
            if isinstance(func, ast.Name) and func.id in ("int", "float"):
                mark(node, 7)
        elif isinstance(node, ast.Subscript):
            mark(node, 4)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            right = node.right if isinstance(node, ast.BinOp) else node.value
            if not isinstance(right, ast.Constant):
                mark(node, 5)
        elif isinstance(node, (ast.Assign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) > 1 for t in targets):
                mark(node, 6)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name in _read_before_assigned(node):
                mark(name, 3)
    return out


def _bindings(tree) -> tuple[set[str], set[str], set[str]]:
    """(every name the program binds, with the builtins; attribute and function names it
    defines; the names its imports bind)."""
    bound, defined, modules = set(_BUILTINS), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                name = (a.asname or a.name).split(".")[0]
                bound.add(name)
                modules.add(name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            defined.add(node.attr)
    return bound, defined, modules


def _reads_input(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        zero = bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0
        return func.id == "input" or (func.id == "open" and zero)
    return isinstance(func, ast.Attribute) and ast.unparse(func).startswith("sys.stdin")


def _read_before_assigned(fn) -> list[ast.Name]:
    """Reads of a local of `fn` on a line before its first assignment there (no `global`)."""
    declared = {n for node in ast.walk(fn) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    first: dict[str, int] = {}
    reads: list[tuple[ast.Name, int]] = []  # (a read, 0: before the first store's line; 1: or on it)
    augmented = {id(n.target) for n in ast.walk(fn) if isinstance(n, ast.AugAssign)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                first[node.id] = min(first.get(node.id, 1 << 30), node.lineno)
            if isinstance(node.ctx, ast.Load) or id(node) in augmented:  # `x += 1` reads x first
                reads.append((node, int(id(node) in augmented)))
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    skip = declared | params
    return [r for r, same in reads if r.id in first and r.id not in skip and r.lineno < first[r.id] + same]
