"""The model-facing format of code and traces (docs/trace-format.md), and the parser back to steps.

Code side: a task-prefix token, then for each non-blank source line its 0-based line
token `<k>`, `<indent>` when the indentation grows, one `<dedent>` per level it
shrinks, then the line: stripped source (`exact` profile) or its Python tokens joined
by spaces (`official` profile, modeling/lexical.py):

    <codenet> <0> n = int('3') <1> for i in range(n): <2> <indent> print(i)
    <codenet> <0> n = int ( '3' ) <1> for i in range ( n ) : <2> <indent> print ( i )

Trace side, one step per executed line (0-based line token, as on the code side):

    <line> <1> <state> n : 3 <dictsep> i : 0 </state> <output> 0

`<output> text` follows the step whose line printed it (newlines escaped as `\\n`). Our
addition, additive to the official vocabulary: a crashing trace ends with
`<exception> <k> TypeError`, the line where the exception was raised and its type.

Values come from `render` (exact `repr`, see execution/render.py); the official profile
writes them as lexical tokens with string quotes dropped (`['a', 'b']` -> `[ a , b ]`).
Which options a model uses is its profile (modeling/profiles.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from codeexecutor.execution.records import ExecResult, ExecStatus, Step
from codeexecutor.modeling.compact import DELTA, compact_plan, expand, read_pairs
from codeexecutor.modeling.lexical import code_lines as lexical_lines
from codeexecutor.modeling.lexical import indented_lines, lexical_value

# Official order first (CodeExecutor release), then ours.
OFFICIAL_SPECIAL_TOKENS = (
    "<line>",
    "<state>",
    "</state>",
    "<dictsep>",
    "<output>",
    "<function>",
    "<singleline>",
    "<tutorial>",
    "<codenet>",
    "<indent>",
    "<dedent>",
)
MAX_LINES = 200
LINE_TOKENS = tuple(f"<{i}>" for i in range(MAX_LINES))
OUR_SPECIAL_TOKENS = ("<exception>", DELTA)  # DELTA: compact traces only (modeling/compact.py)
SPECIAL_TOKENS = OFFICIAL_SPECIAL_TOKENS + LINE_TOKENS + OUR_SPECIAL_TOKENS
TASK_TOKENS = {"singleline": "<singleline>", "tutorial": "<tutorial>", "codenet": "<codenet>"}


class FormatError(ValueError):
    """A program that cannot be put in the model format (too many lines, ...)."""


# -- code side ----------------------------------------------------------------------------


def format_code(source: str, task: str = "codenet", lexical: bool = False) -> str:
    """Model-format code: task token, then per line `<k>`, indentation tokens, the line.

    lexical=False (the `exact` profile): the stripped source line. lexical=True (the
    `official` profile): the line's Python tokens joined by spaces (modeling/lexical.py)."""
    if task not in TASK_TOKENS:
        raise FormatError(f"unknown task {task!r}; one of {', '.join(TASK_TOKENS)}")
    parts = [TASK_TOKENS[task]]
    for k, delta, text in code_lines(source, lexical):
        parts.append(f"<{k}>")
        parts += ["<indent>"] * max(delta, 0) + ["<dedent>"] * max(-delta, 0)
        parts.append(text)
    return " ".join(parts)


def code_lines(source: str, lexical: bool = False) -> list[tuple[int, int, str]]:
    """(0-based line, indent change, line text) per non-blank line; FormatError past 200 lines."""
    lines = source.splitlines()
    if len(lines) > MAX_LINES:
        raise FormatError(f"{len(lines)} lines: the format has line tokens for {MAX_LINES}")
    if lexical:
        return [(k, delta, " ".join(tokens)) for k, delta, tokens in lexical_lines(source) if k < MAX_LINES]
    return indented_lines(source)


def release_code_tokens(source: str) -> list[str]:
    """The release's `code_tokens` field: `<k>`, indentation tokens and Python tokens."""
    return format_code(source, "codenet", lexical=True).split(" ")[1:]


# -- values ---------------------------------------------------------------------------------

_STRING = re.compile(r"""(?<![\w'"])[bB]?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def official_value(text: str) -> str:
    """Drop the quotes of every string literal inside a rendered value, keeping its spacing."""

    def unquote(m: re.Match) -> str:
        s = m.group(0)
        if s[0] in "bB":
            s = s[1:]
        quote = s[0]
        return s[1:-1].replace("\\" + quote, quote)

    return _STRING.sub(unquote, text)


def _value(text: str, quotes: bool, lexical: bool) -> str:
    if lexical:
        return lexical_value(text)
    return text if quotes else official_value(text)


# -- trace side -------------------------------------------------------------------------------


def format_state(state: Mapping[str, str], quotes: bool = True, lexical: bool = False) -> str:
    items = [f"{name} : {_value(value, quotes, lexical)}" for name, value in state.items()]
    return "<state> " + " <dictsep> ".join(items) + (" </state>" if items else "</state>")


def format_output(text: str, lexical: bool = False) -> str:
    """An `<output>` step's text: newlines escaped; in the official profile the newline
    that ends a print is dropped (the release shows `<output> 3` for `print(3)`)."""
    if lexical and text.endswith("\n"):
        text = text[:-1]
    return "<output> " + text.replace("\\", "\\\\").replace("\n", "\\n")


STEP_ORDERS = ("start", "end")  # a model's `step_order`: steps as their lines start, or as they finish


def finish_order(steps: Sequence[Step], crashed: bool = False) -> list[Step]:
    """The steps in the order their lines finish: the steps of the calls a line makes come
    before the line's own step (which holds the state after the whole line, the call's
    result included), so a trace reaches a result after the steps that compute it. Needs
    each step's call depth. In a run that `crashed`, the line that raised keeps its step
    (as it does in start order) and the lines waiting on its call, which never finish,
    have none: the crash step follows the raising line directly."""
    out: list[Step] = []
    pending: list[Step] = []
    for step in steps:
        while pending and pending[-1].depth >= step.depth:  # that line (and every call it made) is over
            out.append(pending.pop())
        pending.append(step)
    out.extend(pending[-1:] if crashed else reversed(pending))
    return out


def format_trace(
    result: ExecResult | Sequence[Step],
    quotes: bool = True,
    error=None,
    exception_step: bool = True,
    lexical: bool = False,
    compact: bool = False,
    code: str | None = None,
) -> str:
    """Serialize a trace; a result that ended in an exception gets the exception step
    (unless exception_step=False, as the release's format has none). `compact`: a step
    writes only the names that changed (modeling/compact.py; `code` tells where a
    function's frame starts and ends)."""
    if isinstance(result, ExecResult):
        steps, error = result.steps, result.error if result.status in (ExecStatus.ERROR, ExecStatus.MEMORY) else None
    else:
        steps = result
    plan = compact_plan(steps, code) if compact else [None] * len(steps)
    parts = []
    for step, names in zip(steps, plan):
        if names is None:
            state = format_state(dict(step.state), quotes, lexical)
        else:
            state = format_state({n: step.state[n] for n in names}, quotes, lexical).replace("<state>", DELTA, 1)
        parts.append(f"<line> <{step.line - 1}> {state}")
        if step.output:
            parts.append(format_output(step.output, lexical))
    if error is not None and exception_step:
        line = f"<{error.line - 1}> " if error.line else ""
        parts.append(f"<exception> {line}{error.type}")
    return " ".join(parts)


ACTION_MARKER = "<mask>"  # opens a debugger action in a trace: RoBERTa's mask token, which no trace holds
MARKED_ACTIONS = ("next", "out", "continue")  # `step` is the next step of a whole trace: it has no marker


def action_marker(action: str, line: int | None = None) -> str:
    """The words that ask for a debugger action after a trace's steps: `<mask> next`,
    `<mask> out`, `<mask> continue <k>` (k the 0-based breakpoint line, as steps write it).
    What follows them is the one step the action lands on (docs/debugger.md)."""
    if action not in MARKED_ACTIONS:
        raise ValueError(f"no marker for action {action!r}; one of {', '.join(MARKED_ACTIONS)}")
    if action == "continue":
        if line is None:
            raise ValueError("continue needs its breakpoint line")
        return f"{ACTION_MARKER} continue <{line - 1}>"
    return f"{ACTION_MARKER} {action}"


def format_singleline_target(
    state: Mapping[str, str], line: int, quotes: bool = True, lexical: bool = False, line_info: bool = True
) -> str:
    """SingleLine targets are the one state after the last line (the release: the state
    alone, `line_info=False`)."""
    body = format_state(dict(state), quotes, lexical)
    return f"<line> <{line - 1}> {body}" if line_info else body


# -- parsing generated text back --------------------------------------------------------------


@dataclass
class ParsedTrace:
    steps: list[Step] = field(default_factory=list)
    exception: str | None = None  # exception type of the final <exception> step
    exception_line: int | None = None  # 1-based
    problems: list[str] = field(default_factory=list)  # what could not be parsed

    @property
    def output(self) -> str:
        return "".join(s.output for s in self.steps)


_SEGMENT = re.compile(r"<line>|<exception>")
_LINE_TOKEN = re.compile(r"\s*<(\d+)>\s*")


def _unescape_output(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "n\\":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_trace(text: str, output_newline: bool = False) -> ParsedTrace:
    """Steps from (possibly malformed) generated trace text. Never raises: everything it
    cannot read is described in `problems`. A final step without `</state>` (a generation
    cut short) is dropped, as the official metric does. Both profiles' texts parse (values
    are taken as written); output_newline=True gives each output step back the newline
    the official profile drops. Compact text (`<delta>` steps) is expanded first."""
    result = ParsedTrace()
    if DELTA in text:
        expansion = expand(text)
        text = expansion.text
        result.problems += expansion.problems
    starts = [m.start() for m in _SEGMENT.finditer(text)]
    if not starts:
        if text.strip():
            result.problems.append("no <line> or <exception> step found")
        return result
    if text[: starts[0]].strip():
        result.problems.append(f"text before the first step: {text[: starts[0]].strip()[:40]!r}")
    for i, start in enumerate(starts):
        segment = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        if segment.startswith("<exception>"):
            body = segment[len("<exception>") :]
            m = _LINE_TOKEN.match(body)
            if m:
                result.exception_line = int(m.group(1)) + 1
                body = body[m.end() :]
            result.exception = body.strip().split(" ")[0] if body.strip() else None
            if result.exception is None:
                result.problems.append("empty <exception> step")
            if i + 1 < len(starts):
                result.problems.append("steps after the <exception> step")
            continue
        body = segment[len("<line>") :]
        m = _LINE_TOKEN.match(body)
        if not m:
            result.problems.append(f"step {i}: no line token")
            continue
        line = int(m.group(1)) + 1
        body = body[m.end() :]
        if not body.startswith("<state>"):
            result.problems.append(f"step {i}: no <state>")
            continue
        end = body.find("</state>")
        if end < 0:
            result.problems.append(f"step {i}: no </state> (dropped)")
            continue
        # A value keeps the spaces it begins or ends with (a repr such as ' - 3').
        state = dict(read_pairs(body[len("<state>") : end], result.problems, f"step {i}"))
        rest = body[end + len("</state>") :].strip()
        output = ""
        if rest.startswith("<output>"):
            output = _unescape_output(rest[len("<output>") :].strip()) + ("\n" if output_newline else "")
        elif rest:
            result.problems.append(f"step {i}: unexpected text after </state>: {rest[:30]!r}")
        result.steps.append(Step(line, state, output))
    return result
