"""The hot path: commands and message data cut straight from a segment.

Nearly every segment of a busy connection starts on a command boundary with nothing buffered on
its side: commands (HANDLE SEND / NOTIFY, CHANNEL ACK) each followed by its fragment's octets.
``cut_segment`` cuts them from the segment itself, as the kit's framer with :meth:`Side.measure`
would, without copying the segment into the queue, a generator per piece or a copy per piece of
message data it passes on whole; each piece then goes where the general path sends it
(:meth:`AmqpFastConnection._command`, :meth:`Messages.data`, :meth:`Messages.finish_fragment`).
It stops at the first thing it would have to wait for or doubt (a partial command, a long size,
an unknown type, the octets after a fragment that are not a whole well-formed command) and
leaves the rest of the segment to the framer, which then sees exactly what it would have seen.
tests/test_amqp_fast_hot.py proves both ways give the same (``AmqpFastConnection(hot=False)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.api import Direction, Event
from dissectors.amqp_fast.commands import BY_CODE, COMMAND_END, LONG_SIZE
from dissectors.amqp_fast.framing import Side
from dissectors.amqp_fast.messages import Messages

if TYPE_CHECKING:
    from dissectors.amqp_fast.connection import AmqpFastConnection


def direct(side: Side) -> bool:
    """Whether ``side`` may cut straight from the next segment: nothing buffered, in sync, no junk
    run waiting for its finding, past the initiation, and no doubt about a fragment's end."""
    return (not len(side.queue) and side.queue.synced and side.junk_at < 0 and not side.initiation
            and (side.after == "" or side.after == "check"))


def cut_segment(conn: AmqpFastConnection, d: Direction, side: Side, msgs: Messages, data: bytes,
                out: list[Event]) -> int:
    """Cut whole pieces from ``data`` into ``out`` (as ``feed``'s loop would); returns how many
    octets were used. Only when ``direct(side)``; the caller moves the queue past them."""
    n = len(data)
    pos = 0
    base = side.queue.offset
    enc = conn.enc
    command = conn._command
    while pos < n:
        due = side.due
        if due:
            take = due if due <= n - pos else n - pos
            chunk = data[pos:pos + take] if take != n else data
            side.due = due - take
            msgs.data(chunk, enc)
            pos += take
            if due == take:
                side.after, side.tail = "check", msgs.tail()
            continue
        # A command: the 2-octet size form (never above the framer's cap, at least DEFAULT_CAP),
        # whole in this segment, of a known type.
        if n - pos < 3:
            break
        size = data[pos] << 8 | data[pos + 1]
        stop = pos + 2 + size
        if size < 2 or size == LONG_SIZE or stop > n or data[pos + 2] not in BY_CODE:
            break
        if side.after:  # "check": the octets after a fragment
            if data[stop - 1] != COMMAND_END:
                break  # the framer doubts the fragment's end
            side.after, side.tail = "", b""
            out.append(msgs.finish_fragment(d, enc))
        out.append(command(d, data[pos:stop], base + pos))
        pos = stop
    if pos:
        side.seen_frame = True
        side.after_gap = False
    return pos
