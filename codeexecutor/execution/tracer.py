"""The line tracer that runs inside the sandboxed child.

One step per `line` event of the program's own frames (the module and its functions),
in the order the events fire, with its call depth. A step's state is the frame's visible variables *after*
the line ran, so it is filled in at the frame's next event (its next line, its return,
or the end of the run). Output written while a line runs is attached to the innermost
running step.

Comprehension, generator-expression and lambda frames are not traced: they are part of
the line that contains them (otherwise `[int(x) for x in s]` over 10^5 items would make
10^5 steps of one line). Code compiled from strings (`exec`, `eval`) is not the
program's own code and is not traced either.

Frames are turned into plain strings at once; the stack keeps a frame only while it runs.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Callable

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
        sink: "OutputSink",
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
        """Visible variables of a frame, rendered: no dunders, no modules.

        Renderings of immutable values are memoized per name: while `name` still holds
        the very same object (an identity check; the memo keeps the object alive so its
        id cannot be reused), its text is reused. Mutable values are rendered each time.
        The result is exactly what `render` gives.
        """
        limit = self.value_limit
        memo = self._memo
        state = {}
        for name, value in frame.f_locals.items():
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
        for _, index in reversed(self.stack):
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
        for frame, index in reversed(self.stack):
            if index >= 0:
                return self.steps[index][0]
        return None
