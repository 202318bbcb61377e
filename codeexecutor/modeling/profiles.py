"""Format profiles: how one model sees code and writes traces (docs/trace-format.md).

A model carries its profile in its saved config (`format_profile`, `exception_step`):

* `official`: the released CodeExecutor's format. Code as Python lexical tokens joined
  by spaces after each line's `<k>`; values as lexical tokens with string quotes
  dropped (`s : [ x , y ]`); SingleLine targets are the state alone; the source ids end
  `<mask0> </s>` with at most 251 body tokens; at most 768 generated tokens. A folder
  whose config has no `format_profile` (the released checkpoint) is `official`.
* `exact`: ours. Stripped source lines; values as exact `repr` with quotes (quotes
  decide TypeErrors such as `'2' ** 2`); the `<exception> <k> Type` step ends a
  crashing trace.

`exception_step` adds the crash step to `official` too (the released model continued
on crash-aware data). Datasets store structured steps (`code`, `steps`, `error`,
`status` columns), so either profile serializes the same build at tokenization time.

Orthogonal to the profile, `trace_state` says how a step writes its state: `full` (every
step the whole state, as the release) or `delta` (only what changed since the step
before: modeling/compact.py). A delta model's generations are expanded to full states in
`parse` and by the generator, so every consumer reads full states.

`step_order` says where a line that calls a function writes its step: `start` (as the
line starts, before the call's steps: the release's order) or `end` (as it finishes,
after them: `format.finish_order`), so a call's result follows the steps that make it.

`code_window` says which tokens of a program longer than the code length the model reads:
`head` (its first tokens, as the release) or `ends` (its first tokens and its last whole
lines: `modeling/tokenizer.Encoder.code`), so a long module's final call, whose arguments
are the input, stays in view.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from codeexecutor.execution.records import ExecError, Step
from codeexecutor.modeling.choices import CODE_WINDOWS, PROFILES
from codeexecutor.modeling.compact import STATE_KINDS, expand
from codeexecutor.modeling.format import (
    STEP_ORDERS,
    action_marker,
    finish_order,
    format_code,
    format_singleline_target,
    format_trace,
    parse_trace,
)

RELEASE_SOURCE_BODY = 251  # max_source_length 256 - 5 (inference/dataset.py)
RELEASE_MAX_GENERATED = 768  # max_target_length: the release's decoding loop runs at most this many steps


# what `Profile.example` reads of a dataset row
EXAMPLE_COLUMNS = ("task", "code", "steps", "status", "error", "action")


@dataclass(frozen=True)
class Profile:
    name: str = "exact"
    exception_step: bool = True
    state: str = "full"  # full | delta: how a trace step writes its state
    order: str = "start"  # start | end: a calling line's step before or after the call's steps
    window: str = "head"  # head | ends: a long program's first tokens, or its first tokens and its last lines

    def __post_init__(self) -> None:
        if self.name not in PROFILES:
            raise ValueError(f"unknown format profile {self.name!r}; one of {', '.join(PROFILES)}")
        if self.state not in STATE_KINDS:
            raise ValueError(f"unknown trace state {self.state!r}; one of {', '.join(STATE_KINDS)}")
        if self.order not in STEP_ORDERS:
            raise ValueError(f"unknown step order {self.order!r}; one of {', '.join(STEP_ORDERS)}")
        if self.window not in CODE_WINDOWS:
            raise ValueError(f"unknown code window {self.window!r}; one of {', '.join(CODE_WINDOWS)}")

    @property
    def delta(self) -> bool:
        return self.state == "delta"

    @property
    def full(self) -> Profile:
        """The same profile writing whole states: what references are scored in."""
        return Profile(self.name, self.exception_step, order=self.order, window=self.window)

    @property
    def official(self) -> bool:
        return self.name == "official"

    @property
    def label(self) -> str:
        return (
            self.name
            + ("+exception" if self.official and self.exception_step else "")
            + ("+delta" if self.delta else "")
            + ("+end" if self.order == "end" else "")
            + ("+ends" if self.window == "ends" else "")
        )

    # -- code and targets ---------------------------------------------------------------
    def code(self, source: str, task: str = "codenet") -> str:
        return format_code(source, task, lexical=self.official)

    def trace(self, steps, error: ExecError | None = None, code: str | None = None) -> str:
        """A trace's target text; `code` (the program) tells a compact trace where frames change."""
        steps = finish_order(list(steps), crashed=error is not None) if self.order == "end" else list(steps)
        return format_trace(
            steps,
            quotes=not self.official,
            error=error,
            exception_step=self.exception_step,
            lexical=self.official,
            compact=self.delta,
            code=code,
        )

    def action(self, steps, error: ExecError | None, code: str, action: Mapping) -> str:
        """A debugger action's target text: the real steps before the position, already in
        this profile's order (`action["at"]` of them), the action's marker, then the step
        it lands on: `steps[at]`, or the crash where the steps end there. A compact landing
        writes what changed since the position, as the model's own trace would there."""
        if action.get("order", self.order) != self.order:
            raise ValueError(f"an action row in step order {action['order']!r} read by a {self.order!r} profile")
        at = int(action["at"])
        write = {
            "quotes": not self.official,
            "exception_step": self.exception_step,
            "lexical": self.official,
            "compact": self.delta,
            "code": code,
        }
        prefix = format_trace(list(steps[:at]), **write)
        landed = list(steps[: at + 1])
        whole = format_trace(landed, error=error if len(landed) == at else None, **write)
        if not whole.startswith(prefix):
            raise ValueError(f"action row: the steps before {at} are not written alike alone and with the landing")
        marker = action_marker(action["name"], action.get("line"))
        # a crash in a format without the crash step lands on nothing: the trace ends at the
        # marker, and the row bears no loss (modeling/rows.py)
        return f"{prefix} {marker} {whole[len(prefix) :].lstrip()}".strip()

    def singleline(self, state: Mapping[str, str], line: int) -> str:
        return format_singleline_target(
            state, line, quotes=not self.official, lexical=self.official, line_info=not self.official
        )

    def expand(self, text: str):
        """Full-state text of generated text (modeling/compact.Expansion; unchanged for a full-state model)."""
        return expand(text)

    def parse(self, text: str):
        """Steps back from generated text (official outputs get back their print newline;
        compact steps expanded to whole states)."""
        return parse_trace(text, output_newline=self.official)

    def example(self, row: Mapping) -> tuple[str, str]:
        """(model input, model target) of one dataset row, from its structured columns."""
        steps = [
            Step(s["line"], s["state"], s.get("output", ""), s.get("depth", 0))
            for s in json.loads(row["steps"] or "[]")
        ]
        if row["task"] == "singleline":
            last = steps[-1]
            return self.code(row["code"], "singleline"), self.singleline(last.state, last.line)
        error = None
        if row.get("error") and row.get("status") in ("error", "memory"):
            e = json.loads(row["error"])
            error = ExecError(e["type"], e.get("message", ""), e.get("line"))
        if row.get("action"):  # a debugger action (curricula/actions.py): steps already in this order
            action = json.loads(row["action"])
            return self.code(row["code"], row["task"]), self.action(steps, error, row["code"], action)
        return self.code(row["code"], row["task"]), self.trace(steps, error, row["code"])

    def examples(self, batch: Mapping[str, list]) -> list[tuple[str, str]]:
        """`example` of each row of a batch of dataset columns (`datasets`' batched form)."""
        keys = list(batch)
        return [self.example({k: batch[k][i] for k in keys}) for i in range(len(batch[keys[0]]))]

    def to_config(self) -> dict:
        return {
            "format_profile": self.name,
            "exception_step": self.exception_step,
            "trace_state": self.state,
            "step_order": self.order,
            "code_window": self.window,
        }


def lacks_depth(rows, limit: int = 2000) -> bool:
    """True when dataset rows (the first `limit` of them) were traced before steps carried
    their call depth: no step of theirs has one, yet one of their programs ran a line
    inside a function. Such a build cannot be written in `end` order (every step would
    look like module level)."""
    from itertools import islice

    from codeexecutor.modeling.compact import line_scopes

    called = False
    for row in islice(rows, limit):
        steps = json.loads(row["steps"] or "[]")
        if any(s.get("depth") for s in steps):
            return False
        if not called and row.get("task") != "singleline":
            scopes = line_scopes(row["code"])
            called = any(s["line"] in scopes for s in steps)
    return called


def profile_of(config) -> Profile:
    """The profile a model config names; the released checkpoint's config names none."""
    name = getattr(config, "format_profile", None) or "official"
    step = getattr(config, "exception_step", None)
    return Profile(
        name,
        (name == "exact") if step is None else bool(step),
        getattr(config, "trace_state", None) or "full",
        getattr(config, "step_order", None) or "start",
        getattr(config, "code_window", None) or "head",
    )
