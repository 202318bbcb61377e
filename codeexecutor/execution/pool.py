"""Parent side of the sandbox: a warm pool of worker processes and the public API.

    with ExecutorPool(workers=2) as pool:
        result = pool.execute("print(1)")
        for key, result in pool.execute_many(programs):  # as they finish
            ...

Programs are compiled here, in the parent (a syntax error never reaches a worker); the
code object travels to a worker as marshal bytes. Workers are started with
`subprocess` (never forked from this process, which may have imported torch), so a
fork per program stays cheap. A worker that dies is replaced and the program it was
running gets an error result; the pool itself keeps going.

Flavors: a program that imports numpy (or a library built on it) runs in a worker that
pre-imported numpy (the import costs a fresh process ~110 ms; pre-importing it in every
worker would cost every fork ~0.3 ms). Such workers are started on first need, up to
`workers` of them; they sit idle otherwise.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import json
import logging
import marshal
import os
import pickle
import queue
import selectors
import subprocess
import sys
import threading
import types
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import codeexecutor
from codeexecutor.execution.framing import REQUEST, recv, recv_bytes, send_bytes
from codeexecutor.execution.records import ExecError, ExecResult, ExecStatus, Limits
from codeexecutor.execution.tracer import PROGRAM_FILENAME
from codeexecutor.execution.worker import FLAVORS
from codeexecutor.source import looks_like_python2, newer_python

try:
    import orjson
except ImportError:  # optional: json does the same, slower
    orjson = None

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Program:
    """One program to run: its source, the text on its stdin, and a key for the caller."""

    source: str
    stdin: str = ""
    key: Any = None


# Top-level packages whose import pulls numpy in: programs importing them run in a
# numpy worker (worker.FLAVORS names each flavor and what it pre-imports). A program that imports numpy some other way
# (`__import__`) is still correct in a base worker, only slower.
_NUMPY_USERS = ("numpy", "scipy", "pandas", "sklearn", "sympy")
_SCIENCE_USERS = ("scipy", "sympy")  # their imports cost a fresh child more than its CPU limit can spare


def flavor_of(source: str, code: types.CodeType) -> str:
    """The worker flavor for a compiled program: "science" when it imports scipy or sympy,
    "numpy" when it imports numpy (or pandas, sklearn) anywhere, else "base"."""
    if not any(name in source for name in _NUMPY_USERS):
        return "base"
    found, todo = set(), [code]
    while todo:
        c = todo.pop()
        found.update(name.partition(".")[0] for name in c.co_names)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    if found & set(_SCIENCE_USERS):
        return "science"
    return "numpy" if found & set(_NUMPY_USERS) else "base"


def compile_program(source: str) -> bytes | ExecResult:
    """marshal bytes of the compiled program, or a SYNTAX_ERROR result saying why not."""
    code = _compile(source)
    return code if isinstance(code, ExecResult) else marshal.dumps(code)


def _compile(source: str) -> types.CodeType | ExecResult:
    if "\x00" in source:
        return ExecResult(
            ExecStatus.SYNTAX_ERROR,
            error=ExecError("ValueError", "source contains NUL bytes (is this a binary file?)", None),
        )
    try:
        with warnings.catch_warnings():  # a program's own syntax warnings are not the caller's to see
            warnings.simplefilter("ignore")
            code = compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True)
    except SyntaxError as exc:
        message = f"{exc.msg}"
        if looks_like_python2(source):
            message += " (this looks like Python 2 code; only Python 3 runs here: convert it with 2to3)"
        else:
            newer = newer_python(source, exc)
            if newer is not None:
                here = "{}.{}".format(*sys.version_info[:2])
                return ExecResult(
                    ExecStatus.NEWER_PYTHON,
                    error=ExecError(
                        type(exc).__name__, f"uses {newer[1]}: needs Python {newer[0]}, this is {here}", exc.lineno
                    ),
                )
        return ExecResult(ExecStatus.SYNTAX_ERROR, error=ExecError(type(exc).__name__, message, exc.lineno))
    except UnicodeError as exc:  # lone surrogates (undecodable bytes read with surrogateescape)
        return ExecResult(
            ExecStatus.SYNTAX_ERROR,
            error=ExecError(type(exc).__name__, "source is not valid UTF-8 text (is this a binary file?)", None),
        )
    except (RecursionError, MemoryError) as exc:  # absurdly nested source
        return ExecResult(
            ExecStatus.SYNTAX_ERROR, error=ExecError(type(exc).__name__, "source too deeply nested to compile", None)
        )
    return code


def _loads(data: bytes):
    if orjson is not None:
        try:
            return orjson.loads(data)
        except ValueError:
            pass
    return json.loads(data)


def _result_from_dict(d: dict | bytes | None) -> ExecResult:
    """A worker answers with a dict, or with the child's JSON bytes passed through;
    None stands for a worker that died while running the program."""
    if d is None:
        return ExecResult(
            ExecStatus.ERROR,
            error=ExecError("SandboxError", "the sandbox worker died while running this program", None),
        )
    try:
        return ExecResult.from_json(_loads(d) if isinstance(d, bytes) else d)
    except (KeyError, TypeError, ValueError) as exc:
        return ExecResult(ExecStatus.ERROR, error=ExecError("SandboxError", f"malformed result: {exc}", None))


def _worker_path() -> str:
    """PYTHONPATH of a worker: this package's root, then the site-packages of this
    interpreter (workers run with -S: no site processing, whose .pth hooks would add
    ~2 MB of imported heap that every fork copies)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(codeexecutor.__file__)))
    sites = [p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages")) and p != root]
    return os.pathsep.join([root, *sites])


class _Worker:
    """One worker process and its pipes; used by one thread at a time."""

    def __init__(self, flavor: str = "base", wait: bool = True) -> None:
        self.flavor = flavor
        self.network_isolated = False
        self.rehearsed = False
        self.scratch_prefix = ""
        self.unprivileged = False
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",  # set before the interpreter starts: fixes set iteration order
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": _worker_path(),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "codeexecutor.execution.worker", "--flavor", flavor],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,
        )
        if wait:
            self.wait_ready()

    def wait_ready(self) -> _Worker:
        """Read the worker's hello (it has imported everything and is ready to fork)."""
        try:
            hello = recv(self.proc.stdout.fileno())
        except (OSError, EOFError):
            hello = None
        if not hello or not hello.get("ready"):
            self.close()
            raise RuntimeError("a sandbox worker failed to start (is the codeexecutor package importable?)")
        self.network_isolated = hello.get("network_isolated", False)
        self.rehearsed = hello.get("rehearsed", False)  # see rehearsal.rehearse
        self.scratch_prefix = hello.get("scratch_prefix", "")  # its runs' dirs: prefix + N
        self.unprivileged = hello.get("unprivileged_children", False)  # see sandbox._drop_privileges
        return self

    def run(self, code_bytes: bytes, stdin: bytes, limits: Limits, options: dict | None = None) -> dict | bytes | None:
        """Send one request and wait for its reply (None when the worker died)."""
        try:
            self.send(code_bytes, stdin, limits, options)
        except OSError:
            return None
        return self.receive()

    def send(self, code_bytes: bytes, stdin: bytes, limits: Limits, options: dict | None = None) -> None:
        request = pickle.dumps((code_bytes, stdin, limits.to_wire(), options), protocol=pickle.HIGHEST_PROTOCOL)
        send_bytes(self.proc.stdin.fileno(), REQUEST.pack(limits.wall, limits.timeout) + request)

    def receive(self) -> dict | bytes | None:
        """The worker's reply: the child's JSON bytes or a dict; None when the worker died."""
        try:
            reply = recv_bytes(self.proc.stdout.fileno())
        except OSError:
            return None
        if not reply:
            return None
        if reply[:1] == b"J":  # the child's JSON, passed through
            return reply[1:]
        try:
            return pickle.loads(reply[1:])
        except Exception:
            return None

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ExecutorPool:
    """A pool of warm sandbox workers. Thread-safe; use as a context manager."""

    def __init__(self, workers: int = 2, limits: Limits | None = None, prestart: Iterable[str] = ()) -> None:
        """`workers` base workers start now (in parallel). Workers of another flavor
        (see `flavor_of`) start when a program first needs one, except one of each flavor
        in `prestart` (e.g. ("numpy",) for large batches of contest programs)."""
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        prestart = tuple(prestart)
        unknown = [f for f in prestart if f not in FLAVORS]
        if unknown:
            raise ValueError(f"unknown worker flavor(s) {unknown}: known are {', '.join(FLAVORS)}")
        self.limits = limits or Limits()
        self.size = workers
        self._idle: dict[str, queue.Queue[_Worker]] = {f: queue.Queue() for f in FLAVORS}
        self._started: dict[str, int] = dict.fromkeys(FLAVORS, 0)  # non-base workers started
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        flavors = ["base"] * workers + [f for f in dict.fromkeys(prestart) if f != "base"]
        starting = [_Worker(f, wait=False) for f in flavors]  # all start at once
        with self._lock:
            self._all.extend(starting)
        try:
            for worker in starting:
                worker.wait_ready()
        except Exception:
            self.close()
            raise
        for worker in starting:
            if worker.flavor != "base":
                self._started[worker.flavor] += 1
            self._idle[worker.flavor].put(worker)

    def _start_worker(self, flavor: str) -> _Worker:
        worker = _Worker(flavor)
        with self._lock:
            self._all.append(worker)
        return worker

    def _replace(self, dead: _Worker) -> _Worker:
        """A new worker of the same flavor in place of one that died."""
        log.warning("a sandbox worker died; starting a new one")
        with self._lock:
            if dead in self._all:
                self._all.remove(dead)
        dead.close()
        return self._start_worker(dead.flavor)

    def _acquire(self, flavor: str, block: bool = True) -> _Worker:
        """An idle worker of this flavor; non-base flavors are started on first need,
        up to `size` of them. Without `block`, raises queue.Empty rather than wait."""
        idle = self._idle[flavor]
        try:
            return idle.get_nowait()
        except queue.Empty:
            pass
        if flavor != "base":
            with self._lock:
                start = self._started[flavor] < self.size
                if start:
                    self._started[flavor] += 1
            if start:
                try:
                    return self._start_worker(flavor)
                except Exception:
                    with self._lock:
                        self._started[flavor] -= 1
                    raise
        return idle.get(block=block)

    @property
    def network_isolated(self) -> bool:
        return all(w.network_isolated for w in self._all)

    def execute(
        self,
        source: str,
        stdin: str = "",
        limits: Limits | None = None,
        *,
        trace: bool = True,
        record_reads: bool = False,
        record_values: bool = False,
        fill: dict | None = None,
    ) -> ExecResult:
        """Run one program in the sandbox and return its result.

        trace=False runs it without the tracer (no steps); record_reads=True also returns
        every stdin read with the source span that made it (in `result.reads`);
        record_values=True every value-use event (`result.values`, each
        [site, kind, literal] with `result.fill["sites"]` giving the sites: value_record.py);
        `fill` a table of values to inject where the program lacks them (fill.py; what the
        run needed and used comes back in `result.fill`).
        """
        if self._closed:
            raise RuntimeError("the ExecutorPool is closed")
        limits = limits or self.limits
        code = _compile(source)
        if isinstance(code, ExecResult):
            return code
        sites = None
        if record_values:
            from codeexecutor.execution.value_record import instrument

            try:
                code, sites = instrument(source, PROGRAM_FILENAME)
            except (SyntaxError, ValueError, RecursionError) as exc:  # the copy, not the program, is at fault
                log.warning("value recording left off (the instrumented copy does not compile: %s)", exc)
                sites = []
        flavor = flavor_of(source, code)
        worker = self._acquire(flavor)
        try:
            options = {"trace": trace, "record_reads": record_reads, "record_values": record_values, "fill": fill}
            raw = worker.run(marshal.dumps(code), stdin.encode("utf-8", "surrogateescape"), limits, options)
            if raw is None:  # the worker died: replace it, report the program
                worker = self._replace(worker)
            result = _result_from_dict(raw)
        finally:
            self._idle[flavor].put(worker)
        if sites is not None:
            result = dataclasses.replace(result, fill={"sites": sites})
        return result

    def execute_many(
        self,
        programs: Iterable[Program | str | tuple[str, str]],
        limits: Limits | None = None,
        progress: bool | str = False,
    ) -> Iterator[tuple[Any, ExecResult]]:
        """Run many programs on all workers; yield (key, result) as each finishes.

        A program given as a str or (source, stdin) tuple gets its index as key.
        `progress` shows a tqdm bar (a str is used as its description).

        One thread drives every worker it holds through a selector: it compiles the next
        programs, sends each to a free worker of its flavor, and collects replies as they
        come. Workers are refilled before results are handed to the caller, so they run
        while the caller works on a result. Workers held by other threads' `execute`
        calls are left alone; stopping early returns every worker to the pool.
        """
        if self._closed:
            raise RuntimeError("the ExecutorPool is closed")
        batch = _Batch(self, limits or self.limits, iter(enumerate(programs)))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(desc=progress if isinstance(progress, str) else "executing", unit="prog", mininterval=0.5)
        try:
            while True:
                done = batch.step()
                if done is None:
                    return
                for item in done:
                    if bar is not None:
                        bar.update(1)
                    yield item
        finally:
            batch.close()
            if bar is not None:
                bar.close()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers, self._all = self._all, []
        for w in workers:
            w.close()

    def __enter__(self) -> ExecutorPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Batch:
    """The state of one `execute_many` call: the workers it holds, the programs waiting for
    a worker of their flavor, and the replies in flight (keyed by the worker's pipe)."""

    def __init__(self, pool: ExecutorPool, limits: Limits, items: Iterator) -> None:
        self.pool = pool
        self.limits = limits
        self.items = items
        self.exhausted = False
        self.selector = selectors.DefaultSelector()
        self.free: dict[str, list[_Worker]] = {f: [] for f in FLAVORS}
        self.held: dict[str, int] = dict.fromkeys(FLAVORS, 0)
        self.waiting: dict[str, collections.deque] = {f: collections.deque() for f in FLAVORS}
        self.busy: dict[int, tuple[_Worker, Any]] = {}
        self.options = {"trace": True, "record_reads": False}
        # Every base worker that is idle now (at least one: wait for it).
        self._take("base", block=True)
        while self.held["base"] < pool.size and self._take("base", block=False):
            pass

    def _take(self, flavor: str, block: bool) -> bool:
        try:
            worker = self.pool._acquire(flavor, block)  # a numpy worker may be started
        except queue.Empty:
            return False
        self.free[flavor].append(worker)
        self.held[flavor] += 1
        return True

    def _pull(self) -> tuple[Any, ExecResult] | None:
        """Move the next program to its flavor's waiting line; a program that does not
        compile is answered at once."""
        try:
            index, prog = next(self.items)
        except StopIteration:
            self.exhausted = True
            return None
        if isinstance(prog, str):
            prog = Program(prog, "", index)
        elif isinstance(prog, tuple):
            prog = Program(prog[0], prog[1] if len(prog) > 1 else "", index)
        elif prog.key is None:
            prog = Program(prog.source, prog.stdin, index)
        code = _compile(prog.source)
        if isinstance(code, ExecResult):
            return prog.key, code
        self.waiting[flavor_of(prog.source, code)].append((prog.key, code, prog.stdin))
        return None

    def _fill(self, out: list) -> None:
        """Give every free worker a program, pulling programs as needed (at most a few
        waiting for a busy flavor)."""
        while True:
            for flavor, line in self.waiting.items():
                # Hold one more worker of a flavor while its line waits (up to the pool size;
                # when this batch holds none, wait for one that other threads hold).
                while line and (
                    self.free[flavor]
                    or (self.held[flavor] < self.pool.size and self._take(flavor, block=self.held[flavor] == 0))
                ):
                    self._send(self.free[flavor].pop(), *line.popleft())
            queued = sum(map(len, self.waiting.values()))
            if self.exhausted or queued >= 4 * self.pool.size or not (self.free["base"] or queued == 0):
                return
            answered = self._pull()
            if answered is not None:
                out.append(answered)

    def _send(self, worker: _Worker, key, code, stdin: str) -> None:
        try:
            worker.send(marshal.dumps(code), stdin.encode("utf-8", "surrogateescape"), self.limits, self.options)
        except OSError:
            pass  # a dead worker: its reply reads as end of file, handled in step()
        self.busy[worker.proc.stdout.fileno()] = (worker, key)
        self.selector.register(worker.proc.stdout.fileno(), selectors.EVENT_READ)

    def step(self) -> list | None:
        """Results that came in (after refilling the workers), or None when all are done."""
        out: list = []
        self._fill(out)
        if out:
            return out
        if not self.busy:
            return None if self.exhausted and not any(self.waiting.values()) else out
        replies = []
        for sel_key, _ in self.selector.select():
            fd = sel_key.fd
            self.selector.unregister(fd)
            worker, key = self.busy.pop(fd)
            replies.append((key, self._receive(worker)))
        self._fill(out)  # the workers run on while the replies are parsed here
        out.extend((key, _result_from_dict(raw)) for key, raw in replies)
        return out

    def _receive(self, worker: _Worker) -> dict | bytes | None:
        """The worker's raw reply (None when it died: it is replaced); the worker is free again."""
        raw = worker.receive()
        if raw is None:
            worker = self.pool._replace(worker)
        self.free[worker.flavor].append(worker)
        return raw

    def close(self) -> None:
        """Collect the replies still in flight (a worker must not keep a stale reply) and
        give every held worker back to the pool."""
        for fd, (worker, _) in list(self.busy.items()):
            self.selector.unregister(fd)
            self._receive(worker)
        self.busy.clear()
        self.selector.close()
        for flavor, workers in self.free.items():
            for worker in workers:
                self.pool._idle[flavor].put(worker)
            workers.clear()


_default_pool: ExecutorPool | None = None
_default_lock = threading.Lock()


def default_pool() -> ExecutorPool:
    """A lazily started one-worker pool shared by `execute` calls in this process."""
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            _default_pool = ExecutorPool(workers=1)
            atexit.register(_default_pool.close)
        return _default_pool


def execute(source: str, stdin: str = "", limits: Limits | None = None, **options) -> ExecResult:
    """Trace one program in the sandbox (the shared default pool); options as ExecutorPool.execute."""
    return default_pool().execute(source, stdin, limits, **options)


def execute_many(
    programs: Iterable[Program | str | tuple[str, str]],
    workers: int = 2,
    limits: Limits | None = None,
    progress: bool | str = False,
) -> Iterator[tuple[Any, ExecResult]]:
    """Trace many programs on a fresh pool of `workers`; yields (key, result) as they finish."""
    with ExecutorPool(workers, limits) as pool:
        yield from pool.execute_many(programs, progress=progress)
