"""From a folder of Python modules to self-contained function-call programs.

A *call* is a doctest example (`>>> f(x)` in any docstring of a module) or the
function call inside a test's assertion (`self.assertEqual(f(x), y)`,
`assert f(x) == y`, in `test_*.py` / `*_test.py` files). Each call becomes one program:

    <the module-level definitions the call needs, and what they need in turn>
    <earlier examples of the same docstring, as statements (doctest's setup)>
    print(repr(<call>))

Definitions are followed across the folder: `from pkg.mod import f`, relative imports
and `from .mod import *` re-exports are resolved to the module that defines the name,
and the definition is inlined (an alias by an assignment). Standard-library imports are
kept; anything else is a skip with its reason (a third-party module, `import pkg.mod`
used as an attribute, two different definitions of one name). Docstrings and type
annotations are dropped (they cost code tokens, and a docstring holds the answer), so
programs are written with `ast.unparse`, which also normalises their source for
deduplication.
"""

from __future__ import annotations

import ast
import doctest
import os
import sys
import threading
from dataclasses import dataclass

STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
DEFINERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)
ASSERTS = {
    "assertEqual",
    "assertEquals",
    "assertTrue",
    "assertFalse",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertAlmostEqual",
    "assertIs",
    "assertIsNone",
    "assertIsNotNone",
    "assertCountEqual",
    "assertIn",
    "assertNotEqual",
    "assertGreater",
    "assertLess",
    "assertSequenceEqual",
}


class Skip(Exception):
    """A call that cannot become a program; `reason` is counted in the build's stats."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Call:
    module: str  # dotted name of the module whose docstring or test holds the call
    path: str  # that file, relative to the corpus root
    line: int  # 1-based line of the call in that file
    setup: tuple[str, ...]  # statements run before it (earlier doctest examples)
    expr: str  # the call expression (or a print statement, kept as it is)
    origin: str  # doctest | test | docs | puzzle


@dataclass(frozen=True)
class Program:
    """A program a non-package source made (curricula/doc_sessions.py, curricula/puzzles.py)."""

    call: Call  # where it comes from, and the expression it shows
    code: str
    group: str  # its split group, relative to the corpus root: no group in two splits
    driver: int  # UTF-8 byte offset where its driver starts: definitions before, the inputs after
    keep_driver: bool  # mutants leave the driver as it is (a call on fixed inputs)


def module_name(relpath: str) -> str:
    parts = relpath[:-3].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_test_file(relpath: str) -> bool:
    base = os.path.basename(relpath)
    return base.startswith("test_") or base.endswith("_test.py")


class _Strip(ast.NodeTransformer):
    """Drops docstrings and the annotations of functions and their variables; a body
    left empty gets `pass`."""

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]
        body = [stmt for stmt in body if stmt is not None and not isinstance(stmt, ast.Pass)]
        return body or [ast.Pass()]

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.returns = None
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + [node.args.vararg, node.args.kwarg]:
            if a is not None:
                a.annotation = None
        node.body = self._body(node.body)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):  # class-level annotations stay: they are a dataclass's fields
        node.body = self._body([stmt if isinstance(stmt, ast.AnnAssign) else self.visit(stmt) for stmt in node.body])
        return node

    def visit_AnnAssign(self, node):
        if node.value is None:
            return ast.Pass() if isinstance(node.target, ast.Name) else None
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def plain_source(source: str) -> str:
    """A program as the functions set writes programs: no docstrings, no function
    annotations, `ast.unparse`'s layout (the source itself where it does not parse)."""
    try:
        return ast.unparse(_Strip().visit(ast.parse(source))) + "\n"
    except (SyntaxError, ValueError, RecursionError):
        return source


def _bound(stmt: ast.stmt) -> list[str]:
    """The module-level names a definition binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class Module:
    def __init__(self, name: str, path: str, tree: ast.Module) -> None:
        self.name, self.path, self.tree = name, path, tree
        self.defs: dict[str, ast.stmt] = {}  # name -> the last top-level statement binding it
        self.stars: list[ast.ImportFrom] = []
        for stmt in tree.body:
            if isinstance(stmt, DEFINERS):
                for name in _bound(stmt):
                    self.defs[name] = stmt
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                self.stars.append(stmt)


class Corpus:
    """The parsed modules of one folder, and the name resolution across them."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: list[str] = []  # relative paths, sorted
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            self.files += [
                os.path.relpath(os.path.join(dirpath, f), root) for f in sorted(filenames) if f.endswith(".py")
            ]
        self.files.sort()
        self.by_name = {module_name(p): p for p in self.files}
        self._cache: dict[str, Module | None] = {}
        self.unparsed: dict[str, str] = {}  # relative path -> why it does not parse here
        self._lock = threading.Lock()

    def parse(self, relpath: str) -> Module | None:
        """The parsed module, or None where it is not UTF-8 Python 3 (parsed once; the
        builder's threads share the cache)."""
        with self._lock:
            if relpath not in self._cache:
                self._cache[relpath] = self._read(relpath)
            return self._cache[relpath]

    def _read(self, relpath: str) -> Module | None:
        with open(os.path.join(self.root, relpath), "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
            tree = ast.parse(text)
            compile(tree, relpath, "exec", dont_inherit=True)
        except SyntaxError as exc:
            from codeexecutor.source import newer_python

            self.unparsed[relpath] = "newer_python" if newer_python(text, exc) else "not_python3_or_not_utf8"
            return None
        except (UnicodeDecodeError, ValueError, RecursionError, MemoryError):
            self.unparsed[relpath] = "not_python3_or_not_utf8"
            return None
        return Module(module_name(relpath), relpath, tree)

    def find(self, dotted: str) -> str | None:
        """The file of a dotted module name: the name itself, or the one module whose
        name ends with it (a corpus folder whose modules import each other from a
        sub-folder, as `from maths.prime_check import is_prime` does from `files/`)."""
        if dotted in self.by_name:
            return self.by_name[dotted]
        tails = [p for n, p in self.by_name.items() if n.endswith("." + dotted)]
        return tails[0] if len(tails) == 1 else None

    def target(self, mod: Module, node: ast.ImportFrom) -> str | None:
        if node.level:
            pkg = mod.name.split(".")
            if not mod.path.endswith("__init__.py"):
                pkg = pkg[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            dotted = ".".join(pkg + ([node.module] if node.module else []))
        else:
            dotted = node.module or ""
        return dotted

    def definition(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, ast.stmt] | None:
        """(module, statement) that defines `name` as seen from `mod`, through imports."""
        if depth > 12:
            raise Skip("import_chain_too_deep")
        stmt = mod.defs.get(name)
        if stmt is None:
            for star in mod.stars:
                found = self._imported(mod, star, name, depth)
                if found is not None:
                    return found
            return None
        if isinstance(stmt, ast.ImportFrom):
            alias = next(a for a in stmt.names if (a.asname or a.name) == name)
            dotted = self.target(mod, stmt)
            if not stmt.level and dotted.split(".")[0] in STDLIB:
                return mod, stmt
            return self._imported(mod, stmt, alias.name, depth, strict=True)
        if isinstance(stmt, ast.Import):
            alias = next(a for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
            if alias.name.split(".")[0] in STDLIB:
                return mod, stmt
            path = self.find(alias.name)
            if path is not None:
                if alias.asname or "." not in alias.name:  # `import pkg.mod as m`, `import mod`: the name is the module
                    return self._module(path)
                raise Skip("package_module_import")  # `import pkg.mod`, used as pkg.mod.f: a chain of names
            raise Skip(f"third_party:{alias.name.split('.')[0]}")
        return mod, stmt

    def _module(self, path: str) -> tuple[Module, ModuleRef]:
        other = self.parse(path)
        if other is None:
            raise Skip("imported_module_does_not_parse")
        return other, ModuleRef(other)

    def _imported(self, mod: Module, node: ast.ImportFrom, name: str, depth: int, strict: bool = False):
        dotted = self.target(mod, node)
        path = self.find(dotted)
        if path is None:
            sub = self.find(f"{dotted}.{name}" if dotted else name)  # `from pkg import module`
            if sub is not None and strict:
                return self._module(sub)
            if strict:
                top = dotted.split(".")[0] or "relative"
                raise Skip(f"third_party:{top}" if not node.level else "unresolved_relative_import")
            return None
        other = self.parse(path)
        if other is None:
            raise Skip("imported_module_does_not_parse")
        found = self.definition(other, name, depth + 1)
        if found is None and strict:
            sub = self.find(f"{dotted}.{name}")
            if sub is not None:  # `from pkg import module`, pkg/__init__.py beside it
                return self._module(sub)
            raise Skip("unresolved_import")
        return found


class ModuleRef:
    """A name bound to a module of the corpus (`import pkg.mod as m`, `from pkg import mod`):
    the program gets the module's names it reads (`m.f`) inlined and a class `m` holding
    them, so `m.f(x)` runs as written."""

    def __init__(self, module: Module) -> None:
        self.module = module


def assemble(corpus: Corpus, mod: Module, driver: list[ast.stmt], max_lines: int = 120) -> str:
    """The program: every definition the driver statements need, in dependency order
    (standard-library imports first), then the driver."""
    imports: list[str] = []
    body: list[str] = []
    done: set[int] = set()
    names: dict[str, int] = {}  # name bound in the program -> id of its statement (two different ones clash)
    aliases: dict[str, tuple[Module, set[str]]] = {}  # a name bound to a corpus module -> it, the names read off it

    def need(m: Module, used: set[str], active: set[int]) -> None:
        for name in sorted(used):
            found = corpus.definition(m, name)
            if found is None:
                continue  # a builtin, a local, or a name the program will miss (a NameError run is skipped)
            owner, stmt = found
            if isinstance(stmt, ModuleRef):  # a module of the corpus: its names are added below, as read
                key = id(stmt.module)
                if names.get(name, key) != key:
                    raise Skip("name_clash")
                names[name] = key
                aliases.setdefault(name, (stmt.module, set()))
                continue
            key = id(stmt)
            if names.get(name, key) != key:
                raise Skip("name_clash")
            names[name] = key
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):  # a standard-library import: only this name
                node = (
                    ast.ImportFrom(
                        module=stmt.module, names=[a for a in stmt.names if (a.asname or a.name) == name], level=0
                    )
                    if isinstance(stmt, ast.ImportFrom)
                    else ast.Import(names=[a for a in stmt.names if (a.asname or a.name).split(".")[0] == name])
                )
                if not node.names:  # the statement binds the name some other way: no line of it would
                    raise Skip("unresolved_import_name")
                text = ast.unparse(node)
                if text not in imports:
                    imports.append(text)
                continue
            if key in active:
                continue  # mutual recursion: already being added
            if key not in done:
                active.add(key)
                need(owner, _used(stmt) - {name}, active)
                active.discard(key)
                if key not in done:
                    done.add(key)
                    body.append(ast.unparse(_Strip().visit(_copy(stmt))))
            bound = _bound(stmt)
            if name not in bound:  # imported under another name
                alias = f"{name} = {bound[0]}" if len(bound) == 1 else None
                if alias is None:
                    raise Skip("unresolved_alias")
                if alias not in body:
                    body.append(alias)

    for stmt in driver:
        need(mod, _used(stmt), set())
    # Names bound to corpus modules: each gets what is read off it, inlined, and a class
    # holding those names (until nothing new is read: an inlined function may read more).
    while True:
        texts = body + [ast.unparse(s) for s in driver]
        grown = False
        for alias, (module, attrs) in list(aliases.items()):
            read = _attributes_of(alias, texts) - attrs
            if read:
                attrs |= read
                need(module, read, set())
                grown = True
        if not grown:
            break
    for alias, (module, attrs) in aliases.items():
        members = []
        for attr in sorted(attrs):
            found = corpus.definition(module, attr)
            if found is None or isinstance(found[1], ModuleRef):
                raise Skip("package_module_import")  # m.sub.f, or a name the module does not define
            members.append(
                f"    {attr} = staticmethod({attr})"
                if isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef))
                else f"    {attr} = {attr}"
            )
        body.append(f"class {alias}:\n" + ("\n".join(members) or "    pass"))
    imports.sort(key=lambda s: s != "from __future__ import annotations")
    program = "\n".join(imports + body + [ast.unparse(s) for s in driver]) + "\n"
    lines = sum(1 for line in program.splitlines() if line.strip())
    if lines > max_lines:
        raise Skip("too_many_lines")
    return program


def _attributes_of(alias: str, texts: list[str]) -> set[str]:
    """The attribute names read off `alias` (`alias.f`) in these program pieces."""
    out = set()
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == alias:
                out.add(node.attr)
    return out


def _copy(stmt: ast.stmt) -> ast.stmt:
    return ast.parse(ast.unparse(stmt)).body[0]


def _docstring_nodes(tree: ast.Module):
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node


def doctest_calls(mod: Module) -> list[Call]:
    """One Call per doctest example that shows a result or raises; the examples before
    it in the same docstring are its setup."""
    parser = doctest.DocTestParser()
    out = []
    for node in _docstring_nodes(mod.tree):
        doc = ast.get_docstring(node, clean=False)
        if not doc or ">>>" not in doc:
            continue
        try:
            examples = parser.get_examples(doc)
        except ValueError:
            continue
        first = node.body[0].lineno if not isinstance(node, ast.Module) else 1
        before: list[str] = []
        for ex in examples:
            source = ex.source.strip()
            if ex.want.strip() or ex.exc_msg is not None:
                out.append(Call(mod.name, mod.path, first + ex.lineno, tuple(before), source, "doctest"))
            before.append(source)
    return out


def _asserted_call(node: ast.AST) -> ast.Call | None:
    """The function call an assertion checks (`self.assertEqual(f(x), y)`, `assert f(x) == y`)."""
    call = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ASSERTS and node.args:
        call = node.args[0]
    elif isinstance(node, ast.Assert):
        test = node.test
        call = test.left if isinstance(test, ast.Compare) else test.operand if isinstance(test, ast.UnaryOp) else test
    if not isinstance(call, ast.Call):
        return None
    func = call.func  # f(x), or m.f(x) on a name (a module of the package, or an object the test made)
    return (
        call
        if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name))
        else None
    )


def _is_assertion(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assert) or (
        isinstance(stmt, ast.Expr)
        and _asserted_call(stmt.value) is None
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr.startswith("assert")
    )


def _bound_in(stmts: list[ast.stmt]) -> set[str]:
    """Names the statements bind (assignments, loop targets, with-targets, definitions)."""
    out = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    return out


def assertion_calls(mod: Module, setup: bool = True) -> list[Call]:
    """One Call per assertion in a test file whose checked value is a function call. In a
    test function, the statements before the assertion's are its setup when the call reads
    a name they bind (`xs = [3, 1]` then `assert my_sort(xs) == [1, 3]`); `setup=False`
    leaves them out (such a call is then skipped as using the test's locals)."""
    out, seen = [], set()
    for func in ast.walk(mod.tree):
        if not (isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and func.name.startswith("test")):
            continue
        for idx, stmt in enumerate(func.body):
            for node in ast.walk(stmt):
                call = _asserted_call(node)
                if call is None or id(node) in seen:
                    continue
                seen.add(id(node))
                before = [s for s in func.body[:idx] if not _is_assertion(s)] if setup else []
                used = _used(call)
                if not used & _bound_in(before):
                    before = []
                out.append(
                    Call(
                        mod.name,
                        mod.path,
                        node.lineno,
                        tuple(ast.unparse(s) for s in before),
                        ast.unparse(call),
                        "test",
                    )
                )
    for node in ast.walk(mod.tree):  # assertions outside test functions: no setup
        call = _asserted_call(node)
        if call is not None and id(node) not in seen:
            out.append(Call(mod.name, mod.path, node.lineno, (), ast.unparse(call), "test"))
    return sorted(out, key=lambda c: c.line)


def driver_statements(call: Call) -> list[ast.stmt]:
    """The setup statements and the printed call, parsed; Skip where a piece does not parse."""
    stmts: list[ast.stmt] = []
    for text in call.setup:
        try:
            stmts += ast.parse(text).body
        except SyntaxError:
            raise Skip("doctest_setup_does_not_parse") from None
    try:
        body = ast.parse(call.expr).body
    except SyntaxError:
        raise Skip("doctest_call_does_not_parse") from None
    if len(body) == 1 and isinstance(body[0], ast.Expr) and not is_print(body[0].value):
        body = ast.parse(f"print(repr({ast.unparse(body[0].value)}))").body
    return stmts + body


def is_print(node: ast.AST) -> bool:
    """A call of `print`: an example that prints shows its own output, no repr added."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def called_function(call: Call) -> str | None:
    """The name the call's outermost function has (`f` of `f(x)`, `C` of `C(x).m()`)."""
    try:
        node = ast.parse(call.expr, mode="eval").body
    except SyntaxError:
        return None
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def tested_function(call: Call) -> str | None:
    """The function a call tests: the first function it calls, in reading order, that is no
    builtin (`chunked` of `list(chunked(xs, 2))`, `f` of `f(x)`), else its outermost."""
    try:
        node = ast.parse(call.expr, mode="eval").body
    except SyntaxError:
        return None
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func, attrs = sub.func, []
            while isinstance(func, ast.Attribute):
                attrs.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name) and func.id not in BUILTINS:
                return ".".join([func.id, *reversed(attrs)])  # `mi.chunked` of `mi.chunked(xs, 2)`
    return called_function(call)


def uses_locals(corpus: Corpus, mod: Module, call: Call) -> bool:
    """A test assertion whose call (or its setup) reads a name that neither the setup, the
    module nor the builtins bind: a name the test bound in a way the setup did not keep
    (a fixture argument, `self.x`)."""
    setup = [s for text in call.setup for s in ast.parse(text).body]
    names = _used(ast.parse(call.expr, mode="eval")) | {n for s in setup for n in _used(s)}
    local = _bound_in(setup)
    return any(n not in BUILTINS and n not in local and corpus.definition(mod, n) is None for n in names)


def capped(calls: list[Call], per_function: int, per_module: int, counts) -> list[Call]:
    """At most `per_function` calls of each called function (a function with 60 doctests
    does not fill the set, but a module of 60 functions keeps each), and `per_module` in
    all; what is left out is counted."""
    per: dict[str, int] = {}
    kept = []
    for call in calls:
        key = tested_function(call) or call.expr
        if per.get(key, 0) >= per_function:
            counts["skip:over_calls_per_function"] += 1
            continue
        per[key] = per.get(key, 0) + 1
        kept.append(call)
    if len(kept) > per_module:
        counts["skip:over_calls_per_module"] += len(kept) - per_module
        kept = kept[:per_module]
    return kept


BUILTINS = frozenset(dir(__import__("builtins")))
