"""Reading user-supplied program and input files, with errors that say how to fix them."""

from __future__ import annotations

import io
import os
import re
import sys
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


# Syntax that parses only from a given interpreter on: (version, what, where in the source).
NEWER_SYNTAX = (
    (
        (3, 13),
        "a type parameter default (PEP 696)",
        re.compile(r"^\s*(?:async\s+def|def|class)\s+\w+\s*\[[^\]]*=", re.M),
    ),
    ((3, 12), "type parameters (PEP 695)", re.compile(r"^\s*(?:async\s+def|def|class)\s+\w+\s*\[", re.M)),
    ((3, 12), "a type alias statement (PEP 695)", re.compile(r"^\s*type\s+\w+\s*(?:\[[^\]]*\]\s*)?=", re.M)),
)
_FSTRING_PREFIX = re.compile(r"(?<![\w'\"])[rRbB]?[fF][rR]?['\"]")


def parse_quietly(source: str, mode: str = "exec"):
    """`ast.parse` without the warnings a program's own source raises while it is parsed
    (an invalid escape sequence, say): they belong to that program, not to the caller."""
    import ast
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, mode=mode)


def looks_like_python2(source: str) -> bool:
    return any(p.search(source) for p in PY2_HINTS)


def newer_python(source: str, exc: SyntaxError) -> tuple[str, str] | None:
    """(version, feature) when `source` failed to compile here only because it is written
    for a newer interpreter: PEP 695 type parameters and type aliases, PEP 696 defaults, or
    an f-string that only PEP 701 (3.12) parses (quotes reused inside it, a backslash or a
    comment in a replacement field); None otherwise."""
    here = sys.version_info[:2]
    for version, what, pattern in NEWER_SYNTAX:
        if version > here and pattern.search(source):
            return "{}.{}".format(*version), what
    line = ""
    if exc.lineno and 0 < exc.lineno <= source.count("\n") + 1:
        line = source.splitlines()[exc.lineno - 1] if source.splitlines() else ""
    if here < (3, 12) and (exc.msg or "").startswith("f-string") and _FSTRING_PREFIX.search(line or source):
        return "3.12", "an f-string that only Python 3.12 parses (PEP 701)"
    return None


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
        raise UsageError(
            f"{what} {path} is {os.path.getsize(path):,} bytes; the limit is {MAX_PROGRAM_BYTES:,} "
            "(give one program, not a data file)"
        )
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
            raise UsageError(
                f"{what} {path} is Python 2 code (line {exc.lineno}: {exc.msg}); "
                "convert it with 2to3, only Python 3 runs here"
            ) from None
        newer = newer_python(source, exc)
        if newer is not None:
            raise UsageError(
                f"{what} {path} uses {newer[1]}, which needs Python {newer[0]} and this is Python "
                f"{sys.version_info[0]}.{sys.version_info[1]} (line {exc.lineno}): run it with Python "
                f"{newer[0]} or later"
            ) from None
    except (ValueError, RecursionError, MemoryError):
        pass  # the sandbox reports these as its syntax_error status
    return source
