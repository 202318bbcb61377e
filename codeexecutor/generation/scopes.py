"""Which names a state of a program can hold at a given line: static facts of the code
that a small model gets wrong, read off the program without running it.

The tracer writes a frame's `f_locals` (execution/tracer.py). Where the frame is a
function's, those are the slots of its code object, always in one order: the
parameters and other locals (`co_varnames`), then the cell variables that are not
parameters, then the free variables. So a state of a function frame names a
subsequence of that list, and nothing else; its parameters, bound when the frame starts,
are the first names of every whole state of it, in their order. A module frame's state is its globals in the
order they were first bound; a name bound at module level appears only once the module
has run the statement that binds it, so while the module has run no line past `k`, its
state names only what the statements starting at or before `k` bind (loops go back, but
never past the furthest line reached), and what a function binds with `global`.

`Scopes(source)` gives, per 0-based line, the scope the line's step belongs to: a
function's ordered slots, or the module's names with the line that first binds each.
Class bodies, code that does not compile, and modules that can bind names no statement
shows (`from m import *`, `globals()`, `vars()`, `exec`, `setattr` on a module) are left
unrestricted (None), as the plain identifier rule has them.

A model reads a program in its own format (`modeling/format.py`: `<k>` line markers,
indentation tokens); `source_of` rebuilds a compilable source from it, line numbers kept.
"""

from __future__ import annotations

import ast
import dis
import re
import types
import warnings
from dataclasses import dataclass

_DYNAMIC = re.compile(r"\bglobals\s*\(|\bvars\s*\(|\bexec\s*\(|\bsetattr\s*\(|\b__dict__\b|\bimport\s*\*")
_LOCALS = re.compile(r"\blocals\s*\(|\bvars\s*\(\s*\)")
_MARK = re.compile(r"(?:^|(?<= ))<(\d+)> ((?:<indent> |<dedent> )*)")
_TASK = re.compile(r"^<(codenet|tutorial|singleline)> ")


@dataclass(frozen=True)
class Function:
    """A function's frame: its slots in f_locals order, and its parameters, which a
    whole state of the frame lists first, in this order (they are bound when the frame
    starts; `deletes`: a `del`, or a change through `locals()`, may unbind one, so the
    order is not guaranteed)."""

    slots: tuple[str, ...]
    params: tuple[str, ...] = ()
    deletes: bool = False

    @property
    def first(self) -> tuple[str, ...]:
        """The names every whole state of this frame starts with."""
        return () if self.deletes else self.params


@dataclass(frozen=True)
class Module:
    """The module's frame: each name bound at module level with the first 0-based line
    that binds it; `anytime`: names functions bind with `global`."""

    bound: tuple[tuple[str, int], ...]
    anytime: frozenset[str]

    def names(self, reached: int) -> frozenset[str]:
        """Names the module may hold when no line past `reached` has run."""
        return frozenset(n for n, line in self.bound if line <= reached) | self.anytime


def source_of(formatted: str) -> str:
    """A program's source back from its model format (task token, `<k>` markers,
    indentation tokens), each line at its number and indented four spaces a level; text
    without a task token is taken for a source already and returned as it is."""
    if not _TASK.match(formatted.strip()):
        return formatted
    text = _TASK.sub("", formatted.strip())
    marks = list(_MARK.finditer(text))
    lines: list[str] = []
    level = 0
    for i, m in enumerate(marks):
        end = marks[i + 1].start() - 1 if i + 1 < len(marks) else len(text)
        k = int(m.group(1))
        level += m.group(2).count("<indent>") - m.group(2).count("<dedent>")
        lines += [""] * (k - len(lines))
        if k == len(lines):
            lines.append("    " * max(level, 0) + text[m.end() : end])
    return "\n".join(lines) + "\n"


class Scopes:
    """Per 0-based line, the scope its step's state belongs to (see the module doc)."""

    def __init__(self, source: str) -> None:
        self.by_line: dict[int, Function | None] = {}  # lines of function and class bodies
        self.module: Module | None = None
        try:
            with warnings.catch_warnings():  # the user's `'\s'` is theirs to hear about, not a decoding rule's
                warnings.simplefilter("ignore")
                tree = ast.parse(source)
                code = compile(tree, "<program>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        dynamic = bool(_DYNAMIC.search(source))
        loose = bool(_LOCALS.search(source))  # locals() hands out the frame's own dict: a `del` on it reorders names
        functions = {}  # (qualified name without '<locals>.', the lines of its code) -> its Function
        for obj in _code_objects(code):
            if obj.co_name.startswith("<"):
                continue  # comprehensions, lambdas: untraced, part of their line
            qual = getattr(obj, "co_qualname", obj.co_name).replace("<locals>.", "")
            cells = [c for c in obj.co_cellvars if c not in obj.co_varnames]
            lines = {line for _, _, line in obj.co_lines() if line is not None}
            n = obj.co_argcount + obj.co_kwonlyargcount + bool(obj.co_flags & 4) + bool(obj.co_flags & 8)  # *args, **kw
            functions[(qual, frozenset(lines))] = Function(
                tuple(obj.co_varnames) + tuple(cells) + tuple(obj.co_freevars),
                tuple(obj.co_varnames[:n]),
                loose or "DELETE_FAST" in _opnames(obj),
            )
        if not dynamic:
            self.module = _module(tree)
        for node, qual, first, last in _scoped(tree):
            body = range(first, last + 1)
            if isinstance(node, ast.ClassDef):
                self.by_line.update({line: None for line in body})
                continue
            same = [(lines, f) for (q, lines), f in functions.items() if q == qual]
            if len(same) > 1:  # a name defined twice: the code object whose lines lie in this body
                same = [(lines, f) for lines, f in same if any(line - 1 in body for line in lines)]
            self.by_line.update({line: same[0][1] if len(same) == 1 else None for line in body})
        for node, _, first, _ in _scoped(tree):
            # Lines that run in two scopes: a class body's frame starts on its first
            # decorator's or its `class` line, and `def f(x): return x` runs its body on
            # its header's line.
            if isinstance(node, ast.ClassDef):
                self.by_line.update({line: None for line in range(_start(node), node.lineno)})
            elif node.lineno - 1 == first:
                self.by_line[first] = None

    def at(self, line: int) -> Function | Module | None:
        """The scope of a step at this 0-based line; None: no restriction known."""
        return self.by_line[line] if line in self.by_line else self.module


def _opnames(code: types.CodeType) -> set[str]:
    return {i.opname for i in dis.get_instructions(code)}


def _code_objects(code: types.CodeType):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _code_objects(const)


def _scoped(tree: ast.AST, prefix: str = ""):
    """(node, qualified name, first, last 0-based body line) of each function and class
    body, outer ones first; a header line stays with the scope around it."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            name = prefix + node.name
            yield node, name, _start(node.body[0]), (node.end_lineno or node.body[-1].lineno) - 1
            yield from _scoped(node, name + ".")
        else:
            yield from _scoped(node, prefix)


def _start(stmt: ast.stmt) -> int:
    """A statement's first 0-based line, its decorators included (a decorated definition
    binds its name in a step of the first decorator's line)."""
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]) - 1


def _module(tree: ast.Module) -> Module:
    """Module-level bindings with the first line (0-based) of the statement binding each."""
    first: dict[str, int] = {}
    anytime: set[str] = set()

    def bind(name: str, line: int) -> None:
        if name not in first or line < first[name]:
            first[name] = line

    def walk(node: ast.AST, line: int) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, line)
            for inner in ast.walk(node):
                if isinstance(inner, ast.Global):
                    anytime.update(inner.names)
            for d in node.decorator_list:
                walk(d, line)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for inner in ast.walk(node):  # a walrus in a comprehension binds in the module
                if isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
                    bind(inner.target.id, line)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id, line)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind(alias.asname or alias.name.split(".")[0], line)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, line)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name, line)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest, line)
        for child in ast.iter_child_nodes(node):
            walk(child, _start(child) if isinstance(child, ast.stmt) else line)

    for stmt in tree.body:
        walk(stmt, _start(stmt))
    return Module(tuple(sorted(first.items(), key=lambda kv: kv[1])), frozenset(anytime))
