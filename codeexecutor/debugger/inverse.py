"""Inverse execution: an input that makes a program print, or a function return, a given value.

The model runs forwards only, so the search proposes and the model ranks. Candidates come
without the model (debugger/proposals.py: the program's literals and its own calls, the
wanted value's parts, an example input's neighbours); the model predicts each candidate's
output in one batched greedy decode, and the candidates are ranked by how close that
prediction is to the wanted output (an exact match first, then the character-level
likeness, then the model's log-probability). The top `k` are then run in the sandbox:
an input counts when its real output is the wanted one, whatever input the question had
in mind. The sandbox only checks; it never reorders, so pass@k measures the model's
ranking (eval/inverse.py sets it beside the proposals' own order and their coverage).
"""

from __future__ import annotations

import ast
import difflib
import math
from dataclasses import dataclass

from codeexecutor.debugger.proposals import arity, call_candidates, calls_of, literal, stdin_candidates
from codeexecutor.errors import UsageError
from codeexecutor.generation.decoding import Decoding


def normal(output: str) -> str:
    """Output compared as a user reads it: trailing spaces and newlines left out."""
    return "\n".join(line.rstrip() for line in output.strip("\n").splitlines())


def likeness(predicted: str | None, wanted: str) -> float:
    """How near a predicted output is to the wanted one, 0 to 1: for two numbers by their
    distance (5 is nearer 6 than 0 is), else by the characters they share; -1 for none."""
    if predicted is None:
        return -1.0
    a, b = normal(predicted), normal(wanted)
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return 1.0 / (1.0 + abs(x - y) / max(1.0, abs(y)))
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio()


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None  # nan and inf are compared as text


def parse_call(call: str) -> tuple[str, list | None]:
    """`f` or `f(1, 'a')` → ('f', None) or ('f', [1, 'a']): the function and an example's
    literal arguments."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        raise UsageError(
            f"--call {call.strip()!r}: write the function's name or an example call, e.g. f or f(3, 'ab')"
        ) from None
    if isinstance(node, ast.Name):
        return node.id, None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        try:
            return node.func.id, [ast.literal_eval(a) for a in node.args]
        except ValueError:
            raise UsageError(f"--call {call.strip()!r}: an example call's arguments must be literals") from None
    raise UsageError(f"--call {call.strip()!r}: write the function's name or an example call, e.g. f or f(3, 'ab')")


@dataclass(frozen=True)
class Tries:
    """How inverse execution searches: `candidates` inputs drawn (with `seed`), ranked by
    the model, and the first `k` of them run in the sandbox to check them (when `check`)."""

    k: int = 5
    candidates: int = 32
    check: bool = True
    seed: int = 0


def inputs_for(
    gen, source: str, wanted: str, call: str | None = None, stdin: str | None = None, tries: Tries | None = None
) -> dict:
    """Inputs for `source` that should give `wanted`: with `call` (a function's name or an
    example call) the arguments of a call whose return value's repr is `wanted` (the program
    reads `stdin` as given, and what it prints before the call does not count); else a
    stdin, of the shape of the example `stdin`, that makes the program print `wanted`.
    Returns the ranked candidates (the first `tries.k` run in the sandbox when it checks)."""
    tries = tries or Tries()
    k, candidates, check, seed = tries.k, tries.candidates, tries.check, tries.seed
    texts, programs, target, mode = _candidates(source, wanted, call, stdin, candidates, seed)
    ranked = _rank(gen, texts, programs, target, mode)
    if check:
        for c in ranked[:k]:
            c["real_output"], c["reproduces"] = run_candidate(*c["_program"], target, mode)
    for c in ranked:
        del c["_program"]
    checked = [c for c in ranked[:k] if "reproduces" in c]
    return {
        "wanted": target,
        "mode": mode,
        "candidates": len(ranked),
        "ranked": ranked,
        "pass@1": checked[0]["reproduces"] if checked else None,
        f"pass@{k}": any(c["reproduces"] for c in checked) if checked else None,
    }


def _candidates(source: str, wanted: str, call: str | None, stdin: str | None, limit: int, seed: int):
    """(candidate texts, (program, stdin) of each, the wanted output, the mode)."""
    if call is not None:
        name, example = parse_call(call)
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise UsageError(f"the program does not parse (line {exc.lineno}): {exc.msg}") from None
        if example is None and arity(tree, name) is None and not calls_of(tree, name):
            raise UsageError(
                f"--call {name}: the program defines no function {name} and never calls it; "
                f"name one it defines, or give an example call such as {name}(1, 'a')"
            )
        texts = call_candidates(source, name, wanted, example, limit, seed)
        programs = [(source.rstrip("\n") + f"\nprint(repr({t}))\n", stdin or "") for t in texts]
        return texts, programs, repr(literal(wanted)), "call"  # as print(repr(call)) writes it: 'ab' for ab
    if stdin:
        texts = stdin_candidates(stdin, wanted, source, limit, seed)
        return texts, [(source, t) for t in texts], wanted, "stdin"
    raise UsageError("inverse execution needs --call (a function, or an example call) or --stdin (an example input)")


def _rank(gen, texts: list[str], programs: list[tuple[str, str]], target: str, mode: str) -> list[dict]:
    """The candidates best first by the model's predicted output alone (no run)."""
    from codeexecutor.generation.api import prepare
    from codeexecutor.modeling.format import FormatError

    try:
        inputs = [gen.code_input(prepare(code, text)[0], "codenet") for code, text in programs]
    except FormatError as exc:
        raise UsageError(f"the model cannot read this program: {exc}") from None
    rules = gen.rules_apply()
    decoded = gen.generate(inputs, Decoding(beam=1, names=rules, values=rules), batch_size=64)
    ranked = []
    for i, (text, program, g) in enumerate(zip(texts, programs, decoded)):
        predicted = gen.parse(g.text).output if g.finished else None
        shown = None if predicted is None else compared(predicted, mode)
        ranked.append(
            {
                "input": text,
                "predicted_output": predicted,
                "predicted_matches": shown is not None and shown == normal(target),
                "likeness": round(likeness(shown, target), 4),
                "logprob": round(g.logprob, 3),
                "proposed": i,
                "_program": program,
            }
        )
    ranked.sort(key=lambda c: (-c["predicted_matches"], -c["likeness"], -c["logprob"], c["proposed"]))
    return ranked


def compared(output: str, mode: str) -> str:
    """The part of an output the question asks about: a call's printed repr is its last
    line (what the program printed before it does not count), stdin's is the whole."""
    text = normal(output)
    return text.rsplit("\n", 1)[-1] if mode == "call" else text


def run_candidate(code: str, stdin: str, target: str, mode: str = "stdin") -> tuple[str | None, bool]:
    """The candidate's real output in the sandbox, and whether it is the wanted one."""
    from codeexecutor.execution import ExecStatus, execute

    result = execute(code, stdin)
    if result.status != ExecStatus.OK:
        return None, False
    return result.stdout, compared(result.stdout, mode) == normal(target)
