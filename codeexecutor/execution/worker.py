"""A warm sandbox worker: `python -m codeexecutor.execution.worker`.

Started by the pool (pool.py) with a scrubbed environment and PYTHONHASHSEED=0, it
moves itself into an empty network namespace (when running as root), pre-imports the
standard-library modules contest programs use, then serves requests on its stdin and
stdout: for each program it forks a child (sandbox.run_child), waits for the child's
JSON result with a wall-clock deadline, kills the child's process group as a backstop,
removes the per-run scratch dir and answers with a result dict.

Framing: 4-byte big-endian length, then a pickle. Only the trusted parent pickles to
us; what a child sends is parsed as JSON, never unpickled.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import time
import traceback

_real_exit = os._exit  # the sandbox replaces os._exit inside children
GRACE = 0.5  # seconds past the wall limit before the worker kills the child
PREIMPORT = (
    "collections", "itertools", "heapq", "bisect", "functools", "operator", "math", "cmath",
    "re", "string", "fractions", "decimal", "copy", "random", "array", "statistics",
    "typing", "io", "json", "datetime", "dataclasses", "enum", "numbers", "queue",
    "pprint", "textwrap", "unicodedata", "calendar", "time", "abc", "contextlib",
)
_HEADER = struct.Struct(">I")


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _HEADER.pack(len(data)) + data)


def recv(fd: int):
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    data = _read_exact(fd, size)
    if data is None:
        return None
    return pickle.loads(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    parts = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def isolate_network() -> bool:
    """Enter a new, empty network namespace (needs root). True when it worked."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.unshare(0x40000000) == 0  # CLONE_NEWNET
    except Exception:
        ok = False
    # Forget ctypes so that a program's `import ctypes` fires the import audit event.
    for name in ("ctypes", "ctypes._endian", "_ctypes"):
        sys.modules.pop(name, None)
    return ok


def scratch_base() -> str:
    for base in ("/dev/shm", os.environ.get("TMPDIR", ""), "/tmp"):
        if base and os.path.isdir(base) and os.access(base, os.W_OK):
            return base
    return os.getcwd()


class Server:
    def __init__(self, proto_in: int, proto_out: int) -> None:
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.base = scratch_base()
        self.pending_reap: tuple[int, str] | None = None
        self.runs = 0

    def serve(self) -> None:
        while True:
            request = recv(self.proto_in)
            if request is None:
                return
            self.pending_reap = None
            try:
                result = self.run_one(*request)
            except Exception:
                result = _error("SandboxError", traceback.format_exc(limit=5))
            send(self.proto_out, result)
            if self.pending_reap is not None:  # reap after answering: off the caller's critical path
                pid, scratch = self.pending_reap
                os.waitpid(pid, 0)
                shutil.rmtree(scratch, ignore_errors=True)

    def run_one(self, code_bytes: bytes, stdin: bytes, limits, options: dict | None = None) -> dict:
        """Run one program in a forked child. When the child ended normally with a result,
        its reaping and scratch cleanup are left in `pending_reap` for after the reply."""
        self.runs += 1
        scratch = os.path.join(self.base, f"codeexecutor-{os.getpid()}-{self.runs}")
        os.mkdir(scratch, 0o700)
        deferred = False
        try:
            with open(os.path.join(scratch, ".stdin"), "wb") as f:
                f.write(stdin)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child
                try:
                    os.close(r)
                    os.close(self.proto_in)
                    os.close(self.proto_out)
                    from codeexecutor.execution.sandbox import run_child

                    run_child(code_bytes, scratch, limits, w, options)
                finally:
                    _real_exit(70)
            os.close(w)
            data, killed, wstatus = _collect(r, pid, time.monotonic() + limits.wall + GRACE)
            os.close(r)
            result = _parse(data)
            if result is not None and not killed:  # the child wrote its result and is exiting
                self.pending_reap, deferred = (pid, scratch), True
                return result
            if wstatus is None:
                _, wstatus = os.waitpid(pid, 0)
            return _interpret(data, wstatus, killed, limits)
        finally:
            if not deferred:
                shutil.rmtree(scratch, ignore_errors=True)


def _collect(fd: int, pid: int, deadline: float) -> tuple[bytes, bool, int | None]:
    """Read the child's result until EOF, then wait for its exit; kill it at the deadline.

    Returns (data, killed by the deadline, wait status if reaped). A child that sent
    a result is exiting and is not waited for here (the caller reaps it later).
    """
    parts = []
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while time.monotonic() < deadline:
        if poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            parts.append(chunk)
    else:
        _kill(pid)
        return b"".join(parts), True, None
    if parts:
        return b"".join(parts), False, None
    # EOF without a result: the child is exiting, or closed the pipe and runs on: give it until the deadline.
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (old kernel): poll waitpid
        pidfd = None
    try:
        while True:
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            if done:
                return b"".join(parts), False, wstatus
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.0005))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    _kill(pid)
    return b"".join(parts), True, None


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _error(kind: str, message: str, status: str = "error") -> dict:
    return {"status": status, "steps": [], "stdout": "", "error": {"type": kind, "message": message, "line": None}, "stderr": ""}


def _parse(data: bytes) -> dict | None:
    if data:
        try:
            result = json.loads(data)
            if isinstance(result, dict) and "status" in result:
                return result
        except ValueError:
            pass
    return None


def _interpret(data: bytes, wstatus: int, killed: bool, limits) -> dict:
    result = _parse(data)
    if result is not None:
        return result
    if killed:
        return _error("Timeout", f"killed after the wall-clock limit of {limits.wall:g} s", "timeout")
    if os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return _error("Timeout", f"CPU limit of {limits.timeout:g} s ({name})", "timeout")
        return _error(name, f"the program crashed with signal {name}")
    code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else -1
    return _error("SandboxError", f"the run ended (exit code {code}) without a result; did the program close its file descriptors?")


def main() -> None:
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    isolated = isolate_network()
    from codeexecutor.execution.sandbox import SAFE_ENV

    os.environ.clear()  # once per worker; children inherit it
    os.environ.update(SAFE_ENV)
    os.environ["HOME"] = os.environ["TMPDIR"] = base = scratch_base()
    for name in PREIMPORT:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import codeexecutor.execution.sandbox  # noqa: F401  (import once, before forking)
    import codeexecutor.inline_record  # noqa: F401

    gc.freeze()  # keep the imported heap out of the collector: fewer copy-on-write faults per fork
    send(proto_out, {"ready": True, "network_isolated": isolated, "pid": os.getpid()})
    Server(proto_in, proto_out).serve()


if __name__ == "__main__":
    main()
