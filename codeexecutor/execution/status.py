"""ExecStatus on its own: the sandbox child imports it without the dataclass records
(dataclasses pulls in inspect, ~1.4 MB that every fork would copy)."""

import enum


class ExecStatus(str, enum.Enum):  # noqa: UP042  (StrEnum would change str() and format() of a member)
    """How one traced execution ended."""

    OK = "ok"  # ran to the end (or exited with code 0 / None)
    ERROR = "error"  # uncaught exception (or the process died on a signal)
    TIMEOUT = "timeout"  # CPU or wall-clock limit
    MEMORY = "memory"  # uncaught MemoryError under the memory limit
    TRACE_LIMIT = "trace_limit"  # more executed lines than max_steps
    SYNTAX_ERROR = "syntax_error"  # does not compile as Python 3
    NEWER_PYTHON = "newer_python"  # compiles only on a newer interpreter (3.12's type parameters, say)
    VIOLATION = "violation"  # tried something the sandbox forbids (fork, network, writes, ...)
    EXIT = "exit"  # sys.exit with a non-zero code, or os._exit

    def __str__(self) -> str:  # so f"{status}" prints "ok", not "ExecStatus.OK"
        return self.value
