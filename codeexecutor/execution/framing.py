"""Length-prefixed messages over file descriptors (between trusted processes only: the
pool and its workers, a worker and the child it forked before running any program).

`send_bytes`/`recv_bytes` move raw frames (a worker forwards a request to its child and
a child's JSON result to the pool without decoding them); `send`/`recv` pickle.
"""

from __future__ import annotations

import os
import pickle
import struct

_HEADER = struct.Struct(">I")
# What a pool request starts with, for the worker: wall-clock and CPU seconds.
REQUEST = struct.Struct(">dd")


def send_bytes(fd: int, data) -> None:
    """Write one frame: a 4-byte length, then `data` (bytes or a memoryview)."""
    _write_all(fd, memoryview(_HEADER.pack(len(data))))
    _write_all(fd, memoryview(data))


def recv_bytes(fd: int) -> bytes | None:
    """The next frame's bytes, or None at end of file."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    return _read_exact(fd, _HEADER.unpack(header)[0])


def send(fd: int, obj) -> None:
    send_bytes(fd, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def recv(fd: int):
    """The next message, or None at end of file."""
    data = recv_bytes(fd)
    return None if data is None else pickle.loads(data)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    if size == 0:
        return b""
    chunk = os.read(fd, size)
    if len(chunk) == size:  # the usual case: one read
        return chunk
    parts = []
    while True:
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
        if not size:
            return b"".join(parts)
        chunk = os.read(fd, min(size, 1 << 20))
