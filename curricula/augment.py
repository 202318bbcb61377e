"""Fresh names and values for SingleLine training programs.

A SingleLine program is a few literal assignments and one line:

    mn = 2018
    i = 17
    j = 1203
    mn = min(mn, i * j % 2019)

Programs of one contest problem share names and values, so a model trained on them
learns the train problems' values instead of how a line computes (measured: a 5 M model
after 1.5 epochs has a held-out loss three times its training loss). A variant keeps
the line's shape and draws the rest anew:

- every variable the program assigns gets a new name (from the names the training
  programs use, or a made-up one), renamed at its AST positions so `a.x`, `f(x=1)` and
  strings stay as they are;
- the values of the literal assignments are drawn again, each kind like its original:
  an int with as many digits and the same sign, a float of the same magnitude, a string
  whose letters and digits are replaced by others of their class (punctuation and
  spaces stay, so `'10 30'.split()` still parses as numbers), containers element-wise
  with their length and dict keys kept; bools and None stay;
- an int or (short) string literal in the line itself is redrawn with probability
  `line_literal_p`: `% 2019` becomes `% 4821`, `print("error")` `print("xqtdw")`
  (a string subscript, `d['a']`, stays: it names a key of the values).

The variant's target comes from running it in the sandbox, like any SingleLine
example; one that raises is dropped. Only training programs are varied: valid and test
stay real programs.
"""

from __future__ import annotations

import ast
import keyword
import random
import string

from codeexecutor.source import parse_quietly

_BUILTINS = set(dir(__builtins__) if not isinstance(__builtins__, dict) else __builtins__)
_KEEP_SMALL = {0, 1, -1}  # loop bounds, flags and offsets: kept half the time


def assigned_names(code: str | ast.AST) -> list[str]:
    """Names the program (source or parsed) stores to, in order of first store."""
    out: list[str] = []
    for node in ast.walk(parse_quietly(code) if isinstance(code, str) else code):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in out:
            out.append(node.id)
    return out


def _new_int(v: int, rng: random.Random) -> int:
    if v in _KEEP_SMALL and rng.random() < 0.5:
        return v
    digits = len(str(abs(v)))
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    n = rng.randint(lo, 10**digits - 1)
    return -n if v < 0 else n


def _new_str(s: str, rng: random.Random) -> str:
    pools = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
    out = []
    for ch in s:
        pool = next((p for p in pools if ch in p), None)
        out.append(rng.choice(pool) if pool is not None and rng.random() < 0.7 else ch)
    return "".join(out)


def new_value(v, rng: random.Random, depth: int = 0):
    """A value of the same kind and shape as `v`, drawn anew."""
    if isinstance(v, bool) or v is None or depth > 4:
        return v
    if isinstance(v, int):
        return _new_int(v, rng)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return v
        scale = abs(v) if v else 1.0
        return round(rng.uniform(0, 2 * scale) * (-1 if v < 0 else 1), rng.choice((1, 2, 3, 6)))
    if isinstance(v, str):
        return _new_str(v, rng)
    if isinstance(v, list):
        return [new_value(x, rng, depth + 1) for x in v]
    if isinstance(v, tuple):
        return tuple(new_value(x, rng, depth + 1) for x in v)
    if isinstance(v, set):  # drawn in a fixed order: a set of strings iterates by hash, which varies by process
        return {new_value(x, rng, depth + 1) for x in sorted(v, key=repr)}
    if isinstance(v, dict):
        return {k: new_value(x, rng, depth + 1) for k, x in v.items()}
    return v


def render(v) -> str:
    """`repr` of a literal value, but sets in sorted order, so the same value is the same
    text in every process."""
    if isinstance(v, set):
        return "{" + ", ".join(sorted(render(x) for x in v)) + "}" if v else "set()"
    if isinstance(v, list):
        return "[" + ", ".join(render(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(render(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{render(k)}: {render(x)}" for k, x in v.items()) + "}"
    return repr(v)


def made_up_name(rng: random.Random) -> str:
    """A name of the kinds contest code uses: one or two letters, or snake_case words."""
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(string.ascii_letters) + (
            rng.choice(string.ascii_lowercase + string.digits) if rng.random() < 0.4 else ""
        )
    syllables = [
        "cnt",
        "num",
        "tmp",
        "res",
        "val",
        "idx",
        "max",
        "min",
        "sum",
        "lst",
        "arr",
        "cur",
        "pre",
        "nxt",
        "left",
        "right",
        "total",
        "count",
        "ans",
        "memo",
        "dp",
        "pos",
        "key",
        "item",
        "word",
        "flag",
        "diff",
    ]
    parts = [rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3)))]
    name = "_".join(parts)
    return name + str(rng.randint(0, 9)) if rng.random() < 0.2 else name


def _replace_spans(code: str, spans: list[tuple[int, int, int, str]]) -> str:
    """Replace (line, col, end_col, text) spans (1-based lines, same-line spans)."""
    lines = code.split("\n")
    for line, col, end, text in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        row = lines[line - 1].encode("utf-8")  # ast offsets are in UTF-8 bytes
        lines[line - 1] = (row[:col] + text.encode("utf-8") + row[end:]).decode("utf-8")
    return "\n".join(lines)


def _line_literals(line: ast.stmt, rng: random.Random, p: float) -> list[tuple[int, int, int, str]]:
    """Spans that redraw the line's int and short string literals, each with probability p;
    a string subscript (`d['a']`) stays: it names a key the values hold."""
    keys = {id(n.slice) for n in ast.walk(line) if isinstance(n, ast.Subscript)}
    spans = []
    for node in ast.walk(line):
        if not isinstance(node, ast.Constant) or (type(node.value) is str and id(node) in keys):
            continue
        if node.lineno != node.end_lineno or rng.random() >= p:
            continue
        if type(node.value) is int:
            spans.append((node.lineno, node.col_offset, node.end_col_offset, str(_new_int(node.value, rng))))
        elif type(node.value) is str and len(node.value) <= 40:
            spans.append((node.lineno, node.col_offset, node.end_col_offset, repr(_new_str(node.value, rng))))
    return spans


def variant(
    code: str, rng: random.Random, name_pool: list[str] | None = None, line_literal_p: float = 0.3
) -> str | None:
    """One variant of a SingleLine program (see the module doc), or None if it cannot
    be varied safely (a syntax error, an f-string, nothing to vary)."""
    try:
        tree = parse_quietly(code)
    except SyntaxError:
        return None
    if any(isinstance(n, ast.JoinedStr) for n in ast.walk(tree)) or not tree.body:
        return None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    renamed: dict[str, str] = {}
    taken = set(used)
    for name in assigned_names(tree):
        for _ in range(20):
            new = rng.choice(name_pool) if name_pool and rng.random() < 0.6 else made_up_name(rng)
            if new.isidentifier() and not keyword.iskeyword(new) and new not in _BUILTINS and new not in taken:
                renamed[name] = new
                taken.add(new)
                break
    spans: list[tuple[int, int, int, str]] = []
    *context, last = tree.body
    for stmt in context:  # `name = <literal>`: the value is drawn anew
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.value.lineno == stmt.value.end_lineno:
            try:
                value = ast.literal_eval(stmt.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            spans.append(
                (stmt.value.lineno, stmt.value.col_offset, stmt.value.end_col_offset, render(new_value(value, rng)))
            )
    spans += _line_literals(last, rng, line_literal_p)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in renamed:
            spans.append((node.lineno, node.col_offset, node.end_col_offset, renamed[node.id]))
    if not spans:
        return None
    out = _replace_spans(code, spans)
    try:
        check = parse_quietly(out)
    except SyntaxError:
        return None
    want = sorted(renamed.get(n.id, n.id) for n in ast.walk(tree) if isinstance(n, ast.Name))
    if sorted(n.id for n in ast.walk(check) if isinstance(n, ast.Name)) != want:
        return None
    return out if out != code else None


def variants(code: str, k: int, seed: str, name_pool: list[str] | None = None) -> list[str]:
    """Up to `k` distinct variants of one program, the same for the same seed."""
    rng = random.Random(f"augment:{seed}")
    out: list[str] = []
    for _ in range(3 * k):
        if len(out) == k:
            break
        v = variant(code, rng, name_pool)
        if v is not None and v not in out:
            out.append(v)
    return out
