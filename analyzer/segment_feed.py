"""The engine's per-packet path: a segment of a conversation already under way, reassembled and
fed to its dissector.

Functions of the engine (:class:`analyzer.engine.Analyzer`, passed as ``engine``) moved into a
module of their own so that they are compiled (analyzer/native.py) together with the classes they
read on every packet (analyzer/flows.py, analyzer/reassembly.py); the engine's generators and its
stamping of frames (``_stream``, ``_fast_released``, ``_emit``) stay in it and are called back.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from analyzer.api import Direction, Event
from analyzer.flows import Conversation, Side
from analyzer.packets import ACK
from analyzer.reassembly import Data

C2S: Final = Direction.C2S
S2C: Final = Direction.S2C
NOTHING: Final[tuple[Event, ...]] = ()


def fast_segment(engine: Any, side: Side, seq: int, ack: int, flags: int, payload: bytes, number: int,
                 ts: float) -> Iterable[Event] | None:
    """A segment of a known, decided conversation without SYN, FIN or RST. The common case (at
    most one in-order piece of data) goes without generators and gives back what the dissector
    made of it; anything else (data released from the out-of-order buffer, a loss, a mismatch)
    is given back as a generator, so that however many frames one packet releases they stream
    out one at a time instead of being collected first."""
    conv = side.conv
    assert conv is not None
    info = conv.info
    info.packets += 1
    info.last_ts = ts
    if conv.foreign:
        foreign_bytes(conv, side, len(payload))
        return None
    direction = C2S if conv.c2s is side else S2C
    if flags & ACK and ack != side.last_ack:
        other = conv.s2c if direction is C2S else conv.c2s
        # Usually the other direction's next sequence number: share that int object.
        side.last_ack = other.next_seq if ack == other.next_seq else ack
        peer = other.peer_ack(ack, number, ts)
        if peer:
            return engine._fast_released(conv, direction, side, peer, seq, payload, number, ts)
    if payload:
        # The common case (the next bytes in order) without a list and a Data made and read.
        offset = side.in_order(seq, payload)
        if offset < 0:
            events = side.segment(seq, payload, False, number, ts)
            if not events:
                return None
            first = events[0]
            if len(events) != 1 or type(first) is not Data:
                return engine._stream(conv, direction, events, ts)
            offset = first.offset  # the packet and time are this segment's
            payload = first.data
        # One piece of data, without _stream's generator.
        if direction is C2S:
            info.bytes_c2s += len(payload)
        else:
            info.bytes_s2c += len(payload)
        if conv.conn is not None:
            return feed(engine, conv, direction, offset, payload, number, ts)
    return None


def feed(engine: Any, conv: Conversation, direction: Direction, offset: int, data: bytes | None, packet: int,
         ts: float, lost: int = 0) -> Sequence[Event]:
    """Hand stream bytes at ``offset`` (or, with ``data`` None, a hole of ``lost`` bytes) to the
    dissector; what it returns, stamped. The bytes come unpacked rather than as a :class:`Data`:
    the fast path has them at hand and reading a named tuple's fields costs more."""
    conn: Any = conv.conn
    assert conn is not None
    try:
        if data is not None:
            end = offset + len(data)
            reasm = conv.c2s if direction is C2S else conv.s2c
            # The segment is recorded only after the dissector has seen it: when it makes
            # frames lying wholly in it, _emit records it as the only one left without first
            # moving the previous one into a list (a list and a tuple per packet).
            try:
                out = conn.feed(direction, data, ts)
            except Exception:
                reasm.add(end, packet, ts)
                raise
            left_out = False
            if conv.leaves_out:
                own = conn.frames_left_out
                other = conn.other_frames_left_out
                if own:
                    conv.info.frames += own
                    conn.frames_left_out = 0
                    left_out = True
                if other:  # not ended by these bytes: they say nothing of this direction's segments
                    conv.info.frames += other
                    conn.other_frames_left_out = 0
                anchors = conn.anchors_left_out
                if anchors:  # of frames that end in these bytes: this packet is their last
                    for ref in anchors:
                        ref[2] = packet
                    anchors.clear()
            if out:
                result = engine._emit(conv, out, direction, offset, packet, ts, end)
            else:
                if left_out:
                    # Frames ended in these bytes, so no later frame starts before them: this
                    # segment alone is kept, as _emit leaves it after a frame made from it.
                    reasm.older = None
                    reasm.seg_end = end
                    reasm.seg_packet = packet
                    reasm.seg_ts = ts
                else:
                    reasm.add(end, packet, ts)
                result = NOTHING
        else:
            out = conn.gap(direction, lost, ts)
            result = engine._emit(conv, out) if out else NOTHING
        if conv.timed:
            # Bytes may have moved the deadline (an answer arrived, a heartbeat was seen).
            dl = conn.deadline()
            if dl != conv.deadline:
                conv.deadline = dl
                wake = conv.wake
                # A wake-up already due at or before the new deadline stands (schedule() would
                # keep it: its idle expiry, if any, came from an earlier last packet).
                if dl is not None and (wake is None or wake[0] > dl):
                    engine._wakeups.schedule(conv, engine.idle_timeout)
        return result
    except Exception as exc:  # a dissector bug must not end the whole analysis
        return engine._crashed(conv, exc)


def foreign_bytes(conv: Conversation, side: Side, size: int) -> None:
    """Count another shard's conversation's bytes as they come (no reassembly: retransmissions
    count twice): what matters here is whether it carried any, which decides whether a new SYN
    on its 4-tuple starts a new conversation (:meth:`Conversation.reopened_by`)."""
    if size:
        if side is conv.c2s:
            conv.info.bytes_c2s += size
        else:
            conv.info.bytes_s2c += size
