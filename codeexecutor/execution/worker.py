"""A warm sandbox worker: `python -m codeexecutor.execution.worker`.

Started by the pool (pool.py) with a scrubbed environment and PYTHONHASHSEED=0, it
moves itself into an empty network namespace (when running as root), pre-imports the
standard-library modules contest programs use, runs one rehearsal program through the
child's code path (rehearsal.rehearse: what CPython builds on first use is then inherited
instead of built in every child), then serves requests on its stdin and
stdout: for each program it forks a child (sandbox.serve_one), waits for the child's
JSON result with a wall-clock deadline, kills the child's process group as a backstop,
removes the per-run scratch dir and answers with a result dict.

Pre-forking: the worker keeps one child forked in advance, waiting for its program, so
the fork (about 1 ms) and the reaping of the previous child happen while the worker
would otherwise wait for the next request.

Protocol (framing.py frames). Pool -> worker: REQUEST header (wall and CPU seconds, which
the worker needs for its deadline and messages) + the child's request, a pickle of
(code, stdin, limits, options) from the trusted parent that the worker forwards to its
not-yet-running child without decoding. Worker -> pool: b"J" + the child's JSON result
as it came (the pool parses it once; it is never unpickled), or b"P" + a pickled dict
the worker made itself (timeouts, crashes).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pickle
import re
import select
import shutil
import signal
import sys
import time
import traceback

from codeexecutor.execution.framing import REQUEST, recv_bytes, send, send_bytes

_real_exit = os._exit  # the sandbox replaces os._exit and os.close (see sandbox.prepare_zygote)
_close = os.close
serve_one = None  # sandbox.serve_one, bound by main() before the first fork
GRACE = 0.5  # seconds past the wall limit before the worker kills the child
# What contest programs import (counted on the 2,901 shared AtCoder programs: sys 266,
# math 116, collections 110, itertools 86, bisect 45, fractions 33, functools 22, heapq 21,
# numpy 13, re 13, operator 12, typing 9, string 4, datetime/copy/queue 2, decimal 1).
# A pre-imported module costs every fork only the page-table entries of its heap; for
# these standard-library modules that is not measurable (bench: fork + exit 0.55 ms either
# way), so the programs that use them no longer pay 1-10 ms of import each.
# Left out on purpose: `random` (it re-seeds from the OS in every forked child; see
# sandbox._SeededRandomFinder), `queue` (imports threading, whose at-fork hooks run in
# every child) and numpy (+0.3 ms a fork: programs importing it go to a worker started
# with `--flavor numpy` instead; see FLAVORS and pool.flavor_of).
PREIMPORT = (
    "collections",
    "itertools",
    "heapq",
    "bisect",
    "functools",
    "operator",
    "math",
    "fractions",
    "decimal",
    "typing",
    "string",
    "datetime",
    "copy",
)
# Extra modules a worker of each flavor pre-imports (the pool routes programs by them).
# `science`: scipy's submodules contest programs use and sympy, whose imports alone cost
# 0.3 to 0.7 s of CPU in a fresh child: paid once by the worker, they no longer count
# against a program's 1-second CPU limit (a loaded machine pushed some past it).
FLAVORS = {
    "base": (),
    "numpy": ("numpy",),
    "science": (
        "numpy",
        "scipy",
        "scipy.sparse",
        "scipy.sparse.csgraph",
        "scipy.special",
        "scipy.optimize",
        "scipy.linalg",
        "scipy.integrate",
        "scipy.interpolate",
        "scipy.stats",
        "sympy",
    ),
}


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
        self.base = os.path.realpath(scratch_base())
        # Scratch dirs are named by this worker's pid and start time (pids are reused:
        # pid_max is often 32768, and every run is a process).
        self.prefix = os.path.join(self.base, f"codeexecutor-{os.getpid()}-{time.time_ns()}-")
        self.runs = 0
        self.ready: tuple[int, int, int, str] | None = None  # pid, request fd, result fd, scratch
        self.pending_reap: tuple[int, str] | None = None

    def serve(self) -> None:
        try:
            while True:
                if self.ready is None:
                    try:
                        self.ready = self._spawn()
                    except (OSError, RuntimeError):
                        pass  # tried again for the next request, which gets the error
                request = recv_bytes(self.proto_in)
                if request is None:
                    return
                try:
                    wall, cpu = REQUEST.unpack_from(request)
                    result = self.run_one(memoryview(request)[REQUEST.size :], wall, cpu)
                except Exception:
                    result = _error("SandboxError", traceback.format_exc(limit=5))
                if isinstance(result, bytes):
                    send_bytes(self.proto_out, b"J" + result)
                else:
                    send_bytes(self.proto_out, b"P" + pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                self._reap()
        finally:
            self._discard_ready()

    def _spawn(self) -> tuple[int, int, int, str]:
        """Fork a child that prepares itself and waits for one program."""
        scratch = self._new_scratch()
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 70
            try:
                for fd in (req_w, res_r, self.proto_in, self.proto_out):
                    _close(fd)
                serve_one(req_r, res_w, scratch)  # returns only if no program came
                # This worker is shutting down (it removes the dir too) or was killed (then
                # nobody else would: see remove_stale_scratch for what is still left).
                _remove_scratch(scratch)
                code = 0
            finally:
                _real_exit(code)
        _close(req_r)
        _close(res_w)
        return pid, req_w, res_r, scratch

    def _new_scratch(self) -> str:
        """A new, empty, private scratch dir; a name that exists (left by someone else)
        is skipped, never reused."""
        for _ in range(100):
            self.runs += 1
            scratch = f"{self.prefix}{self.runs}"
            try:
                os.mkdir(scratch, 0o700)
                return scratch
            except FileExistsError:
                continue
        raise RuntimeError(f"cannot create a scratch dir named {self.prefix}N in {self.base}")

    def _reap(self) -> None:
        if self.pending_reap is not None:
            pid, scratch = self.pending_reap
            self.pending_reap = None
            os.waitpid(pid, 0)
            _remove_scratch(scratch)

    def _discard_ready(self) -> None:
        if self.ready is not None:
            pid, req_w, res_r, scratch = self.ready
            self.ready = None
            _close(req_w)  # the waiting child reads EOF and exits
            _close(res_r)
            os.waitpid(pid, 0)
            _remove_scratch(scratch)
        self._reap()

    def run_one(self, request, wall: float, cpu: float) -> dict | bytes:
        """Run one program (`request`: the child's frame) in the waiting child. When the
        child ended normally with a result, its reaping and scratch cleanup are left in
        `pending_reap` for after the reply."""
        pid, req_w, res_r, scratch = self.ready or self._spawn()
        self.ready = None
        deferred = False
        try:
            try:
                send_bytes(req_w, request)
            except BrokenPipeError:
                pass  # the child died before its program: reported below from its exit status
            _close(req_w)
            data, killed, wstatus = _collect(res_r, pid, time.monotonic() + wall + GRACE)
            _close(res_r)
            if data.startswith(b'{"status":') and data.endswith(b"}") and not killed:
                # The child wrote its (JSON) result and is exiting: pass the bytes on as they
                # are (the parent parses them once) and reap the child after replying.
                self.pending_reap, deferred = (pid, scratch), True
                return data
            if wstatus is None:
                _, wstatus = os.waitpid(pid, 0)
            return _interpret(data, wstatus, killed, wall, cpu)
        finally:
            if not deferred:
                _remove_scratch(scratch)


_STALE = re.compile(r"codeexecutor-(\d+)-")


def remove_stale_scratch(base: str) -> int:
    """Remove the scratch dirs in `base` that this user's workers left behind when they
    were killed (their pid no longer runs). Returns how many were removed."""
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        match = _STALE.match(entry.name)
        if not match:
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(match.group(1)), 0)
            continue  # that pid runs (its worker, or a process that reused the pid)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
        except (OSError, ValueError, OverflowError):
            continue
    return removed


def _remove_scratch(scratch: str) -> None:
    """Remove a run's scratch dir: the usual case (only the child's .fd1 left) without
    walking it; anything the program wrote there by shutil.rmtree."""
    try:
        os.unlink(os.path.join(scratch, ".fd1"))
    except OSError:
        pass
    try:
        os.rmdir(scratch)
    except OSError:
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
            _close(pidfd)
    _kill(pid)
    return b"".join(parts), True, None


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _error(kind: str, message: str, status: str = "error") -> dict:
    return {
        "status": status,
        "steps": [],
        "stdout": "",
        "error": {"type": kind, "message": message, "line": None},
        "stderr": "",
    }


def _parse(data: bytes) -> dict | None:
    if data:
        try:
            result = json.loads(data)
            if isinstance(result, dict) and "status" in result:
                return result
        except ValueError:
            pass
    return None


def _interpret(data: bytes, wstatus: int, killed: bool, wall: float, cpu: float) -> dict:
    result = _parse(data)
    if result is not None:
        return result
    if killed:
        return _error("Timeout", f"killed after the wall-clock limit of {wall:g} s", "timeout")
    if os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return _error("Timeout", f"CPU limit of {cpu:g} s ({name})", "timeout")
        return _error(name, f"the program crashed with signal {name}")
    code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else -1
    return _error(
        "SandboxError",
        f"the run ended (exit code {code}) without a result; did the program close its file descriptors?",
    )


_FILLERS: list = []  # see fill_free_blocks
_STATS_ROW = re.compile(rb"^\s*(\d+)\s+(\d+)\s+\d+\s+\d+\s+(\d+)\s*$")


def free_blocks() -> dict[int, int]:
    """Free blocks of CPython's small-object allocator per block size, read from the table
    that `sys._debugmallocstats()` writes to fd 2 (empty if that table cannot be read)."""
    read, write = os.pipe()
    saved = os.dup(2)
    try:
        os.dup2(write, 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
    except (AttributeError, OSError):
        return {}
    finally:
        _close(saved)
        _close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    _close(read)
    sizes = {}
    for line in b"".join(chunks).splitlines():
        row = _STATS_ROW.match(line)
        if row:
            _, size, avail = map(int, row.groups())
            sizes[size] = avail
    return sizes


def fill_free_blocks() -> list:
    """Occupy the free blocks that the worker's imports left scattered through the pages of
    CPython's small-object allocator, with objects the worker keeps (returned).

    A child's new objects then go to fresh pages, many to a page, instead of into those
    holes, each in a page the child shares with the worker (one copy-on-write fault per
    page). Costs no memory that is not already resident. Measured on the real programs
    of bench_exec: 5% fewer page faults, about 3% more programs per second.
    """
    keep: list = []
    # 16-byte blocks: the item arrays of one-element lists (the lists go elsewhere).
    keep.extend([None] for _ in range(free_blocks().get(16, 0)))
    for size, avail in free_blocks().items():  # read again: those lists took larger blocks
        if size == 32:
            keep.extend(float(i) + 0.5 for i in range(avail))  # a float is 24 bytes
        elif size >= 48:
            keep.extend(bytes(size - 33) for _ in range(avail))  # bytes: 33 + length
    return keep


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    flavor = argv[argv.index("--flavor") + 1] if "--flavor" in argv else "base"
    if flavor not in FLAVORS:
        raise SystemExit(f"worker: unknown flavor {flavor!r} (one of {', '.join(FLAVORS)})")
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    isolated = isolate_network()
    if sys.path and sys.path[0] in ("", os.getcwd()):  # -m put the working dir ("/") first: not a package root
        del sys.path[0]
    import site  # the worker runs with -S; take only the builtins site adds (exit, quit, help, ...)

    site.setquit()
    site.setcopyright()
    site.sethelper()
    from codeexecutor.execution.sandbox import SAFE_ENV

    os.environ.clear()  # once per worker; children inherit it
    os.environ.update(SAFE_ENV)
    os.environ["HOME"] = os.environ["TMPDIR"] = scratch_base()
    import codeexecutor.execution.inline_record  # noqa: F401
    import codeexecutor.execution.sandbox as sandbox  # import once, before forking

    sandbox.prepare_zygote()  # the seeded-random finder is in place before any import below
    loaded = []
    for name in PREIMPORT + FLAVORS[flavor]:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            pass
    global serve_one
    serve_one = sandbox.serve_one
    server = Server(proto_in, proto_out)
    remove_stale_scratch(server.base)
    from codeexecutor.execution.rehearsal import rehearse

    rehearsed = rehearse()  # the child's code path, run once here (see its docstring)
    gc.collect()
    global _FILLERS
    _FILLERS = fill_free_blocks()
    gc.freeze()  # keep the imported heap out of the collector: fewer copy-on-write faults per fork
    send(
        proto_out,
        {
            "ready": True,
            "network_isolated": isolated,
            "pid": os.getpid(),
            "flavor": flavor,
            "preimported": loaded,
            "rehearsed": rehearsed,
            "scratch_prefix": server.prefix,
            "unprivileged_children": sandbox.CAN_DROP,
        },
    )
    server.serve()


if __name__ == "__main__":
    main()
