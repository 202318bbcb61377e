"""The paper's mutant sampling procedure on top of the operator registry.

For each of `n` attempts (default 20): every site is mutated with probability `p`
(default 0.5) by its operator; a loop is one candidate site, and when it is mutated it
gets one of the loop operators that apply to it (OIL, RIL for `for` loops, ZIL),
uniformly. (So p = 0 leaves every program as it is.)
Conflicting edits (a site inside a loop body that ZIL replaces, ...) are resolved in
favour of the one decided first, loops first. A mutant that does not re-parse cleanly
or does not compile is discarded; so is one whose token form (no comments, no
whitespace) equals the original's or an earlier mutant's. Every discard is counted.

Reproducible: the random stream of attempt k is seeded with (sha256 of the source,
seed, k), so the same program and seed give byte-identical mutants on any machine and
in any process, whatever else ran before.
"""

from __future__ import annotations

import hashlib
import io
import random
import tokenize
from collections import Counter
from dataclasses import dataclass, field

from mutation.operators import OPERATORS, Site
from mutation.parsing import Edit, apply_edits, has_errors, overlaps, parse


@dataclass(frozen=True)
class Mutant:
    code: str
    operators: tuple[str, ...]  # operator of each site applied, in the order decided
    edits: tuple[Edit, ...]  # byte-range edits of the original source, in source order

    def to_json(self) -> dict:
        return {"code": self.code, "operators": list(self.operators), "edits": [e.to_json() for e in self.edits]}


@dataclass
class MutationStats:
    attempts: int = 0
    emitted: int = 0
    no_edit: int = 0
    unparsable: int = 0
    not_compilable: int = 0
    duplicate: int = 0
    sites: Counter = field(default_factory=Counter)  # candidate sites per operator

    def to_json(self) -> dict:
        return {**{k: v for k, v in self.__dict__.items() if k != "sites"}, "sites": dict(self.sites)}


class MutationError(ValueError):
    """The original program cannot be mutated (it does not parse)."""


def token_form(code: str) -> str | None:
    """Whitespace- and comment-insensitive form of a program, for deduplication."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(code).readline)
        return "\x1f".join(
            t.string
            for t in toks
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)
        )
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def select_operators(names: str | list[str] | None) -> list[str]:
    """Validate a list (or comma-separated string) of operator names."""
    if names is None:
        return list(OPERATORS)
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    names = [n.strip().upper() for n in names]
    unknown = [n for n in names if n not in OPERATORS]
    if unknown:
        raise ValueError(f"unknown mutation operator(s) {', '.join(unknown)}; choose from {', '.join(OPERATORS)}")
    return names


def find_sites(tree, operators: list[str]) -> tuple[list[Site], dict[int, list[Site]]]:
    """(non-loop sites in source order, loop sites grouped by loop start byte)."""
    plain: list[Site] = []
    loops: dict[int, list[Site]] = {}
    for name in operators:
        op = OPERATORS[name]
        for site in op.sites(tree.root_node):
            if op.loop:
                loops.setdefault(site.start, []).append(site)
            else:
                plain.append(site)
    plain.sort(key=lambda s: (s.start, s.end, s.op))
    return plain, dict(sorted(loops.items()))


def mutate(
    source: str,
    n: int = 20,
    seed: int = 0,
    p: float = 0.5,
    operators: str | list[str] | None = None,
    stats: MutationStats | None = None,
    protected: tuple[tuple[int, int], ...] = (),
) -> list[Mutant]:
    """Up to `n` distinct, parseable, compilable mutants of `source` (paper procedure).

    `protected`: UTF-8 byte ranges no edit may touch or wrap (the literals that stdin
    inlining put in: mutating the input is not mutating the program).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    names = select_operators(operators)
    stats = stats if stats is not None else MutationStats()
    data = source.encode("utf-8")
    tree = parse(data)
    if has_errors(tree):
        raise MutationError("the program does not parse (tree-sitter found ERROR/MISSING nodes)")
    plain, loops = find_sites(tree, names)
    guard = [Edit(a, b, "") for a, b in protected]
    for site in plain:
        stats.sites[site.op] += 1
    for group in loops.values():
        for site in group:
            stats.sites[site.op] += 1
    digest = hashlib.sha256(data).hexdigest()
    seen = {token_form(source)}
    mutants: list[Mutant] = []
    for attempt in range(n):
        stats.attempts += 1
        rng = random.Random(f"{digest}:{seed}:{attempt}")
        chosen: list[Edit] = []
        applied: list[str] = []
        for group in loops.values():  # a loop is one candidate: mutated with p, by one loop operator
            if rng.random() < p:
                site = group[rng.randrange(len(group))]
                if _add(chosen, OPERATORS[site.op].apply(data, site, rng), guard):
                    applied.append(site.op)
        for site in plain:
            if rng.random() < p and _add(chosen, OPERATORS[site.op].apply(data, site, rng), guard):
                applied.append(site.op)
        if not chosen:
            stats.no_edit += 1
            continue
        code_bytes = apply_edits(data, chosen)
        if has_errors(parse(code_bytes)):
            stats.unparsable += 1
            continue
        code = code_bytes.decode("utf-8")
        try:
            compile(code, "<mutant>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            stats.not_compilable += 1
            continue
        form = token_form(code)
        if form in seen:
            stats.duplicate += 1
            continue
        seen.add(form)
        edits = tuple(sorted(chosen))
        mutants.append(Mutant(code, tuple(applied), edits))
        stats.emitted += 1
    return mutants


def _touches(edit: Edit, span: Edit) -> bool:
    """Does an edit change or wrap a protected span? (Insertions at its edges wrap it.)"""
    if edit.start == edit.end:
        return span.start <= edit.start <= span.end
    return edit.start < span.end and span.start < edit.end


def _add(chosen: list[Edit], edits: list[Edit], guard: list[Edit] = ()) -> bool:
    """Add a site's edits unless one conflicts with an edit already chosen or touches a
    protected span."""
    if any(overlaps(e, c) for e in edits for c in chosen) or any(_touches(e, g) for e in edits for g in guard):
        return False
    chosen.extend(edits)
    return True
