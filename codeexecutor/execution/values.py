"""The value abstraction of guided execution: the kinds a missing value is predicted as.

A run of incomplete code (`guided.py`) asks a predictor, for each value the code lacks,
for one of `KINDS`; the sandbox child turns the answer into a real value (`concretize`).
The same abstraction labels what real runs read (`kind_of`, used by `value_record.py`),
so a predictor learns from the kinds it is later asked for.

The kinds are LExecutor's 23 fine-grained classes with two of ours added: `module` (a
name like `os` or `re` read without its import: the real standard-library module where
there is one) and `absorb` (an object that absorbs every use: the "dummy" baseline, never
learned). A predictor may give a concrete literal with the kind (`'alice'`, `[3, 1, 2]`);
the child parses it with `ast.literal_eval` only, and keeps it only when its kind is the
kind predicted, so nothing a predictor returns can run code, open a file or a socket.
"""

from __future__ import annotations

import ast
import dis
import sys
import types

KINDS = (
    "none",
    "true",
    "false",
    "int_neg",
    "int_zero",
    "int_pos",
    "float_neg",
    "float_zero",
    "float_pos",
    "str_empty",
    "str",
    "list_empty",
    "list",
    "tuple_empty",
    "tuple",
    "set_empty",
    "set",
    "dict_empty",
    "dict",
    "callable",
    "resource",
    "object",
    "module",
)

_DEFAULTS = {
    "none": None,
    "true": True,
    "false": False,
    "int_neg": -1,
    "int_zero": 0,
    "int_pos": 1,
    "float_neg": -1.0,
    "float_zero": 0.0,
    "float_pos": 1.0,
    "str_empty": "",
    "str": "a",
    "list_empty": [],
    "tuple_empty": (),
    "set_empty": set(),
    "dict_empty": {},
}
STDLIB = frozenset(sys.stdlib_module_names)


def kind_of(value: object) -> str:
    """The kind a real value is abstracted to."""
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    t = type(value)
    if t is int or (isinstance(value, int) and not isinstance(value, bool)):
        return "int_neg" if value < 0 else "int_zero" if value == 0 else "int_pos"
    if isinstance(value, float):
        return "float_neg" if value < 0 else "float_zero" if value == 0 else "float_pos"
    if isinstance(value, str):
        return "str" if value else "str_empty"
    for cls, name in ((list, "list"), (tuple, "tuple"), ((set, frozenset), "set"), (dict, "dict")):
        if isinstance(value, cls):
            try:
                return name if len(value) else f"{name}_empty"
            except Exception:
                return name
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, (Absorbing, Injected)):  # what was injected is an object, whatever it answers
        return "callable" if isinstance(value, InjectedCallable) else "object"
    if hasattr(type(value), "__enter__") and hasattr(type(value), "__exit__"):
        return "resource"
    if callable(value):
        return "callable"
    return "object"


_UNPACK = dis.opmap["UNPACK_SEQUENCE"]


def _unpacked(frame) -> int:
    """How many values the instruction running in `frame` unpacks (1 unless UNPACK_SEQUENCE)."""
    try:
        code, at = frame.f_code.co_code, frame.f_lasti
        return code[at + 1] if code[at] == _UNPACK else 1
    except (AttributeError, IndexError):
        return 1


# -- the child's injected objects --------------------------------------------------------
class Injected:
    """An injected object or callable: each attribute it lacks and each call's result is
    asked of the predictor in turn (through the run's `Filler`), keyed by where it is used."""

    def __init__(self, filler, key: str, name: str, kind: str) -> None:
        object.__setattr__(self, "_fill", (filler, key, name, kind))

    def __getattr__(self, attr: str):
        filler, key, name, _ = object.__getattribute__(self, "_fill")
        if attr in ("__name__", "__qualname__"):
            return name
        if attr.startswith("__") and attr.endswith("__"):  # protocols (copy, pickle, ...) stay absent
            raise AttributeError(attr)
        return filler.value(f"{key}.{attr}", "attribute", attr, owner=name)

    def __getitem__(self, index):
        """An index of an injected value is what it holds: asked like a call's result, per line."""
        filler, key, name, _ = object.__getattribute__(self, "_fill")
        return filler.value(f"{key}[]@{filler.line()}", "call", name, owner=name)

    def __iter__(self):
        """Its elements are asked of the predictor: as many as an unpacking `a, b = it` takes
        (read off the instruction that iterates), else one."""
        filler, key, name, _ = object.__getattribute__(self, "_fill")
        line = filler.line()
        count = _unpacked(sys._getframe(1))
        return iter([filler.value(f"{key}[{i}]@{line}", "call", name, owner=name) for i in range(count)])

    def __instancecheck__(self, instance) -> bool:  # `isinstance(x, injected)` is false, as for a class
        return False

    def __subclasscheck__(self, subclass) -> bool:
        return False

    def __repr__(self) -> str:
        _, _, name, kind = object.__getattribute__(self, "_fill")
        return f"<injected {kind} {name}>"


class InjectedCallable(Injected):
    """A callable, most often a class (as LExecutor finds)."""

    def __call__(self, *args, **kwargs):
        filler, key, name, _ = object.__getattribute__(self, "_fill")
        return filler.value(f"{key}()@{filler.line()}", "call", name, owner=name)


class InjectedDict(dict):
    """A non-empty dict of the kind's default: a key it lacks holds a value asked of the predictor."""

    def __init__(self, filler, key: str, name: str) -> None:
        super().__init__(a=Injected(filler, f"{key}['a']", name, "object"))
        self._fill = (filler, key, name)

    def __missing__(self, item):
        filler, key, name = self._fill
        label = repr(item) if isinstance(item, (str, int, float, bool, type(None))) else type(item).__name__
        return filler.value(f"{key}[{label[:40]}]", "call", name, owner=name)


class _EmptyContext:
    """Enters as itself, leaves without swallowing, iterates as empty."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __iter__(self):
        return iter(())


class InjectedResource(_EmptyContext, Injected):
    """What `with` and `open` give: enters as itself, reads as empty."""

    def read(self, *args):
        return ""

    def close(self) -> None:
        return None


class InjectedModule(types.ModuleType):
    """A module that is not installed: its attributes are asked of the predictor."""

    def __init__(self, filler, name: str) -> None:
        super().__init__(name)
        self.__path__ = []  # a package, so that `import name.sub` comes back to the finder
        self.__dict__["_fill"] = (filler, f"module:{name}")

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        filler, key = self.__dict__["_fill"]
        return filler.value(f"{key}.{attr}", "attribute", attr, owner=self.__name__)


class Absorbing(_EmptyContext):
    """The absorbing dummy: any attribute, call, index or operator gives another one; it
    iterates as empty, has length 0, converts to 0, and is always true."""

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Absorbing()

    def _absorb(self, *args, **kwargs):
        return Absorbing()

    __call__ = __getitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _absorb
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = _absorb
    __neg__ = __pos__ = __invert__ = __abs__ = _absorb
    __lt__ = __le__ = __gt__ = __ge__ = _absorb

    def __setitem__(self, key, value) -> None:
        return None

    def __delitem__(self, key) -> None:
        return None

    def __contains__(self, item) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return True

    def __index__(self) -> int:
        return 0

    __int__ = __index__

    def __instancecheck__(self, instance) -> bool:
        return False

    def __subclasscheck__(self, subclass) -> bool:
        return False

    def __float__(self) -> float:
        return 0.0

    def __str__(self) -> str:
        return "dummy"

    def __repr__(self) -> str:
        return "<absorbing dummy>"

    def __hash__(self) -> int:
        return 0


def concretize(filler, key: str, name: str, spec: dict):
    """The real value of a prediction `spec` ({"kind", optional "value": a literal})."""
    kind = spec.get("kind")
    literal = spec.get("value")
    if literal is not None:
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            if kind_of(value) == kind:
                return value
    if kind in _DEFAULTS:
        default = _DEFAULTS[kind]
        return type(default)() if isinstance(default, (list, set, dict)) else default
    if kind in ("list", "tuple", "set", "dict"):  # LExecutor's concretisation: one injected object inside
        inner = Injected(filler, f"{key}[0]", f"{name}[0]", "object")
        if kind == "list":
            return [inner]
        if kind == "tuple":
            return (inner,)
        if kind == "set":
            return {inner}
        return InjectedDict(filler, key, name)
    if kind == "callable":
        return InjectedCallable(filler, key, name, kind)
    if kind == "resource":
        return InjectedResource(filler, key, name, kind)
    if kind == "module":
        return filler.module(name)
    if kind == "absorb":
        return Absorbing()
    return Injected(filler, key, name, "object")
