"""Reading user-supplied program and input files, with errors that say how to fix them."""

from __future__ import annotations

import io
import os
import re
import tokenize

from codeexecutor.errors import UsageError

MAX_PROGRAM_BYTES = 1 << 20  # contest programs are a few KB; the format has line tokens for 200 lines
MAX_PROGRAM_LINES = 20_000
PY2_HINTS = (
    re.compile(r"^\s*print\s+[^\s(=.,)]", re.M),
    re.compile(r"\braw_input\s*\("),
    re.compile(r"\bxrange\s*\("),
    re.compile(r"^\s*exec\s+[\"'\w]", re.M),
    re.compile(r"except\s+\w+\s*,\s*\w+\s*:"),
)


def looks_like_python2(source: str) -> bool:
    return any(p.search(source) for p in PY2_HINTS)


def read_text_file(path: str, what: str = "file") -> str:
    """Read a UTF-8 (or PEP 263-declared) text file; UsageError if missing/binary/undecodable."""
    if not os.path.exists(path):
        raise UsageError(f"{what} not found: {path} (check the path)")
    if os.path.isdir(path):
        raise UsageError(f"{what} is a directory, not a file: {path}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror} (check its permissions)") from exc
    if b"\x00" in data:
        raise UsageError(f"{what} {path} is a binary file (it contains NUL bytes); give a Python source / text file")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {path} is not valid text ({exc}); save it as UTF-8") from exc
    return text[1:] if text.startswith("\ufeff") else text


def read_program(path: str, what: str = "program") -> str:
    """A Python 3 program from a file: UsageError (one line, with the fix) when it is
    missing, not a text file, empty, far larger than a program, or Python 2 code."""
    if os.path.isfile(path) and os.path.getsize(path) > MAX_PROGRAM_BYTES:
        raise UsageError(f"{what} {path} is {os.path.getsize(path):,} bytes; the limit is {MAX_PROGRAM_BYTES:,} "
                         "(give one program, not a data file)")
    source = read_text_file(path, what)
    if not source.strip():
        raise UsageError(f"{what} {path} is empty; give a Python 3 program")
    lines = source.count("\n") + 1
    if lines > MAX_PROGRAM_LINES:
        raise UsageError(f"{what} {path} has {lines:,} lines; the limit is {MAX_PROGRAM_LINES:,} (give one program)")
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        if looks_like_python2(source):
            raise UsageError(f"{what} {path} is Python 2 code (line {exc.lineno}: {exc.msg}); "
                             "convert it with 2to3, only Python 3 runs here") from None
    except (ValueError, RecursionError, MemoryError):
        pass  # the sandbox reports these as its syntax_error status
    return source
