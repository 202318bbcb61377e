"""Records that cross the sandbox boundary: statuses, steps, errors, results and limits.

Everything here is plain data (frozen dataclasses and a str enum) so that results can be
compared, hashed, pickled between processes and written as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codeexecutor.execution.status import ExecStatus


@dataclass(frozen=True)
class Step:
    """One executed line: its 1-based number, the frame's visible variables after it ran
    (name -> rendered value, in definition order), what it printed and its call depth
    (how many of the program's frames were below its own; 0 at module level)."""

    line: int
    state: Mapping[str, str] = field(default_factory=dict)
    output: str = ""
    depth: int = 0

    def to_json(self) -> dict[str, Any]:
        obj = {"line": self.line, "state": dict(self.state), "output": self.output}
        if self.depth:  # absent at module level: a trace without calls has no depth field
            obj["depth"] = self.depth
        return obj


@dataclass(frozen=True)
class ExecError:
    """Why a run did not end normally: exception class (or sandbox event), message and the
    program line where it happened (None when no program line was running)."""

    type: str
    message: str
    line: int | None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "line": self.line}


@dataclass(frozen=True)
class ExecResult:
    status: ExecStatus
    steps: tuple[Step, ...] = ()
    stdout: str = ""
    error: ExecError | None = None
    stderr: str = ""
    reads: tuple | None = None  # stdin reads, when recorded (see codeexecutor.execution.inline)
    fill: Mapping[str, Any] | None = None  # guided execution's needs and uses (see codeexecutor.execution.fill)
    values: tuple | None = None  # value-use events, when recorded (see codeexecutor.execution.value_record)

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form: {"status", "steps", "stdout", "error"}."""
        return {
            "status": self.status.value,
            "steps": [s.to_json() for s in self.steps],
            "stdout": self.stdout,
            "error": self.error.to_json() if self.error else None,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ExecResult:
        err = obj.get("error")
        return cls(
            status=ExecStatus(obj["status"]),
            steps=_steps(obj["steps"]),
            stdout=obj.get("stdout", ""),
            error=ExecError(err["type"], err["message"], err["line"]) if err else None,
            stderr=obj.get("stderr", ""),
            reads=tuple(tuple(r) for r in obj["reads"]) if obj.get("reads") is not None else None,
            fill=obj.get("fill"),
            values=tuple(tuple(v) for v in obj["values"]) if obj.get("values") is not None else None,
        )


def _steps(raw: list) -> tuple[Step, ...]:
    if raw and isinstance(raw[0], list):  # the sandbox's compact form, one check for all
        return tuple([Step(s[0], s[1] or {}, s[2], s[3] if len(s) > 3 else 0) for s in raw])
    return tuple(_step(s) for s in raw)


def _step(s: Any) -> Step:
    if isinstance(s, (list, tuple)):  # the sandbox's compact form: [line, state, output, depth]
        return Step(s[0], s[1] or {}, s[2], s[3] if len(s) > 3 else 0)
    return Step(s["line"], dict(s["state"]), s.get("output", ""), s.get("depth", 0))


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run.

    timeout: CPU seconds of the traced program (default 1 s: docs/sandbox.md).
    wall_timeout: wall-clock seconds before the run is killed; None = timeout + 1 s
        (RLIMIT_CPU does not stop a program that sleeps or blocks).
    memory_mb: address-space limit of the forked child.
    max_steps: executed lines recorded before the run stops with TRACE_LIMIT.
    max_output: bytes of stdout before the run stops with VIOLATION.
    value_limit: characters of one rendered value (see render.py).
    """

    timeout: float = 1.0
    wall_timeout: float | None = None
    memory_mb: int = 1024
    max_steps: int = 1024
    max_output: int = 1 << 20
    value_limit: int = 100

    def __post_init__(self) -> None:
        problems = []
        if not self.timeout > 0:
            problems.append(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.wall_timeout is not None and not self.wall_timeout > 0:
            problems.append(f"wall_timeout must be > 0 seconds, got {self.wall_timeout}")
        if self.memory_mb < 64:
            problems.append(f"memory_mb must be >= 64 (the interpreter needs it), got {self.memory_mb}")
        if self.max_steps < 1:
            problems.append(f"max_steps must be >= 1, got {self.max_steps}")
        if self.max_output < 0 or self.value_limit < 8:
            problems.append("max_output must be >= 0 and value_limit >= 8")
        if problems:
            raise ValueError("invalid sandbox limits: " + "; ".join(problems))

    @property
    def wall(self) -> float:
        return self.wall_timeout if self.wall_timeout is not None else self.timeout + 1.0

    def to_wire(self) -> dict[str, Any]:
        """Plain dict for the sandbox processes (which do not import this module)."""
        return {
            "timeout": self.timeout,
            "wall": self.wall,
            "memory_mb": self.memory_mb,
            "max_steps": self.max_steps,
            "max_output": self.max_output,
            "value_limit": self.value_limit,
        }
