"""Bug classes about values: conversions, reads, off-by-ones, `None`, unpacking, `str`
and `int` mixed, zero divisors (mutation/bugs.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from tree_sitter import Node

from mutation.bug_base import _alone_on_line, _args, _assigned_names, _Bug, _call_name, _indent, _unwrap
from mutation.operators import Site, _text
from mutation.parsing import Edit, walk


class DCV(_Bug):
    """Dropped conversion: `int(x)` or `float(x)` is `x`, `map(int, xs)` is `xs`."""

    name, description = "DCV", "a conversion of input dropped: int(x) -> x, map(int, xs) -> xs"
    crashes_with = ("TypeError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != "call":
                continue
            name, args = _call_name(node), _args(node)
            if name in ("int", "float") and len(args) == 1 and args[0].type != "keyword_argument":
                yield Site(self.name, node.start_byte, node.end_byte, (_unwrap(args[0]),))
            elif name == "map" and len(args) == 2 and _text(args[0]) in ("int", "float"):
                yield Site(self.name, node.start_byte, node.end_byte, (_unwrap(args[1]),))

    @classmethod
    def examples(cls):
        return [("n = int('5')\nprint(n + 1)", "n = '5'\nprint(n + 1)")]


class NSP(_Bug):
    """No split: `map(int, s.split())` iterates the characters of `s`."""

    name, description = "NSP", "a line parsed whole: map(int, s.split()) -> map(int, s)"
    crashes_with = ("ValueError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != "call" or _call_name(node) != "map":
                continue
            args = _args(node)
            if len(args) == 2 and args[1].type == "call" and not _args(args[1]):
                func = args[1].child_by_field_name("function")
                if func is not None and func.type == "attribute" and _text(func).endswith(".split"):
                    obj = func.child_by_field_name("object")
                    yield Site(self.name, args[1].start_byte, args[1].end_byte, (_unwrap(obj),))

    @classmethod
    def examples(cls):
        return [("a = list(map(int, '10 20'.split()))", "a = list(map(int, '10 20'))")]


class XRD(_Bug):
    """Extra read: the program reads one line more than its input has."""

    name, description = "XRD", "one read more than the input has: a line `x = input()` added"
    crashes_with = ("EOFError",)

    def sites(self, root: Node) -> Iterator[Site]:
        source = root.text
        for node in walk(root):
            if node.type == "expression_statement" and node.named_child_count == 1:
                child = node.named_children[0]
                target = child.child_by_field_name("left") if child.type == "assignment" else None
                if target is not None and target.type == "identifier" and node.parent is not None:
                    if _text(target).startswith("__"):
                        continue  # the inlined input's list, not the program's
                    if node.parent.type in ("module", "block") and _alone_on_line(source, node):
                        text = f"{_text(target)} = input()\n{_indent(source, node)}"
                        yield Site(self.name, node.start_byte, node.start_byte, (text,))

    @classmethod
    def examples(cls):
        return [("n = 3\nprint(n)", "n = input()\nn = 3\nprint(n)")]


_ATOMIC = ("identifier", "integer", "call", "subscript", "attribute", "parenthesized_expression")
_ADDITIVE = ("+", "-")  # `n - 1 + 1` groups as `(n - 1) + 1`: no parentheses needed


def _grouped(node: Node) -> str:
    """The node's text, parenthesised where `+ 1` after it would bind into it (`x >> 1`, `a if c else b`)."""
    text = _text(node)
    if node.type in _ATOMIC:
        return text
    op = node.child_by_field_name("operator") if node.type == "binary_operator" else None
    if op is not None and _text(op) in _ADDITIVE + ("*", "/", "//", "%", "**"):
        return text
    return f"({text})"


class OBR(_Bug):
    """Off-by-one range: the stop of `range(...)` one more."""

    name, description = "OBR", "an off-by-one range: range(n) -> range(n + 1)"
    crashes_with = ("IndexError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type == "call" and _call_name(node) == "range":
                args = _args(node)
                if 1 <= len(args) <= 2 and all(a.type != "keyword_argument" for a in args):
                    stop = args[-1]
                    yield Site(self.name, stop.start_byte, stop.end_byte, (f"{_grouped(stop)} + 1",))

    @classmethod
    def examples(cls):
        return [("for i in range(len(a)):\n    print(a[i])", "for i in range(len(a) + 1):\n    print(a[i])")]


class OBI(_Bug):
    """Off-by-one index: `a[i]` is `a[i + 1]`; `a[len(a) - 1]` is `a[len(a)]`."""

    name, description = "OBI", "an off-by-one index: a[i] -> a[i + 1], a[n - 1] -> a[n]"
    crashes_with = ("IndexError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != "subscript" or node.named_child_count != 2:
                continue
            index = node.child_by_field_name("subscript")
            if index is None or index.type == "slice":
                continue
            text = _text(index)
            if index.type == "binary_operator" and text.replace(" ", "").endswith("-1"):
                left = index.child_by_field_name("left")
                yield Site(self.name, index.start_byte, index.end_byte, (_text(left),))
            elif index.type in ("identifier", "binary_operator"):
                yield Site(self.name, index.start_byte, index.end_byte, (f"{_grouped(index)} + 1",))

    @classmethod
    def examples(cls):
        return [("print(a[n - 1])", "print(a[n])"), ("print(a[i])", "print(a[i + 1])")]


class NON(_Bug):
    """`None` where a value was expected: `x = sorted(y)` is `x = y.sort()`, a function's
    `return v` is a bare `return`."""

    name, description = "NON", "a None where a value was expected: sorted(y) -> y.sort(), return v -> return"
    crashes_with = ("TypeError", "AttributeError")

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type == "call" and _call_name(node) == "sorted" and node.parent is not None:
                args = _args(node)
                if len(args) >= 1 and args[0].type == "identifier" and node.parent.type == "assignment":
                    rest = "".join(", " + _text(a) for a in args[1:])
                    yield Site(self.name, node.start_byte, node.end_byte, (f"{_text(args[0])}.sort({rest[2:]})",))
            elif node.type == "return_statement" and node.named_child_count == 1:
                yield Site(self.name, node.start_byte, node.end_byte, ("return",))

    @classmethod
    def examples(cls):
        return [
            ("b = sorted(a)\nprint(b[0])", "b = a.sort()\nprint(b[0])"),
            ("def f(x):\n    return x", "def f(x):\n    return"),
        ]


class WUP(_Bug):
    """Wrong unpacking: one target more than the value has (`a, b, c = x` for two), or, of
    three or more, one fewer."""

    name, description = "WUP", "a wrong number of values to unpack: a, b = x -> a, b, c = x"
    crashes_with = ("ValueError",)

    def sites(self, root: Node) -> Iterator[Site]:
        defined = _assigned_names(root)
        extra = next((n for n in ("c", "d", "z", "rest", "tmp", "x2") if n not in defined), None)
        if extra is None:  # every spare name is taken: no site
            return
        for node in walk(root):
            if node.type in ("pattern_list", "tuple_pattern") and node.parent is not None:
                if node.parent.type in ("assignment", "for_statement", "for_in_clause"):
                    if node.parent.child_by_field_name("left") == node and node.named_child_count >= 2:
                        last = node.named_children[-1]
                        yield Site(self.name, last.end_byte, last.end_byte, (f", {extra}",))
                        if node.named_child_count >= 3:  # or one target fewer
                            prev = node.named_children[-2]
                            yield Site(self.name, prev.end_byte, last.end_byte, ("",))

    @classmethod
    def examples(cls):
        return [("a, b = 1, 2", "a, b, c = 1, 2")]


class MSI(_Bug):
    """A `str` and an `int` mixed: the `str(...)` around a number added to text dropped,
    or `' '.join` of numbers without `map(str, ...)`."""

    name, description = "MSI", "str and int mixed: 'n=' + str(n) -> 'n=' + n, ' '.join(map(str, a)) -> ' '.join(a)"
    crashes_with = ("TypeError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != "call":
                continue
            args = _args(node)
            if _call_name(node) == "str" and len(args) == 1 and node.parent is not None:
                if node.parent.type == "binary_operator" and _text(node.parent.child_by_field_name("operator")) == "+":
                    yield Site(self.name, node.start_byte, node.end_byte, (_unwrap(args[0]),))
            elif _call_name(node) == "map" and len(args) == 2 and _text(args[0]) == "str":
                parent = node.parent.parent if node.parent is not None else None
                if parent is not None and parent.type == "call" and _call_name(parent).endswith(".join"):
                    yield Site(self.name, node.start_byte, node.end_byte, (_unwrap(args[1]),))

    @classmethod
    def examples(cls):
        return [("print(' '.join(map(str, a)))", "print(' '.join(a))"), ("s = 'n=' + str(n)", "s = 'n=' + n")]


class UDV(_Bug):
    """A divisor that can be zero: `x / n` is `x / (n - 1)`, or divides by a counter
    that starts at zero."""

    name, description = "UDV", "an unguarded division: x / n -> x / (n - 1), or by a counter set to 0"
    crashes_with = ("ZeroDivisionError",)

    def sites(self, root: Node) -> Iterator[Site]:
        zeros = sorted(
            {
                _text(n.child_by_field_name("left"))
                for n in walk(root)
                if n.type == "assignment"
                and n.child_by_field_name("left") is not None
                and n.child_by_field_name("left").type == "identifier"
                and n.child_by_field_name("right") is not None
                and _text(n.child_by_field_name("right")) == "0"
            }
        )
        for node in walk(root):
            if node.type in ("binary_operator", "augmented_assignment"):
                op = node.child_by_field_name("operator")
                right = node.child_by_field_name("right")
                if op is None or right is None or _text(op).rstrip("=") not in ("/", "//", "%"):
                    continue
                if right.type == "integer":
                    continue
                choices = (f"({_text(right)} - 1)",) + tuple(z for z in zeros if z != _text(right))[:2]
                yield Site(self.name, right.start_byte, right.end_byte, choices)

    def apply(self, source: bytes, site: Site, rng: random.Random) -> list[Edit]:
        return [Edit(site.start, site.end, rng.choice(site.data), self.name)]

    @classmethod
    def examples(cls):
        return [("print(s / n)", "print(s / (n - 1))")]
