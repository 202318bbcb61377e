"""The captured output of a sandboxed run (the tracer attaches it to steps)."""

from __future__ import annotations

import io


class OutputSink(io.RawIOBase):
    """Binary sink under a write-through TextIOWrapper: records everything written,
    keeps what the tracer has not attached to a step yet in `pending`, and calls
    `on_overflow` once the total exceeds `cap` bytes; if that returns, bytes past the
    cap are dropped."""

    def __init__(self, cap: int, on_overflow) -> None:
        super().__init__()
        self.chunks: list[bytes] = []
        self.pending: list[bytes] = []
        self.size = 0
        self.cap = cap
        self.on_overflow = on_overflow

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytes(b)
        self.size += len(data)
        if self.size > self.cap:
            keep = len(data) - (self.size - self.cap)
            if keep > 0:
                self.chunks.append(data[:keep])
                self.pending.append(data[:keep])
            self.size = self.cap
            self.on_overflow()
            return len(data)
        self.chunks.append(data)
        self.pending.append(data)
        return len(data)

    def take(self) -> str:
        text = b"".join(self.pending).decode("utf-8", "replace")
        self.pending.clear()
        return text

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")
