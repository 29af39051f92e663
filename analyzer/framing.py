"""Cutting one direction's byte stream into frames, with resynchronisation.

Protocol-agnostic: a dissector supplies ``measure`` (how long is the frame that starts here?) and
``resync`` (where does the next plausible frame start?). The queue only ever holds bytes that
really arrived, so a length read from the wire never decides an allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: ``measure(buf, pos)`` -> total length of the frame at ``pos``; 0 = need more bytes to tell;
#: -1 = not a frame start (the stream is out of sync).
Measure = Callable[[memoryview, int], int]
#: ``resync(buf, pos)`` -> (index, found). found: a frame starts at index. Not found: every byte
#: before index can be dropped and more data is needed.
Resync = Callable[[memoryview, int], tuple[int, bool]]


@dataclass(slots=True)
class Piece:
    """A cut piece of the stream: a whole frame, or bytes skipped while out of sync."""

    offset: int  # stream offset of the first byte
    data: bytes
    junk: bool = False


class ByteQueue:
    """Ordered bytes of one direction, addressed by stream offset."""

    __slots__ = ("_buf", "_pos", "_base", "synced")

    def __init__(self, synced: bool = True) -> None:
        self._buf = bytearray()
        self._pos = 0  # read position inside _buf
        self._base = 0  # stream offset of _buf[0]
        self.synced = synced

    @property
    def offset(self) -> int:
        """Stream offset of the next unread byte."""
        return self._base + self._pos

    def __len__(self) -> int:
        return len(self._buf) - self._pos

    def append(self, data: bytes) -> None:
        self._buf += data

    def lost(self, length: int) -> int:
        """A hole of ``length`` bytes follows what is buffered: drop the unread (now useless)
        partial frame, skip the hole, and fall out of sync. Returns how many bytes were dropped."""
        dropped = len(self)
        self._base += len(self._buf) + length
        self._buf = bytearray()
        self._pos = 0
        self.synced = False
        return dropped

    def cut(self, measure: Measure, resync: Resync) -> Iterator[Piece]:
        buf = self._buf
        view = memoryview(buf)
        try:
            while True:
                pos = self._pos
                if pos >= len(buf):
                    break
                if not self.synced:
                    at, found = resync(view, pos)
                    at = max(pos, min(at, len(buf)))
                    if at > pos:
                        yield Piece(self._base + pos, bytes(view[pos:at]), junk=True)
                        self._pos = at
                    if not found:
                        break
                    self.synced = True
                    continue
                n = measure(view, pos)
                if n == 0 or (n > 0 and pos + n > len(buf)):
                    break
                if n < 0:
                    self.synced = False
                    continue
                self._pos = pos + n
                yield Piece(self._base + pos, bytes(view[pos:pos + n]))
        finally:
            view.release()
            self._compact()

    def drain(self) -> Piece | None:
        """At end of stream: whatever is left unframed."""
        if len(self) == 0:
            return None
        piece = Piece(self.offset, bytes(self._buf[self._pos:]), junk=True)
        self._base += len(self._buf)
        self._buf = bytearray()
        self._pos = 0
        return piece

    def _compact(self) -> None:
        if self._pos and (self._pos >= len(self._buf) or self._pos > 65536):
            del self._buf[:self._pos]
            self._base += self._pos
            self._pos = 0
