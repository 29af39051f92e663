"""Framing (RFC 006 §3.1): cutting each direction's bytes into the initiation, commands and message data.

A command is its size (2 octets 0x0000-0xFFFE, or 0xFFFF and 4 octets), the command type octet,
its fields and the command-end octet 0xCE, which the size counts. Message data is no command:
after a HANDLE SEND, NOTIFY or PREPARE the next fragment-size octets of the stream are message data
(unless out-of-band), so the connection tells this side how much data is due (:attr:`Side.due`)
and :meth:`Side.measure` hands it over in pieces as it arrives: a fragment is never buffered whole.

Cutting is the kit's :class:`Framer`; this module adds how long the thing at a position is
(``measure``) and where the next believable command starts after junk (``resync``).
"""

from __future__ import annotations

import struct

from dissectors.amqp_fast.commands import (
    BY_CODE,
    COMMAND_END,
    LONG_SIZE,
    PROTOCOL_ID,
    browse_without_tag,
    layout,
)
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit.framing import Framer
from dissectors.kit.state import plain_state
from dissectors.schema import DecodeError

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")

#: Commands larger than this are not believed (the framer would wait for them): before tuning, and
#: after it when frame-max allows more, the bound is a multiple of frame-max.
DEFAULT_CAP = 1 << 20
MAX_CAP = 64 << 20
#: How far past a fragment's end the next command is looked for before the octets are given up as junk.
LONG_SCAN = 4096


def header(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """(octets of the size header, command size) of the command at ``pos``; (0, 0) when more bytes
    are needed to tell."""
    avail = len(buf) - pos
    if avail < 2:
        return 0, 0
    size = _U16.unpack_from(buf, pos)[0]
    if size != LONG_SIZE:
        return 2, size
    if avail < 6:
        return 0, 0
    return 6, _U32.unpack_from(buf, pos + 2)[0]


def fields_fit(buf: memoryview | bytes, start: int, end: int, code: int, enc: Encoding) -> bool:
    """Whether the fields of command ``code`` fill ``buf[start:end]`` exactly."""
    shapes = [layout(code, enc)]
    if code == 37:
        shapes.append(browse_without_tag(enc))
    view = memoryview(buf)
    for shape in shapes:
        try:
            _, used = shape.read_fields(view, start, end)
        except DecodeError:
            continue
        if used == end:
            return True
    return False


def believable(buf: memoryview | bytes, pos: int, enc: Encoding, cap: int) -> int:
    """The length of a wholly buffered, well-formed command at ``pos`` (known type, command-end in
    place, fields exactly filling it); 0 when more bytes are needed to tell; -1 when it is none."""
    hs, size = header(buf, pos)
    if hs == 0:
        return 0
    if size < 2 or size > cap:
        return -1
    n = hs + size
    if len(buf) - pos < n:
        return 0
    code = buf[pos + hs]
    if code not in BY_CODE or buf[pos + n - 1] != COMMAND_END:
        return -1
    return n if fields_fit(buf, pos + hs + 1, pos + n - 1, code, enc) else -1


@plain_state
class Side(Framer):
    """One direction: the kit's framer, the initiation that may open the client's stream, the message
    data due after a command, and the largest command believed (``cap``)."""

    __slots__ = ("initiation", "due", "cap", "after", "tail", "swallowed")

    def __init__(self, label: str, synced: bool, client: bool) -> None:
        super().__init__(label, synced)
        self.initiation = synced and client  # the client's first two octets
        self.due = 0  # octets of message data still due in the current fragment
        self.cap = DEFAULT_CAP
        #: After a fragment's last octet: "check" until the stream after it shows what it was, then
        #: "ok" (a command follows), "short" (a command began ``swallowed`` octets before the
        #: fragment's end) or "long" (octets that are no command follow it); "" otherwise.
        self.after = ""
        self.tail = b""  # the fragment's last octets, while "check" or "short"
        self.swallowed = 0

    def measure_with(self, enc: Encoding):  # type: ignore[no-untyped-def]
        """The kit's ``measure`` for this side under encoding ``enc`` (a closure: the encoding is the
        connection's, rebuilt from its settings on resume)."""

        def measure(buf: memoryview, pos: int) -> int:
            avail = len(buf) - pos
            if self.due:
                return min(self.due, avail)
            if self.after == "check":
                verdict = self._after_fragment(buf, pos, enc)
                if verdict is not None:
                    return verdict
            if self.initiation:
                # The initiation: protocol id and version. Ids 128-255 are AMQP/Fast, reserved or test
                # protocols, letters AMQP/HTTP (§3.2.2); anything else is a command without it.
                first = buf[pos]
                if first >= PROTOCOL_ID or 65 <= first <= 90 or 97 <= first <= 122:
                    return 2 if avail >= 2 else 0
                self.initiation = False
            hs, size = header(buf, pos)
            if hs == 0:
                return 0
            if size < 2:
                self.reason = f"a command size of {size} octets cannot hold the type and command-end"
                return -1
            if size > self.cap:
                self.reason = f"a command size of {size} octets is more than believable"
                return -1
            if avail <= hs:
                return 0
            if buf[pos + hs] in BY_CODE:
                return hs + size
            # An unknown command type: only believed when its command-end is where it should be.
            if avail < hs + size:
                return 0
            if buf[pos + hs + size - 1] != COMMAND_END:
                self.reason = f"command type {buf[pos + hs]} is unknown and no command-end closes it"
                return -1
            return hs + size

        return measure

    def _after_fragment(self, buf: memoryview, pos: int, enc: Encoding) -> int | None:
        """``measure`` right after a message fragment: a well-formed command should start here. If
        none does, a fragment shorter than its fragment-size shows as a command that began inside
        it (and ends here or later), a longer one as octets before the next well-formed command.
        None: neither explains it, measure as usual."""
        # A known type with its command-end in place is taken for the command it looks like (its
        # fields are the decoder's business); only when that fails are the fragment's bounds doubted.
        hs, size = header(buf, pos)
        avail = len(buf) - pos
        if hs == 0 or (avail <= hs and size >= 2):
            return 0
        known = avail > hs and buf[pos + hs] in BY_CODE
        if known and 2 <= size <= self.cap:
            if avail < hs + size:
                return 0  # maybe a command: wait until it is whole
            if buf[pos + hs + size - 1] == COMMAND_END:
                self.after = "ok"
                return hs + size
        found = self._straddling(buf, pos, enc)
        if found != -1:
            return found
        for q in range(pos + 1, min(len(buf), pos + LONG_SCAN)):
            if believable(buf, q, enc, self.cap) > 0:
                hq, sq = header(buf, pos)
                if hq and hq + sq == q - pos and buf[pos + hq] in BY_CODE:
                    break  # the octets before it are a (malformed) command of their own
                self.after = "long"
                return q - pos
        else:
            if len(buf) - pos < LONG_SCAN:
                return 0  # no command yet: wait for more octets
        self.after = "ok"
        return None

    def _straddling(self, buf: memoryview, pos: int, enc: Encoding) -> int:
        """A well-formed command that begins in the fragment's tail and ends at or after ``pos``: the
        octets of it still to come (``swallowed`` says how many the fragment took); 0: wait; -1: none."""
        tail = self.tail
        t = len(tail)
        avail = len(buf) - pos
        pending = False
        for p in range(t - 1, -1, -1):  # the fewest swallowed octets first
            taken = t - p
            hs, size = header(tail[p:p + 6] + bytes(buf[pos:pos + 6]), 0)
            if hs == 0:
                pending = pending or avail < 6
                continue
            n = hs + size
            if size < 2 or size > self.cap or n <= taken:
                continue
            code = tail[p + hs] if hs < taken else (buf[pos + hs - taken] if hs - taken < avail else None)
            if code is None:
                pending = True
                continue
            if code not in BY_CODE:
                continue
            if n - taken > avail:
                pending = True
                continue
            if buf[pos + n - taken - 1] != COMMAND_END:
                continue
            if believable(tail[p:] + bytes(buf[pos:pos + n - taken]), 0, enc, self.cap) == n:
                self.after = "short"
                self.swallowed = taken
                return n - taken
        return 0 if pending else -1

    def resync_with(self, enc: Encoding):  # type: ignore[no-untyped-def]
        """The kit's ``resync``: the next position where a wholly buffered, well-formed command starts.
        A candidate whose end is not buffered yet cannot be checked: keep scanning for a checkable
        one, and only wait (keeping bytes from the first unchecked candidate on) when none is found."""

        def resync(buf: memoryview, pos: int) -> tuple[int, bool]:
            n = len(buf)
            unchecked = -1
            for p in range(pos, n):
                verdict = believable(buf, p, enc, self.cap)
                if verdict > 0:
                    return p, True
                if verdict == 0 and unchecked < 0:
                    hs, size = header(buf, p)
                    # Only a short-size candidate of a known type is worth waiting for (a junk run
                    # then keeps at most 64 KiB while it waits).
                    if hs == 0 or (hs == 2 and size >= 2 and (n <= p + hs or buf[p + hs] in BY_CODE)):
                        unchecked = p
            return (n if unchecked < 0 else unchecked), False

        return resync
