"""Fitting a curriculum's stages into a wall-clock budget (`codeexecutor pretrain --minutes`).

The clock starts as the training process enters its loop, so its set-up and the step's
compile are paid from the budget, however long they take. That start is the run's, not its
first stage's: when the first stage fixes its steps, the time it has taken beyond its
measured steps (`start`: set-up, compile, the first stage's data and the first steps'
slowness) is taken off the top,
and each stage owns a slot of what is left: the stages' shares (`Stage.share`, by default
its part of the recipe's steps) laid end to end after the start (charged to the first
stage, a 12 s compile would leave a 12% share of a two-minute budget a few steps).
Whatever runs in a stage's slot is paid from it: its data's set-up, the mining of its
hardest examples, its steps, and at its end the evaluation and export (`MARGIN` of the
slot goes to steps, the rest to that end). So a stage whose mining or evaluation is slow
takes its own steps' time, never the next stage's: the last stage, CodeNetMut, keeps its
share. Mining is planned too: it may take `MINING_SHARE` of what is left of its stage's
slot when it begins (`mining_seconds`), and scores the examples it reaches in that time (a
recipe's `mine_from` is sized for an hour; a ten-minute budget would otherwise spend a
stage's whole slot scoring). A stage's steps are fixed when its first `WARMUP` steps have
run, from their speed (the first two left out: they pay for the stage's set-up) and the
time to its slot's end. Its learning rate warms up over those first steps whatever the
total, so fixing the total then changes nothing already trained. A stage of another speed
(SingleLine's short rows against CodeNet's long ones) measures its own.

Fixing sets the moment the stage should end (`ends_at`, on the run's clock). At every
log step after that the stage's steps are fitted again to that moment from its recent
speed (`refit`, `RecentSpeed`), moved only when they are off by more than
`TOLERANCE`: a warm-up measured on a busy machine, a device that slows, or a resumed
process's lost time then move the stage's end back to its moment instead of starving or
overrunning the stages after it. Each move rescales the rest of the stage's linear
learning-rate decay.

The plan is written to `plan.json` in the run folder as each stage is fixed or fitted
again, so a resumed run keeps the steps and moments it had and plans only the stages
left, with the time that is left.
"""

from __future__ import annotations

import json
import os
import time

from codeexecutor.atomic import write_json

WARMUP = 20  # steps a stage runs before its total is fixed
MARGIN = 0.92  # of a stage's share of the time that goes to its steps; the rest covers its end and set-ups
TOLERANCE = 0.03  # share of a stage's steps by which a refit may be off before it moves them
RECENT = 6  # log intervals a refit measures the speed over, at the least
MINING_SHARE = 0.25  # of what is left of a stage's slot when its mining begins: the most the mining may take


class Budget:
    def __init__(self, minutes: float, stages: list, out: str, started: float | None = None) -> None:
        self.path = os.path.join(out, "plan.json")
        self.stages = stages
        plan = json.load(open(self.path)) if os.path.exists(self.path) else {}
        self.seconds = plan.get("seconds", minutes * 60.0)
        self.spent = plan.get("spent", 0.0)  # training seconds of earlier processes (a resumed run)
        self.fixed: dict[str, dict] = plan.get("stages", {})
        self.start = plan.get("start")  # seconds of the run's start, laid before the slots; None until measured
        total = sum(st.steps for st in stages)  # the recipe's steps, before a resumed run's fixed ones replace them
        self.shares = plan.get("shares") or {
            st.name: st.share if st.share is not None else st.steps / total for st in stages
        }  # kept: a resumed run's slots do not move
        for st in stages:
            if st.name in self.fixed:
                st.steps = self.fixed[st.name]["steps"]
        self.started = (
            time.perf_counter() if started is None else started
        )  # perf_counter() when this process's clock began

    def elapsed(self) -> float:
        return self.spent + time.perf_counter() - self.started

    def is_fixed(self, stage) -> bool:
        return stage.name in self.fixed

    def slot(self, index: int) -> tuple[float, float]:
        """(start, end) of stage `index`'s part of the run's clock: the shares laid end to
        end over the budget after the run's start (the whole budget until it is measured)."""
        total = sum(self.shares.values())
        before = sum(self.shares[st.name] for st in self.stages[:index]) / total
        origin = min(self.start or 0.0, self.seconds)
        span = self.seconds - origin
        return origin + span * before, origin + span * (before + self.shares[self.stages[index].name] / total)

    def mining_seconds(self, index: int) -> float:
        """The seconds stage `index` may spend mining its hardest examples, from now."""
        return max(0.0, self.slot(index)[1] - self.elapsed()) * MINING_SHARE

    def fix(self, index: int, seconds_per_step: float, done: int) -> int:
        """Stage `index`'s steps, from its measured seconds a step and the `done` steps it
        has run: as many as end its steps at MARGIN of its slot (what ran before them in
        the slot, its set-up and mining, already spent); written to plan.json at once."""
        stage = self.stages[index]
        if self.start is None:  # the run's first fix: what went before the first stage's measured steps
            self.start = round(max(0.0, self.elapsed() - done * seconds_per_step), 2) if index == 0 else 0.0
        start, end = self.slot(index)
        ends_at = start + (end - start) * MARGIN
        left = max(0.0, ends_at - self.elapsed())
        steps = max(done, int(left / max(seconds_per_step, 1e-9)) + done)
        stage.steps = steps
        self.fixed[stage.name] = {
            "steps": steps,
            "planned": steps,
            "seconds_per_step": round(seconds_per_step, 5),
            "fixed_after": done,
            "seconds_left": round(max(0.0, self.seconds - self.elapsed()), 1),
            "slot": [round(start, 2), round(end, 2)],
            "ends_at": round(ends_at, 2),
            "refits": 0,
        }
        self.save()
        return steps

    def refit(self, index: int, seconds_per_step: float, done: int) -> int:
        """Stage `index`'s steps fitted again, after `done` of them, so that at
        `seconds_per_step` it still ends at the moment its fix planned; unchanged while
        within TOLERANCE, never fewer than `done` (a stage past its moment ends now)."""
        stage = self.stages[index]
        plan = self.fixed.get(stage.name)
        if plan is None or "ends_at" not in plan:
            return stage.steps
        left = plan["ends_at"] - self.elapsed()
        steps = done + max(0, int(left / max(seconds_per_step, 1e-9)))
        if left > 0 and abs(steps - stage.steps) <= TOLERANCE * stage.steps:
            return stage.steps
        stage.steps = steps
        plan.update(steps=steps, refits=plan.get("refits", 0) + 1, last_seconds_per_step=round(seconds_per_step, 5))
        self.save()
        return steps

    def save(self) -> None:
        state = {"seconds": self.seconds, "spent": self.elapsed(), "start": self.start, "shares": self.shares}
        write_json(self.path, {**state, "stages": self.fixed})


class RecentSpeed:
    """Seconds a step over the later half of a stage's log intervals since its fix (at
    least the last RECENT of them): steady as the stage goes on, yet following a change of
    speed. Seeded with the step its fix was made at; a stage resumed by a new process
    starts unseeded, so that its start-up is not taken for its speed."""

    def __init__(self, step: int | None = None) -> None:
        self.stamps = [] if step is None else [(step, time.perf_counter())]

    def tick(self, step: int) -> float | None:
        """Stamps `step`; the seconds a step over the window, None with one stamp."""
        self.stamps.append((step, time.perf_counter()))
        first = max(0, min(len(self.stamps) // 2, len(self.stamps) - 1 - RECENT))
        (s0, t0), (s1, t1) = self.stamps[first], self.stamps[-1]
        return (t1 - t0) / (s1 - s0) if s1 > s0 else None


class StepClock:
    """Seconds a step over a stage's warm-up, its first two steps left out."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def tick(self) -> None:
        self.stamps.append(time.perf_counter())

    def seconds_per_step(self) -> float:
        s = self.stamps[2:] if len(self.stamps) > 3 else self.stamps
        return (s[-1] - s[0]) / max(1, len(s) - 1)
