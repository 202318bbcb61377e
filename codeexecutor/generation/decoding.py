"""How a trace is decoded: one value made once (from the command line, or by a caller) and
handed whole from `trace`, `evaluate`, `rerank` and the benchmarks down to the search
(`TraceGenerator.generate`); the debugger and REval make theirs from the model (greedy,
the rules where they apply).

A field left `None` is the model's own default, resolved against the loaded model by
`resolved`: the beam is 10 for the released checkpoint (its inference) and greedy for our
own trace formats; the state rules are on where they apply (our formats, where they cut
fewer traces at the length cap at no measured cost) and off for the release's, whose
checkpoint then generates what the release's inference does. `RELEASE` is the released
checkpoint's decoding spelled out: a beam of 10 and no rules.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from typing import Literal

from codeexecutor.errors import UsageError

ExceptionAt = Literal["step", "end"]
EXCEPTION_AT = ("step", "end")


@dataclass(frozen=True)
class Decoding:
    beam: int | None = None  # hypotheses kept (None: 10 for the released checkpoint, else greedy)
    max_length: int | None = None  # tokens generated at most, </s> included (None and cap: max_trace_length)
    names: bool | None = None  # states name only the code's identifiers (generation/constraints.py)
    values: bool | None = None  # a value at most as long as the tracer renders one
    exception_bias: float = 0.0  # added to `<exception>` at step ends (generation/verdict.py)
    exception_at: ExceptionAt = "step"  # "end": the bias acts only where the trace would end
    length_penalty: float = (
        0.0  # finished traces ranked by log-probability / ((5 + length) / 6) ** A (0: the release's)
    )

    def __post_init__(self) -> None:
        if (self.beam is not None and self.beam < 1) or (self.max_length is not None and self.max_length < 1):
            raise UsageError("--beam and --max-length must be >= 1")
        if self.length_penalty < 0:
            raise UsageError("--length-penalty must be >= 0 (0 is the release's ranking; 1 divides by the length)")
        if self.exception_at not in EXCEPTION_AT:
            raise UsageError(f"--exception-at {self.exception_at}: one of {', '.join(EXCEPTION_AT)}")

    @classmethod
    def from_args(cls, args, rules_default: bool | None = None) -> Decoding:
        """The decoding a command line asks for (`--beam`, `--max-length`, `--constrain-names`,
        `--constrain-values`, `--exception-bias`, `--exception-at`, `--length-penalty`; each
        optional). A rule flag left out is `rules_default` (None: where the rules apply)."""

        def flag(name: str):
            value = getattr(args, name, None)
            return rules_default if value is None else bool(value)

        return cls(
            beam=getattr(args, "beam", None),
            max_length=getattr(args, "max_length", None),
            names=flag("constrain_names"),
            values=flag("constrain_values"),
            exception_bias=getattr(args, "exception_bias", 0.0) or 0.0,
            exception_at=getattr(args, "exception_at", None) or "step",
            length_penalty=getattr(args, "length_penalty", 0.0) or 0.0,
        )

    def resolved(self, generator) -> Decoding:
        """Every `None` field made the loaded model's default (see the module's docstring)."""
        rules = generator.rules_apply()
        return replace(
            self,
            beam=default_beam(generator) if self.beam is None else self.beam,
            names=rules if self.names is None else self.names,
            values=rules if self.values is None else self.values,
        )

    def rules(self) -> dict:
        """The fields that decide an answer beyond the beam and the length cap, as a report
        and an answers journal record them."""
        d = asdict(self)
        return {k: d[k] for k in ("names", "values", "exception_bias", "exception_at", "length_penalty")}


def default_beam(generator) -> int:
    """The beam when none is given: 10 for the released checkpoint, as its inference; greedy
    for our own trace formats, whose beam of 10 stops traces early (experiments/NOTEBOOK.md)."""
    return 10 if generator.profile.official else 1


def decoding_arguments(p, beam: int | None = 10) -> None:
    """The decoding options `trace` and `evaluate` share (argparse); `beam`: the default
    beam size (None: the model's, `Decoding.resolved`)."""
    p.add_argument(
        "--beam",
        type=int,
        default=beam,
        help="beam size (1 is greedy; the release: 10"
        + ("" if beam else "; default: 1 for our own trace formats, 10 for the released checkpoint")
        + ")",
    )
    p.add_argument(
        "--max-length", type=int, help="trace tokens to generate at most (default and cap: the model's, 768)"
    )
    p.add_argument(
        "--constrain-names",
        action=argparse.BooleanOptionalAction,
        help="states may only name the "
        "program's identifiers (stops a small model's name loops; generation/constraints.py; default: on in "
        "`trace` for our own trace formats, off for the release's and in `evaluate`)",
    )
    p.add_argument(
        "--constrain-values",
        action=argparse.BooleanOptionalAction,
        help="a value ends at the tracer's "
        "length limit (100 characters, then '...'; stops growing-value loops; default as --constrain-names)",
    )
    p.add_argument(
        "--exception-bias",
        type=float,
        default=0.0,
        metavar="B",
        help="favour <exception> by B nats where a step may end, so that a model that ranks a crash second "
        "reports it (not in the release's decoding; generation/verdict.py)",
    )
    p.add_argument(
        "--exception-at",
        choices=("step", "end"),
        default="step",
        help="where the bias acts: every step end, or only where the trace would end (</s>)",
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        default=0.0,
        metavar="A",
        help="rank the beam's finished traces by log-probability over ((5 + length) / 6) ** A, so that a "
        "trace is not preferred for stopping early (not in the release's decoding; default 0)",
    )


MODEL_DEFAULTS = Decoding()  # every field the loaded model's default: how `trace` decodes
UNRULED = Decoding(names=False, values=False)  # the model's beam, no state rules: how `evaluate` decodes
RELEASE = Decoding(beam=10, names=False, values=False)  # the released checkpoint's inference
GREEDY = Decoding(beam=1, names=False, values=False)  # greedy, no rules: how training and a GPU lease score
