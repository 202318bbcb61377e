"""Building a sandboxed run's result: its output, the error's program line, the JSON."""

from __future__ import annotations

import json
import os
import sys

try:
    import orjson
except ImportError:  # optional: json does the same, slower
    orjson = None

from codeexecutor.execution.tracer import PROGRAM_FILENAME


def read_fd1(path: str, inode: int) -> str:
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


def to_json(payload: dict) -> bytes:
    """The result as UTF-8 JSON: orjson (20x faster than json on a 1,024-step trace);
    json for what orjson refuses (lone surrogates, ints over 64 bits) or without it."""
    if orjson is not None:
        try:
            return orjson.dumps(payload)
        except (TypeError, ValueError):
            pass
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace")


def program_line(exc: BaseException) -> int | None:
    """The line of the innermost program frame in the traceback (where it was raised)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == PROGRAM_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _install_paths() -> tuple[tuple[str, str], ...]:
    """Where this interpreter's standard library and packages live, longest first: an error
    message naming a file there names it from `<stdlib>/` or `<site-packages>/` (the same
    message on every interpreter and machine)."""
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths[k]: "<stdlib>" for k in ("stdlib", "platstdlib") if paths.get(k)}
    found.update({paths[k]: "<site-packages>" for k in ("purelib", "platlib") if paths.get(k)})
    found.update({p: "<site-packages>" for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))})
    return tuple(sorted(found.items(), key=lambda kv: -len(kv[0])))


_INSTALL = _install_paths()


def message_of(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return "<str failed>"
    for path, name in _INSTALL:
        if path in text:
            text = text.replace(path, name)
    return text
