"""Bug classes about names: a misspelt one, one used before it is assigned, an import
removed, a method the type lacks, a recursion that never ends (mutation/bugs.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from tree_sitter import Node

from mutation.bug_base import _BUILTINS, _alone_on_line, _args, _assigned_names, _Bug, _call_name
from mutation.operators import Site, _text
from mutation.parsing import Edit, walk


def _misspellings(name: str) -> list[str]:
    out = []
    if len(name) > 1:
        out.append(name[:-1])  # the last letter dropped
    out.append(name + name[-1])  # the last letter doubled
    swapped = name.swapcase() if len(name) == 1 else name[0].swapcase() + name[1:]
    out.append(swapped)
    return out


class MSN(_Bug):
    """Misspelt name: a read of a variable written with a typo no definition has."""

    name, description = "MSN", "a misspelt name: total -> totall"
    crashes_with = ("NameError",)

    def sites(self, root: Node) -> Iterator[Site]:
        defined = _assigned_names(root)
        for node in walk(root):
            if node.type != "identifier" or not _is_read(node):
                continue
            name = _text(node)
            if name in _BUILTINS or name.startswith("__"):
                continue
            typos = tuple(
                t for t in _misspellings(name) if t not in defined and t not in _BUILTINS and t.isidentifier()
            )
            if typos:
                yield Site(self.name, node.start_byte, node.end_byte, typos)

    def apply(self, source: bytes, site: Site, rng: random.Random) -> list[Edit]:
        return [Edit(site.start, site.end, rng.choice(site.data), self.name)]

    @classmethod
    def examples(cls):
        return [("total = 1\nprint(total)", "total = 1\nprint(totall)")]


def _is_read(node: Node) -> bool:
    """An identifier that is read, not bound, and not an attribute's or a keyword's name."""
    parent = node.parent
    if parent is None:
        return False
    if parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
        return False
    if parent.type == "keyword_argument" and parent.child_by_field_name("name") == node:
        return False
    if parent.type in ("assignment", "augmented_assignment", "for_statement", "for_in_clause"):
        return parent.child_by_field_name("right") == node
    if parent.type in (
        "pattern_list",
        "tuple_pattern",
        "list_pattern",
        "parameters",
        "default_parameter",
        "typed_parameter",
        "function_definition",
        "class_definition",
        "dotted_name",
        "aliased_import",
        "global_statement",
        "nonlocal_statement",
        "lambda_parameters",
        "as_pattern_target",
    ):
        return False
    return True


class UBA(_Bug):
    """Used before assigned: two statements of a block swapped, the second reading a name
    the first binds (`UnboundLocalError` in a function, `NameError` at module level), or
    a function's `global` line forgotten (`pass` keeps the block whole)."""

    name, description = "UBA", "a name used before it is assigned: two statements swapped, a global forgotten"
    crashes_with = ("UnboundLocalError", "NameError")

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):  # a `global` line removed: the function's own assignment makes the name local
            if node.type == "global_statement" and _alone_on_line(root.text, node):
                yield Site(self.name, node.start_byte, node.end_byte, ("pass",))
        for block in walk(root):
            if block.type not in ("module", "block"):
                continue
            stmts = [s for s in block.named_children if s.type == "expression_statement"]
            for a, b in zip(stmts, stmts[1:]):
                if a.next_named_sibling != b or a.end_point[0] == b.start_point[0]:
                    continue
                bound = _bound_by(a)
                if bound and bound & {_text(n) for n in walk(b) if n.type == "identifier" and _is_read(n)}:
                    between = root.text[a.end_byte : b.start_byte].decode("utf-8", "replace")
                    yield Site(self.name, a.start_byte, b.end_byte, (_text(b) + between + _text(a),))

    @classmethod
    def examples(cls):
        return [
            ("def f():\n    s = 1\n    t = s + 1\n    return t", "def f():\n    t = s + 1\n    s = 1\n    return t")
        ]


def _bound_by(stmt: Node) -> set[str]:
    child = stmt.named_children[0] if stmt.named_child_count else None
    if child is None or child.type != "assignment":
        return set()
    left = child.child_by_field_name("left")
    return {_text(n) for n in walk(left) if n.type == "identifier"} if left is not None else set()


class RMI(_Bug):
    """Removed import: an import line of the module deleted (its line left blank)."""

    name, description = "RMI", "an import removed: the module is used without it"
    crashes_with = ("NameError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in root.named_children:
            if node.type in ("import_statement", "import_from_statement") and "__future__" not in _text(node):
                if _alone_on_line(root.text, node):
                    yield Site(self.name, node.start_byte, node.end_byte, ("",))

    @classmethod
    def examples(cls):
        return [("import math\nprint(math.sqrt(4))", "\nprint(math.sqrt(4))")]


# a method of one type called on another that lacks it: a list's `add`, a set's `append`, ...
_WRONG_METHOD = {
    "append": "add",
    "add": "append",
    "extend": "update",
    "update": "extend",
    "remove": "discard",
    "index": "find",
    "find": "index",
    "items": "iteritems",
    "keys": "iterkeys",
    "popleft": "pop_left",
    "appendleft": "prepend",
    "split": "splits",
    "strip": "trim",
    "join": "concat",
    "count": "counts",
    "sort": "sorted",
    "upper": "toupper",
    "lower": "tolower",
}


class MMT(_Bug):
    """A method the value's type lacks: `xs.add(x)` on a list, `s.append(x)` on a set."""

    name, description = "MMT", "a method the type lacks: xs.append(x) -> xs.add(x)"
    crashes_with = ("AttributeError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for node in walk(root):
            if node.type != "call":
                continue
            func = node.child_by_field_name("function")
            if func is not None and func.type == "attribute":
                attr = func.child_by_field_name("attribute")
                if attr is not None and _text(attr) in _WRONG_METHOD:
                    yield Site(self.name, attr.start_byte, attr.end_byte, (_WRONG_METHOD[_text(attr)],))

    @classmethod
    def examples(cls):
        return [("a = []\na.append(1)", "a = []\na.add(1)")]


class URC(_Bug):
    """Unbounded recursion: a recursive call's shrinking argument (`n - 1`, `n // 2`)
    passed unchanged."""

    name, description = "URC", "a recursion that never ends: f(n - 1) -> f(n)"
    crashes_with = ("RecursionError",)

    def sites(self, root: Node) -> Iterator[Site]:
        for fn in walk(root):
            if fn.type != "function_definition":
                continue
            name = _text(fn.child_by_field_name("name"))
            for node in walk(fn):
                if node.type == "call" and _call_name(node) == name:
                    for arg in _args(node):
                        if arg.type == "binary_operator" and arg.child_by_field_name("right").type == "integer":
                            left = arg.child_by_field_name("left")
                            yield Site(self.name, arg.start_byte, arg.end_byte, (_text(left),))

    @classmethod
    def examples(cls):
        return [
            (
                "def f(n):\n    if n == 0:\n        return 1\n    return n * f(n - 1)",
                "def f(n):\n    if n == 0:\n        return 1\n    return n * f(n)",
            )
        ]
