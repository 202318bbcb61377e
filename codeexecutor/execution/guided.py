"""Guided execution: run code that lacks values by injecting what a predictor says.

`run_guided` runs a program in the sandbox with an injection table (fill.py). Where the
run stops for want of a value (a name that is not defined, an attribute or a call's
result of an injected object), it asks its predictor for that value from the code
around the use, adds the answer to the table and runs the program again from the start,
until the run needs nothing new. Every run is a real run of the program, so what it
reports is what the interpreter did with those values.

*Tries* use the run's own feedback: where the best run so far stops on an error at a
line that uses an injected value (a `TypeError` because an injected string was called),
the predictor's next candidate for that value is tried, and the run that covers most
lines is kept. Where the predictor offers the absorbing value, the second try gives it
to every value at once: a floor, so that tries never cover less than the dummy does.
The predictor is any object with `name` and `predict(requests)`: the executor knows no
model. `Request` carries the use and its context; an answer is a
ranked list of `Candidate`s (a kind of `values.KINDS`, at most a literal, a probability).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from codeexecutor.execution.coverage import code_lines, covered_lines
from codeexecutor.execution.records import ExecError, ExecResult, Limits
from codeexecutor.execution.status import ExecStatus

CONTEXT_BEFORE = 600  # characters of code before a use that a predictor sees
CONTEXT_AFTER = 300
MAX_INJECTIONS = 64
MAX_NEEDS = 8  # values asked after one run: a run stops at the first it lacks, unless the program catches that
PREFIXES = ("name:", "module:")
# A choice's key (never an injection key: those begin with a PREFIX) saying that every
# value not chosen otherwise takes the predictor's absorbing candidate, where it has one.
ABSORB_ALL = "*absorb"


@dataclass(frozen=True)
class Request:
    key: str  # the injection table's key: name:x, name:x.attr, name:f()@7, module:m.attr
    use: str  # name | attribute | call
    name: str  # the name read (the attribute's, the callee's)
    owner: str | None  # the injected value whose attribute or call this is
    line: int | None
    before: str  # the code before the use (at most CONTEXT_BEFORE characters)
    after: str  # the code from the use's end on


@dataclass(frozen=True)
class Candidate:
    kind: str
    value: str | None = None  # a Python literal of that kind, or None for the kind's default
    p: float = 1.0


class Predictor(Protocol):
    name: str

    def predict(self, requests: list[Request]) -> list[list[Candidate]]: ...


@dataclass
class Injection:
    key: str
    use: str
    name: str
    line: int | None
    kind: str
    value: str | None
    p: float
    rank: int = 0  # which of the predictor's candidates (0: its first)

    def to_json(self) -> dict:
        return {
            "line": self.line,
            "name": self.name,
            "use": self.use,
            "kind": self.kind,
            "value": self.value,
            "p": round(self.p, 4),
            "rank": self.rank,
        }


@dataclass
class GuidedRun:
    result: ExecResult
    injections: list[Injection]
    covered_lines: list[int]
    runs: int = 0  # sandbox runs it took, over every try
    tries: int = 0
    predictor: str = ""

    def to_json(self) -> dict:
        obj = self.result.to_json()
        obj["injections"] = [i.to_json() for i in self.injections]
        obj["covered_lines"] = self.covered_lines
        obj["fill"] = {"predictor": self.predictor, "runs": self.runs, "tries": self.tries}
        return obj


def use_span(source_lines: list[str], line: int | None, use: str, name: str) -> tuple[int, int] | None:
    """The columns of a use on its line: the name read, `.name`'s name, or the callee's name."""
    if line is None or not 1 <= line <= len(source_lines):
        return None
    text = source_lines[line - 1]
    pattern = {"attribute": r"\.\s*({})\b", "call": r"\b({})\s*\("}.get(use, r"(?<![\w.])({})\b")
    found = re.search(pattern.format(re.escape(name)), text) or re.search(rf"\b({re.escape(name)})\b", text)
    return (found.start(1), found.end(1)) if found else None


def context(source: str, line: int | None, col: int | None, end_col: int | None) -> tuple[str, str]:
    """(before, after): the code around a use at (line, col..end_col), cut to the context sizes."""
    lines = source.splitlines(keepends=True)
    if line is None or col is None or not 1 <= line <= len(lines):
        return source[-CONTEXT_BEFORE:], ""
    offset = sum(len(t) for t in lines[: line - 1])
    start, end = offset + col, offset + (end_col if end_col is not None else col)
    return source[max(0, start - CONTEXT_BEFORE) : start], source[end : end + CONTEXT_AFTER]


def request_of(source: str, lines: list[str], need: dict) -> Request:
    span = use_span(lines, need.get("line"), need["use"], need["name"])
    before, after = context(source, need.get("line"), *(span or (None, None)))
    return Request(need["key"], need["use"], need["name"], need.get("owner"), need.get("line"), before, after)


class _Search:
    """The state of one guided run: the predictions asked so far and the choices made."""

    def __init__(self, pool, source: str, stdin: str, predictor: Predictor, limits: Limits | None) -> None:
        self.pool, self.source, self.stdin, self.predictor, self.limits = pool, source, stdin, predictor, limits
        self.lines = source.splitlines()
        self.candidates: dict[str, list[Candidate]] = {}
        self.requests: dict[str, dict] = {}
        self.runs = 0

    def ask(self, needs: list[dict]) -> None:
        fresh = [n for n in needs if n["key"] not in self.candidates]
        if not fresh:
            return
        answers = self.predictor.predict([request_of(self.source, self.lines, n) for n in fresh])
        for need, ranked in zip(fresh, answers):
            self.candidates[need["key"]] = list(ranked) or [Candidate("object", None, 0.0)]
            self.requests[need["key"]] = need

    def pick(self, key: str, choice: dict[str, int]) -> Injection:
        need, ranked = self.requests[key], self.candidates[key]
        default = _absorbing_rank(ranked) if choice.get(ABSORB_ALL) else 0
        rank = min(choice.get(key, default), len(ranked) - 1)
        c = ranked[rank]
        return Injection(key, need["use"], need["name"], need.get("line"), c.kind, c.value, c.p, rank)

    def used(self, result: ExecResult, chosen: dict[str, Injection]) -> dict[str, Injection]:
        """Of the values a run was offered, those it used: the attributes and calls the child
        saw used, the names read on a line it ran."""
        seen = (result.fill or {}).get("used", {})
        words = {w for line in {s.line for s in result.steps} for w in re.findall(r"\w+", self.lines[line - 1])}
        return {
            k: i for k, i in chosen.items() if k in seen or i.use == "import" or (i.use == "name" and i.name in words)
        }

    def run(self, choice: dict[str, int], known: bool = False) -> tuple[ExecResult, dict[str, Injection]]:
        """One guided run: inject, run, ask for what it lacked, until it lacks nothing new.
        With `known`, every value asked so far is in the table from the start (a try then
        costs a run or two, not one a value); what the run used is then not told apart
        from what it was offered, so the run that is kept is made again without it."""
        chosen: dict[str, Injection] = {k: self.pick(k, choice) for k in self.candidates} if known else {}
        limit = len(chosen) + MAX_INJECTIONS
        while True:
            table = {k: {"kind": i.kind, "value": i.value} for k, i in chosen.items()}
            result = self.pool.execute(self.source, self.stdin, self.limits, fill=table)
            self.runs += 1
            report = result.fill if isinstance(result.fill, dict) else {}
            needs = [n for n in _well_formed(report.get("needs")) if n["key"] not in table][:MAX_NEEDS]
            used = report.get("used") if isinstance(report.get("used"), dict) else {}
            for key, line in used.items():
                if not isinstance(key, str) or not (line is None or type(line) is int):
                    continue
                if key.startswith("module:") and "." not in key and key not in chosen:
                    chosen[key] = Injection(key, "import", key[7:], line, "module", None, 1.0)
            if not needs or len(chosen) >= limit:
                return result, (self.used(result, chosen) if known else chosen)
            self.ask(needs)
            for need in needs:
                chosen[need["key"]] = self.pick(need["key"], choice)


def _absorbing_rank(ranked: list[Candidate]) -> int:
    return next((r for r, c in enumerate(ranked) if c.kind == "absorb"), 0)


def _offers_absorbing(search: _Search) -> bool:
    return any(c.kind == "absorb" for ranked in search.candidates.values() for c in ranked)


def _well_formed(needs) -> list[dict]:
    """The needs a run reported that have the form the child writes (a program can reach
    its run's report: what it forges is dropped, never trusted)."""
    if not isinstance(needs, list):
        return []
    return [
        n
        for n in needs
        if isinstance(n, dict)
        and isinstance(n.get("key"), str)
        and n["key"].startswith(PREFIXES)
        and n.get("use") in ("name", "attribute", "call")
        and isinstance(n.get("name"), str)
        and (n.get("line") is None or type(n.get("line")) is int)
        and (n.get("owner") is None or isinstance(n.get("owner"), str))
    ]


def _suspects(result: ExecResult, chosen: dict[str, Injection], lines: list[str]) -> list[str]:
    """The injected values to change after a failed run, likeliest first: those used on the
    failing line (the last injected first), then the others from the last injected back."""
    if result.status in (ExecStatus.OK, ExecStatus.EXIT) or result.error is None:
        return []
    line = result.error.line
    words = set(re.findall(r"\w+", lines[line - 1])) if line and line <= len(lines) else set()
    ordered = [i for i in chosen.values() if i.use != "import"]
    on_line = [i.key for i in reversed(ordered) if i.line == line or i.name in words]
    return on_line + [i.key for i in reversed(ordered) if i.key not in on_line]


def _next_choice(best, search: _Search, tried: set) -> dict[str, int] | None:
    """The next try: the best run's choices with one suspect moved to a candidate not yet tried."""
    result, chosen, _, base, _ = best
    suspects = _suspects(result, chosen, search.lines)
    deepest = max((len(search.candidates.get(k, ())) for k in suspects), default=0)
    for step in range(1, deepest):  # breadth first: each suspect's next candidate before any one's later ones
        for key in suspects:
            rank = base.get(key, 0) + step
            if rank >= len(search.candidates.get(key, ())):
                continue
            choice = {k: v for k, v in base.items() if not (k != key and k.startswith(key) and k[len(key)] in ".([")}
            choice[key] = rank  # what hung off the changed value is asked afresh
            if frozenset(choice.items()) not in tried:
                return choice
    return None


def run_guided(
    pool, source: str, stdin: str = "", predictor: Predictor | None = None, limits: Limits | None = None, tries: int = 1
) -> GuidedRun:
    """Run `source` with the values it lacks injected by `predictor`; `tries` runs at most.

    Where the first run leaves code lines unrun and the predictor offers the absorbing
    value, the second try gives it to every value at once (the floor: what the dummy
    reaches); the other tries change one suspect of the best run at a time, and the run
    that covers most is kept, the predictor's own on a tie."""
    search = _Search(pool, source, stdin, predictor, limits)
    lines = code_lines(source)
    choice: dict[str, int] | None = {}
    tried: set = set()
    best = floor = None
    attempts = 0
    while choice is not None and attempts < max(1, tries):
        result, chosen = search.run(choice, known=attempts > 0)
        attempts += 1
        tried.add(frozenset(choice.items()))
        covered = covered_lines(source, [s.line for s in result.steps], result.status.value)
        if best is None or len(covered) > len(best[2]):
            best = (result, chosen, covered, dict(choice), attempts > 1)
        guessed = any(i.kind != "absorb" for i in chosen.values() if i.use != "import")
        if attempts == 1 and tries > 1 and guessed and len(covered) < len(lines) and _offers_absorbing(search):
            result, chosen = search.run({ABSORB_ALL: 1})
            attempts += 1
            floor = (result, chosen, covered_lines(source, [s.line for s in result.steps], result.status.value))
        choice = _next_choice(best, search, tried)
    result, chosen, covered, kept, offered = best
    if floor is not None and len(floor[2]) > len(covered):
        result, chosen, covered = floor
    elif offered:  # a try's run: made again from the start, so that it reports the values it used alone
        result, chosen = search.run(kept)
        covered = covered_lines(source, [s.line for s in result.steps], result.status.value)
    if result.error is not None and result.error.type == "FillNeeded":
        result = _limit_reached(result)
    used = sorted(chosen.values(), key=lambda i: (i.line is None, i.line or 0))
    return GuidedRun(result, used, covered, search.runs, attempts, getattr(predictor, "name", ""))


def _limit_reached(result: ExecResult) -> ExecResult:
    from dataclasses import replace

    err = result.error
    message = f"no value injected for {err.message}: the run reached its limit of {MAX_INJECTIONS} injections"
    return replace(result, error=ExecError("FillLimit", message, err.line))
