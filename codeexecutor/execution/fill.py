"""Child side of guided execution: the values a run injects where the code lacks them.

Installed by the sandbox when a run's options carry `fill` (a table: use key -> predicted
spec, made by the parent's `guided.py`). The child

* seeds the program's globals with the names the table fills (`name:x`), before it runs;
* answers each attribute read and call of an injected object from the table (keys
  `name:x.attr`, `name:f()@7`: the owner's key, then the attribute or the call's line);
* turns a module that is not installed into an `InjectedModule` (a finder placed after
  the real ones, so an installed module is always the real one);
* for a use the table lacks, records it as a *need* (key, use, name, owner, line) and
  stops the run with `FillNeeded`, which a program's `except Exception` does not catch;
  a `NameError` of a name that is not filled is recorded as a need too.

The parent asks its predictor for the needs and runs the program again with a larger
table, from the start, until nothing new is needed. Every value is made here from a
kind and at most a literal (values.concretize), so a predictor cannot hand the program
code to run.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

from codeexecutor.execution.policy import BLOCKED_IMPORTS
from codeexecutor.execution.tracer import PROGRAM_FILENAME
from codeexecutor.execution.values import STDLIB, InjectedModule, concretize, kind_of

# Standard-library modules a `module` answer never imports: the sandbox's refused ones and
# those with effects at import time (a browser opened, a window, a terminal).
NEVER_IMPORTED = BLOCKED_IMPORTS | {
    "antigravity",
    "this",
    "webbrowser",
    "turtle",
    "turtledemo",
    "tkinter",
    "idlelib",
    "pty",
}


class FillNeeded(BaseException):
    """A value the table lacks: the run stops, the parent predicts it and runs again."""


class Filler:
    def __init__(self, table: dict[str, dict]) -> None:
        self.table = table
        self.made: dict[str, object] = {}  # key -> the one value of that key in this run
        self.used: dict[str, int | None] = {}  # key -> line of its first use, in order of use
        self.needs: list[dict] = []
        self.modules: dict[str, InjectedModule] = {}
        self.returned: str | None = None  # the kind of exit()'s value, once the program exits

    def line(self) -> int | None:
        """The program line running now (the innermost program frame's)."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != PROGRAM_FILENAME:
            frame = frame.f_back
        return frame.f_lineno if frame is not None else None

    def value(self, key: str, use: str, name: str, owner: str | None = None):
        if key in self.made:
            return self.made[key]
        spec = self.table.get(key)
        if spec is None:
            self.need(key, use, name, owner, self.line())
            raise FillNeeded(key)
        made = self.made[key] = concretize(self, key, name, spec)
        self.used.setdefault(key, self.line())
        return made

    def need(self, key: str, use: str, name: str, owner: str | None, line: int | None) -> None:
        if all(n["key"] != key for n in self.needs):
            self.needs.append({"key": key, "use": use, "name": name, "owner": owner, "line": line})

    def module(self, name: str):
        """The `module` kind: the standard library's module of that name, else an injected
        one. Private modules (`_posixsubprocess`), those the sandbox refuses a program, and
        those that act when imported are never imported for it."""
        top = name.split(".")[0]
        if top in STDLIB and not top.startswith("_") and top not in NEVER_IMPORTED:
            try:
                return importlib.import_module(name)
            except Exception:
                pass
        return self.missing_module(name)

    def missing_module(self, name: str) -> InjectedModule:
        if name not in self.modules:
            self.modules[name] = InjectedModule(self, name)
            self.used.setdefault(f"module:{name}", self.line())
        return self.modules[name]

    def seed(self, namespace: dict) -> None:
        """Put the table's top-level names into the program's globals."""
        for key in self.table:
            if key.startswith("name:") and key[5:].isidentifier():
                name = key[5:]
                namespace[name] = self.value(key, "name", name)
        self.used.clear()  # seeding is no use: each name's first use is the need that asked for it

    def on_error(self, exc: BaseException, line: int | None) -> bool:
        """A run's uncaught exception: True where it is a value the table lacks."""
        if isinstance(exc, FillNeeded):
            return True
        name = getattr(exc, "name", None) if type(exc) is NameError else None
        if type(name) is str and name.isidentifier() and f"name:{name}" not in self.table:
            self.need(f"name:{name}", "name", name, None, line if type(line) is int else None)
            return True
        return False

    def exited(self, code) -> None:
        try:
            self.returned = kind_of(code)
        except Exception:  # a program's value whose comparison raises
            self.returned = "object"

    def report(self) -> dict:
        return {"needs": self.needs, "used": self.used, "modules": sorted(self.modules), "returned": self.returned}


class _MissingModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: a module no real finder has becomes an injected one."""

    def __init__(self, filler: Filler) -> None:
        self.filler = filler

    def find_spec(self, fullname, path=None, target=None):
        # Only the program's own imports: a library's `try: import _winapi` stays an ImportError.
        if fullname.split(".")[0] in STDLIB or not _imported_by_program():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return self.filler.missing_module(spec.name)

    def exec_module(self, module) -> None:
        return None


def _imported_by_program() -> bool:
    """Whether the import running now is a statement of the program (the first frame below
    the import machinery is the program's)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename == PROGRAM_FILENAME


def install(table: dict[str, dict], namespace: dict) -> Filler:
    filler = Filler(table)
    sys.meta_path.append(_MissingModuleFinder(filler))
    filler.seed(namespace)
    return filler
