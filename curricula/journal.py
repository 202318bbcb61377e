"""A crash-safe, resumable record of finished work units (programs).

Each unit is appended as its records (JSON lines) followed by a done line, in one write
that is flushed and fsync'ed. On open, the file is cut back to the end of the last done
line: a unit interrupted by `kill -9` (or a torn last line) disappears and is redone,
complete units are kept and skipped. Nothing is lost and nothing is duplicated.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

DONE = "_done"


class Journal:
    def __init__(self, path: str) -> None:
        self.path = path
        self.done: set[str] = set()
        self.records_kept = 0
        good_end = 0
        if os.path.exists(path):
            pending = 0
            with open(path, "rb") as f:
                offset = 0
                for raw in f:
                    offset += len(raw)
                    if not raw.endswith(b"\n"):
                        break  # torn last line
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        break
                    if isinstance(obj, dict) and DONE in obj:
                        self.done.add(obj[DONE])
                        self.records_kept += pending
                        pending = 0
                        good_end = offset
                    else:
                        pending += 1
            with open(path, "r+b") as f:
                f.truncate(good_end)
        self._file = open(path, "ab")

    def write_unit(self, unit: str, records: list[dict], meta: dict | None = None) -> None:
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
        lines.append(json.dumps({DONE: unit, **(meta or {})}, ensure_ascii=False))
        self._file.write(("\n".join(lines) + "\n").encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.done.add(unit)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_journal(path: str) -> Iterator[tuple[str, dict]]:
    """("record", obj) and ("done", obj) entries of a (closed) journal, in order."""
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            obj = json.loads(raw)
            yield ("done" if DONE in obj else "record"), obj
