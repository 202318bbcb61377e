"""The twelve mutation operators (docs/mutation.md), one small class each, in one registry.

An operator finds its *sites* in a tree-sitter tree of the original source and turns a
site into byte-range `Edit`s of that source. Randomness comes only from the injected
`random.Random`. `alternatives` lists every replacement a site can get when that set
is finite (AOR, ASR, ROR, LCR, ...), which is what the exhaustive tests check;
`examples()` gives (before, after) pairs for the parametrised operator test.

Guards against nonsense (mutants certain to be meaningless):
* AOR/ASR: never when an operand is a string, bytes, f-string, list, tuple, dict, set or
  comprehension literal (`'a' + s`, `[0] * n`, `s += 'x'`): another arithmetic operator
  on a sequence is a guaranteed TypeError, not a new behaviour.
* AOR/LCR keep the tree's shape: parentheses are added where a new operator would
  re-associate an unparenthesized chain (`a - b - 1` → `(a - b) / 1`).
* CRP writes a negative number in parentheses where the minus would bind differently
  (`(-5) ** 2`, `-(-5)`).
* ROR: when an operand is the literal `None` only `==` ↔ `!=` (never `None < x`).
* CRP: no docstrings, no f-strings, no `"__main__"` (it would switch the whole program
  off), no imaginary numbers.
* RIL: only on iterables that `reversed()` can take or might take: never on calls of
  map/filter/zip/enumerate/iter/open/set/frozenset, generator expressions, set literals,
  or `sys.stdin`.
* BCR: only `break`/`continue` whose nearest enclosing loop is in the same function.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from tree_sitter import Node

from mutation.parsing import Edit, walk


@dataclass(frozen=True)
class Site:
    """A place an operator can mutate: the node's byte range and what the operator needs."""

    op: str
    start: int
    end: int
    data: tuple = field(default=(), compare=False)


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace")


_NON_NUMERIC_LITERALS = frozenset(
    {
        "string",
        "concatenated_string",
        "list",
        "tuple",
        "dictionary",
        "set",
        "list_comprehension",
        "dictionary_comprehension",
        "set_comprehension",
        "generator_expression",
    }
)


def _non_numeric_literal(node: Node | None) -> bool:
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node is not None and node.type in _NON_NUMERIC_LITERALS


class Operator:
    """Base class. Subclasses set `name`, `node_types`, and implement `sites` and either
    `alternatives` (finite choices) or `apply`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    node_types: ClassVar[tuple[str, ...]] = ()
    loop: ClassVar[bool] = False  # OIL/RIL/ZIL are chosen per loop, not per site

    def sites(self, root: Node) -> Iterator[Site]:
        raise NotImplementedError

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        """Every way to mutate the site, when finitely many; [] when not enumerable."""
        return []

    def apply(self, source: bytes, site: Site, rng: random.Random) -> list[Edit]:
        return rng.choice(self.alternatives(source, site))

    @classmethod
    def examples(cls) -> list[tuple[str, str]]:
        """(before, after) pairs; for random operators `after` is for random.Random(0)."""
        return []


# -- operator families from one table ------------------------------------------------------


class _TokenSwap(Operator):
    """Replace one operator token by another from the same family.

    Parentheses keep the tree's shape: a new operator that binds differently from the
    old one would otherwise re-associate an unparenthesized chain (`a - b - 1` with the
    second `-` turned into `/` is `a - (b / 1)`). `wraps` gives the byte ranges to
    parenthesize; they are applied when `needs_wrap(old, new)`.
    """

    family: ClassVar[tuple[str, ...]] = ()
    parent_type: ClassVar[str] = ""

    def tokens(self, node: Node) -> list[Node]:
        op = node.child_by_field_name("operator")
        return [op] if op is not None else []

    def allowed(self, node: Node, token: Node) -> tuple[str, ...]:
        current = _text(token)
        return tuple(t for t in self.family if t != current)

    def wraps(self, node: Node) -> tuple[tuple[int, int], ...]:
        return ()

    def needs_wrap(self, old: str, new: str) -> bool:
        return False

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != self.parent_type:
                continue
            for token in self.tokens(node):
                if _text(token) in self.family:
                    choices = self.allowed(node, token)
                    if choices:
                        yield Site(
                            self.name, token.start_byte, token.end_byte, (choices, _text(token), self.wraps(node))
                        )

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        choices, old, wraps = site.data
        out = []
        for alt in choices:
            edits = [Edit(site.start, site.end, alt, self.name)]
            if wraps and self.needs_wrap(old, alt):
                for start, end in wraps:
                    edits += [Edit(start, start, "(", self.name), Edit(end, end, ")", self.name)]
            out.append(edits)
        return out


def _family(name: str, description: str, parent_type: str, family: tuple[str, ...], examples, base=_TokenSwap):
    return type(
        name,
        (base,),
        {
            "name": name,
            "description": description,
            "node_types": (parent_type,),
            "family": family,
            "parent_type": parent_type,
            "examples": classmethod(lambda cls: list(examples)),
            "__doc__": description,
        },
    )


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "@": 2, "**": 4}
_COMPOUND_ARITH = ("binary_operator", "unary_operator", "await")


class _ArithmeticSwap(_TokenSwap):
    def allowed(self, node: Node, token: Node) -> tuple[str, ...]:
        if _non_numeric_literal(node.child_by_field_name("left")) or _non_numeric_literal(
            node.child_by_field_name("right")
        ):
            return ()
        return super().allowed(node, token)

    def wraps(self, node: Node) -> tuple[tuple[int, int], ...]:
        if node.type != "binary_operator":
            return ()  # augmented assignment: the right side is a whole expression
        ranges = [
            (child.start_byte, child.end_byte)
            for child in (node.child_by_field_name("left"), node.child_by_field_name("right"))
            if child is not None and child.type in _COMPOUND_ARITH
        ]
        if node.parent is not None and node.parent.type in _COMPOUND_ARITH:
            ranges.append((node.start_byte, node.end_byte))
        return tuple(ranges)

    def needs_wrap(self, old: str, new: str) -> bool:
        return _PRECEDENCE[old] != _PRECEDENCE[new]


class _LogicalSwap(_TokenSwap):
    def wraps(self, node: Node) -> tuple[tuple[int, int], ...]:
        ranges = [(c.start_byte, c.end_byte) for c in node.named_children if c.type == "boolean_operator"]
        if node.parent is not None and node.parent.type == "boolean_operator":
            ranges.append((node.start_byte, node.end_byte))
        return tuple(ranges)

    def needs_wrap(self, old: str, new: str) -> bool:
        return True


class _RelationalSwap(_TokenSwap):
    def tokens(self, node: Node) -> list[Node]:
        return [c for c in node.children if not c.is_named]

    def allowed(self, node: Node, token: Node) -> tuple[str, ...]:
        neighbours = [token.prev_named_sibling, token.next_named_sibling]
        if any(n is not None and n.type == "none" for n in neighbours):
            return tuple(t for t in ("==", "!=") if t != _text(token)) if _text(token) in ("==", "!=") else ()
        return super().allowed(node, token)


_ARITH = ("+", "-", "*", "/", "//", "%", "**")
_AUG = ("+=", "-=", "*=", "/=", "//=", "%=", "**=")
_REL = ("<", "<=", ">", ">=", "==", "!=")

AOR = _family(
    "AOR",
    "replace a binary arithmetic operator with another",
    "binary_operator",
    _ARITH,
    [("x = a * b", "x = a + b"), ("x = a - b - 1", "x = (a - b) / 1"), ("x = a * b + c", "x = (a * b) ** c")],
    _ArithmeticSwap,
)
ASR = _family(
    "ASR",
    "replace an augmented assignment operator with another",
    "augmented_assignment",
    _AUG,
    [("a += 2", "a -= 2")],
    _ArithmeticSwap,
)
ROR = _family(
    "ROR",
    "replace a comparison operator with another",
    "comparison_operator",
    _REL,
    [("if a <= b:\n    pass", "if a < b:\n    pass")],
    _RelationalSwap,
)
LCR = _family(
    "LCR",
    "swap the logical connectors and / or",
    "boolean_operator",
    ("and", "or"),
    [("c = a and b", "c = a or b"), ("c = a or b", "c = a and b"), ("c = a or b and d", "c = a and (b and d)")],
    _LogicalSwap,
)


# -- deletions ------------------------------------------------------------------------------


class AOD(Operator):
    """Delete a unary arithmetic operator '+' or '-'."""

    name = "AOD"
    description = "delete a unary + or -"
    node_types = ("unary_operator",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type == "unary_operator":
                op = node.child_by_field_name("operator")
                arg = node.child_by_field_name("argument")
                if op is not None and arg is not None and _text(op) in ("+", "-"):
                    yield Site(self.name, op.start_byte, arg.start_byte)

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        return [[Edit(site.start, site.end, "", self.name)]]

    @classmethod
    def examples(cls):
        return [("x = -y", "x = y"), ("x = a - (- 3)", "x = a - (3)")]


class COD(Operator):
    """Delete the negation `not`, or turn `not in` into `in`."""

    name = "COD"
    description = "delete `not`, or `not in` -> `in`"
    node_types = ("not_operator", "comparison_operator")

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type == "not_operator":
                arg = node.child_by_field_name("argument")
                if arg is not None:
                    yield Site(self.name, node.start_byte, arg.start_byte, ("",))
            elif node.type == "comparison_operator":
                for token in node.children:
                    if token.type == "not in":
                        yield Site(self.name, token.start_byte, token.end_byte, ("in",))

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        return [[Edit(site.start, site.end, site.data[0], self.name)]]

    @classmethod
    def examples(cls):
        return [("if not x:\n    pass", "if x:\n    pass"), ("y = k not in d", "y = k in d")]


class SIR(Operator):
    """Delete one argument of `collection[start:end:step]`."""

    name = "SIR"
    description = "delete one part of a slice a[start:end:step]"
    node_types = ("slice",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type == "slice":
                for part in node.named_children:
                    if part.type != "comment":
                        yield Site(self.name, part.start_byte, part.end_byte)

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        return [[Edit(site.start, site.end, "", self.name)]]

    @classmethod
    def examples(cls):
        return [("b = a[1:n]", "b = a[:n]"), ("b = a[::-1]", "b = a[::]")]


# -- break / continue -------------------------------------------------------------------------

_LOOPS = ("for_statement", "while_statement")
_SCOPES = ("function_definition", "class_definition", "lambda")


def _in_loop(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _LOOPS:
            return True
        if parent.type in _SCOPES:
            return False
        parent = parent.parent
    return False


class BCR(Operator):
    """Swap `break` and `continue` inside a loop."""

    name = "BCR"
    description = "swap break and continue inside a loop"
    node_types = ("break_statement", "continue_statement")

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type in self.node_types and _in_loop(node):
                yield Site(
                    self.name,
                    node.start_byte,
                    node.end_byte,
                    ("continue" if node.type == "break_statement" else "break",),
                )

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        return [[Edit(site.start, site.end, site.data[0], self.name)]]

    @classmethod
    def examples(cls):
        return [
            ("for i in a:\n    if i:\n        break", "for i in a:\n    if i:\n        continue"),
            ("while x:\n    continue", "while x:\n    break"),
        ]


# -- constants ------------------------------------------------------------------------------------

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def _is_docstring(string: Node) -> bool:
    stmt = string.parent
    if stmt is None or stmt.type != "expression_statement" or stmt.named_child_count != 1:
        return False
    body = stmt.parent
    if body is None or body.type not in ("module", "block"):
        return False
    if body.type == "block" and (
        body.parent is None or body.parent.type not in ("function_definition", "class_definition")
    ):
        return False
    first = next((c for c in body.named_children if c.type != "comment"), None)
    return first is not None and first.id == stmt.id


class CRP(Operator):
    """Constant replacement: numbers from Normal(x, 100) (ints stay ints, floats stay
    floats); strings extended by 1-2 random characters or shortened by one."""

    name = "CRP"
    description = "replace a numeric or string constant"
    node_types = ("integer", "float", "string")

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            t = node.type
            if t == "integer" or t == "float":
                text = _text(node)
                if text[-1] in "jJ":
                    continue
                try:
                    value = int(text, 0) if t == "integer" else float(text)
                except ValueError:
                    continue
                yield Site(self.name, node.start_byte, node.end_byte, (t, value, _binds_tighter_than_minus(node)))
            elif t == "string":
                start = node.child(0)
                if (
                    start is None
                    or "f" in _text(start).lower()
                    or any(c.type == "interpolation" for c in node.children)
                ):
                    continue
                if _is_docstring(node):
                    continue
                content = next((c for c in node.children if c.type == "string_content"), None)
                if content is None:  # empty string: insert between the quotes
                    end = node.child(node.child_count - 1)
                    yield Site(self.name, end.start_byte, end.start_byte, ("string", "", ()))
                    continue
                if _text(content) == "__main__":
                    continue
                escapes = tuple((c.start_byte, c.end_byte) for c in content.children if c.type == "escape_sequence")
                yield Site(self.name, content.start_byte, content.end_byte, ("string", _text(content), escapes))

    def apply(self, source: bytes, site: Site, rng: random.Random) -> list[Edit]:
        kind = site.data[0]
        if kind in ("integer", "float"):
            new = rng.gauss(site.data[1], 100)
            if kind == "integer":
                text = str(round(new))
            else:
                old = _text_of(source, site).replace("_", "").lower()
                if "e" in old:
                    text = repr(float(f"{new:.6g}"))
                else:
                    decimals = len(old.split(".")[1]) if "." in old else 1
                    text = repr(round(new, max(1, min(decimals, 6))))
            if text.startswith("-") and site.data[2]:
                text = f"({text})"  # keep the structure: (-5) ** 2, -(-5), (-5).real
            return [Edit(site.start, site.end, text, self.name)]
        escapes = site.data[2]
        raw = source[site.start : site.end]
        # Byte offsets (within the content) that are not inside an escape sequence.
        inside = set()
        for a, b in escapes:
            inside.update(range(a - site.start + 1, b - site.start))
        positions = [i for i in range(len(raw) + 1) if i not in inside and (i == len(raw) or (raw[i] & 0xC0) != 0x80)]
        deletable = [i for i in positions[:-1] if not any(a - site.start <= i < b - site.start for a, b in escapes)]
        if deletable and rng.random() < 0.5:  # shorten by one character
            i = rng.choice(deletable)
            j = i + 1
            while j < len(raw) and (raw[j] & 0xC0) == 0x80:
                j += 1
            return [Edit(site.start + i, site.start + j, "", self.name)]
        extra = "".join(rng.choice(_ALPHABET) for _ in range(rng.choice((1, 2))))
        i = rng.choice(positions)
        return [Edit(site.start + i, site.start + i, extra, self.name)]

    @classmethod
    def examples(cls):
        return [("x = 5", "x = 99"), ("s = 'abc'", "s = 'abccq'"), ("y = 2.5", "y = 96.7")]


def _binds_tighter_than_minus(node: Node) -> bool:
    """Would a negative number written here change the tree? (`x ** 2` base, after a
    unary operator, before `.attr` / `[i]` / `(...)`)."""
    parent = node.parent
    if parent is None:
        return False
    if parent.type == "unary_operator":
        return True
    if parent.type == "binary_operator":
        op = parent.child_by_field_name("operator")
        left = parent.child_by_field_name("left")
        return op is not None and _text(op) == "**" and left is not None and left.id == node.id
    if parent.type in ("attribute", "subscript", "call"):
        first = parent.child(0)
        return first is not None and first.id == node.id
    return False


def _text_of(source: bytes, site: Site) -> str:
    return source[site.start : site.end].decode("utf-8", "replace")


# -- loops ----------------------------------------------------------------------------------------


def _body(loop: Node) -> Node | None:
    return loop.child_by_field_name("body")


class _LoopOperator(Operator):
    loop = True
    node_types = _LOOPS

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type in _LOOPS and self.applies(node):
                yield Site(self.name, node.start_byte, node.end_byte, self.data(node))

    def applies(self, loop: Node) -> bool:
        body = _body(loop)
        return body is not None and body.named_child_count > 0

    def data(self, loop: Node) -> tuple:
        return ()

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        return [self.edits(source, site)]


class OIL(_LoopOperator):
    """One iteration loop: add `break` at the end of the loop body."""

    name = "OIL"
    description = "one-iteration loop: add break at the end of the body"

    def data(self, loop: Node) -> tuple:
        body = _body(loop)
        block_on_own_line = body.start_point[0] > loop.start_point[0]
        return (body.end_byte, block_on_own_line, body.start_point[1])

    def edits(self, source: bytes, site: Site) -> list[Edit]:
        end, own_line, column = site.data
        text = ("\n" + " " * column + "break") if own_line else "; break"
        return [Edit(end, end, text, self.name)]

    @classmethod
    def examples(cls):
        return [
            ("for i in a:\n    s += i\nprint(s)", "for i in a:\n    s += i\n    break\nprint(s)"),
            ("while x: x -= 1", "while x: x -= 1; break"),
        ]


class ZIL(_LoopOperator):
    """Zero iteration loop: the body becomes `break`, so the loop stops during its first iteration."""

    name = "ZIL"
    description = "zero-iteration loop: the body becomes break"

    def data(self, loop: Node) -> tuple:
        body = _body(loop)
        return (body.start_byte, body.end_byte)

    def edits(self, source: bytes, site: Site) -> list[Edit]:
        start, end = site.data
        return [Edit(start, end, "break", self.name)]

    @classmethod
    def examples(cls):
        return [("for i in a:\n    s += i\n    t = 1\nprint(s)", "for i in a:\n    break\nprint(s)")]


_NOT_REVERSIBLE_CALLS = frozenset({"map", "filter", "zip", "enumerate", "iter", "open", "set", "frozenset"})


class RIL(_LoopOperator):
    """Reverse iteration loop: `for x in reversed(...)`."""

    name = "RIL"
    description = "reverse iteration: for x in reversed(...)"
    node_types = ("for_statement",)

    def applies(self, loop: Node) -> bool:
        if loop.type != "for_statement" or not super().applies(loop):
            return False
        it = loop.child_by_field_name("right")
        if it is None or it.type in ("generator_expression", "set", "set_comprehension", "expression_list"):
            return False
        if it.type == "call":
            func = it.child_by_field_name("function")
            if func is not None and _text(func) in _NOT_REVERSIBLE_CALLS | {"reversed"}:
                return False
        return _text(it) not in ("sys.stdin", "sys.stdin.buffer")

    def data(self, loop: Node) -> tuple:
        it = loop.child_by_field_name("right")
        return (it.start_byte, it.end_byte)

    def edits(self, source: bytes, site: Site) -> list[Edit]:
        start, end = site.data
        return [Edit(start, start, "reversed(", self.name), Edit(end, end, ")", self.name)]

    @classmethod
    def examples(cls):
        return [("for i in range(n):\n    print(i)", "for i in reversed(range(n)):\n    print(i)")]


OPERATORS: dict[str, Operator] = {
    op.name: op for op in (CRP(), AOD(), AOR(), ASR(), BCR(), COD(), LCR(), ROR(), SIR(), OIL(), RIL(), ZIL())
}
LOOP_OPERATORS = tuple(name for name, op in OPERATORS.items() if op.loop)
