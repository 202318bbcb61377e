"""Fitting a curriculum's stages into a wall-clock budget (`codeexecutor pretrain --minutes`).

A stage's steps are fixed when its first `WARMUP` steps have run: from their speed (the
first two left out: they pay for the stage's set-up) and the time the training has left,
the stage takes its share of that time (`Stage.share`, by default its part of the
recipe's steps) among itself and the stages after it, less a margin for the stage ends
(export, evaluation) and the next stages' set-up (mining, data). Its learning rate warms
up over those first steps whatever the total, so fixing the total then changes nothing
already trained. A stage of another speed (SingleLine's short rows against CodeNet's
long ones) measures its own. The plan is written to `plan.json` in the run folder as each
stage is fixed, so a resumed run keeps the steps it started with and plans only the
stages left, with the time that is left.
"""

from __future__ import annotations

import json
import os
import time

WARMUP = 20  # steps a stage runs before its total is fixed
MARGIN = 0.92  # of a stage's share of the time that goes to its steps; the rest covers its end and set-ups


class Budget:
    def __init__(self, minutes: float, stages: list, out: str) -> None:
        self.path = os.path.join(out, "plan.json")
        self.stages = stages
        plan = json.load(open(self.path)) if os.path.exists(self.path) else {}
        self.seconds = plan.get("seconds", minutes * 60.0)
        self.spent = plan.get("spent", 0.0)  # training seconds of earlier processes (a resumed run)
        self.fixed: dict[str, dict] = plan.get("stages", {})
        for st in stages:
            if st.name in self.fixed:
                st.steps = self.fixed[st.name]["steps"]
        total = sum(st.steps for st in stages)
        self.shares = {st.name: st.share if st.share is not None else st.steps / total for st in stages}
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return self.spent + time.perf_counter() - self.started

    def is_fixed(self, stage) -> bool:
        return stage.name in self.fixed

    def fix(self, index: int, seconds_per_step: float, done: int) -> int:
        """Stage `index`'s steps, from its measured seconds a step and the `done` steps it
        has run; written to plan.json at once."""
        stage = self.stages[index]
        later = self.stages[index:]
        left = max(0.0, self.seconds - self.elapsed())
        share = self.shares[stage.name] / sum(self.shares[st.name] for st in later)
        steps = max(done, int(left * share * MARGIN / max(seconds_per_step, 1e-9)) + done)
        stage.steps = steps
        self.fixed[stage.name] = {"steps": steps, "seconds_per_step": round(seconds_per_step, 5),
                                  "fixed_after": done, "seconds_left": round(left, 1)}
        self.save()
        return steps

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"seconds": self.seconds, "spent": self.elapsed(), "stages": self.fixed}, f, indent=2)
        os.replace(tmp, self.path)


class StepClock:
    """Seconds a step over a stage's warm-up, its first two steps left out."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def tick(self) -> None:
        self.stamps.append(time.perf_counter())

    def seconds_per_step(self) -> float:
        s = self.stamps[2:] if len(self.stamps) > 3 else self.stamps
        return (s[-1] - s[0]) / max(1, len(s) - 1)
