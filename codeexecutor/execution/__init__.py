"""Ground-truth execution: a sandboxed line tracer and its worker pool.

Public API: `execute`, `execute_many`, `ExecutorPool`, `Program`, the records
(`ExecResult`, `ExecStatus`, `ExecError`, `Step`, `Limits`) and `render`.

Attributes are imported lazily: the sandbox worker imports this package and forks per
program, and every module it holds (subprocess, logging and threading install at-fork
handlers) makes each fork slower.
"""

from importlib import import_module

_WHERE = {
    "ExecutorPool": "pool",
    "Program": "pool",
    "compile_program": "pool",
    "execute": "pool",
    "execute_many": "pool",
    "ExecError": "records",
    "ExecResult": "records",
    "ExecStatus": "status",
    "Limits": "records",
    "Step": "records",
    "render": "render",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(f"codeexecutor.execution.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'codeexecutor.execution' has no attribute {name!r}")
