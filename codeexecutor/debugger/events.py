"""A run as the debugger walks it: the events of a trace, in the order the model writes
them, each with the frame depth it happened at, and where each action lands.

An event is a step of the trace: a line has run and left its frame in a state (and maybe
printed), or the program raised. The model writes the steps in its profile's order
(`step_order`: as lines start, or as they finish, a calling line after the steps of its
calls); the debugger walks the same order, so the state it shows at an event is the state
the model writes there: the frame's variables after the line ran.

Actions, from the event at position i (-1: before the first):

* `step`: the next event, into calls;
* `next`: the next event in this frame or a caller's (a call's own steps skipped);
* `out`: the next event in a caller's frame (the state the caller is left in);
* `continue LINE`: the next event of that line (a breakpoint's next hit).

The real run's events carry the tracer's depth. A predicted trace carries none, so its
depths come from the program's scopes (`modeling/compact.line_scopes`): a line in the frame's
scope stays at its depth, one in a caller's scope returns to it, any other function's is a
call one deeper, unless the frame's last event was one of its exits (a `return`, a `raise`,
its body's last line): then that call has returned and the new one is its sibling
(`solve(read())`). A recursive call's frames read as one, as the trace's compact form reads
them, so a walk through recursion can land elsewhere in a prediction than in the real run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codeexecutor.execution.records import ExecError, Step
from codeexecutor.modeling.compact import line_scopes
from codeexecutor.modeling.format import finish_order, format_trace

ACTIONS = ("step", "next", "out", "continue")


@dataclass
class Event:
    line: int  # 1-based line of the program the model reads
    state: dict[str, str] = field(default_factory=dict)
    output: str = ""
    depth: int = 0
    exception: str | None = None  # the type, on the event a crash ends with

    def to_json(self) -> dict:
        out = {"line": self.line, "state": dict(self.state)}
        if self.output:
            out["output"] = self.output
        if self.exception:
            out["exception"] = self.exception
        return out

    def same(self, other: Event | None) -> bool:
        """The same event: line, state, output and exception all equal."""
        return other is not None and self.to_json() == other.to_json()


def real_events(steps: list[Step], error: ExecError | None, order: str) -> list[Event]:
    """A real run's events in the model's order, with the tracer's depths; a crash ends
    with an exception event on the raising line."""
    ordered = finish_order(list(steps), crashed=error is not None) if order == "end" else list(steps)
    events = [Event(s.line, dict(s.state), s.output, s.depth) for s in ordered]
    if error is not None:
        events.append(Event(error.line or 0, {}, "", events[-1].depth if events else 0, error.type))
    return events


def row_events(row, order: str) -> list[Event]:
    """A built dataset row's real events (its `steps` and `error` columns) in the model's order."""
    import json

    steps = [Step(s["line"], s["state"], s.get("output", ""), s.get("depth", 0)) for s in json.loads(row["steps"])]
    error = None
    if row.get("error") and row.get("status") in ("error", "memory"):
        e = json.loads(row["error"])
        error = ExecError(e["type"], e.get("message", ""), e.get("line"))
    return real_events(steps, error, order)


class Frames:
    """The stack of scopes a predicted trace is in, followed event by event: the depth of
    each event read off the program's scopes (module level is scope 0)."""

    def __init__(self, code: str, stack: list[int] | None = None) -> None:
        self.scopes = line_scopes(code)
        self.exits = exit_lines(code)
        self.stack = list(stack or [0])
        self.last: int | None = None  # the line of the event before

    def copy(self) -> Frames:
        other = Frames.__new__(Frames)
        other.scopes, other.exits, other.stack, other.last = self.scopes, self.exits, list(self.stack), self.last
        return other

    def enter(self, line: int) -> int:
        """The depth of an event on `line` (0 at module level), the stack moved to it."""
        scope = self.scopes.get(line, 0)
        if scope == self.stack[-1]:
            pass
        elif scope in self.stack:  # back in a caller's frame: the frames above it returned
            del self.stack[self.stack.index(scope) + 1 :]
        else:  # a function called from here, or from the caller of one that just returned
            if len(self.stack) > 1 and self.last in self.exits.get(self.stack[-1], ()):
                self.stack.pop()
            self.stack.append(scope)
        self.last = line
        return len(self.stack) - 1


def exit_lines(code: str) -> dict[int, set[int]]:
    """Each function's scope (the first line of its body) -> the lines its call can end on:
    its `return` and `raise` lines and the last lines of its body (a trailing loop's header,
    the last line of each branch of a trailing `if` or `try`)."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}

    def tails(body: list) -> set[int]:
        last = body[-1]
        if isinstance(last, (ast.For, ast.AsyncFor, ast.While)):
            return {last.lineno} | tails(last.orelse) if last.orelse else {last.lineno}
        if isinstance(last, ast.If):
            return tails(last.body) | (tails(last.orelse) if last.orelse else {last.lineno})
        if isinstance(last, ast.Try):
            ends = tails(last.finalbody) if last.finalbody else tails(last.orelse or last.body)
            return ends.union(*(tails(h.body) for h in last.handlers))
        if isinstance(last, (ast.With, ast.AsyncWith)):
            return tails(last.body)
        return {last.lineno}

    out: dict[int, set[int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            ends = {n.lineno for n in ast.walk(node) if isinstance(n, (ast.Return, ast.Raise))}
            out[node.body[0].lineno] = ends | tails(node.body)
    return out


def stack_at(code: str, events: list[Event], position: int) -> Frames:
    """The scope stack after the events up to `position`, as `Frames` reads them."""
    frames = Frames(code)
    for event in events[: position + 1]:
        frames.enter(event.line)
    return frames


def with_depths(code: str, events: list[Event], frames: Frames) -> list[Event]:
    """Predicted events given depths from the scopes, starting from `frames`."""
    frames = frames.copy()
    for event in events:
        event.depth = frames.enter(event.line) if not event.exception else (len(frames.stack) - 1)
    return events


def target(events: list[Event], start: int, depth: int, action: str, line: int | None = None) -> int | None:
    """The index in `events` (after `start`) where `action` lands, from an event at `depth`;
    None: the run ends first."""
    for j in range(start + 1, len(events)):
        e = events[j]
        if (
            action == "step"
            or (action == "next" and e.depth <= depth)
            or (action == "out" and e.depth < depth)
            or (action == "continue" and e.line == line)
            or e.exception  # a crash ends every walk
        ):
            return j
    return None


def trace_text(profile, events: list[Event], code: str) -> str:
    """Events in a model's own trace format (its profile: values, compact states)."""
    steps = [Step(e.line, e.state, e.output, e.depth) for e in events if not e.exception]
    error = next((ExecError(e.exception, "", e.line) for e in events if e.exception), None)
    return format_trace(
        steps,
        quotes=not profile.official,
        error=error,
        exception_step=profile.exception_step,
        lexical=profile.official,
        compact=profile.delta,
        code=code,
    )
