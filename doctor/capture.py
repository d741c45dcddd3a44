"""Bounded capture of a process's output: keep the head and the tail, drop the middle."""

from __future__ import annotations

DEFAULT_LIMIT = 1 << 20  # 1 MiB per stream is plenty to diagnose and cheap to keep


class CappedBuffer:
    """Accumulates bytes up to `limit`, keeping the first and last halves when more arrives."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        half = self.limit // 2
        room = half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * half:  # trim lazily so each write stays amortised O(len)
                del self._tail[: len(self._tail) - half]

    @property
    def truncated(self) -> int:
        """How many bytes were dropped from the middle."""
        return max(0, self.total - self.limit) if self.total > self.limit else 0

    def getvalue(self) -> bytes:
        half = self.limit // 2
        tail = bytes(self._tail[-half:]) if len(self._tail) > half else bytes(self._tail)
        if self.total <= self.limit:
            return bytes(self._head) + bytes(self._tail)
        dropped = self.total - len(self._head) - len(tail)
        return bytes(self._head) + f"\n[... {dropped} bytes omitted by dfdoctor ...]\n".encode() + tail

    def text(self) -> str:
        return self.getvalue().decode("utf-8", "replace")
