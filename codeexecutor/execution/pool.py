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
"""

from __future__ import annotations

import atexit
import json
import logging
import marshal
import os
import queue
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import codeexecutor
from codeexecutor.execution.records import ExecError, ExecResult, ExecStatus, Limits
from codeexecutor.execution.tracer import PROGRAM_FILENAME
from codeexecutor.execution.framing import recv, send

log = logging.getLogger(__name__)

_PY2_HINTS = (
    re.compile(r"^\s*print\s+[^\s(=.,)]", re.M),
    re.compile(r"\braw_input\s*\("),
    re.compile(r"\bxrange\s*\("),
    re.compile(r"^\s*exec\s+[\"'\w]", re.M),
    re.compile(r"except\s+\w+\s*,\s*\w+\s*:"),
)


@dataclass(frozen=True)
class Program:
    """One program to run: its source, the text on its stdin, and a key for the caller."""

    source: str
    stdin: str = ""
    key: Any = None


def compile_program(source: str) -> bytes | ExecResult:
    """marshal bytes of the compiled program, or a SYNTAX_ERROR result saying why not."""
    if "\x00" in source:
        return ExecResult(ExecStatus.SYNTAX_ERROR, error=ExecError("ValueError", "source contains NUL bytes (is this a binary file?)", None))
    try:
        code = compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True)
    except SyntaxError as exc:
        message = f"{exc.msg}"
        if any(p.search(source) for p in _PY2_HINTS):
            message += " (this looks like Python 2 code; only Python 3 runs here: convert it with 2to3)"
        return ExecResult(ExecStatus.SYNTAX_ERROR, error=ExecError(type(exc).__name__, message, exc.lineno))
    except (RecursionError, MemoryError) as exc:  # absurdly nested source
        return ExecResult(ExecStatus.SYNTAX_ERROR, error=ExecError(type(exc).__name__, "source too deeply nested to compile", None))
    return marshal.dumps(code)


def _result_from_dict(d: dict | bytes) -> ExecResult:
    """A worker answers with a dict, or with the child's JSON bytes passed through."""
    try:
        return ExecResult.from_json(json.loads(d) if isinstance(d, bytes) else d)
    except (KeyError, TypeError, ValueError) as exc:
        return ExecResult(ExecStatus.ERROR, error=ExecError("SandboxError", f"malformed result: {exc}", None))


class _Worker:
    """One worker process and its pipes; used by one thread at a time."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(codeexecutor.__file__)))
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",  # set before the interpreter starts: fixes set iteration order
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": root,
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codeexecutor.execution.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,
        )
        hello = recv(self.proc.stdout.fileno())
        if not hello or not hello.get("ready"):
            self.close()
            raise RuntimeError("a sandbox worker failed to start (is the codeexecutor package importable?)")
        self.network_isolated = hello.get("network_isolated", False)

    def run(self, code_bytes: bytes, stdin: bytes, limits: Limits, options: dict | None = None) -> dict | bytes | None:
        try:
            send(self.proc.stdin.fileno(), (code_bytes, stdin, limits.to_wire(), options))
            return recv(self.proc.stdout.fileno())
        except (OSError, EOFError):
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

    def __init__(self, workers: int = 2, limits: Limits | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.limits = limits or Limits()
        self.size = workers
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(workers):
            self._add_worker()

    def _add_worker(self) -> _Worker:
        worker = _Worker()
        with self._lock:
            self._all.append(worker)
        self._idle.put(worker)
        return worker

    @property
    def network_isolated(self) -> bool:
        return all(w.network_isolated for w in self._all)

    def execute(
        self, source: str, stdin: str = "", limits: Limits | None = None, *, trace: bool = True, record_reads: bool = False
    ) -> ExecResult:
        """Run one program in the sandbox and return its result.

        trace=False runs it without the tracer (no steps); record_reads=True also returns
        every stdin read with the source span that made it (in `result.reads`).
        """
        if self._closed:
            raise RuntimeError("the ExecutorPool is closed")
        limits = limits or self.limits
        compiled = compile_program(source)
        if isinstance(compiled, ExecResult):
            return compiled
        worker = self._idle.get()
        try:
            options = {"trace": trace, "record_reads": record_reads}
            raw = worker.run(compiled, stdin.encode("utf-8", "surrogateescape"), limits, options)
            if raw is None:  # the worker died: replace it, report the program
                log.warning("a sandbox worker died; starting a new one")
                with self._lock:
                    self._all.remove(worker)
                worker.close()
                worker = _Worker()
                with self._lock:
                    self._all.append(worker)
                return ExecResult(ExecStatus.ERROR, error=ExecError("SandboxError", "the sandbox worker died while running this program", None))
            return _result_from_dict(raw)
        finally:
            self._idle.put(worker)

    def execute_many(
        self,
        programs: Iterable[Program | str | tuple[str, str]],
        limits: Limits | None = None,
        progress: bool | str = False,
    ) -> Iterator[tuple[Any, ExecResult]]:
        """Run many programs on all workers; yield (key, result) as each finishes.

        A program given as a str or (source, stdin) tuple gets its index as key.
        `progress` shows a tqdm bar (a str is used as its description).
        """
        items = iter(enumerate(programs))
        feed_lock = threading.Lock()
        results: queue.Queue = queue.Queue(maxsize=4 * self.size)
        done_marker = object()
        stop = threading.Event()  # set when the consumer stops early

        def put(item) -> None:
            while not stop.is_set():
                try:
                    results.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue

        def feeder() -> None:
            try:
                while not stop.is_set():
                    with feed_lock:
                        try:
                            index, prog = next(items)
                        except StopIteration:
                            return
                    if isinstance(prog, str):
                        prog = Program(prog, "", index)
                    elif isinstance(prog, tuple):
                        prog = Program(prog[0], prog[1] if len(prog) > 1 else "", index)
                    elif prog.key is None:
                        prog = Program(prog.source, prog.stdin, index)
                    try:
                        result = self.execute(prog.source, prog.stdin, limits)
                    except Exception as exc:  # never let one program stop the batch
                        result = ExecResult(ExecStatus.ERROR, error=ExecError("SandboxError", repr(exc), None))
                    put((prog.key, result))
            finally:
                put(done_marker)

        threads = [threading.Thread(target=feeder, daemon=True) for _ in range(self.size)]
        for t in threads:
            t.start()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(desc=progress if isinstance(progress, str) else "executing", unit="prog", mininterval=0.5)
        running = len(threads)
        try:
            while running:
                item = results.get()
                if item is done_marker:
                    running -= 1
                    continue
                if bar is not None:
                    bar.update(1)
                yield item
        finally:
            stop.set()
            if bar is not None:
                bar.close()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers, self._all = self._all, []
        for w in workers:
            w.close()

    def __enter__(self) -> "ExecutorPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
