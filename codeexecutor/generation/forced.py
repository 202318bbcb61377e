"""A trace continued from steps imposed on the model: the debugger's decoding.

The model writes a program's trace one step after another, each step conditioned on the
steps before it. Feeding it steps it did not write (the real run's, up to a breakpoint, or
a state the user edited) and letting it go on from there asks it what happens next from
that point: the way an execution model becomes a debugger without a task of its own.

`continue_trace` reads the code and the imposed prefix in one pass (as training reads a
trace, `CodeExecutorModel.prefill`), keeps their keys and values, and then decodes
greedily, handing each finished step to a caller's `stop` test, so an action decodes only
as far as its answer lies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Continuation:
    text: str  # the steps the model wrote after the prefix, in its own format
    finished: bool  # it wrote </s> (the program ended) before the stop test or the length cap
    cut: bool  # the model's trace length ran out first
    tokens: int  # tokens decoded


@torch.no_grad()
def continue_trace(
    generator,
    model_input: str,
    prefix: str,
    stop: Callable[[str], bool] | None = None,
    max_new: int | None = None,
    rules: bool = False,
) -> Continuation:
    """Greedy steps after the imposed `prefix` (trace text in the model's format, ending at a
    step's end; "" starts from the first step). `stop(text)` is asked after each step the
    model finishes, with the continuation so far: True ends the decoding there. `max_new`:
    tokens decoded at most (default: up to the model's trace length). `rules`: decode under
    the state rules (generation/constraints.py), as `trace` does where they apply; they read
    the imposed prefix first, as if the model had written it."""
    from codeexecutor.generation.constraints import RowConstraints

    model, enc = generator.model, generator.encoder
    device = next(model.parameters()).device
    code = torch.tensor([enc.code(model_input)], device=device)
    code_mask = torch.ones_like(code)
    fed = [enc.mask0] + (enc.ids(prefix) if prefix.strip() else [])
    room = model.config.max_trace_length - 1  # the trace ids a model reads, </s> included
    if len(fed) > room:
        return Continuation("", False, True, 0)
    cache, code_len, logp = model.prefill(code, code_mask, torch.tensor([fed], device=device))
    logp = logp[0]
    keys = torch.cat([code_mask.bool(), torch.ones(1, len(fed), dtype=torch.bool, device=device)], 1)
    starts = {t for t in (enc.line_id, enc.exception_id) if t is not None}
    constraint = RowConstraints([generator._rules(True, True)(model_input)], 1) if rules else None
    for token in fed[1:] if constraint else ():
        constraint.advance([0], [token])

    def feed(token: int, position: int) -> torch.Tensor:
        nonlocal keys
        keys = torch.cat([keys, torch.ones(1, 1, dtype=torch.bool, device=device)], 1)
        step = torch.tensor([token], device=device)
        return model.decode_step(step, cache, keys, code_len + position)[0]

    written: list[int] = []
    room = min(room, len(fed) + max_new) if max_new else room
    while len(fed) + len(written) < room:
        if constraint:
            logp = constraint.mask(logp[None])[0]
        token = int(logp.argmax())
        if token == enc.eos:
            return Continuation(enc.decode(written), True, False, len(written) + 1)
        if token in starts and written and stop is not None and stop(enc.decode(written)):
            return Continuation(enc.decode(written), False, False, len(written))
        written.append(token)
        if constraint:
            constraint.advance([0], [token])
        logp = feed(token, len(fed) + len(written) - 1)
    return Continuation(enc.decode(written), False, True, len(written))
