"""The paths a training run falls back on when its process dies, safest last.

Inside one process the step falls back by itself from a compile that fails (training/
step.py). What it cannot survive is its own death: a device fault (an illegal memory
access in a kernel) breaks the CUDA context of the process it happens in, so no retry in
that process can run; a recompile limit under `fullgraph` is an error in the middle of a
stage; the kernel's OOM killer ends it outright. `codeexecutor pretrain` therefore trains
in a child process and, when the child dies, starts another from the last checkpoint on
the next path of `safer_paths`: the tile path compiled (where the device compiles), then
the tile path eagerly. The budget's clock keeps running through the dead child's time
(`spend`), so the stages after it keep their shares of what is left.
"""

from __future__ import annotations

import json
import os

from codeexecutor.atomic import write_json

REFUSAL_FILE = "CODEEXECUTOR_REFUSAL_FILE"  # the variable naming where a training process writes the setting it refused
TILES_COMPILED = "the tile path, compiled where the device compiles"
TILES_EAGER = "the tile path, eager"
PATHS = {TILES_COMPILED: {"attention": "sdpa", "compile": "auto"}, TILES_EAGER: {"attention": "sdpa", "compile": False}}


def safer_paths(cur) -> list[str | None]:
    """The attempts a run of the curriculum `cur` makes: None (as the curriculum asks), then
    each safer path that differs from it."""
    compiled = cur.train.compile
    asked = {"attention": cur.model.attention, "compile": "auto" if compiled is True else compiled}
    return [None] + [name for name, path in PATHS.items() if path != asked]  # true and auto compile alike on a GPU


def on_path(order, path: str | None):
    """The training order of an attempt on `path` (None: as it asks)."""
    return order if path is None else order.on_path(**PATHS[path])


STARTUP = 20.0  # seconds a new training process takes to its loop, where the budget's clock starts (imports, data)


def spend(run: str, seconds: float, budget: float) -> float:
    """Count `seconds` of wall clock (the attempts so far) and the next process's start-up as
    spent in the run's budget of `budget` seconds (plan.json, written where the dead process
    had not written it yet): a killed process did not write its last seconds, and the start
    of the next one is not on the budget's clock either. Returns the seconds left."""
    path = os.path.join(run, "plan.json")
    plan = {"seconds": budget, "spent": 0.0, "stages": {}}
    if os.path.exists(path):
        with open(path) as f:
            plan = json.load(f)
    plan["spent"] = round(max(plan.get("spent", 0.0), seconds + STARTUP), 2)
    os.makedirs(run, exist_ok=True)
    write_json(path, plan)
    return plan["seconds"] - plan["spent"]
