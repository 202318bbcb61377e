"""Stdin inlining: replace a program's input reads by the literal values they read.

CodeNet programs read stdin; the model sees them with their reads replaced by literals
(the paper's Figure 3: `rec = ['10', '3', '5']`). We do it from one real run, not by
guessing from the syntax:

1. Run the program in the sandbox with a recording stdin (inline_record.py): every
   read is logged with its value and the exact source span of the instruction that
   made it.
2. A direct read (`input()`, `sys.stdin.readline()`, `open(0).read()`, an alias such as
   `input = sys.stdin.readline`, ...) has the span of its call expression: that call is
   replaced by the literal it returned. Iteration over a stream (`for l in sys.stdin`,
   `list(map(int, open(0)))`, `n, *a = open(0)`) is logged at its statement: the one
   stream expression in that statement (`sys.stdin`, `sys.stdin.buffer`, `open(0)`,
   `open('/dev/stdin')`) is replaced by the list of lines it yielded.
3. A read site that runs more than once (inside a loop or a function called repeatedly)
   becomes `__inputs__.pop(0)`, consuming one literal list in program order (a method,
   so a program that defines its own `next` still works). The list is defined in front
   of the first simple statement that module execution reaches (`__inputs__ = [...]; main()`,
   also inside `if __name__ == '__main__':`), so no line moves and no step is added; only
   when there is none, on a blank or comment line before the first executed statement.
   Dunder names are not part of trace states, so traces differ only on inlined lines' text.
4. The inlined program is run again without stdin: it must print the same output and
   end the same way, or the program is rejected.

Everything that cannot be handled raises InlineError with a named `reason`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from codeexecutor.execution import ExecStatus, ExecutorPool, Limits
from codeexecutor.execution.pool import default_pool
from codeexecutor.source import parse_quietly

SEQUENCE_NAME = "__inputs__"
_DIRECT = {"input", "readline", "read", "readlines", "eof"}
_ITER = {"next", "eof"}
REASONS = (
    "syntax_error",
    "newer_python",
    "run_failed",
    "eof_read",
    "unmapped_read",
    "overlapping_reads",
    "no_place_for_sequence",
    "verify_mismatch",
)


class InlineError(Exception):
    """A program whose stdin reads cannot be inlined; `reason` is one of REASONS."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def syntax_error(source: str, exc: SyntaxError) -> InlineError:
    """The InlineError of a program that does not parse: `newer_python` where it is written
    for a newer interpreter (codeexecutor/source.py), else `syntax_error`."""
    from codeexecutor.source import newer_python

    newer = newer_python(source, exc)
    if newer is not None:
        return InlineError("newer_python", f"line {exc.lineno}: uses {newer[1]}, which needs Python {newer[0]}")
    return InlineError("syntax_error", f"line {exc.lineno}: {exc.msg}")


@dataclass(frozen=True)
class InlineResult:
    source: str
    reads: int  # number of reads replaced
    sites: int  # number of source places edited
    sequence_reads: int  # reads served by the literal sequence
    literal_spans: tuple[tuple[int, int], ...] = ()  # UTF-8 byte ranges of the inserted text in `source`


def _value(read) -> object:
    value, is_bytes = read[1], read[2]
    if is_bytes:
        if isinstance(value, list):
            return [v.encode("utf-8", "surrogateescape") for v in value]
        return value.encode("utf-8", "surrogateescape")
    return value


class _Source:
    """Byte offsets of a source (co_positions and ast columns are UTF-8 byte offsets)."""

    def __init__(self, source: str) -> None:
        self.data = source.encode("utf-8")
        self.starts = [0]
        for i, b in enumerate(self.data):
            if b == 10:
                self.starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


def _is_stream(node: ast.AST) -> bool:
    """sys.stdin, sys.stdin.buffer, open(0...), open('/dev/stdin'...), io.open(0)."""
    if isinstance(node, ast.Attribute) and node.attr == "buffer":
        node = node.value
    if (
        isinstance(node, ast.Attribute)
        and node.attr == "stdin"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ):
        return True
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        first = node.args[0]
        if name == "open" and isinstance(first, ast.Constant) and first.value in (0, "/dev/stdin"):
            return True
    return False


def _statement_exprs(stmt: ast.stmt):
    """Expression nodes of a statement, not descending into nested statement bodies."""
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST):
                yield from ast.walk(item)


def inline_stdin(
    source: str,
    stdin: str,
    verify: bool = True,
    pool: ExecutorPool | None = None,
    limits: Limits | None = None,
) -> InlineResult:
    """Return `source` with its stdin reads replaced by literals (see module docstring)."""
    try:
        tree = parse_quietly(source)
    except SyntaxError as exc:
        raise syntax_error(source, exc) from exc
    pool = pool or default_pool()
    original = pool.execute(source, stdin, limits, trace=False, record_reads=True)
    if original.status not in (ExecStatus.OK, ExecStatus.ERROR, ExecStatus.EXIT):
        raise InlineError("run_failed", f"the program ended with status {original.status}")
    reads = list(original.reads or ())
    if not reads:
        return InlineResult(source, 0, 0, 0)
    if any(r[0] == "input_eof" for r in reads):
        raise InlineError("eof_read", "input() is called past the end of the input (EOFError)")

    result = inline_reads(source, tree, reads)
    if verify:
        _verify(pool, limits, original, result.source)
    return result


def inline_reads(
    source: str, tree: ast.Module, reads: list, sequence_sites: frozenset = frozenset(), sequence: list | None = None
) -> InlineResult:
    """The source with the given reads replaced (module docstring, steps 2-3). `reads` are
    records as inline_record.py makes them, in program order. The static inliner
    (inline_static.py), which cannot tell how often a site runs, names the sites that read
    from the literal sequence (`sequence_sites`) and gives the sequence itself."""
    src = _Source(source)
    calls: dict[tuple[int, int], ast.Call] = {}
    stmts: list[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            calls[src.span(node)] = node
        if isinstance(node, ast.stmt):
            stmts.append(node)

    # Group the reads by the source span that made them, in order of first read.
    groups: dict[tuple, list] = {}
    for r in reads:
        if r[3] is None:
            raise InlineError("unmapped_read", f"a {r[0]} read happened outside the program's code")
        groups.setdefault((r[3], r[4], r[5], r[6]), []).append(r)

    edits: list[tuple[int, int, int]] = []  # (start, end, group index)
    group_values: list[list] = []
    for index, (span, group) in enumerate(groups.items()):
        line, col, end_line, end_col = span
        start, end = src.offset(line, col), src.offset(end_line, end_col)
        kinds = {r[0] for r in group}
        if kinds <= _DIRECT and "next" not in kinds and (start, end) in calls:
            edits.append((start, end, index))
            group_values.append([_value(r) for r in group])
        elif kinds <= _ITER:
            holders = [s for s in stmts if src.span(s)[0] <= start and end <= src.span(s)[1]]
            stmt = min(holders, key=lambda s: src.span(s)[1] - src.span(s)[0]) if holders else None
            streams = [n for n in _statement_exprs(stmt) if _is_stream(n)] if stmt is not None else []
            if len(streams) != 1:
                raise InlineError("unmapped_read", f"line {line}: iteration over stdin in a form not recognised")
            s_start, s_end = src.span(streams[0])
            edits.append((s_start, s_end, index))
            group_values.append([[_value(r) for r in group if r[0] == "next"]])
        else:
            raise InlineError("unmapped_read", f"line {line}: {'/'.join(sorted(kinds))} read in a form not recognised")
    ordered = sorted(edits)
    for (_a0, a1, _), (b0, _b1, _) in zip(ordered, ordered[1:]):
        if b0 < a1:
            raise InlineError("overlapping_reads", "two reads share one expression")

    # Sites that ran once get their literal; the others share one sequence, in read order.
    if sequence is None:  # recorded reads: a site that ran more than once reads from the sequence
        multi = {i for i, values in enumerate(group_values) if len(values) > 1}
        group_of_span = {span: i for i, span in enumerate(groups)}
        sequence = [_value(r) for r in reads if group_of_span[(r[3], r[4], r[5], r[6])] in multi]
    else:  # static: the sites it names
        multi = {i for i, span in enumerate(groups) if span in sequence_sites}
    replacements = [
        (start, end, f"{SEQUENCE_NAME}.pop(0)" if i in multi else repr(group_values[i][0])) for start, end, i in edits
    ]
    if sequence:
        replacements.append(_sequence_definition(src, source, tree, sequence))
    inlined, spans = _apply(src.data, replacements)
    return InlineResult(inlined, len(reads), len(edits), len(sequence), tuple(spans))


def _first_simple(body: list[ast.stmt]) -> ast.stmt | None:
    """The first simple statement that module execution reaches, looking into the bodies
    of if/with/try (run at most once) but not loops (a definition there would rerun)."""
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.decorator_list:
                return None
            continue
        if isinstance(stmt, (ast.If, ast.With, ast.Try)):
            return _first_simple(stmt.body)
        if isinstance(stmt, (ast.For, ast.While, ast.AsyncFor, ast.AsyncWith, ast.Match)):
            return None
        return stmt
    return None


def _apply(data: bytes, replacements: list[tuple[int, int, str]]) -> tuple[str, list[tuple[int, int]]]:
    """Apply (start, end, text) byte-range replacements; return the new source and the
    byte spans the inserted texts occupy in it."""
    out, spans, pos, size = [], [], 0, 0
    for start, end, text in sorted(replacements):
        out.append(data[pos:start])
        size += start - pos
        piece = text.encode("utf-8")
        out.append(piece)
        spans.append((size, size + len(piece)))
        size += len(piece)
        pos = end
    out.append(data[pos:])
    return b"".join(out).decode("utf-8"), spans


def _sequence_definition(src: _Source, source: str, tree: ast.Module, sequence: list) -> tuple[int, int, str]:
    """Where the literal sequence is defined, as a replacement of the original bytes: in
    front of a line that already runs first, so no line moves and no step is added; else
    on a blank or comment line before the first executed statement."""
    definition = f"{SEQUENCE_NAME} = {sequence!r}"
    stmt = _first_simple(tree.body)
    if stmt is not None:
        at = src.offset(stmt.lineno, stmt.col_offset)
        return at, at, f"{definition}; "
    lines = source.split("\n")
    previous_end = 0
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not top.decorator_list:
            previous_end = top.end_lineno
            continue
        if isinstance(top, ast.ImportFrom) and top.module == "__future__":
            previous_end = top.end_lineno
            continue
        for k in range(top.lineno - 2, previous_end - 1, -1):
            if not lines[k].strip() or lines[k].startswith("#"):  # blank, or a comment at column 0
                start = src.starts[k]
                return start, start + len(lines[k].encode("utf-8")), definition
        raise InlineError("no_place_for_sequence", f"no simple statement or blank line before line {top.lineno}")
    raise InlineError("no_place_for_sequence", "the module has no statement that runs")


def _verify(pool: ExecutorPool, limits: Limits | None, original, inlined: str) -> None:
    again = pool.execute(inlined, "", limits, trace=False)
    same_end = again.status == original.status and (again.error.type if again.error else None) == (
        original.error.type if original.error else None
    )
    if again.stdout != original.stdout or not same_end:
        raise InlineError(
            "verify_mismatch",
            f"inlined program ended {again.status} with {len(again.stdout)} chars of output; "
            f"the original ended {original.status} with {len(original.stdout)}",
        )
