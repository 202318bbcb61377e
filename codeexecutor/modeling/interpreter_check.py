"""What this interpreter lacks of what a program imports: crashes a reading can be sure of.

Many real submissions crash not for their logic but for the Python they run on: code
written for an older interpreter or library names what is gone (`from fractions import
gcd`, removed in 3.9; `fractions.gcd(a, b)`; `np.bool8`, removed in numpy 2;
`from scipy.misc import comb`). No model can know what the running interpreter has, but
the interpreter can be asked, as a linter's "no name in module" asks it:

* `import m` / `from m import x`, where no module `m` is found: ModuleNotFoundError;
* `from m import x`, where `m` has no `x` (and no submodule `x`): ImportError;
* `m.x`, where `m` is bound once, by `import m`, and has no `x` that the program does
  not set itself: AttributeError.

Code with a fallback is left alone: all of a `try`, and an `if`, a conditional expression
or an `and`/`or` that asks for the version or `hasattr`. So is code that may never run: a
function nothing names, the dead branch of `if False:`. Only modules whose
import has no effect beyond defining names are imported to be asked: the standard
library (less the few that draw, open or print) and the libraries contest judges
install (`CHECKED_LIBRARIES`); any other module is only looked up, never run.

`first_missing(code)` gives the first such use in the order of the source, as the crash
a program makes there once it reaches that line.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from functools import lru_cache

# Libraries contest judges install, whose names changed across versions; importing one
# defines names and runs nothing else.
CHECKED_LIBRARIES = frozenset({"numpy", "scipy", "networkx", "sortedcontainers"})
# Standard modules whose import does more than define names (draw, open a browser, print).
_UNSAFE = frozenset(
    {"antigravity", "this", "turtle", "turtledemo", "idlelib", "tkinter", "test", "__hello__", "__phello__"}
)


def _askable(module: str) -> bool:
    """May `module` be imported to ask for its names? Never a private part (a package's
    `__main__` runs a tool when imported: `unittest.__main__`, `venv.__main__`) nor a test
    package (`test.autotest` runs the test suite)."""
    parts = module.split(".")
    if any(p.startswith("_") or p in ("test", "tests") for p in parts):
        return False
    return (parts[0] in sys.stdlib_module_names and parts[0] not in _UNSAFE) or parts[0] in CHECKED_LIBRARIES


@lru_cache(maxsize=512)
def _found(module: str) -> bool:
    """Is there a module of this dotted name? Only a module `_askable` says may be run is
    imported to look for a submodule; for any other, its top-level name is looked up."""
    top = module.split(".")[0]
    try:
        if importlib.util.find_spec(top) is None:
            return False
        return module == top or not _askable(module) or importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):
        return False


@lru_cache(maxsize=512)
def _names(module: str) -> frozenset[str] | None:
    """The names a module has, or None where it may not be asked (or fails to import)."""
    if not _askable(module) or not _found(module):
        return None
    try:
        found = importlib.import_module(module)
    except Exception:  # noqa: BLE001 (a module that fails to import here is not ours to judge)
        return None
    names = set(dir(found))
    getattr_ = getattr(found, "__getattr__", None)
    if getattr_ is not None:  # lazy names (numpy, scipy): dir() may not list them
        return _Lazy(found, names)
    return frozenset(names)


class _Lazy(frozenset):
    """A module's names where it makes some on demand: membership asks the module."""

    def __new__(cls, module, names):
        obj = super().__new__(cls, names)
        obj.module = module
        return obj

    def __contains__(self, name) -> bool:
        if frozenset.__contains__(self, name):
            return True
        try:
            getattr(self.module, name)
        except Exception:  # noqa: BLE001 (a lazy attribute that fails is one the module lacks)
            return False
        return True


def missing(code: str) -> list[tuple[int, str, str]]:
    """Every use of a name this interpreter lacks, outside code with a fallback or code that
    may never run: (line, exception type, what is missing)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return []
    skipped = _guarded(tree) | _not_always_run(tree)
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, "ModuleNotFoundError", a.name) for a in node.names if not _found(a.name)]
        elif node.module and not node.level:
            if not _found(node.module):
                out.append((node.lineno, "ModuleNotFoundError", node.module))
                continue
            names = _names(node.module)
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if names is not None and a.name != "*" and a.name not in names and not _found(sub):
                    out.append((node.lineno, "ImportError", sub))
    out += _missing_attributes(tree, skipped)
    return sorted(out)


_VERSION_WORDS = frozenset({"version", "version_info", "hexversion", "platform", "__version__", "hasattr", "getattr"})


def _asks_version(test, flags: set[str]) -> bool:
    """Does an expression ask which version it runs on (or whether a module has a name)?"""
    return any(
        (isinstance(n, ast.Name) and (n.id in _VERSION_WORDS or n.id in flags))
        or (isinstance(n, ast.Attribute) and n.attr in _VERSION_WORDS)
        for n in ast.walk(test)
    )


def _guarded(tree) -> set[int]:
    """The nodes with a fallback: all of a `try` (its handlers too), and all of an `if`, a
    conditional expression or an `and`/`or` that asks for the version, directly or through
    a name set from such a test (`PY2 = sys.version_info[0] == 2`)."""
    flags = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and _asks_version(n.value, set())
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out = set()
    for t in ast.walk(tree):
        trystar = getattr(ast, "TryStar", ast.Try)
        if isinstance(t, (ast.Try, trystar)):
            out.update(id(n) for n in ast.walk(t))
        elif isinstance(t, (ast.If, ast.IfExp)) and _asks_version(t.test, flags):
            out.update(id(n) for n in ast.walk(t))
        elif isinstance(t, ast.BoolOp) and any(_asks_version(v, flags) for v in t.values):
            out.update(id(n) for n in ast.walk(t))
    return out


def _not_always_run(tree) -> set[int]:
    """The nodes of functions nothing else in the program names (a helper never called)
    and of `if` branches whose test is a constant that skips them (`if False:`)."""
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    out = set()
    for t in ast.walk(tree):
        if isinstance(t, (ast.FunctionDef, ast.AsyncFunctionDef)) and t.name not in named:
            out.update(id(n) for n in ast.walk(t))
        elif isinstance(t, ast.If) and isinstance(t.test, ast.Constant):
            dead = t.orelse if t.test.value else t.body
            out.update(id(n) for s in dead for n in ast.walk(s))
    return out


def _modules_bound_once(tree) -> dict[str, str]:
    """Names bound by one `import m` (as name) and by nothing else: name -> m."""
    binds: dict[str, set] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                binds.setdefault(a.asname or a.name.split(".")[0], set()).add(
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                binds.setdefault(a.asname or a.name, set()).add(None)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            binds.setdefault(n.id, set()).add(None)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.setdefault(n.name, set()).add(None)
        elif isinstance(n, ast.arg) or (isinstance(n, ast.ExceptHandler) and n.name):
            binds.setdefault(n.arg if isinstance(n, ast.arg) else n.name, set()).add(None)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                binds.setdefault(name, set()).add(None)
        elif type(n).__name__ in ("MatchAs", "MatchStar") and getattr(n, "name", None):
            binds.setdefault(n.name, set()).add(None)
    return {name: next(iter(ms)) for name, ms in binds.items() if len(ms) == 1 and None not in ms}


def _missing_attributes(tree, skipped: set[int]) -> list[tuple[int, str, str]]:
    once = _modules_bound_once(tree)
    set_here = {
        (n.value.id, n.attr)
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
    }
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        if not isinstance(node.value, ast.Name):
            continue
        module = once.get(node.value.id)
        if module is None or id(node) in skipped or (node.value.id, node.attr) in set_here:
            continue
        names = _names(module)
        if names is not None and node.attr not in names and not _found(f"{module}.{node.attr}"):
            out.append((node.lineno, "AttributeError", f"{module}.{node.attr}"))
    return out


def first_missing(code: str) -> tuple[str, int] | None:
    """(exception type, line) of the first use of a name this interpreter lacks, or None."""
    found = missing(code)
    return (found[0][1], found[0][0]) if found else None
