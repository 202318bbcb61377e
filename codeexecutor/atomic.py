"""Writes a reader never sees half done: the one helper every long job writes through.

Each writes beside its target (`PATH.tmp`, the same file system) and renames it into place
with `os.replace`, which is atomic on POSIX: a job killed mid-write leaves the old file
(or none), never a torn one, and a job started again can trust what it finds.
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
