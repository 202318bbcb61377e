"""The line tracer that runs inside the sandboxed child.

One step per `line` event of the program's own frames (the module and its functions),
in the order the events fire, with its call depth. A step's state is the frame's visible variables *after*
the line ran, so it is filled in at the frame's next event (its next line, its return,
or the end of the run). Output written while a line runs is attached to the innermost
running step.

Comprehensions, generator expressions and lambdas are not traced: they are part of the
line that contains them (otherwise `[int(x) for x in s]` over 10^5 items would make 10^5
steps of one line), and their variables are not part of a state. Code compiled from
strings (`exec`, `eval`) is not the program's own code and is not traced either.

The trace is the same on every interpreter from 3.11 on. `Tracer` is 3.11's, a
`sys.settrace` function; there a comprehension has a frame of its own. From 3.12 a list,
set or dict comprehension runs in the enclosing frame; `MonitoringTracer` (PEP 669's
`sys.monitoring`) reads what `frames.analyse` finds in the code to leave its loop's events
and variables out, never reads a frame in the middle of one (3.12 would write back into
it), reads module frames from their globals, and lists a function's names in 3.11's
order. `make_tracer` picks the one for this interpreter; `start(code)` and `stop()` switch
either on and off.

Frames are turned into plain strings at once; the stack keeps a frame only while it runs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

from codeexecutor.execution.frames import INLINED, MODULE, analyse
from codeexecutor.execution.render import render

if TYPE_CHECKING:
    from codeexecutor.execution.output import OutputSink

PROGRAM_FILENAME = "<program>"
_UNTRACED_NAMES = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>"})
_ModuleType = types.ModuleType
_BIG = 10**15  # ints inside (-_BIG, _BIG) have a repr of at most 16 characters
# Types whose rendering cannot change while a variable holds the same object.
_IMMUTABLE = frozenset(
    {int, float, bool, type(None), str, bytes, complex, range, types.FunctionType, types.BuiltinFunctionType, type}
)


class Tracer:
    """A `sys.settrace` function. `steps` holds [line, state-or-None, output, depth] lists;
    depth is the number of the program's frames below the line's own (0 at module level),
    what lets a reader put a call's steps before the line that made it."""

    def __init__(
        self,
        max_steps: int,
        sink: OutputSink,
        on_limit: Callable[[], None],
        value_limit: int = 100,
        filename: str = PROGRAM_FILENAME,
    ) -> None:
        self.steps: list[list] = []
        self.stack: list[list] = []  # [frame, index of its running step or -1]
        self.max_steps = max_steps
        self.sink = sink  # .pending is truthy when the program wrote since the last take()
        self.on_limit = on_limit  # called when a step over max_steps starts; must not return
        self.value_limit = value_limit
        self.filename = filename
        self._memo: dict[str, tuple] = {}  # name -> (value, its rendering or None)
        self._short = (value_limit - 2) // 4  # a str this long has a repr within the limit

    def start(self, code) -> None:
        """Trace from now on (`code`: the program about to run)."""
        sys.settrace(self)

    def stop(self) -> None:
        """No more events. Raises RuntimeError inside the audit hook of the program's own
        `sys.settrace` call."""
        sys.settrace(None)

    def configure(self, max_steps: int, value_limit: int) -> None:
        self.max_steps = max_steps
        self.value_limit = value_limit
        self._short = (value_limit - 2) // 4

    # -- hot path ------------------------------------------------------------------
    def __call__(self, frame, event, arg):  # the global trace function: 'call' events only
        code = frame.f_code
        if code.co_filename != self.filename or code.co_name in _UNTRACED_NAMES:
            return None  # common case for library frames: no local tracing at all
        self._attach_output()
        self.stack.append([frame, -1])
        return self._local

    def _local(self, frame, event, arg):
        if self.sink.pending:
            self._attach(self.sink.take())
        if event == "line":
            top = self.stack[-1]
            steps = self.steps
            if top[1] >= 0:
                steps[top[1]][1] = self.snapshot(frame)
            if len(steps) >= self.max_steps:
                self.on_limit()
            steps.append([frame.f_lineno, None, "", len(self.stack) - 1])
            top[1] = len(steps) - 1
        elif event == "return":
            _, index = self.stack.pop()
            if index >= 0:
                self.steps[index][1] = self.snapshot(frame)
        return self._local

    # -- helpers ---------------------------------------------------------------------
    def snapshot(self, frame) -> dict[str, str]:
        return self.render_items(frame.f_locals.items())

    def render_items(self, items) -> dict[str, str]:
        """Visible variables of a frame (name, value pairs), rendered: no dunders, no modules.

        Renderings of immutable values are memoized per name: while `name` still holds
        the very same object (an identity check; the memo keeps the object alive so its
        id cannot be reused), its text is reused. Mutable values are rendered each time.
        The result is exactly what `render` gives.
        """
        limit = self.value_limit
        memo = self._memo
        state = {}
        for name, value in items:
            hit = memo.get(name)
            if hit is not None and hit[0] is value:
                if hit[1] is not None:
                    state[name] = hit[1]
                continue
            t = type(value)
            if name[0] == "_" and name[:2] == "__" and name[-2:] == "__" or t is _ModuleType:
                memo[name] = (value, None)  # never part of the state
                continue
            if t in _IMMUTABLE:
                if t is int:
                    text = repr(value) if -_BIG < value < _BIG else render(value, limit)
                elif t is str:
                    text = repr(value) if len(value) <= self._short else render(value, limit)
                elif t is float or t is bool or value is None:
                    text = repr(value)
                else:
                    text = render(value, limit)
                memo[name] = (value, text)
            else:
                text = render(value, limit)
            state[name] = text
        return state

    def _attach_output(self) -> None:
        if self.sink.pending:
            self._attach(self.sink.take())

    def _attach(self, text: str) -> None:
        for entry in reversed(self.stack):
            index = entry[1]
            if index >= 0:
                self.steps[index][2] += text
                return
        # Output before any program line ran (cannot happen for module code); keep it anyway.
        if self.steps:
            self.steps[-1][2] += text

    def close(self) -> None:
        """End of run (normal or abrupt): fill the states of the lines still running."""
        self._attach_output()
        while self.stack:
            frame, index = self.stack.pop()
            if index >= 0 and self.steps[index][1] is None:
                self.steps[index][1] = self.snapshot(frame)

    def current_line(self) -> int | None:
        for entry in reversed(self.stack):
            if entry[1] >= 0:
                return self.steps[entry[1]][0]
        return None


_MISSING = object()


class MonitoringTracer(Tracer):
    """The tracer for 3.12 and later, on `sys.monitoring` (PEP 669): the same steps and
    states as `Tracer` gives on 3.11.

    Events are switched on for the program's own code objects only (library code runs
    untouched, where a `settrace` function is called for every Python call), and an
    event of a comprehension's own loop is switched off at its location the first time it
    fires. The events are those `sys.settrace` itself is built from on these versions: a
    `line` step at each LINE event, and at a backward jump within one line (a one-line
    loop); a frame starts at PY_START, PY_RESUME and PY_THROW, and ends at PY_RETURN,
    PY_YIELD and PY_UNWIND.

    A stack entry also holds the code's `CodeInfo` and, for a function, its names in the
    order 3.11 keeps them: a name stays where it was first bound and a newly bound one goes
    last (3.11's frame dictionary, updated at each read). A generator's order outlives its
    entry, as its frame outlives each resumption."""

    TOOL = 0  # sys.monitoring.DEBUGGER_ID: the tool a line tracer is

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._info: dict = {}  # code object -> CodeInfo
        self._lines: dict = {}  # code object -> {offset: line}
        self._resumed: dict[int, dict] = {}  # id of a suspended generator's frame -> its order
        self._codes: set = set()  # the program's traced code objects

    # -- switching on and off ---------------------------------------------------------------
    def start(self, code) -> None:
        """Claim the tool id (a forked child inherits it claimed), register this tracer's
        callbacks and switch the events on for `code` and the code objects it holds."""
        if _MON.get_tool(self.TOOL) is None:
            _MON.use_tool_id(self.TOOL, "codeexecutor")
        E = _MON.events
        for event, callback in (
            (E.PY_START, self._on_start),
            (E.PY_RESUME, self._on_start),
            (E.PY_THROW, self._on_throw),
            (E.PY_RETURN, self._on_return),
            (E.PY_YIELD, self._on_return),
            (E.PY_UNWIND, self._on_unwind),
            (E.LINE, self._on_line),
            (E.JUMP, self._on_jump),
        ):
            _MON.register_callback(self.TOOL, event, callback)
        local = E.PY_START | E.PY_RESUME | E.PY_RETURN | E.PY_YIELD | E.LINE | E.JUMP
        todo = [code]
        while todo:
            c = todo.pop()
            if c.co_filename == self.filename and c.co_name not in _UNTRACED_NAMES and c not in self._codes:
                self._codes.add(c)
                _MON.set_local_events(self.TOOL, c, local)
                todo.extend(k for k in c.co_consts if isinstance(k, _CodeType))
        _MON.set_events(self.TOOL, E.PY_UNWIND | E.PY_THROW)  # these two exist only as global events

    def stop(self) -> None:
        if _MON.get_tool(self.TOOL) is None:
            return
        _MON.set_events(self.TOOL, 0)
        for c in self._codes:
            _MON.set_local_events(self.TOOL, c, 0)
        self._codes = set()

    # -- events ------------------------------------------------------------------------------
    def _on_start(self, code, offset, frame=None):
        frame = frame or _getframe(1)  # the program's frame that starts (the callback is called from it)
        info = self._info.get(code)
        if info is None:
            info = self._info[code] = analyse(code)
        order = None
        if info.slots is not None:
            if info.suspendable and frame.f_lasti > _first_offset(code):
                order = self._resumed.pop(id(frame), None)
            if order is None:
                order = {}
        self._attach_output()
        self.stack.append([frame, -1, info, order, None])

    def _on_throw(self, code, offset, exc):
        if code in self._codes:
            self._on_start(code, offset, _getframe(1))

    def _on_return(self, code, offset, value):
        if self.sink.pending:
            self._attach(self.sink.take())
        entry = self.stack.pop()
        if entry[1] >= 0:
            self.steps[entry[1]][1] = self.state(entry)
        if entry[2].suspendable and entry[3] is not None and _suspended(entry[0]):
            self._resumed[id(entry[0])] = entry[3]

    def _on_unwind(self, code, offset, exc):
        if code in self._codes:
            self._on_return(code, offset, None)

    def _on_line(self, code, line):
        if self.sink.pending:
            self._attach(self.sink.take())
        top = self.stack[-1]
        if top[1] >= 0 and self.steps[top[1]][0] == line:
            return None  # no new line: 3.12 reports a jump target again after a call returns (`a or f()`)
        info = top[2]
        if info.skip:
            lasti = top[0].f_lasti
            if lasti in info.skip or info.tail.get(lasti) == line:
                return _DISABLE  # the comprehension's own loop, or its exit on its first line
            first = info.lead.get(lasti)
            if first is not None and (top[1] < 0 or self.steps[top[1]][0] != first):
                self._start(top, first)  # 3.11's step of the comprehension's first line
        self._start(top, line)

    def _on_jump(self, code, source, target):
        if target > source:
            return _DISABLE  # forward jumps make no step
        lines = self._lines.get(code)
        if lines is None:
            lines = self._lines[code] = {o: line for a, b, line in code.co_lines() for o in range(a, b, 2)}
        line = lines.get(target)
        if line is None or line != lines.get(source) or target in self.stack[-1][2].skip:
            return _DISABLE  # a new line is a LINE event of its own; a comprehension's loop is no step
        if self.sink.pending:
            self._attach(self.sink.take())
        self._start(self.stack[-1], line)

    def _start(self, top: list, line: int) -> None:
        """A new step of `top`'s frame at `line`; the state of its step before is read now."""
        steps = self.steps
        if top[1] >= 0:
            steps[top[1]][1] = self.state(top)
        if top[2].shadowed:  # what those locals hold before a comprehension of this line takes their names
            get = top[0].f_locals.get
            top[4] = {n: get(n, _MISSING) for n in top[2].shadowed}
        if len(steps) >= self.max_steps:
            self.on_limit()
        steps.append([line, None, "", len(self.stack) - 1])
        top[1] = len(steps) - 1

    # -- states ------------------------------------------------------------------------------
    def state(self, entry, stopped: bool = False) -> dict[str, str]:
        """The state of an entry's frame now; `stopped`: the run ended with the frame where it
        is, which may be inside a comprehension (3.11 shows the locals it shadows, as they
        were when its line began)."""
        frame, _, info, order, before = entry
        if info.kind == MODULE:
            return self.render_items(frame.f_globals.items())
        values = frame.f_locals
        if stopped and before and any(lo <= frame.f_lasti <= hi for lo, hi in info.extents):
            values = dict(values)
            for name, value in before.items():
                if value is _MISSING:
                    values.pop(name, None)
                else:
                    values[name] = value
        if order is None:
            if info.hidden:
                return self.render_items((n, v) for n, v in values.items() if n not in info.hidden)
            return self.render_items(values.items())
        get = values.get
        for name in info.slots:
            value = get(name, _MISSING)
            if value is not _MISSING:
                order[name] = value
            elif name in order:
                del order[name]
        return self.render_items(order.items())

    def close(self) -> None:
        self._attach_output()
        while self.stack:
            entry = self.stack.pop()
            if entry[1] >= 0 and self.steps[entry[1]][1] is None:
                self.steps[entry[1]][1] = self.state(entry, stopped=True)


def _first_offset(code) -> int:
    """Offset of a generator's first RESUME: where a fresh generator's start event is."""
    raw = code.co_code
    for k in range(0, len(raw), 2):
        if raw[k] == _RESUME:
            return k
    return 0


def _suspended(frame) -> bool:
    """Whether a generator frame that just left is suspended at a yield (to be resumed)."""
    raw = frame.f_code.co_code
    lasti = frame.f_lasti
    return 0 <= lasti < len(raw) and raw[lasti] == _YIELD_VALUE


if INLINED:
    import dis

    _MON = sys.monitoring
    _DISABLE = _MON.DISABLE
    _RESUME, _YIELD_VALUE = dis.opmap["RESUME"], dis.opmap["YIELD_VALUE"]
_getframe = sys._getframe
_CodeType = types.CodeType


def make_tracer(
    max_steps: int,
    sink: OutputSink,
    on_limit: Callable[[], None],
    value_limit: int = 100,
    filename: str = PROGRAM_FILENAME,
) -> Tracer:
    """The tracer for this interpreter (see the module docstring)."""
    cls = MonitoringTracer if INLINED else Tracer
    return cls(max_steps, sink, on_limit, value_limit, filename)
