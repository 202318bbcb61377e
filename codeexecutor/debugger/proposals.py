"""Candidate inputs for inverse execution (debugger/inverse.py), made without the model.

For a call, each argument's candidates come from what the program and the question show:
the program's literals, the arguments of the calls of the same function it already makes
(their types first), the wanted value and its parts (an element, a neighbour, a reversal),
an example call's arguments and their neighbours, and a few small values of every kind.
For stdin, an example input is the shape: its numbers and words are replaced, one or two
at a time, by the same pools. The candidates are deterministic for a seed, the example
itself first where there is one, and distinct.
"""

from __future__ import annotations

import ast
import itertools
import math
import random

SMALL = [*range(11), -1, 100, "", "a", "ab", "abc", [], [1], [1, 2, 3], (), {}, True, False, None, 0.5]


def literal(text: str):
    """The value a literal's text writes, or `text` itself where it is not one (a word)."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.strip()


def neighbours(value) -> list:
    """Values a step away from `value`, of its type."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value - 1, value + 1, value * 2, value // 2, -value, 0]
    if isinstance(value, float):
        return [value * 2, value / 2, -value] + ([round(value)] if math.isfinite(value) else [])
    if isinstance(value, str):
        return [value[::-1], value[:-1], value[1:], value.upper(), value.lower(), "".join(sorted(value)), value * 2]
    if isinstance(value, (list, tuple)):
        kind = type(value)
        out = [kind(reversed(value)), value[:-1], value[1:], value + value[-1:]]
        try:
            out.append(kind(sorted(value)))
        except TypeError:
            pass
        return out
    return []


def parts(value) -> list:
    """The wanted value, its neighbours and what it is made of: the elements of a
    container, a string's words and characters, an integer's digits."""
    out = [value, *neighbours(value)]
    if isinstance(value, dict):
        out += [list(value), list(value.values()), list(value.items())]
    elif isinstance(value, (list, tuple, set)):
        out += list(value)[:8] + [len(value)]
    elif isinstance(value, str):
        out += value.split()[:6] + list(dict.fromkeys(value))[:6] + [len(value)]
    elif isinstance(value, int) and not isinstance(value, bool):
        out += [int(d) for d in str(abs(value))][:4]
    return out


def program_literals(tree: ast.AST) -> list:
    """Every literal the program writes (numbers, strings, literal containers)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)):
            try:
                out.append(ast.literal_eval(node))
            except (ValueError, TypeError, SyntaxError, RecursionError):
                pass
    return out


def calls_of(tree: ast.AST, name: str) -> list[list]:
    """The literal arguments of every call of `name` the program makes."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            try:
                out.append([ast.literal_eval(a) for a in node.args])
            except (ValueError, TypeError, SyntaxError, RecursionError):
                pass
    return out


def arity(tree: ast.AST, name: str) -> tuple[int, int] | None:
    """(required, most) positional arguments of the function `name` the program defines."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            args = node.args.posonlyargs + node.args.args
            return len(args) - len(node.args.defaults), len(args)
    return None


def _distinct(values) -> list:
    seen, out = set(), []
    for v in values:
        key = (type(v).__name__, repr(v))
        if key not in seen and len(repr(v)) <= 200:
            seen.add(key)
            out.append(v)
    return out


def call_candidates(source: str, name: str, wanted: str, example: list | None, limit: int, seed: int = 0) -> list[str]:
    """Up to `limit` argument lists (as call text, `name(...)`) for the function `name`."""
    tree = ast.parse(source)
    seen_calls = calls_of(tree, name)
    shape = arity(tree, name)
    n = len(example) if example is not None else (len(seen_calls[0]) if seen_calls else (shape or (1, 1))[0])
    target = literal(wanted)
    pool = _distinct(parts(target) + program_literals(tree) + SMALL)
    per_arg = []
    for i in range(n):
        shown = [c[i] for c in seen_calls if len(c) > i] + ([example[i]] if example is not None else [])
        typed = _distinct(shown + [x for v in shown for x in neighbours(v)])
        kinds = {type(v) for v in shown}
        same_kind = [v for v in pool if type(v) in kinds]
        per_arg.append(_distinct(typed + same_kind + pool))
    rng = random.Random(seed)
    combos = []
    if example is not None:
        combos.append(tuple(example))
    combos += list(itertools.islice(itertools.product(*[a[:4] for a in per_arg]), limit))
    tries = 0
    while len(combos) < 4 * limit and tries < 20 * limit:
        tries += 1
        combos.append(tuple(rng.choice(a[: 8 + tries // limit * 8]) for a in per_arg))
    texts = [f"{name}({', '.join(repr(v) for v in c)})" for c in combos]
    return list(dict.fromkeys(texts))[:limit]


def stdin_candidates(example: str, wanted: str, source: str, limit: int, seed: int = 0) -> list[str]:
    """Up to `limit` inputs of the example's shape: its lines and tokens, one or two of the
    tokens replaced by values of the same kind."""
    lines = [line.split() for line in example.splitlines()]
    slots = [(i, j) for i, toks in enumerate(lines) for j in range(len(toks))]
    words = [w for w in wanted.split()] + [str(v) for v in program_literals(ast.parse(source)) if isinstance(v, str)]
    numbers = [v for v in parts(literal(wanted)) if isinstance(v, int) and not isinstance(v, bool)]
    numbers += [v for w in wanted.split() for v in parts(literal(w)) if isinstance(v, int) and not isinstance(v, bool)]

    def options(tok: str) -> list[str]:
        value = literal(tok)
        if isinstance(value, int) and not isinstance(value, bool):
            return [str(v) for v in _distinct(neighbours(value) + numbers + list(range(11)))]
        return [str(v) for v in _distinct([w for w in words if w != tok] + neighbours(tok))]

    def text(change: dict) -> str:
        return (
            "\n".join(" ".join(change.get((i, j), t) for j, t in enumerate(toks)) for i, toks in enumerate(lines))
            + "\n"
        )

    out = [text({})]
    rng = random.Random(seed)
    each = max(6, (limit - 1) // max(len(slots), 1))  # the budget spread over the tokens: a short input tries more
    for s in slots:  # one token at a time, every option
        out += [text({s: o}) for o in options(lines[s[0]][s[1]])[:each]]
    tries = 0
    while len(out) < 4 * limit and tries < 20 * limit and len(slots) > 1:
        tries += 1
        a, b = rng.sample(slots, 2)
        out.append(
            text(
                {
                    a: rng.choice(options(lines[a[0]][a[1]]) or [lines[a[0]][a[1]]]),
                    b: rng.choice(options(lines[b[0]][b[1]]) or [lines[b[0]][b[1]]]),
                }
            )
        )
    return list(dict.fromkeys(out))[:limit]
