"""The debugger's actions answered as tasks the model was trained on.

A model whose recipe carries the action rows (curricula/actions.py) has learnt to read
the real steps up to a position, then `<mask> next`, `<mask> out` or `<mask> continue <k>`,
and to write the one step the action lands on, the steps between left out. Asked so, an
action costs one step of decoding however far it lands, where the imposed walk
(generation/forced.py) writes every step on the way. `step` has no marker: its answer is
the next step of the whole trace.
"""

from __future__ import annotations

from codeexecutor.debugger.events import Event, trace_text
from codeexecutor.modeling.format import action_marker


def taught(
    gen, code: str, model_input: str, path: list[Event], action: str, line: int | None = None, max_new=None
) -> tuple[Event | None, bool, bool]:
    """(the event `action` lands on from the last event of the real `path`, as the model writes
    it after the action's marker; whether it ended the trace instead; whether the trace's
    length ran out first). `line`: the breakpoint of a `continue`. Decoded greedily, without
    the state rules (they read a trace's steps, and the marker is none)."""
    from codeexecutor.generation.forced import continue_trace

    prefix = trace_text(gen.profile, path, code)
    ask = prefix if action == "step" else f"{prefix} {action_marker(action, line)}".strip()
    cont = continue_trace(gen, model_input, ask, stop=lambda text: True, max_new=max_new)
    parsed = gen.parse(f"{prefix} {cont.text}".strip())
    if len(parsed.steps) > len(path):
        s = parsed.steps[len(path)]
        return Event(s.line, dict(s.state), s.output), False, False
    if parsed.exception:
        where = parsed.exception_line or (path[-1].line if path else 0)  # as `predict` places a crash
        return Event(where, {}, "", 0, parsed.exception), False, False
    return None, cont.finished, cont.cut
