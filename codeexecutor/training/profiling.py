"""A window of training steps under the PyTorch profiler: what a step spends its time on.

    CODEEXECUTOR_PROFILE=30:35 python -m codeexecutor.training --curriculum ...

profiles steps 31 to 35 (after step 30, up to the end of step 35) on rank 0 and writes
OUT/profile.json: the window's wall seconds a step, the device's busy seconds a step (its
kernels' own time: when it is far under the wall time, the accelerator waits for the
host), and the operators that cost most on the host and on the device, as tables.
"""

from __future__ import annotations

import os
import time

from codeexecutor.atomic import write_json

ENV = "CODEEXECUTOR_PROFILE"
ROWS = 25  # operators in each table


def _window(spec: str) -> tuple[int, int]:
    from codeexecutor.errors import ConfigError

    first, sep, last = spec.partition(":")
    if not (sep and first.strip().isdigit() and last.strip().isdigit() and int(first) < int(last)):
        raise ConfigError(f"{ENV}={spec!r} is not a window of steps: write FIRST:LAST, e.g. 30:35")
    return int(first), int(last)


class StepProfiler:
    """`after(step)` at each optimizer step's end: starts the profiler after step FIRST,
    stops it and writes the report after step LAST. Without the variable (or on a rank
    other than 0) it does nothing."""

    def __init__(self, spec: str | None, out: str, rank: int) -> None:
        self.window = _window(spec) if spec else None
        self.active = bool(self.window) and rank == 0
        self.out, self.prof, self.started = out, None, 0.0

    @classmethod
    def from_env(cls, out: str, rank: int) -> StepProfiler:
        return cls(os.environ.get(ENV), out, rank)

    def _sync(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def after(self, step: int) -> None:
        if not self.active:
            return
        first, last = self.window
        if step == first and self.prof is None:
            import torch
            import torch.profiler as tp

            activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self._sync()
            self.prof = tp.profile(activities=activities)
            self.prof.__enter__()
            self.started = time.perf_counter()
        elif step == last and self.prof is not None:
            self._sync()
            wall = time.perf_counter() - self.started
            self.prof.__exit__(None, None, None)
            self._write(self.prof, last - first, wall)
            self.prof, self.active = None, False

    def _write(self, prof, steps: int, wall: float) -> None:
        events = prof.key_averages()

        def own(e, kind: str) -> float:  # an operator's own time in microseconds (the name moved between releases)
            return float(getattr(e, f"self_{kind}_time_total", 0) or 0)

        device = sum(own(e, "device") or own(e, "cuda") for e in events) / 1e6
        report = {
            "steps": steps,
            "wall_seconds_per_step": round(wall / steps, 4),
            "device_busy_seconds_per_step": round(device / steps, 4),
            "device_busy_share": round(device / wall, 4) if wall else None,
            "host_ops_per_step": round(sum(e.count for e in events) / steps),
            "by_host_time": events.table(sort_by="self_cpu_time_total", row_limit=ROWS),
        }
        if device:
            report["by_device_time"] = events.table(sort_by="self_device_time_total", row_limit=ROWS)
        write_json(os.path.join(self.out, "profile.json"), report)
