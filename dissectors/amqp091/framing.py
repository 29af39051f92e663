"""Framing: cutting each direction's bytes into AMQP 0-9-1 frames (spec §4.2.3) with the kit's
:class:`Framer`, which resynchronises after junk and reports an incomplete frame at the end.

What AMQP adds: the 8-byte protocol header that may start the client's stream, how plausible a
frame header is (``measure``), and where the next frame may start after junk (``resync``).
"""

from __future__ import annotations

import struct

from dissectors.amqp091.codes import FRAME_END
from dissectors.amqp091.methods import CLASSES
from dissectors.kit.framing import ByteQueue, Framer
from dissectors.kit.state import plain_state

_HDR = struct.Struct(">BHI")
KNOWN_TYPES = frozenset((1, 2, 3, 8))

#: Frames larger than this are not believed before tune-ok (start-ok can carry big OAuth tokens).
PRE_TUNE_CAP = 1 << 20
UNLIMITED_CAP = 64 << 20
MIDSTREAM_CAP = 16 << 20


@plain_state
class Side(Framer):
    """One direction: the kit's framer (this object itself, rather than one more object per
    direction of every connection), whether a protocol header may still come, and the largest
    frame believed (``cap``: frame-max allows, else junk)."""

    __slots__ = ("header_possible", "direct", "cap")
    #: measure's length of a known frame type comes from its header alone; the one setting it
    #: reads, ``cap``, is lowered at tune (Amqp091Connection calls remeasure then).
    stable_measure = True

    def __init__(self, label: str, synced: bool, cap: int) -> None:
        super().__init__(label, synced)
        self.header_possible = synced
        # Nothing buffered, in sync, no header or junk pending: segments are framed in place.
        self.direct = False
        self.cap = cap

    def update_direct(self) -> None:
        q = self.queue
        self.direct = not len(q) and q.synced and not self.header_possible and self.junk_at < 0

    def measure(self, buf: memoryview, pos: int) -> int:
        """The kit's ``measure``: the length of the frame at ``pos``, 0 to wait, -1 for junk."""
        avail = len(buf) - pos
        if self.header_possible:
            n = min(avail, 4)
            if bytes(buf[pos:pos + n]) == b"AMQP"[:n]:
                return 8 if avail >= 8 else 0
            self.header_possible = False
        if avail < 7:
            return 0
        ftype, _ch, size = _HDR.unpack_from(buf, pos)
        if size > self.cap:
            self.reason = f"a frame header claims {size} payload bytes, more than plausible"
            return -1
        if ftype in KNOWN_TYPES:
            return size + 8
        # Unknown type: only believe it when its frame-end octet is where it should be.
        if avail < size + 8:
            return 0
        if buf[pos + size + 7] != FRAME_END:
            self.reason = f"frame type {ftype} is unknown and no frame-end follows its payload"
            return -1
        return size + 8

    def resync(self, buf: memoryview, pos: int) -> tuple[int, bool]:
        """The kit's ``resync``. A candidate is a known frame type with a plausible size whose
        frame-end octet is 0xCE (and, for a method, a known class). A candidate whose end is not
        buffered yet cannot be checked: keep scanning for a checkable one, and only wait (keeping
        bytes from the first unchecked candidate on) when none is found."""
        unpack = _HDR.unpack_from
        n = len(buf)
        cap = self.cap
        p = pos
        unchecked = -1
        while p < n:
            t = buf[p]
            if t in (1, 2, 3, 8):
                if p + 7 > n:
                    return (p if unchecked < 0 else unchecked), False
                _t, _ch, size = unpack(buf, p)
                if size <= cap:
                    end = p + 7 + size
                    if end < n:
                        if buf[end] == FRAME_END and (t != 1 or size >= 4 and (buf[p + 7] << 8 | buf[p + 8])
                                                      in CLASSES):
                            return p, True
                    elif unchecked < 0:
                        unchecked = p
            p += 1
        return (n if unchecked < 0 else unchecked), False


__all__ = ["ByteQueue", "KNOWN_TYPES", "MIDSTREAM_CAP", "PRE_TUNE_CAP", "Side", "UNLIMITED_CAP"]
