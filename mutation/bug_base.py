"""What the realistic bug classes share (mutation/bugs.py): the base class, the edit
that keeps an inner range, and small readers of tree-sitter nodes."""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from tree_sitter import Node

from mutation.operators import Operator, Site, _text
from mutation.parsing import Edit, walk

_BUILTINS = frozenset(dir(builtins))


def _call_name(node: Node) -> str:
    func = node.child_by_field_name("function")
    return _text(func) if func is not None else ""


def _args(node: Node) -> list[Node]:
    args = node.child_by_field_name("arguments")
    return [] if args is None or args.type != "argument_list" else list(args.named_children)


def _unwrap(inner: Node) -> _Unwrap:
    return _Unwrap(inner.start_byte, inner.end_byte)


def _line_start(source: bytes, offset: int) -> int:
    return source.rfind(b"\n", 0, offset) + 1


def _indent(source: bytes, node: Node) -> str:
    start = _line_start(source, node.start_byte)
    return source[start : node.start_byte].decode("utf-8", "replace")


def _alone_on_line(source: bytes, node: Node) -> bool:
    """Nothing but whitespace before and after the node on its lines."""
    start = _line_start(source, node.start_byte)
    end = source.find(b"\n", node.end_byte)
    end = len(source) if end < 0 else end
    return not source[start : node.start_byte].strip() and not source[node.end_byte : end].strip()


def _assigned_names(root: Node) -> set[str]:
    """Every identifier the program has anywhere, read or bound: a new name must be none of them."""
    names = set()
    for node in walk(root):
        if node.type == "identifier":
            names.add(_text(node))
    return names


class _Bug(Operator):
    """A bug class: `crashes_with` is what it usually raises (documentation and stats only:
    the run decides)."""

    crashes_with: tuple[str, ...] = ()

    def alternatives(self, source: bytes, site: Site) -> list[list[Edit]]:
        """A site's data: replacement texts of its whole range, or `_Unwrap`s (keep an
        inner range, drop what is around it: a protected literal inside stays untouched)."""
        out = []
        for choice in site.data:
            if isinstance(choice, _Unwrap):
                out.append([Edit(site.start, choice.start, "", self.name), Edit(choice.end, site.end, "", self.name)])
            else:
                out.append([Edit(site.start, site.end, choice, self.name)])
        return out


@dataclass(frozen=True)
class _Unwrap:
    """Keep bytes [start, end) of a site and delete the rest of it."""

    start: int
    end: int
