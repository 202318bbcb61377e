"""How far two copies of one model decode alike: the same examples scored by both, and
the share whose predicted traces are the same text. What a change of stored precision
(modeling/int8.py) is judged by before a model ships in it: two copies can score the same
while answering different examples, and a share of identical answers shows that where the
scores cannot."""

from __future__ import annotations

from collections import defaultdict


def agreement(a: list[dict], b: list[dict]) -> dict[str, dict]:
    """Per dataset of two evaluations' predictions (evaluate_model's `predictions`, matched
    by dataset and id): the examples both scored and the percentage decoded identically."""
    mine = {(p["dataset"], str(p["id"])): p["prediction"] for p in a}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for p in b:
        key = (p["dataset"], str(p["id"]))
        if key in mine:
            counts[p["dataset"]][0] += 1
            counts[p["dataset"]][1] += mine[key] == p["prediction"]
    return {
        name: {"examples": n, "identical": round(100.0 * same / n, 2)} for name, (n, same) in sorted(counts.items())
    }
