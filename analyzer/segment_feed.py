"""The engine's per-packet path: the packet loop, and a segment of a conversation already under
way reassembled and fed to its dissector.

Functions of the engine (:class:`analyzer.engine.Analyzer`, passed as ``engine``) moved into a
module of their own so that they are compiled (analyzer/native.py) together with the classes they
read on every packet (analyzer/flows.py, analyzer/reassembly.py, analyzer/tcp_heads.py); the
engine's general steps, its generators and its stamping of frames (``_segment``, ``_on_segment``,
``_stream``, ``_fast_released``, ``_emit``, ...) stay in it and are called back.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from analyzer.api import Direction, Event
from analyzer.flows import Conversation, Side
from analyzer.packets import ACK, FIN, IP4TCP_BY_LINK, RST, SYN
from analyzer.reassembly import Data
from analyzer.tcp_heads import known_segment

C2S: Final = Direction.C2S
S2C: Final = Direction.S2C
NOTHING: Final[tuple[Event, ...]] = ()
SYN_FIN_RST: Final[int] = SYN | FIN | RST
SYN_ACK: Final[int] = SYN | ACK
ONLY_SYN: Final[int] = SYN
ACK_FLAG: Final[int] = ACK


def run_packets(engine: Any, packets: Iterable[Any]) -> Iterator[Event]:
    """The engine's packet loop over ``packets`` (each a RawPacket or a plain tuple of its fields):
    Analyzer._run but for what it does at the end."""
    linkdec = engine.linkdec
    decode = linkdec.decode
    fastmap: dict[bytes, Any] = engine._fast
    heap: list[Any] = engine._heap
    by_link: dict[int, tuple[int, int]] = IP4TCP_BY_LINK
    # Counters live in locals in the loop and are written back before anything is yielded.
    count: int = engine.packets
    ts: Any = engine.last_ts
    started = engine.first_ts is not None
    data: Any  # bytes from every reader; known_segment checks it is (as it did called from Python)
    hit: Side
    try:
        for pkt in packets:
            count += 1
            number = count  # the engine's own ordinal: across files, one packet identity
            _, ts, linktype, data, orig_len = pkt
            if not started:
                engine.first_ts = ts
                started = True
            if heap and heap[0][0] <= ts:
                # Capture time reached a conversation's deadline or idle expiry.
                engine.packets = count
                engine.last_ts = ts
                yield from engine._timers(ts)
            # The shape of nearly every packet (IPv4 without options or IPv6 without extension
            # headers, TCP, on a fixed-length link header, in a conversation already under way)
            # goes without building a TcpSegment.
            link = by_link.get(linktype)
            if link is not None:
                got = known_segment(data, link, fastmap)
                if got is not None:
                    hit, seq, ack, flags, start, end = got
                    if not flags & SYN_FIN_RST:
                        conv = hit.conv
                        assert conv is not None
                        if conv.foreign:  # another shard's: counted, no more (before the payload is cut)
                            info = conv.info
                            info.packets += 1
                            info.last_ts = ts
                            foreign_bytes(conv, hit, end - start)
                            continue
                        out = fast_segment(engine, hit, seq, ack, flags, data[start:end], number, ts)
                        if out:
                            engine.packets = count
                            engine.last_ts = ts
                            yield from out
                        continue
                    if flags & SYN_ACK != ONLY_SYN:
                        # A SYN-ACK, FIN or RST of a known conversation: the general path's steps
                        # without building a TcpSegment and looking the conversation up again (a
                        # bare SYN may start a new conversation on the 4-tuple: not here).
                        conv = hit.conv
                        assert conv is not None
                        engine.packets = count
                        engine.last_ts = ts
                        yield from engine._on_segment(conv, C2S if conv.c2s is hit else S2C, seq, ack, flags,
                                                      data[start:end], number, ts)
                        if engine._startup_errors:
                            yield from engine._pop_startup_errors()
                        continue
            seg = decode(pkt)
            if seg is None:
                continue
            if seg.truncated and engine._capture_owner:
                engine.packets = count
                engine.last_ts = ts
                yield engine._truncated(number, len(data), orig_len)
            key = linkdec.key
            found = fastmap.get(key)
            if found is not None and not seg.flags & SYN_FIN_RST:
                out = fast_segment(engine, found, seg.seq, seg.ack, seg.flags, seg.payload, number, ts)
                if out:
                    engine.packets = count
                    engine.last_ts = ts
                    yield from out
                continue
            engine.packets = count
            engine.last_ts = ts
            yield from engine._segment(seg, key, number, ts)
            if engine._startup_errors:
                yield from engine._pop_startup_errors()
    finally:
        engine.packets = count
        engine.last_ts = ts


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
    if flags & ACK_FLAG and ack != side.last_ack:
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
