"""Length-prefixed pickle messages over file descriptors (between trusted processes only:
the pool and its workers, a worker and the child it forked before running any program)."""

from __future__ import annotations

import os
import pickle
import struct

_HEADER = struct.Struct(">I")


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def recv(fd: int):
    """The next message, or None at end of file."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    data = _read_exact(fd, _HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


def _read_exact(fd: int, size: int) -> bytes | None:
    parts = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)
