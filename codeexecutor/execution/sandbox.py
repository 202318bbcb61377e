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
import marshal
import os
import posix
import signal
import sys
import types

# Imported by the worker, so that a child of a guided run (fill.py) inherits it rather than
# importing it under the tracer and the audit hook.
from codeexecutor.execution.fill import install as install_filler
from codeexecutor.execution.limits import WireLimits, apply_limits, lift_memory_limit, stop_timers
from codeexecutor.execution.output import OutputSink
from codeexecutor.execution.policy import Policy
from codeexecutor.execution.result import message_of, program_line, read_fd1, to_json
from codeexecutor.execution.status import ExecStatus
from codeexecutor.execution.tracer import PROGRAM_FILENAME, make_tracer

SAFE_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# Bound before prepare_zygote replaces the program-facing versions.
_signal = signal.signal
UNPRIVILEGED = 65534  # nobody/nogroup: the child's user and group when the worker runs as root


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
        self.stdin_text = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding="utf-8", errors="replace"
        )
        self.tracer = make_tracer(1024, self.stdout, self._on_step_limit)
        self.policy = Policy()
        self.recorder = None
        self.values = None  # value-use events (value_record.py), when asked
        self.filler = None  # guided execution's injected values (fill.py), when asked
        self.kept: tuple = ()

    def attach(self, result_fd: int, scratch: str) -> None:
        """In the child: take over the result pipe and the scratch dir (already a real path)."""
        os.dup2(result_fd, RESULT_FD)  # out of the program's way; os.close refuses it
        _real_close(result_fd)
        self.scratch = scratch
        self.policy.attach(scratch)
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
                from codeexecutor.execution.inline_record import install_recorder

                self.recorder = install_recorder()
            if options.get("record_values"):
                from codeexecutor.execution.value_record import install as install_values

                self.values = install_values()
            code = marshal.loads(code_bytes)
            module = types.ModuleType("__main__")
            module.__dict__["__builtins__"] = builtins
            module.__file__ = PROGRAM_FILENAME
            sys.modules["__main__"] = module
            sys.argv = ["main.py"]
        except BaseException as exc:  # setup failed: report it rather than die silently
            self.finish(ExecStatus.ERROR, "SandboxSetupError", f"{type(exc).__name__}: {exc}")
        if options.get("trace", True):
            self.tracer.start(code)
        if hasattr(sys, "monitoring"):  # 3.12+: the program sees the sys of 3.11 (it may not touch the tracer's events)
            del sys.monitoring
        self.guard_on = True
        try:
            if options.get("fill") is not None:  # under the guard: a seeded module's import is judged too
                self.filler = install_filler(options["fill"], module.__dict__)
            exec(code, module.__dict__)
        except SystemExit as exc:
            if self.filler is not None:  # a lifted body's `return x` is `exit(x)`: the kind it returned
                self.filler.exited(exc.code)
            if exc.code is None or exc.code == 0:
                self.finish(ExecStatus.OK)
            self.finish(ExecStatus.EXIT, "SystemExit", str(exc.code), program_line(exc))
        except MemoryError as exc:
            self.finish(ExecStatus.MEMORY, "MemoryError", str(exc), program_line(exc))
        except BaseException as exc:
            if self.filler is not None:
                self.filler.on_error(exc, program_line(exc))
            self.finish(ExecStatus.ERROR, type(exc).__name__, message_of(exc), program_line(exc))
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
            payload = {
                "status": ExecStatus.ERROR.value,
                "steps": [],
                "stdout": "",
                "stderr": "",
                "error": {"type": "SandboxError", "message": f"building the result failed: {exc!r}", "line": None},
            }
        data = to_json(payload)
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
        stop_timers()
        try:
            # Not needed for correctness (the tracer ignores our own frames); fails when we
            # are inside the audit hook of the program's own sys.settrace call.
            self.tracer.stop()
        except RuntimeError:
            pass
        lift_memory_limit()

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
            "stdout": self.stdout.text() + read_fd1(os.path.join(self.scratch, ".fd1"), self.fd1_inode),
            "error": None if error_type is None else {"type": error_type, "message": message[:1000], "line": line},
            "stderr": self.stderr.text()[-4000:],
            "reads": self.recorder.reads if self.recorder is not None else None,
            "fill": self.filler.report() if self.filler is not None else None,
            "values": self.values.events if self.values is not None else None,
        }

    def _on_step_limit(self) -> None:
        self.finish(ExecStatus.TRACE_LIMIT)

    def _on_flood(self) -> None:
        self.finish(
            ExecStatus.VIOLATION,
            "OutputLimitExceeded",
            f"program wrote more than {self.limits.max_output} bytes to stdout",
        )

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
        why = self.policy.check(event, args)  # policy.py: what a program may not do
        if why is not None:
            self.violation(why)


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
    (see codeexecutor.execution.inline).
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
CAN_DROP = False  # set by prepare_zygote


def unprivileged_can_run(paths) -> bool:
    """Can the unprivileged user traverse to each of `paths` (the standard library, the
    site-packages, the project) and list it?"""
    import stat

    for path in paths:
        path = os.path.realpath(path)
        if not os.path.exists(path):  # e.g. python311.zip on sys.path: nothing to read there
            continue
        try:
            if not os.stat(path).st_mode & stat.S_IROTH:
                return False
            while True:
                st = os.stat(path)
                if not st.st_mode & stat.S_IXOTH and st.st_uid != UNPRIVILEGED:
                    return False
                parent = os.path.dirname(path)
                if parent == path:
                    break
                path = parent
        except OSError:
            return False
    return True


def prepare_zygote() -> _Run:
    """Once per worker, before it forks: everything a run needs that does not depend on
    the child or the program. Inert in the worker; returns the run every child inherits."""
    global _TEMPLATE, CAN_DROP
    if _TEMPLATE is not None:
        return _TEMPLATE
    run = _Run()
    CAN_DROP = os.geteuid() == 0 and unprivileged_can_run(run.policy.read_roots + run.policy.import_roots)
    # What a child replaces (sys.stdin/stdout/stderr, argv, __main__) stays referenced
    # here, so that replacing it frees nothing in the child: freeing an object the worker
    # made writes to its memory (and an io object's finalizer runs), each write a
    # copy-on-write page fault (~40 for the standard streams alone).
    run.kept = (
        sys.stdin,
        sys.stdout,
        sys.stderr,
        sys.__stdin__,
        sys.__stdout__,
        sys.__stderr__,
        sys.argv,
        sys.modules.get("__main__"),
    )
    _seed_random_on_import()
    _signal(signal.SIGALRM, run._on_alarm)
    _signal(signal.SIGPROF, run._on_cpu)
    _signal(signal.SIGXCPU, run._on_cpu)
    # The program may not switch the timers off or exit around the result pipe.
    os._exit = run._fake_exit
    posix._exit = run._fake_exit
    os.close = posix.close = _guarded_close
    os.closerange = posix.closerange = _guarded_closerange
    # Python 3.11 raises no audit event when a thread starts; 3.13's threading starts them
    # with start_joinable_thread. (threading, imported later by the program, copies the
    # patched functions.)
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, _refuse(run, "_thread.start_new_thread"))  # one message on every interpreter
    if "threading" in sys.modules:
        for name in ("start_new_thread", "start_joinable_thread"):
            if hasattr(_thread, name):
                setattr(sys.modules["threading"], f"_{name}", getattr(_thread, name))
    for name in ("signal", "alarm", "setitimer", "pthread_sigmask", "siginterrupt", "sigwait"):
        if hasattr(signal, name):
            setattr(signal, name, _refuse(run, f"signal.{name}"))
    sys.addaudithook(run.audit)  # inactive until the program starts (run.guard_on)
    _TEMPLATE = run
    return run


def _prepare_child(run: _Run, scratch: str) -> None:
    """Child-specific, program-independent setup: process group, scratch dir as the
    working directory, fd 1 into it (what the program writes to fd 1 directly is part
    of its stdout; fd 2 stays the worker's /dev/null), stdout/stderr captured."""
    os.setpgid(0, 0)
    os.chdir(scratch)
    new = os.open(".fd1", os.O_RDWR | os.O_CREAT, 0o600)
    if os.geteuid() == 0:  # the unprivileged user the program will run as owns its scratch dir
        os.chown(scratch, UNPRIVILEGED, UNPRIVILEGED)
        os.fchown(new, UNPRIVILEGED, UNPRIVILEGED)
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
    apply_limits(limits)
    _drop_privileges()


def _drop_privileges() -> None:
    """Started as root: become an unprivileged user and group (no supplementary groups)
    before the program runs, after the namespace and limits are in place, so that what
    the audit hook cannot see (C code opening files) is not a root read either. Skipped
    where that user could not even read the interpreter (a Python installed under a
    root-only home): `unprivileged_can_run` decided that once, in the worker."""
    if os.geteuid() != 0 or not CAN_DROP:
        return
    os.setgroups([])
    os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)


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
