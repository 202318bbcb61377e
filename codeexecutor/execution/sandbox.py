"""Child side of the sandbox: a pre-forked child that runs one program under the tracer.

Program-independent setup happens once, in the worker, before it forks any child
(`prepare_zygote`): the run object with its output captures and tracer, signal handlers,
the patches that keep the program from exiting around the result pipe, closing it,
starting threads or touching the timers, and an audit hook that ends the run with
VIOLATION on process creation, signals to other processes, sockets, ctypes, tracing
changes and file writes outside the scratch dir. All of it stays inert in the worker
(`_Run.active` is false there) and every forked child starts from a pristine copy, so a
child does not pay for building it (each object a child creates or first writes costs
it a copy-on-write page fault). For the same reason the worker then runs one program
through the child's code path itself (`rehearse`), on a throwaway run.

The worker then forks a child in advance and calls `serve_one`. The child:

1. without waiting for a program: activates the run, puts itself in its own process
   group (the worker kills the group as a backstop) and points fd 1 at a file in its
   per-run scratch dir (fd 2 stays the worker's /dev/null);
2. receives its program (code, stdin, limits, options): points fd 0 at the program's input
   (so `open(0)` and `os.read(0, n)` work), sets resource limits (address space, CPU
   seconds, file size, no core dumps) and the CPU and wall-clock timers;
3. runs the program under the tracer and writes one JSON result to the result pipe.

Every way out (normal end, uncaught exception, timer, step limit, output flood,
violation, `os._exit`) goes through `_Run.finish`, which the program cannot catch.
The environment was scrubbed once by the worker; `random` (and `numpy.random`) are
seeded with 0 when the program imports them.
"""

from __future__ import annotations

import _thread
import builtins
import io
import json
import marshal
import math
import os
import posix
import resource
import signal
import sys
import types

from codeexecutor.execution.status import ExecStatus

try:
    import orjson
except ImportError:  # optional: json does the same, slower
    orjson = None
from codeexecutor.execution.tracer import PROGRAM_FILENAME, Tracer

SAFE_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# Audit events that end the run with VIOLATION whatever their arguments.
BLOCKED_EVENTS = frozenset(
    {
        "os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
        "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill",
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyaddr", "socket.sendto",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
        "ctypes.call_function", "ctypes.string_at", "ctypes.set_errno",
        "sys.settrace", "sys.setprofile", "_thread.start_new_thread",
        "os.chroot", "os.setuid", "os.setgid", "os.setsid", "os.setpgid",
        "resource.setrlimit", "resource.prlimit", "sys.addaudithook", "syslog.openlog",
        "os.add_dll_directory", "pty.spawn", "webbrowser.open",
    }
)
# Audit events that modify the file system at their first (and second) path argument.
PATH_EVENTS = frozenset(
    {
        "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
        "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "shutil.move",
        "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree",
        "os.setxattr", "os.removexattr", "os.mkfifo", "os.mknod",
    }
)
BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Bound before run_child replaces the program-facing versions.
_setitimer = signal.setitimer
_signal = signal.signal


class OutputSink(io.RawIOBase):
    """Binary sink under a write-through TextIOWrapper: records everything written,
    keeps what the tracer has not attached to a step yet in `pending`, and calls
    `on_overflow` once the total exceeds `cap` bytes; if that returns, bytes past the
    cap are dropped."""

    def __init__(self, cap: int, on_overflow) -> None:
        super().__init__()
        self.chunks: list[bytes] = []
        self.pending: list[bytes] = []
        self.size = 0
        self.cap = cap
        self.on_overflow = on_overflow

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytes(b)
        self.size += len(data)
        if self.size > self.cap:
            keep = len(data) - (self.size - self.cap)
            if keep > 0:
                self.chunks.append(data[:keep])
                self.pending.append(data[:keep])
            self.size = self.cap
            self.on_overflow()
            return len(data)
        self.chunks.append(data)
        self.pending.append(data)
        return len(data)

    def take(self) -> str:
        text = b"".join(self.pending).decode("utf-8", "replace")
        self.pending.clear()
        return text

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


class WireLimits:
    """The limits of one run as the worker sends them (records.Limits.to_wire)."""

    __slots__ = ("timeout", "wall", "memory_mb", "max_steps", "max_output", "value_limit")

    def __init__(self, d: dict) -> None:
        for name in self.__slots__:
            setattr(self, name, d[name])


class _Run:
    """State of the one run of a child process.

    Built once in the worker (see `prepare_zygote`) and inherited by every child, which
    calls `attach`; until then `active` is false and every way out is refused, so that
    nothing the worker itself does can trigger a run's exit.
    """

    def __init__(self) -> None:
        self.active = False
        self.result_fd = RESULT_FD
        self.scratch = ""
        self.fd1_inode = -1
        self.limits: WireLimits | None = None
        self.finishing = False
        self.guard_on = False
        self.real_exit = _REAL_EXIT
        self.stdout = OutputSink(1 << 20, self._on_flood)
        self.stderr = OutputSink(64 * 1024, lambda: None)  # first 64 KiB kept; never an error
        self.stdout_text = io.TextIOWrapper(self.stdout, encoding="utf-8", errors="replace", write_through=True)
        self.stderr_text = io.TextIOWrapper(self.stderr, encoding="utf-8", errors="replace", write_through=True)
        # Over fd 0, which each child points at its program's input before the run.
        self.stdin_text = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding="utf-8", errors="replace")
        self.tracer = Tracer(1024, self.stdout, self._on_step_limit)
        self.recorder = None
        self.kept: tuple = ()

    def attach(self, result_fd: int, scratch: str) -> None:
        """In the child: take over the result pipe and the scratch dir (already a real path)."""
        os.dup2(result_fd, RESULT_FD)  # out of the program's way; os.close refuses it
        _real_close(result_fd)
        self.scratch = scratch
        self.active = True

    def configure(self, limits: WireLimits) -> None:
        self.limits = limits
        self.stdout.cap = limits.max_output
        self.tracer.configure(limits.max_steps, limits.value_limit)

    def start(self, code_bytes: bytes, stdin: bytes, limits: WireLimits, options: dict) -> None:
        """Run the program; never returns."""
        try:
            _prepare_run(self, stdin, limits)
            if options.get("record_reads"):
                from codeexecutor.inline_record import install_recorder

                self.recorder = install_recorder()
            code = marshal.loads(code_bytes)
            module = types.ModuleType("__main__")
            module.__dict__["__builtins__"] = builtins
            module.__file__ = PROGRAM_FILENAME
            sys.modules["__main__"] = module
            sys.argv = ["main.py"]
        except BaseException as exc:  # setup failed: report it rather than die silently
            self.finish(ExecStatus.ERROR, "SandboxSetupError", f"{type(exc).__name__}: {exc}")
        if options.get("trace", True):
            sys.settrace(self.tracer)
        self.guard_on = True
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            if exc.code is None or exc.code == 0:
                self.finish(ExecStatus.OK)
            self.finish(ExecStatus.EXIT, "SystemExit", str(exc.code), _program_line(exc))
        except MemoryError as exc:
            self.finish(ExecStatus.MEMORY, "MemoryError", str(exc), _program_line(exc))
        except BaseException as exc:
            self.finish(ExecStatus.ERROR, type(exc).__name__, _message(exc), _program_line(exc))
        self.finish(ExecStatus.OK)

    # -- ways out ------------------------------------------------------------------
    def finish(self, status: ExecStatus, error_type: str | None = None, message: str = "", line=None):
        """Write the one result of this run to the result pipe and exit. Never returns."""
        if not self.active:  # in the worker: nothing here may end the process
            raise RuntimeError(f"sandbox run is not active ({status.value}: {error_type} {message})")
        if self.finishing:  # re-entered (a signal during finish): the first call completes
            return
        self.finishing = True
        try:
            payload = self._payload(status, error_type, message, line)
        except BaseException as exc:  # never leave without a result
            payload = {"status": ExecStatus.ERROR.value, "steps": [], "stdout": "", "stderr": "",
                       "error": {"type": "SandboxError", "message": f"building the result failed: {exc!r}", "line": None}}
        data = _to_json(payload)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.result_fd, view) :]
        except OSError:
            pass
        self.real_exit(0)

    def _payload(self, status: ExecStatus, error_type: str | None, message: str, line) -> dict:
        self._stop()
        return self._result(status, error_type, message, line)

    def _stop(self) -> None:
        """Timers and tracing off, memory limit lifted (room to build the result)."""
        _setitimer(signal.ITIMER_REAL, 0)
        _setitimer(signal.ITIMER_PROF, 0)
        try:
            # Not needed for correctness (the tracer ignores our own frames); fails when we
            # are inside the audit hook of the program's own sys.settrace call.
            sys.settrace(None)
        except RuntimeError:
            pass
        try:  # room for building the result even after a memory bomb
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        except (ValueError, OSError):
            pass

    def _result(self, status: ExecStatus, error_type: str | None, message: str, line) -> dict:
        tracer = self.tracer
        if line is None and error_type is not None:
            line = tracer.current_line()
        tracer.close()
        for step in tracer.steps:
            if step[1] is None:
                step[1] = {}
        return {
            "status": status.value,
            "steps": tracer.steps,
            "stdout": self.stdout.text() + _read_fd1(os.path.join(self.scratch, ".fd1"), self.fd1_inode),
            "error": None if error_type is None else {"type": error_type, "message": message[:1000], "line": line},
            "stderr": self.stderr.text()[-4000:],
            "reads": self.recorder.reads if self.recorder is not None else None,
        }

    def _on_step_limit(self) -> None:
        self.finish(ExecStatus.TRACE_LIMIT)

    def _on_flood(self) -> None:
        self.finish(ExecStatus.VIOLATION, "OutputLimitExceeded", f"program wrote more than {self.limits.max_output} bytes to stdout")

    def _on_alarm(self, signum, frame) -> None:
        self.finish(ExecStatus.TIMEOUT, "Timeout", f"wall-clock limit of {self.limits.wall:g} s")

    def _on_cpu(self, signum, frame) -> None:
        self.finish(ExecStatus.TIMEOUT, "Timeout", f"CPU limit of {self.limits.timeout:g} s")

    def _fake_exit(self, code=0) -> None:
        self.finish(ExecStatus.EXIT, "os._exit", str(code))

    def violation(self, what: str) -> None:
        self.finish(ExecStatus.VIOLATION, "SandboxViolation", what)

    # -- the guard -------------------------------------------------------------------
    def audit(self, event: str, args: tuple) -> None:
        if not self.guard_on or self.finishing:
            return
        if event in BLOCKED_EVENTS:
            if event.startswith("ctypes.") and not _from_program():
                return  # a library (numpy imports ctypes) rather than the program
            self.violation(event)
        elif event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not self._inside(path):
                self.violation(f"write outside the scratch dir: {path!r}")
        elif event in PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not self._inside(path):
                    self.violation(f"{event} outside the scratch dir: {path!r}")
        elif event == "import":
            if args[0] in BLOCKED_IMPORTS and _from_program():
                self.violation(f"import {args[0]}")

    def _inside(self, path) -> bool:
        if isinstance(path, int):
            return path in (1, 2)  # open(1, "w") is stdout
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return real == self.scratch or real.startswith(self.scratch + os.sep)


def _from_program() -> bool:
    """Is the innermost frame outside the import machinery and ctypes the program's own?"""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or f"{os.sep}ctypes{os.sep}" in name):
            return name == PROGRAM_FILENAME
        frame = frame.f_back
    return False


def _read_fd1(path: str, inode: int) -> str:
    """What the program wrote to fd 1 directly (os.write(1, ...), open(1, 'w')): read
    through fd 1 itself while it is still the scratch file, else from the file."""
    try:
        st = os.fstat(1)
        if st.st_ino == inode:
            if st.st_size == 0:
                return ""
            return os.pread(1, min(st.st_size, 1 << 20), 0).decode("utf-8", "replace")
    except OSError:
        pass
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return ""


def _to_json(payload: dict) -> bytes:
    """The result as UTF-8 JSON: orjson (20x faster than json on a 1,024-step trace);
    json for what orjson refuses (lone surrogates, ints over 64 bits) or without it."""
    if orjson is not None:
        try:
            return orjson.dumps(payload)
        except (TypeError, ValueError):
            pass
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace")


def _refuse(run: _Run, what: str):
    def refused(*args, **kwargs):
        run.violation(what)

    return refused


RESULT_FD = 1023  # out of the way of the fds a program opens


def serve_one(request_fd: int, result_fd: int, scratch: str) -> None:
    """Entry point of a pre-forked child; returns only when the worker closes the request
    pipe without sending a program (the caller then cleans up and exits).

    `scratch` is the real path of this run's scratch dir. What does not depend on the
    program is done first, while the worker has no request for this child yet (so it
    costs no latency); then the child waits for its program (code, stdin, limits, options),
    applies the limits and runs it.

    options: {"trace": False} runs without the tracer (for timing and verification);
    {"record_reads": True} records every stdin read with the program span that made it
    (see codeexecutor.inline).
    """
    from codeexecutor.execution.framing import recv

    run = prepare_zygote()  # made by the worker before it forked; here only when called alone
    setup_error = None
    try:
        run.attach(result_fd, scratch)
        _prepare_child(run, scratch)
    except BaseException as exc:  # reported once there is a request to answer
        setup_error = exc
    request = recv(request_fd)
    _real_close(request_fd)
    if request is None:  # no program: the worker is shutting down, or was killed
        return
    code_bytes, stdin, limits, options = request
    if setup_error is not None:
        run.finish(ExecStatus.ERROR, "SandboxSetupError", f"{type(setup_error).__name__}: {setup_error}")
    run.start(code_bytes, stdin, WireLimits(limits), options or {})


_TEMPLATE: _Run | None = None


def prepare_zygote() -> _Run:
    """Once per worker, before it forks: everything a run needs that does not depend on
    the child or the program. Inert in the worker; returns the run every child inherits."""
    global _TEMPLATE
    if _TEMPLATE is not None:
        return _TEMPLATE
    run = _Run()
    # What a child replaces (sys.stdin/stdout/stderr, argv, __main__) stays referenced
    # here, so that replacing it frees nothing in the child: freeing an object the worker
    # made writes to its memory (and an io object's finalizer runs), each write a
    # copy-on-write page fault (~40 for the standard streams alone).
    run.kept = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__,
                sys.argv, sys.modules.get("__main__"))
    _seed_random_on_import()
    _signal(signal.SIGALRM, run._on_alarm)
    _signal(signal.SIGPROF, run._on_cpu)
    _signal(signal.SIGXCPU, run._on_cpu)
    # The program may not switch the timers off or exit around the result pipe.
    os._exit = run._fake_exit
    posix._exit = run._fake_exit
    os.close = posix.close = _guarded_close
    os.closerange = posix.closerange = _guarded_closerange
    # Python 3.11 raises no audit event when a thread starts.
    # (threading, imported later by the program, copies the patched function.)
    _thread.start_new_thread = _thread.start_new = _refuse(run, "_thread.start_new_thread")
    if "threading" in sys.modules:
        sys.modules["threading"]._start_new_thread = _thread.start_new_thread
    for name in ("signal", "alarm", "setitimer", "pthread_sigmask", "siginterrupt", "sigwait"):
        if hasattr(signal, name):
            setattr(signal, name, _refuse(run, f"signal.{name}"))
    sys.addaudithook(run.audit)  # inactive until the program starts (run.guard_on)
    _TEMPLATE = run
    return run


# The program the worker runs in-process, under a throwaway run's tracer, before it forks
# (see `rehearse`): the usual shapes of contest code (reading input, loops, calls,
# recursion, containers, formatting, a caught exception). Small: its request goes
# through one pipe that the same thread then reads.
_REHEARSAL = """\
import sys
from collections import Counter, defaultdict, deque
from heapq import heappop, heappush
from bisect import bisect_left
from itertools import accumulate, permutations
from math import gcd, sqrt
n = int(input())
a = list(map(int, input().split()))
readline = sys.stdin.readline
s = readline().strip()
grid = [list(readline().rstrip()) for _ in range(2)]
d = defaultdict(int)
for i, x in enumerate(a):
    d[x] += i
c = Counter(a)
total = 0
for x in sorted(a, key=lambda v: -v)[:3]:
    if x % 2 == 0:
        continue
    total += x
else:
    total -= 1
i = 0
while i < n and a[i] != 5:
    i += 1
def f(k, memo={}):
    if k < 2:
        return k
    if k not in memo:
        memo[k] = f(k - 1) + f(k - 2)
    return memo[k]
def bfs(start):
    dist = [-1] * n
    dist[start] = 0
    q = deque([start])
    while q:
        v = q.popleft()
        for w in (v - 1, v + 1):
            if 0 <= w < n and dist[w] < 0:
                dist[w] = dist[v] + 1
                q.append(w)
    return dist
class P:
    def __init__(self, v):
        self.v = v
    def __lt__(self, other):
        return self.v < other.v
    def __repr__(self):
        return f"P({self.v})"
ps = [P(x) for x in a]
h = []
for x in a:
    heappush(h, (x, str(x)))
best = min(ps).v
acc = list(accumulate(a))
words = s.split()
t = (n, best, f(12), len(words), gcd(12, 18), int(sqrt(n)), bisect_left(acc, 5), pow(3, n, 7))
perm = max(sum(p[:2]) for p in permutations(a[:3]))
m = {k: v for k, v in c.items() if v > 1}
try:
    q = a[n] // 0
except (IndexError, ZeroDivisionError) as e:
    q = -1
print(n, sum(a), max(a), total, *t, sep=" ", end="\\n")
print("{} {:.3f} {}".format(s.upper(), total / n, dict(d)), q, bfs(0), heappop(h), ps[0])
print(" ".join(map(str, a)), [w[::-1] for w in words], set(a) - {1}, grid, m, perm, "%d %s" % (i, abs(-n)))
print(f"{best:>4}|{s!r}|{divmod(n, 3)}|{round(total / 3, 2)}|{'YES' if n > 3 else 'NO'}")
sys.stdout.write(str(round(3.5)) + "\\n")
"""
_REHEARSAL_INPUT = b"5\n3 1 4 1 5\nhello sandbox world\n#.#\n.#.\n"
_REHEARSAL_LIMITS = {"timeout": 1.0, "wall": 2.0, "memory_mb": 1024, "max_steps": 1024, "max_output": 1 << 20, "value_limit": 100}


def rehearse() -> bool:
    """In the worker, before it forks: run `_REHEARSAL` once through a child's own code
    path (request decoding, tracer, output capture, result building) on a throwaway run
    that is never active. True when it ran to the end.

    What CPython builds lazily on first use, it then builds here once instead of in every
    child: attribute-lookup entries in its global type cache, the line tables that tracing
    needs for each code object it runs, interned names. Each of those writes, done in a
    child, lands on a page it shares with the worker and costs a copy-on-write fault.
    Then primes the type-cache entries of the parts of the path the program does not
    reach (`_warm_type_cache`). Measured on the real programs of bench_exec: 5% fewer
    page faults per program and about 5% more programs per second (paired passes).
    One run is enough: 24 runs gave no fewer faults and were slower (more freed blocks
    left behind).

    Leaves no state behind: the template run (`prepare_zygote`) is not touched, nothing
    reaches the worker's fds, the interpreter's streams and `__main__` are put back, and
    a failure is swallowed (the children only lose the head start).
    """
    from codeexecutor.execution.framing import recv, send

    template = prepare_zygote()
    saved = sys.stdin, sys.stdout, sys.stderr, sys.modules.get("__main__")
    read, write = os.pipe()
    stdin_fd = None
    run = _Run()
    run.scratch = os.path.join(os.sep, "nonexistent", "rehearsal")  # _read_fd1 finds nothing
    try:
        request = (marshal.dumps(compile(_REHEARSAL, PROGRAM_FILENAME, "exec")), _REHEARSAL_INPUT, _REHEARSAL_LIMITS, {})
        send(write, request)
        code_bytes, stdin, wire, _ = recv(read)
        run.configure(WireLimits(wire))
        try:  # the input as a child reads it: a TextIOWrapper over a file descriptor
            stdin_fd = os.memfd_create("rehearsal")
            os.write(stdin_fd, stdin)
            os.lseek(stdin_fd, 0, os.SEEK_SET)
            raw = io.FileIO(stdin_fd, "rb", closefd=False)
        except (AttributeError, OSError):
            raw = io.BytesIO(stdin)
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        module.__file__ = PROGRAM_FILENAME
        sys.modules["__main__"] = module
        sys.stdin = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace")
        sys.stdout, sys.stderr = run.stdout_text, run.stderr_text
        sys.settrace(run.tracer)
        try:
            exec(marshal.loads(code_bytes), module.__dict__)
        finally:
            sys.settrace(None)
        _to_json(run._result(ExecStatus.OK, None, "", None))
        _warm_type_cache((run, run.tracer, run.stdout, run.stdout_text, WireLimits(wire)))
        return not template.active and not template.tracer.steps
    except Exception:
        return False
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        if saved[3] is not None:
            sys.modules["__main__"] = saved[3]
        for fd in (read, write, stdin_fd):
            if fd is not None:
                _real_close(fd)


def _warm_type_cache(objects: tuple) -> None:
    """Look up, on each of `objects` and on the modules a child uses, every name that the
    code of the child's modules (this one, framing, tracer) mentions and that exists there.

    Each attribute access on an object (a module too) first consults CPython's global
    type-attribute cache; a miss writes a cache entry and reference counts. This primes
    the entries of the child's code path that the rehearsal program does not reach (the
    exits, the attach and limit calls): measured 18 -> 5 faults a child in type lookups.
    """
    import codeexecutor.execution.framing as framing
    import codeexecutor.execution.tracer as tracer_module

    names: set[str] = set()
    pending = []
    for module in (sys.modules[__name__], framing, tracer_module):
        for value in vars(module).values():
            members = vars(value).values() if isinstance(value, type) and value.__module__ == module.__name__ else ()
            for item in (value, *members):
                code = getattr(item, "__code__", None)
                if isinstance(code, types.CodeType):
                    pending.append(code)
    while pending:  # nested functions and comprehensions too
        code = pending.pop()
        names.update(code.co_names)
        pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    modules = (os, sys, resource, signal, math, marshal, types, io, posix, builtins, _thread)
    for name in names:
        for module in modules:
            if name in vars(module):
                getattr(module, name)  # (ModuleType, name): one entry whichever module
                break
        for obj in objects:
            if name in getattr(obj, "__dict__", ()) or any(name in vars(k) for k in type(obj).__mro__):
                getattr(obj, name, None)


def _prepare_child(run: _Run, scratch: str) -> None:
    """Child-specific, program-independent setup: process group, scratch dir as the
    working directory, fd 1 into it (what the program writes to fd 1 directly is part
    of its stdout; fd 2 stays the worker's /dev/null), stdout/stderr captured."""
    os.setpgid(0, 0)
    os.chdir(scratch)
    new = os.open(".fd1", os.O_RDWR | os.O_CREAT, 0o600)
    os.dup2(new, 1)
    _real_close(new)
    run.fd1_inode = os.fstat(1).st_ino
    # The environment was scrubbed once in the worker (clearing it here costs 0.3 ms a run).
    sys.stdout = sys.__stdout__ = run.stdout_text
    sys.stderr = sys.__stderr__ = run.stderr_text
    if "random" in sys.modules:  # imported in the worker: it re-seeded from the OS at fork
        sys.modules["random"].seed(0)
    # numpy.random (numpy workers) was seeded at import in the worker and has no fork hook.


def _prepare_run(run: _Run, stdin: bytes, limits: WireLimits) -> None:
    """Program-dependent setup: its stdin, its limits and timers."""
    run.configure(limits)
    if stdin:  # fd 0 is the worker's /dev/null until then
        try:
            fd = os.memfd_create("stdin")
        except (AttributeError, OSError):  # no memfd: a file in the scratch dir
            fd = os.open(".stdin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        view = memoryview(stdin)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 0)
        _real_close(fd)
    sys.stdin = sys.__stdin__ = run.stdin_text
    # CPU time: a precise profiling timer, and RLIMIT_CPU (whole seconds) as the backstop.
    cpu = math.ceil(limits.timeout) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem + (64 << 20)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _setitimer(signal.ITIMER_REAL, limits.wall)
    _setitimer(signal.ITIMER_PROF, limits.timeout)


class _SeededRandomFinder:
    """Meta-path finder that seeds `random` and `numpy.random` with 0 right after they
    are imported, so that programs using them without a seed give reproducible traces.

    The worker does not import `random` itself: the module re-seeds from the OS in every
    forked child (an at-fork hook), which costs each fork ~0.1 ms.
    """

    SEEDED = frozenset({"random", "numpy.random"})

    def find_spec(self, name, path=None, target=None):
        if name not in self.SEEDED:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_seed(module):
            exec_module(module)
            module.seed(0)

        spec.loader.exec_module = exec_and_seed
        return spec


def _seed_random_on_import() -> None:
    if not any(isinstance(f, _SeededRandomFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SeededRandomFinder())


_real_close = os.close
_real_closerange = os.closerange
_REAL_EXIT = os._exit


def _guarded_close(fd: int) -> None:
    if fd == RESULT_FD:
        raise OSError(9, "Bad file descriptor")
    _real_close(fd)


def _guarded_closerange(low: int, high: int) -> None:
    if low <= RESULT_FD < high:
        _real_closerange(low, RESULT_FD)
        _real_closerange(RESULT_FD + 1, high)
    else:
        _real_closerange(low, high)


def _program_line(exc: BaseException) -> int | None:
    """The line of the innermost program frame in the traceback (where it was raised)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == PROGRAM_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<str failed>"
