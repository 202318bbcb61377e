"""Writes a reader never sees half done: the one helper every long job writes through.

Each writes beside its target (`PATH.tmp`, the same file system) and renames it into place
with `os.replace`, which is atomic on POSIX: a job killed mid-write leaves the old file
(or none), never a torn one, and a job started again can trust what it finds. An
append-only JSON Lines file (a build's journal, an evaluation's answers) is read back by
`complete_lines` and cut back to them by `cut_to`, so a line a kill tore is redone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def replacing(path: str | os.PathLike) -> Iterator[str]:
    """A temporary path beside `path` (`PATH.tmp`) to write a file or a whole folder into; on
    success it replaces `path`, on an exception it is removed and `path` is left as it was.
    A folder it replaces is first renamed aside (`PATH.old`) and deleted after, so that a
    kill during the deletion never leaves `path` half deleted."""
    path = os.fspath(path).rstrip("/")
    tmp, old = path + ".tmp", path + ".old"
    _remove(tmp)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if os.path.isdir(tmp) and os.path.isdir(path) and not os.path.islink(path):
        _remove(old)
        os.replace(path, old)
        os.replace(tmp, path)
        _remove(old)
    else:
        os.replace(tmp, path)


def write_text(path: str | os.PathLike, text: str) -> None:
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path: str | os.PathLike, obj, indent: int | None = 2, **dump) -> None:
    """`obj` as JSON (UTF-8, a final newline where indented)."""
    text = json.dumps(obj, indent=indent, **dump)
    write_text(path, text + ("\n" if indent is not None else ""))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def complete_lines(path: str | os.PathLike) -> Iterator[tuple[int, object]]:
    """(byte offset after the line, the parsed line) of each whole JSON line of an
    append-only file, from the start up to the first line cut short or unreadable (a
    kill's), which ends the reading; nothing where there is no file. Reading only: a file
    another process is still appending to is safe to read."""
    if not os.path.exists(path):
        return
    offset = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            try:
                obj = json.loads(raw)
            except ValueError:
                return
            offset += len(raw)
            yield offset, obj


def cut_to(path: str | os.PathLike, length: int) -> None:
    """The append-only file cut back to its first `length` bytes (what `complete_lines`
    kept), so the next append follows a whole line."""
    if os.path.exists(path):
        with open(path, "r+b") as f:
            f.truncate(length)
