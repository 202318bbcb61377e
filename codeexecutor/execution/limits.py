"""The resource limits and timers of one sandboxed run, applied in the child."""

from __future__ import annotations

import math
import resource
import signal

# Bound before the sandbox replaces the program-facing versions (sandbox.prepare_zygote).
_setitimer = signal.setitimer


class WireLimits:
    """The limits of one run as the worker sends them (records.Limits.to_wire)."""

    __slots__ = ("timeout", "wall", "memory_mb", "max_steps", "max_output", "value_limit")

    def __init__(self, d: dict) -> None:
        for name in self.__slots__:
            setattr(self, name, d[name])


def apply_limits(limits: WireLimits) -> None:
    """Address space, CPU seconds (a precise profiling timer, and RLIMIT_CPU in whole
    seconds as the backstop), file size, no core dumps, and the wall-clock timer."""
    cpu = math.ceil(limits.timeout) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem + (64 << 20)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _setitimer(signal.ITIMER_REAL, limits.wall)
    _setitimer(signal.ITIMER_PROF, limits.timeout)


def stop_timers() -> None:
    _setitimer(signal.ITIMER_REAL, 0)
    _setitimer(signal.ITIMER_PROF, 0)


def lift_memory_limit() -> None:
    """Room to build the result, even after a memory bomb."""
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    except (ValueError, OSError):
        pass
