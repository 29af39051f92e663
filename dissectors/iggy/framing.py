"""Cutting Iggy byte streams into frames: the classic framing (iggy.md 1.1 request, 1.2 response)
and V's consensus header (9.1), with the checks that find the next frame start after junk.

Classic request: ``length u32`` (code + payload, not itself), ``code u32``, payload: 4 + length
bytes. Classic response: ``status u32``, ``length u32`` (payload only), payload: 8 + length bytes.
V, both directions: a 256-byte header whose ``size`` (u32 at offset 48) is the whole frame.
A length over 64 MiB is no frame to wait for: the stream is out of sync (and the limit reported).
"""

from __future__ import annotations

import struct

from dissectors.iggy.commands import COMMANDS, V_COMMANDS
from dissectors.iggy.status import STATUS, known
from dissectors.kit import Framer, plain_state

#: Frames above this are dropped by servers (V) and taken here as loss of sync.
MAX_FRAME = 64 << 20
V_HEADER = 256
#: Bytes examined per resynchronisation attempt (bounds the work on long runs of garbage).
RESYNC_WINDOW = 256 << 10
U32 = struct.Struct("<I")
PAIR = struct.Struct("<II")
_u32 = U32.unpack_from
_pair = PAIR.unpack_from

#: Framing kinds.
REQUEST, RESPONSE, VSR = "request", "response", "vsr"


def v_plausible(buf: memoryview | bytes, i: int) -> bool:
    """Could a V frame start at ``i`` (size at 48 within bounds, a known header command at 60)?"""
    if len(buf) - i < 61:
        return False
    (size,) = _u32(buf, i + 48)
    return V_HEADER <= size <= MAX_FRAME and buf[i + 60] in V_COMMANDS


#: The V header commands a client connection carries (the replica-to-replica ones never reach it).
CLIENT_COMMANDS = frozenset({1, 2, 3, 4, 5, 8, 13})


def v_header(buf: memoryview | bytes, i: int) -> bool:
    """A V header at ``i`` for certain: a client connection's command, a size within bounds, and its
    66 reserved bytes (62..128) all zero."""
    return (len(buf) - i >= 128 and buf[i + 60] in CLIENT_COMMANDS and v_plausible(buf, i)
            and not any(buf[i + 62:i + 128]))


def request_plausible(buf: memoryview | bytes, i: int) -> bool:
    length, code = _pair(buf, i)
    return 4 <= length <= MAX_FRAME and code in COMMANDS


def response_plausible(buf: memoryview | bytes, i: int) -> bool:
    """A response start worth resynchronising on: OK with a payload, or an error status with a
    name and no payload (the unnamed codes of the 0.8.0 ranges are too many to tell junk apart)."""
    status, length = _pair(buf, i)
    return length <= MAX_FRAME and (status == 0 or (status in STATUS and length == 0))


#: Bytes a conversation joined mid-stream may hold before its framing is decided: enough to find a
#: V header after the tail of a large frame the capture missed the start of.
MIDSTREAM_DETECT = 4096


def detect(direction: str, buf: bytes, midstream: bool = False) -> str | None:
    """Classic or V framing from the first bytes of a conversation (None: wait for more).

    A V client frame starts with its zero checksum, which read as a classic request would be a
    length of 0: no client sends that. A V server frame's checksum is no known status. Mid-stream,
    the bytes start inside some frame: a V header (with its zero reserved bytes) anywhere in the
    first :data:`MIDSTREAM_DETECT` bytes decides for V."""
    if len(buf) < 8:
        return None
    if direction == "c2s":
        if request_plausible(buf, 0):
            return REQUEST
    else:
        # A V reply whose checksum is zero reads as an empty classic OK: look at the header first.
        if len(buf) >= 128 and v_header(buf, 0):
            return VSR
        if response_plausible(buf, 0):
            whole = 8 + _pair(buf, 0)[1] == len(buf)
            return RESPONSE if whole or len(buf) >= 128 else None
    if len(buf) < 64:
        return None
    if v_plausible(buf, 0):
        return VSR
    if midstream:
        for i in range(1, len(buf) - 128):
            if v_header(buf, i):
                return VSR
        if len(buf) < MIDSTREAM_DETECT:
            return None
    return REQUEST if direction == "c2s" else RESPONSE
    if len(buf) < 64:
        return None
    if v_plausible(buf, 0):
        return VSR
    if midstream:
        for i in range(1, len(buf) - 128):
            if v_plausible(buf, i) and not any(buf[i + 62:i + 128]):
                return VSR
        if len(buf) < MIDSTREAM_DETECT:
            return None
    return REQUEST if direction == "c2s" else RESPONSE


@plain_state
class IggyFramer(Framer):
    """One direction's kit Framer that measures Iggy frames of its ``kind`` (request, response, vsr)
    and remembers lengths over the 64 MiB limit (``over``: [stream offset, length] pairs) for the
    connection to report."""

    __slots__ = ("kind", "over")

    def __init__(self, label: str, kind: str, synced: bool = True) -> None:
        super().__init__(label, synced)
        self.kind = kind
        self.over: list[list[int]] | None = None

    def measure(self, buf: memoryview, pos: int) -> int:
        kind = self.kind
        if kind == VSR:
            if len(buf) - pos < 52:
                return 0
            (size,) = _u32(buf, pos + 48)
            if size < V_HEADER:
                self.reason = f"size {size} is below the {V_HEADER}-byte header"
                return -1
            length, total = size, size
        elif len(buf) - pos < (4 if kind == REQUEST else 8):
            return 0
        elif kind == REQUEST:
            # length < 4 is still a frame (the server answers InvalidCommand and reads on).
            (length,) = _u32(buf, pos)
            total = length + 4
        else:
            status, length = _pair(buf, pos)
            if length and not known(status):
                # A status no server defines can still be a frame (reported as such), but not one
                # that carries a payload: only OK responses do, and error ones by mistake.
                self.reason = f"status {status} is not defined and has a {length}-byte payload"
                return -1
            total = length + 8
        if length > MAX_FRAME:
            self.reason = f"length {length} is over the 64 MiB limit"
            if self.over is None:
                self.over = []
            # ByteQueue addresses its buffer from _base: pos is an index into that buffer.
            self.over.append([self.queue._base + pos, length])
            return -1
        return total

    def resync(self, buf: memoryview, pos: int) -> tuple[int, bool]:
        """Next plausible frame start, confirmed by the frame after it (or by ending exactly where
        the data ends); else drop what cannot start one and wait for more data."""
        n = len(buf)
        kind = self.kind
        first_maybe = -1
        stop = min(n - (127 if kind == VSR else 7), pos + RESYNC_WINDOW)
        plausible = v_header if kind == VSR else request_plausible if kind == REQUEST else response_plausible
        for i in range(pos, max(stop, pos)):
            if not plausible(buf, i):
                continue
            nxt = i + self._total(buf, i)
            if nxt == n:
                return i, True
            if nxt + (128 if kind == VSR else 8) <= n:
                if plausible(buf, nxt):
                    return i, True
                continue
            if first_maybe < 0:
                first_maybe = i
        if first_maybe >= 0:
            return first_maybe, False
        return max(pos, stop), False

    def _total(self, buf: memoryview, i: int) -> int:
        if self.kind == VSR:
            return _u32(buf, i + 48)[0]
        if self.kind == REQUEST:
            return _u32(buf, i)[0] + 4
        return _u32(buf, i + 4)[0] + 8
