"""The debugger's actions answered as tasks the model was trained on.

A model whose recipe carries the action rows (curricula/actions.py) has learnt to read
the real steps up to a position, then `<mask> next`, `<mask> out` or `<mask> continue <k>`,
and to write the one step the action lands on, the steps between left out. Asked so, an
action costs one step of decoding however far it lands, where the imposed walk
(generation/forced.py) writes every step on the way. `step` has no marker: its answer is
the next step of the whole trace.
"""

from __future__ import annotations

from codeexecutor.debugger.events import Event
from codeexecutor.modeling.format import action_marker


def taught(
    gen, code: str, model_input: str, path: list[Event], action: str, line: int | None = None, max_new=None
) -> Event | None:
    """The event `action` lands on from the last event of the real `path` (`line`: the
    breakpoint of a `continue`), as the model writes it after the action's marker; None
    where it writes no step (it ended the trace, or ran out of length)."""
    from codeexecutor.debugger.session import trace_text
    from codeexecutor.generation.forced import continue_trace

    prefix = trace_text(gen.profile, path, code)
    ask = prefix if action == "step" else f"{prefix} {action_marker(action, line)}".strip()
    cont = continue_trace(gen, model_input, ask, stop=lambda text: True, max_new=max_new)
    parsed = gen.parse(f"{prefix} {cont.text}".strip())
    if len(parsed.steps) > len(path):
        s = parsed.steps[len(path)]
        return Event(s.line, dict(s.state), s.output)
    if parsed.exception:
        return Event(parsed.exception_line or 0, {}, "", 0, parsed.exception)
    return None
