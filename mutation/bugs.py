"""Realistic bugs: the mistakes people make, one small class each, in one registry.

The twelve operators (operators.py) change a number or an operator; a program they make
crash crashes for that reason. Real submissions crash for others, and these classes make
those mistakes in correct programs: a conversion of input dropped, one read more than
the input has, an off-by-one in a range or an index, a misspelt name, a local used
before it is assigned, an import removed, a method the value's type lacks, a `None`
where a value was expected, a wrong number of targets to unpack, a `str` left where an
`int` was meant, a divisor that can be zero, a recursion that never ends.

A bug is an `Operator` (same `Site`, `Edit`, `alternatives`/`apply` and `examples`), so
the same tests read both tables. `inject` applies one bug at a time: a variant has one
mistake, as a failing submission mostly does. Whether a variant crashes, and how, is
what running it says; the bug only names how the crash came about. What does not crash
is kept too, as a program that looks wrong and is not.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from mutation.bug_base import _Bug
from mutation.bugs_names import MMT, MSN, RMI, UBA, URC
from mutation.bugs_values import DCV, MSI, NON, NSP, OBI, OBR, UDV, WUP, XRD
from mutation.engine import token_form
from mutation.parsing import Edit, apply_edits, has_errors, parse

BUGS: dict[str, _Bug] = {
    b.name: b
    for b in (DCV(), NSP(), XRD(), OBR(), OBI(), MSN(), UBA(), RMI(), MMT(), NON(), WUP(), MSI(), UDV(), URC())
}


@dataclass(frozen=True)
class Variant:
    """A program with one bug: its code, the bug's class, its edits and the 1-based line
    of the first edit (in the variant's own lines)."""

    code: str
    bug: str
    edits: tuple[Edit, ...]
    line: int


def inject(
    source: str, per_bug: int = 2, seed: int = 0, protected: tuple[tuple[int, int], ...] = (), bugs=None
) -> list[Variant]:
    """Up to `per_bug` variants of `source` for each bug class, one bug each, at sites
    drawn at random (reproducibly: seeded by the source's hash, `seed` and the class).
    `protected`: byte ranges no edit may touch (the literals that stdin inlining put in).
    Variants that do not parse or compile, or equal the original or another, are dropped."""
    data = source.encode("utf-8")
    tree = parse(data)
    if has_errors(tree):
        return []
    digest = hashlib.sha256(data).hexdigest()
    seen = {token_form(source)}
    out: list[Variant] = []
    for name in bugs or BUGS:
        bug = BUGS[name]
        sites = list(bug.sites(tree.root_node))
        rng = random.Random(f"{digest}:{seed}:{name}")
        rng.shuffle(sites)
        made = 0
        for site in sites:
            if made >= per_bug:
                break
            edits = bug.apply(data, site, rng)
            if not edits or _touches_any(edits, protected):
                continue
            variant = _variant(data, edits, name, seen)
            if variant is not None:
                out.append(variant)
                made += 1
    return out


def _touches_any(edits: list[Edit], protected) -> bool:
    """Does an edit change bytes inside a protected range? (Text put beside one, or
    around it, leaves the literal as it was.)"""
    return any(e.start < b and a < e.end for e in edits for a, b in protected)


def _variant(data: bytes, edits: list[Edit], name: str, seen: set) -> Variant | None:
    code_bytes = apply_edits(data, edits)
    if has_errors(parse(code_bytes)):
        return None
    code = code_bytes.decode("utf-8")
    try:
        compile(code, "<bug>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    form = token_form(code)
    if form in seen:
        return None
    seen.add(form)
    first = min(e.start for e in edits)
    return Variant(code, name, tuple(sorted(edits)), data[:first].count(b"\n") + 1)
