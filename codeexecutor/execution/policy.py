"""The audit policy of a sandboxed run: what a program may not do, judged per audit event.

Three layers contain a program (ARCHITECTURE.md says which does what):

* this audit hook, in the child's interpreter: process creation, signals to other
  processes, sockets, ctypes, tracing changes and threads end the run with a
  `violation`; so does every file-system change outside the run's scratch dir, and every
  *read* (open, listdir, scandir) of a path outside what running Python needs: the
  standard library, the sandbox's site-packages, the scratch dir, `/dev/null`,
  `/dev/urandom`, the process's own `/proc/self` entries and standard streams, and
  time-zone data. The import machinery may also read the other `sys.path` entries
  (the project's own packages), the program itself may not. Paths are judged after
  resolving symbolic links, so a link in the scratch dir that points outside is refused.
* the process: resource limits, an empty network namespace, and, when the worker runs
  as root, an unprivileged user and group for the child from before the program starts
  (sandbox._drop_privileges), so that a read this hook cannot see (C code that opens
  files itself) is not a root read;
* the worker: a wall-clock deadline and a kill of the child's process group.
"""

from __future__ import annotations

import os
import sys
import sysconfig

from codeexecutor.execution.tracer import PROGRAM_FILENAME

# Audit events that end the run with VIOLATION whatever their arguments.
BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "subprocess.Popen",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sendto",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.cdata",
        "ctypes.call_function",
        "ctypes.string_at",
        "ctypes.set_errno",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        "_thread.start_new_thread",
        "_thread.start_joinable_thread",
        "os.chroot",
        "os.setuid",
        "os.setgid",
        "os.setsid",
        "os.setpgid",
        "resource.setrlimit",
        "resource.prlimit",
        "sys.addaudithook",
        "syslog.openlog",
        "os.add_dll_directory",
        "pty.spawn",
        "webbrowser.open",
    }
)
# Audit events that modify the file system at their first (and second) path argument.
PATH_EVENTS = frozenset(
    {
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.move",
        "shutil.copyfile",
        "shutil.copymode",
        "shutil.copystat",
        "shutil.copytree",
        "os.setxattr",
        "os.removexattr",
        "os.mkfifo",
        "os.mknod",
    }
)
LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
DEVICES = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/dev/full"})
OWN_STREAMS = ("/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/")
TIME_ZONES = ("/usr/share/zoneinfo", "/etc/localtime", "/etc/timezone")


def _real(path: str) -> str:
    return os.path.realpath(path)


class Policy:
    """Judges audit events; built once in the worker, its scratch dir and pid set per child."""

    def __init__(self) -> None:
        paths = sysconfig.get_paths()
        stdlib = {_real(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
        sites = {_real(p) for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))}
        self.read_roots = tuple(sorted(stdlib | sites | {_real(p) for p in TIME_ZONES if os.path.exists(p)}))
        self.import_roots = tuple(sorted({_real(p) for p in sys.path if p} - {os.sep}))
        self.scratch = ""
        self.own_proc = ""

    def attach(self, scratch: str) -> None:
        """In the child: its scratch dir (a real path) and its own /proc entries."""
        self.scratch = scratch
        self.own_proc = f"/proc/{os.getpid()}/"

    # -- judging ----------------------------------------------------------------------
    def check(self, event: str, args: tuple) -> str | None:
        """Why `event` is a violation, or None when it is allowed."""
        if event in BLOCKED_EVENTS:
            if event.startswith("ctypes.") and not from_program():
                return None  # a library (numpy imports ctypes) rather than the program
            return event
        if event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writing:
                return None if self.inside_scratch(path) else f"write outside the scratch dir: {path!r}"
            return None if self.readable(path) else f"read outside the sandbox: {path!r}"
        if event in LISTING_EVENTS:
            path = args[0] if args and args[0] is not None else "."
            return None if self.readable(path) else f"{event} outside the sandbox: {path!r}"
        if event in PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not self.inside_scratch(path):
                    return f"{event} outside the scratch dir: {path!r}"
            return None
        if event == "import" and args[0] in BLOCKED_IMPORTS and from_program():
            return f"import {args[0]}"
        return None

    def inside_scratch(self, path) -> bool:
        if isinstance(path, int):
            return path in (1, 2)  # open(1, "w") is stdout
        try:
            real = _real(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return real == self.scratch or real.startswith(self.scratch + os.sep)

    def readable(self, path) -> bool:
        if isinstance(path, int):
            return True  # an fd the process already holds (open(0) is stdin)
        try:
            text = os.fsdecode(path)
            if text in OWN_STREAMS[:3] or text.startswith(OWN_STREAMS[3:]):
                return True
            real = _real(text)
        except (TypeError, ValueError):
            return False
        if real in DEVICES or real == self.scratch or real.startswith(self.scratch + os.sep):
            return True
        if self.own_proc and (real + "/").startswith(self.own_proc):
            return True
        if _under(real, self.read_roots):
            return True
        return _under(real, self.import_roots) and from_importer()


def _under(real: str, roots: tuple[str, ...]) -> bool:
    for root in roots:
        if real == root or real.startswith(root + os.sep):
            return True
    return False


_HERE = os.path.dirname(os.path.abspath(__file__))
_HOOK_FILES = frozenset({os.path.join(_HERE, "policy.py"), os.path.join(_HERE, "sandbox.py")})


def _first_outside_sandbox():
    """The innermost frame that is not the audit hook's own (this module, the sandbox)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _HOOK_FILES:
        frame = frame.f_back
    return frame


_IMPORTLIB = os.path.join(sysconfig.get_paths()["stdlib"], "importlib") + os.sep


def from_importer() -> bool:
    """Is the read made by the import machinery (finding or loading a module, or
    importlib.metadata/resources looking at the packages on sys.path)?"""
    frame = _first_outside_sandbox()
    while frame is not None:  # between the read and the program's own code
        name = frame.f_code.co_filename
        if name == PROGRAM_FILENAME:
            return False
        if name.startswith("<frozen importlib") or name.startswith(_IMPORTLIB):
            return True
        frame = frame.f_back
    return False


def from_program() -> bool:
    """Is the innermost frame outside the import machinery and ctypes the program's own?"""
    frame = _first_outside_sandbox()
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or f"{os.sep}ctypes{os.sep}" in name):
            return name == PROGRAM_FILENAME
        frame = frame.f_back
    return False
