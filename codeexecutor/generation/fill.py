"""The predictors guided execution asks (`codeexecutor exec --fill PREDICTOR`).

* `empty`: a fresh empty object for every missing value (LExecutor's naive baseline);
* `dummy`: an object that absorbs every use (any attribute, call, index or operator gives
  another one; it iterates as empty and is always true): it reaches lines, but every
  `if` goes one way and every loop runs zero times;
* `frequency`: the kinds seen most often for that name in training, by use;
* a value model folder (modeling/value_model.py), by default the shipped one.

Each answers a ranked list of candidates; the tries of `run_guided` walk down it.
"""

from __future__ import annotations

import os

from codeexecutor.errors import UsageError
from codeexecutor.execution.guided import Candidate, Request
from codeexecutor.modeling.value_model import check_folder

SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models")
DEFAULT_MODEL = "codeexecutor-values"
TOP = 5  # candidates a predictor gives: what tries can walk through
# Where a try puts the absorbing value among a learned predictor's candidates: after the
# likeliest kind, a value that lets every use pass goes further than the unlikelier kinds
# (chosen on the valid packages: coverage 78.1% against 77.4% in third place; experiments/NOTEBOOK.md).
LAST_RESORT = 1


def default_model_path() -> str:
    return os.path.join(SHIPPED, DEFAULT_MODEL)


class EmptyPredictor:
    name = "empty"

    def predict(self, requests: list[Request]) -> list[list[Candidate]]:
        return [[Candidate("object", None, 1.0)] for _ in requests]


class DummyPredictor:
    name = "dummy"

    def predict(self, requests: list[Request]) -> list[list[Candidate]]:
        return [[Candidate("absorb", None, 1.0)] for _ in requests]


def _ranked(counts: dict[str, float], literals: dict, name: str, fallback: bool = True) -> list[Candidate]:
    """The TOP kinds by weight, each with its literal for `name`; with `fallback`, the
    absorbing value stands second, after the likeliest kind (LAST_RESORT)."""
    total = sum(counts.values()) or 1.0
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    named = literals.get(name, {})
    ranked = [Candidate(kind, named.get(kind), count / total) for kind, count in best]
    if not fallback:
        return ranked
    return ranked[:LAST_RESORT] + [Candidate("absorb", None, 0.0)] + ranked[LAST_RESORT:]


class FrequencyPredictor:
    """Per name and use, the kinds seen in training by how often; a name never seen gets
    its use's overall frequencies."""

    name = "frequency"

    def __init__(self, frequency: dict, literals: dict) -> None:
        self.by_name = frequency.get("names", {})
        self.by_use = frequency.get("uses", {})
        self.literals = literals

    def predict(self, requests: list[Request]) -> list[list[Candidate]]:
        out = []
        for r in requests:
            counts = self.by_name.get(f"{r.use}:{r.name}") or self.by_use.get(r.use) or {"object": 1}
            out.append(_ranked(counts, self.literals, r.name))
        return out


class ModelPredictor:
    def __init__(self, path: str, fallback: bool = True) -> None:
        from codeexecutor.modeling.value_model import ValueModel

        self.model = ValueModel(path)
        self.fallback = fallback
        self.name = f"model:{os.path.basename(os.path.normpath(path))}"

    def predict(self, requests: list[Request]) -> list[list[Candidate]]:
        if not requests:
            return []
        probs = self.model.probabilities([(r.name, r.use, r.before, r.after) for r in requests])
        out = []
        for r, row in zip(requests, probs.tolist()):
            counts = dict(zip(self.model.kinds, row))
            out.append(_ranked(counts, self.model.literals, r.name, self.fallback))
        return out


def load_predictor(spec: str | None, tables: str | None = None, fallback: bool = True):
    """The predictor `--fill` names: a baseline's name or a value model folder (None: the
    shipped one); `frequency` reads the tables of the value model `tables` (default: the shipped one)."""
    if spec == "empty":
        return EmptyPredictor()
    if spec == "dummy":
        return DummyPredictor()
    if spec == "frequency":
        from codeexecutor.modeling.value_model import read_table

        path = tables or default_model_path()
        check_folder(path)
        return FrequencyPredictor(read_table(path, "frequency.json"), read_table(path, "literals.json"))
    path = spec or default_model_path()
    check_folder(path)
    return ModelPredictor(path, fallback)


DEFAULT_TRIES = 6  # runs with other candidates after the first (chosen on the valid packages)


def guided(source: str, stdin: str, spec: str | None, tries: int = DEFAULT_TRIES, limits=None):
    """The guided real run of `source` with the predictor `spec` names (`model` or None: the
    shipped value model), as `exec --fill`, `trace --fill` and `debug --fill` make it."""
    from codeexecutor.execution import ExecutorPool
    from codeexecutor.execution.guided import run_guided

    if tries < 1:
        raise UsageError(f"--tries {tries}: give at least 1")
    predictor = load_predictor(None if spec == "model" else spec)
    with ExecutorPool(workers=1, limits=limits) as pool:
        return run_guided(pool, source, stdin, predictor, limits, tries=tries)
