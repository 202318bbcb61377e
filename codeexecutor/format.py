"""The model-facing format of code and traces (SPEC §3), and the parser back to steps.

Code side: a task-prefix token, then for each non-blank source line its 0-based line
token `<k>`, `<indent>` when the indentation grows, one `<dedent>` per level it
shrinks, then the stripped line:

    <codenet> <0> n = int('3') <1> for i in range(n): <2> <indent> print(i)

Trace side, one step per executed line (0-based line token, as on the code side):

    <line> <1> <state> n : 3 <dictsep> i : 0 </state> <output> 0

`<output> text` follows the step whose line printed it (newlines escaped as `\\n`). Our
addition, additive to the official vocabulary: a crashing trace ends with
`<exception> <k> TypeError`, the line where the exception was raised and its type.

Values come from `render` (exact `repr`, see execution/render.py); `official_value`
drops string quotes as the official release did (`['a', 'b']` -> `[a, b]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codeexecutor.execution.records import ExecResult, ExecStatus, Step

# Official order first (CodeExecutor release), then ours.
OFFICIAL_SPECIAL_TOKENS = (
    "<line>", "<state>", "</state>", "<dictsep>", "<output>", "<function>",
    "<singleline>", "<tutorial>", "<codenet>", "<indent>", "<dedent>",
)
MAX_LINES = 200
LINE_TOKENS = tuple(f"<{i}>" for i in range(MAX_LINES))
OUR_SPECIAL_TOKENS = ("<exception>",)
SPECIAL_TOKENS = OFFICIAL_SPECIAL_TOKENS + LINE_TOKENS + OUR_SPECIAL_TOKENS
TASK_TOKENS = {"singleline": "<singleline>", "tutorial": "<tutorial>", "codenet": "<codenet>"}


class FormatError(ValueError):
    """A program that cannot be put in the model format (too many lines, ...)."""


# -- code side ----------------------------------------------------------------------------

def format_code(source: str, task: str = "codenet") -> str:
    if task not in TASK_TOKENS:
        raise FormatError(f"unknown task {task!r}; one of {', '.join(TASK_TOKENS)}")
    parts = [TASK_TOKENS[task]]
    levels = [0]
    lines = source.splitlines()
    if len(lines) > MAX_LINES:
        raise FormatError(f"{len(lines)} lines: the format has line tokens for {MAX_LINES}")
    for k, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        width = len(line) - len(line.lstrip(" \t"))
        parts.append(f"<{k}>")
        if width > levels[-1]:
            levels.append(width)
            parts.append("<indent>")
        else:
            while len(levels) > 1 and width < levels[-1]:
                levels.pop()
                parts.append("<dedent>")
        parts.append(stripped)
    return " ".join(parts)


# -- values ---------------------------------------------------------------------------------

_STRING = re.compile(r"""(?<![\w'"])[bB]?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def official_value(text: str) -> str:
    """Drop the quotes of every string literal inside a rendered value (official style)."""

    def unquote(m: re.Match) -> str:
        s = m.group(0)
        if s[0] in "bB":
            s = s[1:]
        quote = s[0]
        return s[1:-1].replace("\\" + quote, quote)

    return _STRING.sub(unquote, text)


# -- trace side -------------------------------------------------------------------------------

def format_state(state: dict[str, str], quotes: bool = True) -> str:
    items = [f"{name} : {value if quotes else official_value(value)}" for name, value in state.items()]
    return "<state> " + " <dictsep> ".join(items) + (" </state>" if items else "</state>")


def format_trace(result: ExecResult | list[Step], quotes: bool = True, error=None) -> str:
    """Serialize a trace; a result that ended in an exception gets the exception step."""
    if isinstance(result, ExecResult):
        steps, error = result.steps, result.error if result.status in (ExecStatus.ERROR, ExecStatus.MEMORY) else None
    else:
        steps = result
    parts = []
    for step in steps:
        parts.append(f"<line> <{step.line - 1}> {format_state(dict(step.state), quotes)}")
        if step.output:
            parts.append("<output> " + step.output.replace("\\", "\\\\").replace("\n", "\\n"))
    if error is not None:
        line = f"<{error.line - 1}> " if error.line else ""
        parts.append(f"<exception> {line}{error.type}")
    return " ".join(parts)


def format_singleline_target(state: dict[str, str], line: int, quotes: bool = True) -> str:
    """SingleLine targets are the one state after the last line."""
    return f"<line> <{line - 1}> {format_state(state, quotes)}"


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


def parse_trace(text: str) -> ParsedTrace:
    """Steps from (possibly malformed) generated trace text. Never raises: everything it
    cannot read is described in `problems`. A final step without `</state>` (a generation
    cut short) is dropped, as the official metric does."""
    result = ParsedTrace()
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
        state = {}
        inner = body[len("<state>") : end].strip()
        if inner:
            for pair in inner.split("<dictsep>"):
                name, sep, value = pair.strip().partition(" : ")
                if not sep:
                    name, sep, value = pair.strip().partition(":")
                if not sep or not name.strip():
                    result.problems.append(f"step {i}: unreadable pair {pair.strip()[:30]!r}")
                    continue
                state[name.strip()] = value.strip()
        rest = body[end + len("</state>") :].strip()
        output = ""
        if rest.startswith("<output>"):
            output = _unescape_output(rest[len("<output>") :].strip())
        elif rest:
            result.problems.append(f"step {i}: unexpected text after </state>: {rest[:30]!r}")
        result.steps.append(Step(line, state, output))
    return result
