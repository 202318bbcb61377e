"""Reading user-supplied program and input files, with errors that say how to fix them."""

from __future__ import annotations

import io
import os
import tokenize

from codeexecutor.errors import UsageError


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
