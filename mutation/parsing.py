"""tree-sitter parsing and the byte-range edit record shared by all operators."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Tree

PY_LANGUAGE = Language(tree_sitter_python.language())
_PARSER = Parser(PY_LANGUAGE)


def parse(source: bytes) -> Tree:
    return _PARSER.parse(source)


def has_errors(tree: Tree) -> bool:
    """True when the tree has ERROR or MISSING nodes (tree-sitter recovers from errors)."""
    return tree.root_node.has_error


def walk(node: Node) -> Iterator[Node]:
    """All nodes below `node` (pre-order), iteratively with a cursor: fast on big trees."""
    cursor = node.walk()
    while True:
        yield cursor.node
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return


@dataclass(frozen=True, order=True)
class Edit:
    """Replace bytes [start, end) of the original source by `text` (start == end inserts)."""

    start: int
    end: int
    text: str
    op: str = ""

    def to_json(self) -> dict:
        return {"start": self.start, "end": self.end, "text": self.text, "op": self.op}


def overlaps(a: Edit, b: Edit) -> bool:
    """Two edits conflict when their ranges intersect; insertions conflict only strictly inside."""
    if a.start == a.end and b.start == b.end:
        return a.start == b.start
    if a.start == a.end:
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


def apply_edits(source: bytes, edits: list[Edit]) -> bytes:
    """Apply non-overlapping edits (insertions before replacements at the same offset)."""
    out = []
    pos = 0
    for e in sorted(edits, key=lambda e: (e.start, e.end != e.start, e.end)):
        out.append(source[pos : e.start])
        out.append(e.text.encode("utf-8"))
        pos = max(pos, e.end)
    out.append(source[pos:])
    return b"".join(out)
