"""`Session`: a program walked with pdb's actions, each answered by the model.

The program runs for real in the sandbox first (stdin inlined as the model reads it, or a
call appended). The walk then follows the real run: at each action the model is given the
real steps up to the current event and predicts where the action lands (generation/forced.py),
the answer is set beside the real event there, and the walk moves on to the real one. A
program that cannot run here (it reads input that was not given, imports a module this
machine lacks, is refused by the sandbox) is predicted from its start, and the walk follows
the prediction; so does a walk after `set`, which changes the state at the current event.
"""

from __future__ import annotations

import ast

from codeexecutor.debugger.events import (
    ACTIONS,
    Event,
    Frames,
    real_events,
    stack_at,
    target,
    trace_text,
    with_depths,
)
from codeexecutor.errors import UsageError
from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.shipped import default_model

DEFAULT_MODEL = default_model()  # the best shipped trace model (modeling/shipped.py)
NO_REAL_RUN = ("EOFError", "ModuleNotFoundError", "ImportError")  # a run that says nothing of the program


class Session:
    """`Session(source, stdin=..., call=..., model=...)`; `.step()`, `.next()`, `.out()`,
    `.run_to(line)`, `.set(name, value)`, `.back()`, `.real()`; `.state`, `.line`. Each
    action returns a JSON-ready dict: the predicted event, the real one (where the walk is
    real) and whether they agree."""

    def __init__(
        self,
        source: str,
        stdin: str = "",
        call: str | None = None,
        model: str = DEFAULT_MODEL,
        real: bool = True,
        generator=None,
        actions: str | None = None,
        fill: str | None = None,
    ) -> None:
        from codeexecutor.generation.api import cached_generator, prepare
        from codeexecutor.modeling.format import FormatError

        self.source, self.call = source, call
        if call is not None:
            _check_expression(call, "--call")
            source = source.rstrip("\n") + f"\nprint(repr({call}))\n"
        self.code, _, self.notes = prepare(source, stdin)
        self.stdin = stdin  # what the real run reads where the inlining left reads in the code
        self.lines = len(self.code.splitlines())
        self.gen = generator or cached_generator(model)
        # how `next`, `out` and `continue` are asked: imposed on the model's whole trace (the
        # default: it scored higher at equal steps, docs/debugger.md), or as trained tasks (one
        # step after the action's marker), which only a model trained on them can answer
        self.actions = actions or "imposed"
        if self.actions not in ("imposed", "taught"):
            raise UsageError(f"--actions {self.actions}: one of imposed, taught")
        config = getattr(getattr(self.gen, "model", None), "config", None)
        if self.actions == "taught" and getattr(config, "debugger_actions", None) != "taught":
            raise UsageError(
                "--actions taught: this model was not trained on the actions as tasks (its config has no "
                "debugger_actions: taught); drop --actions, or train with a source of `codeexecutor build actions`"
            )
        try:
            self.model_input = self.gen.code_input(self.code, "codenet")
        except FormatError as exc:
            raise UsageError(f"the model cannot read this program: {exc}") from None
        self._note_unseen()
        self.real_run: list[Event] | None = None
        self.fill = fill  # a predictor's name or folder: the real run is guided (docs/guided-execution.md)
        self.injections: list[dict] = []  # the values a guided real run injected
        if real:
            self.real_run, why = self._run()
            if why:
                self.notes.append(f"{why}: the model predicts from the program's start")
        else:
            self.notes.append("no real run asked for (--no-real): the model predicts from the program's start")
        self.path: list[Event] = []  # the events walked so far; the current one is the last
        self.walk_is_real = self.real_run is not None
        self.history: list[tuple[list[Event], bool]] = []
        self.breakpoints: set[int] = set()
        self._first_prediction: list[Event] | None = None

    # -- where the walk is ------------------------------------------------------------------
    @property
    def position(self) -> int:
        return len(self.path) - 1

    @property
    def state(self) -> dict[str, str]:
        return dict(self.path[-1].state) if self.path else {}

    @property
    def line(self) -> int | None:
        return self.path[-1].line if self.path else None

    @property
    def ended(self) -> bool:
        return bool(self.path) and self.path[-1].exception is not None

    # -- the actions ----------------------------------------------------------------------
    def step(self) -> dict:
        return self._act("step")

    def next(self) -> dict:
        return self._act("next")

    def out(self) -> dict:
        return self._act("out")

    def run_to(self, line: int | None = None) -> dict:
        """`continue`: to the next hit of `line`, or of any breakpoint when none is given."""
        lines = {line} if line is not None else set(self.breakpoints)
        if not lines:
            raise UsageError("no breakpoint to continue to: set one with `b LINE`, or give the line (`c 12`)")
        for k in lines:
            self._check_line(k)
        if self.walk_is_real:  # only lines the real run reaches again
            ahead = {e.line for e in self.real_run[self.position + 1 :]}
            if not lines & ahead and not self.real_run[-1].exception:
                shown = ", ".join(map(str, sorted(lines)))
                raise UsageError(f"line {shown} does not run again in the real run: continue to a line that does")
        return self._act("continue", lines)

    def set(self, name: str, value: str) -> dict:
        """Change one variable of the current state; the walk then follows the model alone."""
        if not self.path:
            raise UsageError("nothing has run yet: step to a line first (`s`), then set its variables")
        if self.ended:
            raise UsageError("the program has ended (it raised): go `back` to a line that ran, then set")
        if not name.isidentifier():
            raise UsageError(f"set {name}: not a variable name (write `set NAME = VALUE`)")
        _check_expression(value, f"set {name} =")
        self.history.append((list(self.path), self.walk_is_real))
        last = self.path[-1]
        self.path[-1] = Event(last.line, {**last.state, name: value.strip()}, last.output, last.depth)
        self.walk_is_real = False
        return {"action": "set", "name": name, "value": value.strip(), **self._where(), "real": None}

    def back(self) -> dict:
        if not self.history:
            raise UsageError("nothing to go back to: this is where the session started")
        self.path, self.walk_is_real = self.history.pop()
        return {"action": "back", **self._where()}

    def add_breakpoint(self, line: int) -> dict:
        self._check_line(line)
        if self.real_run is not None and not any(e.line == line for e in self.real_run):
            raise UsageError(f"line {line} never runs in the real run: break on a line that runs")
        self.breakpoints.add(line)
        return {"action": "break", "line": line, "breakpoints": sorted(self.breakpoints)}

    def real(self) -> dict:
        """The real event here beside the walk's, and where the model's own trace from the
        start first parts from the real run (modeling/divergence.py classes)."""
        if self.real_run is None:
            return {"action": "real", "real": None, "note": "no real run of this program: " + "; ".join(self.notes)}
        from codeexecutor.modeling.divergence import classify, steps

        here = self.real_run[self.position] if self.walk_is_real and self.position >= 0 else None
        if self._first_prediction is None:
            self._first_prediction = self._predict([], Frames(self.code), None, None, None, whole=True)[0]
        predicted, real = self._first_prediction, self.real_run
        parted = classify(steps(self._text(predicted)), steps(self._text(real)), self.code)
        out = {"action": "real", **self._where(), "real": here.to_json() if here else None}
        if self.injections:
            out["injections"] = self.injections
        if not self.walk_is_real:
            out["note"] = "the walk follows the model here (after `set`): the real run has no event for it"
        if parted is None:
            out["parted"] = None
        else:
            kind, index = parted
            out["parted"] = {
                "event": index,
                "kind": kind,
                "predicted": predicted[index].to_json() if index < len(predicted) else None,
                "real": real[index].to_json() if index < len(real) else None,
            }
        return out

    # -- inside --------------------------------------------------------------------------
    def _act(self, action: str, lines: set[int] | None = None) -> dict:
        assert action in ACTIONS
        if self.ended:
            return {"action": action, **self._where(), "note": "the program has ended (it raised)"}
        depth = self.path[-1].depth if self.path else 0
        frames = stack_at(self.code, self.path, self.position)
        scoped = len(frames.stack) - 1  # the depth the predicted events are read against
        # taught: one action, from real steps (the given steps of its training); else imposed
        asked = "taught" if self.actions == "taught" and self._can_teach(action, lines) else "imposed"
        if asked == "taught":
            predicted, finished, cut = self._taught(frames, action, lines)
            k = 0 if predicted else None
        else:
            predicted, finished, cut = self._predict(self.path, frames, action, scoped, lines)
            k = landing(predicted, action, scoped, lines)
        out = {"action": action, "asked": asked, "predicted": predicted[k].to_json() if k is not None else None}
        if k is None:
            out["predicted_end"] = "the trace reaches the model's length limit" if cut else "the program ends"
        self.history.append((list(self.path), self.walk_is_real))
        if self.walk_is_real:
            j = landing(self.real_run, action, depth, lines, start=self.position)
            real = self.real_run[j] if j is not None else None
            out["real"] = real.to_json() if real else None
            out["agree"] = bool(real and real.same(predicted[k] if k is not None else None)) or (
                real is None and k is None and finished
            )
            self.path = list(self.real_run[: j + 1]) if j is not None else list(self.real_run)
            if j is None:
                out["real_end"] = "the program ends"
        else:
            out["real"] = None
            if k is not None:
                self.path = self.path + predicted[: k + 1]
        return {**out, **self._where()}

    def inputs_for(self, wanted: str, k: int = 5, candidates: int = 32) -> dict:
        """Inverse execution (debugger/inverse.py): inputs that make this session's call
        return `wanted` (the call's function, its arguments as the example), or its stdin
        of the same shape make the program print it; ranked by the model, the first `k`
        checked in the sandbox."""
        from codeexecutor.debugger.inverse import Tries, inputs_for

        return inputs_for(self.gen, self.source, wanted, self.call, self.stdin or None, Tries(k, candidates))

    def _predict(self, path, frames, action, depth, lines, whole: bool = False):
        """The model's events after `path`, decoded until the action's landing (or the end)."""
        wanted = [] if whole else [(action, depth, lines)]
        return predict(self.gen, self.code, self.model_input, path, frames, wanted)

    def _can_teach(self, action: str, lines: set[int] | None) -> bool:
        """A trained task answers `next`, `out` and a `continue` to one line, from a real walk:
        after `set` or without a real run the walk has no real steps to give, and `step` is
        the whole trace's next step anyway."""
        return action != "step" and len(lines or ()) <= 1 and self.walk_is_real

    def _taught(self, frames, action: str, lines: set[int] | None):
        """The landing as a trained task (debugger/taught.py): ([event] or [], finished, cut)."""
        from codeexecutor.debugger.taught import taught

        line = min(lines) if lines else None
        event, finished, cut = taught(self.gen, self.code, self.model_input, self.path, action, line)
        return (with_depths(self.code, [event], frames) if event else []), finished, cut

    def _text(self, events: list[Event]) -> str:
        return trace_text(self.gen.profile, events, self.code)

    def _run(self) -> tuple[list[Event] | None, str | None]:
        from codeexecutor.execution import ExecStatus, execute

        result = execute(self.code, self.stdin) if self.fill is None else self._guided()
        if result.status in (ExecStatus.OK, ExecStatus.ERROR) and not (
            result.error and result.error.type in NO_REAL_RUN
        ):
            return real_events(list(result.steps), result.error, self.gen.profile.order), None
        if result.error and result.error.type == "EOFError":
            if self.stdin:
                return None, "the program reads more input than was given (EOFError)"
            return None, "the program reads input and none was given (--stdin FILE)"
        if result.error and result.error.type in NO_REAL_RUN:
            return None, f"the program cannot run here ({result.error.type}: {result.error.message})"
        return None, f"the real run ended {result.status}" + (f" ({result.error.type})" if result.error else "")

    def _guided(self):
        """The real run with the values the program lacks injected; they go in the notes."""
        from codeexecutor.generation.fill import guided

        run = guided(self.code, self.stdin, self.fill)
        self.injections = [i.to_json() for i in run.injections]
        if self.injections:
            told = "; ".join(
                f"line {i['line']} {i['use']} {i['name']} as {i['kind']}"
                + ("" if i["value"] is None else f" = {i['value']}")
                for i in self.injections
            )
            self.notes.append(f"the real run was guided ({run.predictor}), injected: {told}")
        return run.result

    def _note_unseen(self) -> None:
        n, unseen = self.gen.encoder.unseen_lines(self.model_input)
        if unseen:
            lines = ", ".join(str(k + 1) for k in unseen[:20]) + (" ..." if len(unseen) > 20 else "")
            self.notes.append(
                f"the program is {n} code tokens and the model reads {self.gen.encoder.code_body}: "
                f"lines {lines} are predicted without being read"
            )

    def crash(self) -> dict:
        """The product's crash verdict for the program (generation/api.py one_verdict): the
        crash detector's where the model has one, else the crash the model's own trace from
        the start ends in."""
        from codeexecutor.generation.api import one_verdict

        detector = getattr(self.gen, "detector", None)
        if detector is not None:
            verdict = detector.predict([self.code])[0]
            error, _ = one_verdict(None, verdict, 0, True)
            return {
                "action": "crash",
                "error": error,
                "crash_probability": round(verdict.probability, 4),
                "verdict": verdict.source,
            }
        if self._first_prediction is None:
            self._first_prediction = self._predict([], Frames(self.code), None, None, None, whole=True)[0]
        last = self._first_prediction[-1] if self._first_prediction else None
        error = {"type": last.exception, "line": last.line} if last is not None and last.exception else None
        return {"action": "crash", "error": error, "crash_probability": None, "verdict": "trace"}

    def _check_line(self, line: int) -> None:
        if not 1 <= line <= self.lines:
            raise UsageError(f"line {line}: the program has lines 1 to {self.lines}")

    def _where(self) -> dict:
        return {
            "position": self.position,
            "line": self.line,
            "state": self.state,
            "walk": "real" if self.walk_is_real else "predicted",
        }


def predict(
    gen, code: str, model_input: str, path: list[Event], frames: Frames, wanted: list[tuple], max_new: int | None = None
):
    """The model's events after the imposed `path` (their depths read from `frames` on), decoded
    until every (action, depth, lines) of `wanted` has landed, or to the trace's end when
    `wanted` is empty, `max_new` tokens at most; (events, finished, cut at a length limit)."""
    from codeexecutor.generation.forced import continue_trace

    prefix = trace_text(gen.profile, path, code)

    def events_of(text: str) -> list[Event]:
        parsed = gen.parse((prefix + " " + text).strip())
        new = [Event(s.line, dict(s.state), s.output) for s in parsed.steps[len(path) :]]
        if parsed.exception:
            line = parsed.exception_line or (new[-1].line if new else 0)
            new.append(Event(line, {}, "", 0, parsed.exception))
        return with_depths(code, new, frames)

    def stop(text: str) -> bool:
        events = events_of(text)
        return bool(wanted) and all(landing(events, a, d, lines) is not None for a, d, lines in wanted)

    rules = gen.rules_apply()  # the state rules where they apply, as `trace` decodes
    if not path and not wanted:  # the model's own whole trace: the batched search, greedy, as below
        (whole,) = gen.generate([model_input], Decoding(beam=1, names=rules, values=rules))
        return events_of(whole.compact or whole.text), whole.finished, not whole.finished
    cont = continue_trace(gen, model_input, prefix, stop, max_new, rules)
    return events_of(cont.text), cont.finished, cont.cut


def landing(events, action: str, depth: int, lines: set[int] | None, start: int = -1) -> int | None:
    if action == "continue":
        hits = [target(events, start, depth, "continue", k) for k in sorted(lines or ())]
        hits = [h for h in hits if h is not None]
        return min(hits) if hits else None
    return target(events, start, depth, action)


def _check_expression(text: str, what: str) -> None:
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise UsageError(f"{what} {text.strip()!r}: not a Python expression (e.g. 3, 'abc', [1, 2], f(4))") from None
