"""Overlap of a built functions set with other code, by normalised source.

Two grains: a whole *program* (the row's code, normalised by `ast.unparse`), and a
*definition* (each top-level function of a program, docstrings and annotations dropped,
normalised; definitions of fewer than `MIN_DEF_LINES` lines are left out, since a
two-line `gcd` is written the same way everywhere and says nothing about leakage).
A reference set is any iterable of source texts: HumanEval's solutions and the LLM
samples reranked against it, MBPP, the contest programs. Inside the functions set the
report checks what the builder promises: no module (split group) in two splits, and no
normalised program in two splits.
"""

from __future__ import annotations

import ast
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable

from curricula.function_calls import _Strip

MIN_DEF_LINES = 4  # a definition this long (normalised) counts; shorter ones are commonplace


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _tree(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return None


def program_digest(code: str) -> bytes:
    tree = _tree(code)
    return _digest(ast.unparse(tree) if tree is not None else code)


def definition_digests(code: str) -> dict[bytes, str]:
    """digest -> function name, for the program's top-level functions (methods of its
    classes included) of at least MIN_DEF_LINES normalised lines."""
    tree = _tree(code)
    if tree is None:
        return {}
    nodes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nodes += [
        m
        for c in tree.body
        if isinstance(c, ast.ClassDef)
        for m in c.body
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    out = {}
    for node in nodes:
        try:
            text = ast.unparse(_Strip().visit(ast.parse(ast.unparse(node))))
        except (SyntaxError, ValueError, RecursionError):
            continue
        if text.count("\n") + 1 >= MIN_DEF_LINES:
            out[_digest(text)] = node.name
    return out


class Reference:
    """The programs and definitions of one reference set."""

    def __init__(self, name: str, sources: Iterable[str]) -> None:
        self.name, self.size = name, 0
        self.programs: set[bytes] = set()
        self.definitions: set[bytes] = set()
        for code in sources:
            self.size += 1
            self.programs.add(program_digest(code))
            self.definitions |= set(definition_digests(code))


def overlap_report(rows: Iterable[dict], references: list[Reference], examples: int = 5) -> dict:
    """rows: the functions set's rows (code, split, kind, problem_id, id). Per reference:
    rows whose program is in it, rows sharing a definition with it (by split, originals
    apart), a few examples; and the set's own split checks."""
    out = {
        r.name: {
            "reference_size": r.size,
            "programs": Counter(),
            "definitions": Counter(),
            "definitions_originals": Counter(),
            "examples": [],
        }
        for r in references
    }
    splits_of_group: dict[str, set[str]] = defaultdict(set)
    splits_of_program: dict[bytes, set[str]] = defaultdict(set)
    total = Counter()
    for row in rows:
        split = row["split"]
        total[split] += 1
        splits_of_group[row["problem_id"]].add(split)
        digest = program_digest(row["code"])
        splits_of_program[digest].add(split)
        defs = definition_digests(row["code"])
        for ref in references:
            entry = out[ref.name]
            if digest in ref.programs:
                entry["programs"][split] += 1
            shared = [name for d, name in defs.items() if d in ref.definitions]
            if shared:
                entry["definitions"][split] += 1
                if row.get("kind") == "original":
                    entry["definitions_originals"][split] += 1
                if len(entry["examples"]) < examples:
                    entry["examples"].append({"id": row["id"], "split": split, "functions": sorted(shared)})
    report = {"rows": dict(total), "references": {}}
    for name, entry in out.items():
        report["references"][name] = {k: dict(v) if isinstance(v, Counter) else v for k, v in entry.items()}
    report["groups_in_two_splits"] = sum(len(s) > 1 for s in splits_of_group.values())
    report["programs_in_two_splits"] = sum(len(s) > 1 for s in splits_of_program.values())
    return report
