"""Child side of stdin inlining: a stdin that records every read and where it was made.

Installed by the sandbox when a run asks for `record_reads`. It replaces `sys.stdin`,
`input` and `open(0)` / `open('/dev/stdin')` with one recording stream over the run's
input. Each read is recorded as

    [kind, value, is_bytes, lineno, col, end_lineno, end_col]

where the span is the source position (Python 3.11 `co_positions`) of the instruction
of the innermost program frame that was executing when the read happened.
kind is one of input, readline, read, readlines, next, eof (a read that returned nothing),
input_eof (input() raised EOFError).
"""

from __future__ import annotations

import builtins
import io
import sys

from codeexecutor.execution.tracer import PROGRAM_FILENAME

_positions_cache: dict = {}


def _site() -> tuple:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename != PROGRAM_FILENAME:
        frame = frame.f_back
    if frame is None:
        return (None, None, None, None)
    code = frame.f_code
    positions = _positions_cache.get(code)
    if positions is None:
        positions = _positions_cache[code] = list(code.co_positions())
    index = frame.f_lasti // 2
    line, end_line, col, end_col = positions[index] if index < len(positions) else (None, None, None, None)
    return (line, col, end_line, end_col)


class _Shared:
    def __init__(self, data: str) -> None:
        self.data = data
        self.pos = 0
        self.reads: list[list] = []

    def record(self, kind: str, value, is_bytes: bool) -> None:
        if is_bytes:
            value = (
                [v.decode("utf-8", "surrogateescape") for v in value]
                if isinstance(value, list)
                else value.decode("utf-8", "surrogateescape")
            )
        self.reads.append([kind, value, is_bytes, *_site()])

    def line(self, limit: int = -1) -> str:
        end = self.data.find("\n", self.pos)
        end = len(self.data) if end < 0 else end + 1
        if limit is not None and limit >= 0:
            end = min(end, self.pos + limit)
        text = self.data[self.pos : end]
        self.pos = end
        return text

    def rest(self, n: int = -1) -> str:
        end = len(self.data) if n is None or n < 0 else min(len(self.data), self.pos + n)
        text = self.data[self.pos : end]
        self.pos = end
        return text


class RecordingStream:
    """Enough of a text (or, with binary=True, bytes) stdin for contest programs."""

    def __init__(self, shared: _Shared, binary: bool = False) -> None:
        self._s = shared
        self._binary = binary
        self.encoding = "utf-8"
        self.closed = False
        self.name = "<stdin>"
        self.mode = "rb" if binary else "r"

    def _out(self, text: str):
        return text.encode("utf-8", "surrogateescape") if self._binary else text

    def _rec(self, kind: str, value):
        self._s.record(kind if value else "eof", value, self._binary)
        return value

    def readline(self, limit: int = -1):
        return self._rec("readline", self._out(self._s.line(limit)))

    def read(self, n: int = -1):
        return self._rec("read", self._out(self._s.rest(n)))

    def readlines(self, hint: int = -1):
        lines = []
        while True:
            line = self._s.line()
            if not line:
                break
            lines.append(self._out(line))
        self._s.record("readlines", lines, self._binary)
        return lines

    def __iter__(self):
        return self

    def __next__(self):
        line = self._s.line()
        if not line:
            self._s.record("eof", self._out(""), self._binary)
            raise StopIteration
        return self._rec("next", self._out(line))

    @property
    def buffer(self) -> RecordingStream:
        return RecordingStream(self._s, binary=True)

    def fileno(self) -> int:
        return 0

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def install_recorder() -> _Shared:
    """Replace sys.stdin, input and open(0) in this process; return the shared recorder."""
    shared = _Shared(sys.stdin.read())
    stream = RecordingStream(shared)
    sys.stdin = sys.__stdin__ = stream
    real_open = builtins.open

    def input(prompt: str = "") -> str:  # noqa: A001 - stands in for the builtin
        if prompt:
            sys.stdout.write(str(prompt))
        line = shared.line()
        if not line:
            shared.record("input_eof", "", False)
            raise EOFError("EOF when reading a line")
        value = line[:-1] if line.endswith("\n") else line
        shared.record("input", value, False)
        return value

    def open(file, mode="r", *args, **kwargs):  # noqa: A001
        if file in (0, "/dev/stdin") and "w" not in mode and "a" not in mode and "+" not in mode:
            return RecordingStream(shared, binary="b" in mode)
        return real_open(file, mode, *args, **kwargs)

    builtins.input = input
    builtins.open = io.open = open
    return shared
