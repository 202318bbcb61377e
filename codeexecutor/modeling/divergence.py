"""Where two traces of one program first part, and how: the first step of a prediction that
differs from the real trace (or the gold of a test set), put in one class. The debugger's
`real` names where the model's own trace parts from the real run this way, and
experiments/first_error.py counts a run's first errors by these classes.

Two traces are compared in one text form (a model's compact steps against the gold
serialized by the same profile). The first differing step is put in one class:

* `line`: the line (or the kind of step: `<line>`, `<output>`, `<exception>`) differs, a
  control-flow error;
* `form`: the line is right but one writes the whole state and the other a delta;
* `names`: the step names other variables than the gold's (one missing or one added);
* `arguments`: the names are right, but a value differs in the first step of a call,
  whose state holds the arguments the call passed;
* `value`: the names are right, but a value the gold step writes as new or changed (a
  delta step; in a whole state, one that differs from the last state of the same scope)
  differs: a computation gone wrong;
* `recall`: only a name the gold step restates unchanged, in a whole state (a return to
  a caller, say), differs: the model misremembered a value written earlier. "Unchanged"
  is against the last state the gold wrote in the same scope (function), which reads a
  recursive call's frames as one;
* `output` / `exception`: the step kind matches but the printed text or the error does not;
* `end`: one trace ends (or is cut) where the other goes on.
"""

from __future__ import annotations

import re

STEP = re.compile(r"(?=<line> <\d+>|<output>|<exception>)")


def steps(text: str) -> list[str]:
    return [s.strip() for s in STEP.split(text) if s.strip()]


def head(step: str) -> str:
    """`<line> <k>`, `<output>` or `<exception>`: what a step is, before its content."""
    m = re.match(r"<line> <\d+>|<output>|<exception>", step)
    return m.group(0) if m else step.split(" ", 1)[0]


def pairs(step: str) -> tuple[str, dict[str, str]] | None:
    """(form, name -> value) of a line step; None where it does not read."""
    m = re.match(r"<line> <\d+> (<state>|<delta>)(.*?)</state>$", step, re.S)
    if not m:
        return None
    out = {}
    for part in m.group(2).split("<dictsep>"):
        if " : " in part:
            k, v = part.strip().split(" : ", 1)
            out[k.strip()] = v.strip()
        elif part.strip():
            return None
    return ("full" if m.group(1) == "<state>" else "delta"), out


def classify(pred: list[str], gold: list[str], code: str = "") -> tuple[str, int] | None:
    """(class, index) of the first differing step; None when the two agree. `code`: the
    program, whose scopes tell which earlier state a whole state restates."""
    from codeexecutor.modeling.compact import frames

    scope = {line - 1: first for line, (first, _) in frames(code).items()}  # 0-based line -> its function
    known: dict[int, dict[str, str]] = {}  # scope -> its names as the gold last wrote them
    current = -1  # the scope of the gold's previous line step
    for i, (p, g) in enumerate(zip(pred, gold)):
        gp = pairs(g)
        m = re.match(r"<line> <(\d+)>", g)
        here = scope.get(int(m.group(1)), 0) if m else current
        if p != g:
            if head(p) != head(g):
                return "line", i
            if head(g) == "<output>":
                return "output", i
            if head(g) == "<exception>":
                return "exception", i
            pp = pairs(p)
            if gp is None or pp is None:
                return "value", i
            if pp[0] != gp[0]:
                return "form", i
            if list(pp[1]) != list(gp[1]) and gp[0] == "full" or gp[0] == "delta" and set(pp[1]) - set(gp[1]):
                return "names", i
            if gp[0] == "delta":
                return "value", i
            if here and here != current:
                return "arguments", i
            before = known.get(here, {})
            wrong = {k for k in gp[1] if pp[1].get(k) != gp[1][k]}
            return ("value" if any(before.get(k) != gp[1][k] for k in wrong) else "recall"), i
        if gp:
            known[here] = dict(gp[1]) if gp[0] == "full" else {**known.get(here, {}), **gp[1]}
            current = here
    if len(pred) != len(gold):
        return "end", min(len(pred), len(gold))
    return None
