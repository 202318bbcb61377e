"""Rendering of variable values for traces: one pure function, `render`.

Truncation policy (the official CodeExecutor release never published one):

* Functions, methods and builtins render as ``<function>``, classes as ``<class>``,
  modules as ``<module>``.
* Every other value renders as its exact ``repr`` when that is at most ``limit``
  characters long.
* A longer rendering is cut to its first ``limit`` characters followed by ``...``; the
  kept characters are exactly the start of the full ``repr``. The builtin containers
  (list, tuple, dict, set, frozenset, deque, defaultdict) and long strings are rendered
  incrementally, so a million-element list costs ``O(limit)``, not ``O(n)``.
* Integers whose ``repr`` CPython refuses (over 4,300 digits) render as
  ``<int with N bits>``.
* Memory addresses are removed (``<Foo object at 0x7f..>`` → ``<Foo object>``) and
  newlines escaped, so a rendering is one line and identical on every run.
* A ``repr`` that raises renders as ``<repr failed: ExcType>``.

``quotes=False`` gives the official release's style, where string quotes are dropped
(``['a', 'b']`` → ``[a, b]``, ``'hi'`` → ``hi``).
"""

from __future__ import annotations

import collections
import functools
import re
import types

DEFAULT_LIMIT = 100
ELLIPSIS = "..."

_FUNCTION_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    functools.partial,
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Full(Exception):
    """Raised inside the incremental renderer once the budget is spent."""


class _Out:
    __slots__ = ("parts", "left", "quotes")

    def __init__(self, budget: int, quotes: bool) -> None:
        self.parts: list[str] = []
        self.left = budget
        self.quotes = quotes

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.left -= len(text)
        if self.left < 0:
            raise _Full


def _str_piece(s: str, budget: int, quotes: bool) -> str:
    if not quotes:
        return s if len(s) <= budget + 1 else s[: budget + 1]
    if len(s) <= 4 * budget + 8:
        return repr(s)
    # Long string: render only a prefix, with the quote character the full repr uses.
    # Appending the right quote characters makes repr choose that style; then cut them.
    prefix = s[: budget + 1]
    if "'" in s:
        if '"' in s:  # both kinds: repr uses ' and escapes it; the suffix renders as \'"
            return repr(prefix + "'\"")[:-4]
        return repr(prefix + "'")[:-2]  # only ': repr uses "
    return repr(prefix)[:-1]


def _emit(obj: object, out: _Out, active: set[int]) -> None:
    t = type(obj)
    if t is str:
        out.put(_str_piece(obj, out.left, out.quotes))  # type: ignore[arg-type]
        return
    if t is int or t is bool or t is float or obj is None:
        out.put(_scalar(obj))
        return
    if t in (list, tuple, set, frozenset, dict, collections.deque, collections.defaultdict):
        if id(obj) in active:  # self-reference, as repr does it
            out.put(
                "[...]"
                if t in (list, collections.deque)
                else "{...}"
                if t in (dict, collections.defaultdict)
                else "(...)"
            )
            return
        active.add(id(obj))
        try:
            _emit_container(obj, t, out, active)
        finally:
            active.discard(id(obj))
        return
    out.put(_leaf(obj))


_NUMERIC = frozenset({int, float, bool, type(None)})


def _fast(obj, t, budget: int, quotes: bool) -> str | None:
    """The rendering of a list/tuple whose items are flat scalars (or, one level down,
    such lists), cut to at most budget + 1 characters, computed by C's repr of just the
    prefix that can fit; None when the value is not of that shape.

    Each item takes at least 3 characters with its ", ", so budget // 3 + 2 items are
    enough to overflow the budget when the sequence is longer.
    """
    n = budget // 3 + 2
    head = obj[:n]
    kinds = set(map(type, head))
    if kinds <= _NUMERIC or (kinds == {str} and quotes and max(map(len, head)) <= budget):
        try:
            text = repr(head)
        except ValueError:  # a huge int
            return None
        if len(obj) > n:
            text = text[:-1]  # not closed: the budget overflows before the end
        return text
    if t is list and kinds == {list}:  # a grid / DP table: rows of scalars
        parts = ["["]
        size = 1
        for i, row in enumerate(obj):
            piece = _fast(row, list, budget - size, quotes)
            if piece is None:
                return None
            parts.append(piece if i == 0 else ", " + piece)
            size += len(parts[-1])
            if size > budget:
                return "".join(parts)
        parts.append("]")
        return "".join(parts)
    return None


def _emit_container(obj, t, out: _Out, active: set[int]) -> None:
    if t is list or t is tuple:
        text = _fast(obj, t, out.left, out.quotes)
        if text is not None:
            out.put(text)
            return
    if t is dict or t is collections.defaultdict:
        if t is collections.defaultdict:
            out.put("defaultdict(" + _leaf_or_class(obj.default_factory) + ", ")
        if not obj:
            out.put("{}")
        else:
            out.put("{")
            first = True
            for k, v in obj.items():
                if not first:
                    out.put(", ")
                first = False
                _emit(k, out, active)
                out.put(": ")
                _emit(v, out, active)
            out.put("}")
        if t is collections.defaultdict:
            out.put(")")
        return
    if t is list:
        open_, close = "[", "]"
    elif t is tuple:
        open_, close = "(", ",)" if len(obj) == 1 else ")"
    elif t is collections.deque:
        open_, close = "deque([", "])" if obj.maxlen is None else f"], maxlen={obj.maxlen})"
    elif not obj:  # empty set / frozenset
        out.put("set()" if t is set else "frozenset()")
        return
    else:
        open_, close = ("{", "}") if t is set else ("frozenset({", "})")
    out.put(open_)
    first = True
    for item in obj:
        if not first:
            out.put(", ")
        first = False
        _emit(item, out, active)
    out.put(close)


def _scalar(obj: object) -> str:
    try:
        return repr(obj)
    except ValueError:  # an int over CPython's 4,300-digit limit
        return f"<int with {obj.bit_length()} bits>"  # type: ignore[union-attr]


def _leaf_or_class(obj: object) -> str:
    if obj is None:
        return "None"
    if isinstance(obj, type):
        return f"<class '{obj.__qualname__}'>"
    return _leaf(obj)


def _leaf(obj: object) -> str:
    if isinstance(obj, _FUNCTION_TYPES):
        return "<function>"
    if isinstance(obj, type):
        return "<class>"
    if isinstance(obj, types.ModuleType):
        return "<module>"
    try:
        text = repr(obj)
    except ValueError as exc:
        if isinstance(obj, int):  # over CPython's 4,300-digit limit
            return f"<int with {obj.bit_length()} bits>"
        return f"<repr failed: {type(exc).__name__}>"
    except Exception as exc:  # a user __repr__ may raise anything
        return f"<repr failed: {type(exc).__name__}>"
    if not isinstance(text, str):
        return "<repr failed: not a str>"
    if " at 0x" in text:
        text = _ADDRESS.sub("", text)
    if "\n" in text or "\r" in text:
        text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text


def render(value: object, limit: int = DEFAULT_LIMIT, quotes: bool = True) -> str:
    """Render one value for a trace state under the policy in the module docstring."""
    t = type(value)
    if t is list or t is tuple:  # the common case in traces, without the general machinery
        text = _fast(value, t, limit, quotes)
        if text is not None:
            return text if len(text) <= limit else text[:limit] + ELLIPSIS
    out = _Out(limit, quotes)
    try:
        _emit(value, out, set())
    except _Full:
        return "".join(out.parts)[:limit] + ELLIPSIS
    except RecursionError:
        return "<repr failed: RecursionError>"
    text = "".join(out.parts)
    if len(text) > limit:  # a single leaf longer than the budget
        return text[:limit] + ELLIPSIS
    return text
