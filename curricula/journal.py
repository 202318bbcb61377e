"""A crash-safe, resumable record of finished work units (programs).

Each unit is appended as its records (JSON lines) followed by a done line, in one write
that is flushed and fsync'ed. On open, the file is cut back to the end of the last done
line: a unit interrupted by `kill -9` (or a torn last line) disappears and is redone,
complete units are kept and skipped. Nothing is lost and nothing is duplicated.

A done line also names the interpreter (`major.minor`) that traced its unit: traces are
the same on 3.11, 3.12 and 3.13, but a build stays one interpreter's, so a resume or a
merge across interpreters is refused (`check_python`, `merge_shards`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator

from codeexecutor.atomic import complete_lines, cut_to

DONE = "_done"
PYTHON = "{}.{}".format(*sys.version_info[:2])  # the interpreter that traces: a done line records it (docs/sandbox.md)


class Journal:
    def __init__(self, path: str) -> None:
        self.path = path
        self.done: set[str] = set()
        self.pythons: set[str] = set()  # interpreters named by the done lines
        self.records_kept = 0
        good_end = pending = 0
        for offset, obj in complete_lines(path):  # a unit's records count once its done line is whole
            if isinstance(obj, dict) and DONE in obj:
                self.done.add(obj[DONE])
                if obj.get("python"):
                    self.pythons.add(obj["python"])
                self.records_kept += pending
                pending = 0
                good_end = offset
            else:
                pending += 1
        cut_to(path, good_end)
        self._file = open(path, "ab")

    def check_python(self) -> None:
        """Refuse to go on with a journal another interpreter began (UsageError)."""
        from codeexecutor.errors import UsageError

        others = sorted(self.pythons - {PYTHON})
        if others:
            self.close()
            raise UsageError(
                f"{os.path.dirname(self.path) or '.'} was traced by Python {', '.join(others)} and this is "
                f"Python {PYTHON}: resume it with Python {others[0]}, or build into a new --out"
            )

    def write_unit(self, unit: str, records: list[dict], meta: dict | None = None, sync: bool = True) -> None:
        """Append a finished unit. `sync=False` leaves the fsync to `sync()`: a merge
        copying many units commits them together, not one disk flush per program."""
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
        lines.append(json.dumps({DONE: unit, "python": PYTHON, **(meta or {})}, ensure_ascii=False))
        self._file.write(("\n".join(lines) + "\n").encode("utf-8"))
        if sync:
            self.sync()
        self.done.add(unit)

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
        self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def traced_by(path: str) -> str:
    """The interpreter a journal's units were traced by (this one for an empty journal, or
    one written before done lines named it)."""
    found = set()
    for kind, obj in read_journal(path):
        if kind == "done" and obj.get("python"):
            found.add(obj["python"])
    return ", ".join(sorted(found)) or PYTHON


def read_journal(path: str) -> Iterator[tuple[str, dict]]:
    """("record", obj) and ("done", obj) entries of a (closed) journal, in order."""
    size, end = os.path.getsize(path), 0  # a missing journal raises
    for offset, obj in complete_lines(path):
        end = offset
        yield ("done" if DONE in obj else "record"), obj
    if end < size:  # a torn last line is a kill's; an unreadable line before the end is damage
        with open(path, "rb") as f:
            f.seek(end)
            if b"\n" in f.read():
                raise ValueError(f"{path}: the line after byte {end} is not JSON: the journal is damaged")


def record_units(
    journal: Journal,
    results: Iterable[tuple[str, list[dict], dict]],
    total: int,
    done: int,
    desc: str,
    unit: str,
    progress: bool = True,
    logger: logging.Logger | None = None,
) -> Counter:
    """Write each finished unit (`(key, records, meta)`, in the order they come) to the
    journal as it arrives, with a progress bar over `total` units of which `done` were
    finished before; returns the sum of the units' `meta["counts"]`. The journal is
    closed at the end, also when a unit's work raises."""
    bar = None
    if progress:
        from codeexecutor.progress import bar as progress_bar

        bar = progress_bar(
            total=total, initial=done, desc=desc, unit=unit, logger=logger
        )  # a line in build.log every few seconds
    counts: Counter = Counter()
    try:
        for key, records, meta in results:
            journal.write_unit(key, records, meta)
            counts.update(meta.get("counts", {}))
            if bar is not None:
                bar.update(1)
    finally:
        journal.close()
        if bar is not None:
            bar.close()
    return counts
