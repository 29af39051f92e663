"""Bounded engine state (issue 8, section 6), asserted on structure, not measured: an open but
quiet conversation keeps no stream bytes and no empty containers, the retransmission-compare tail
holds only unacknowledged bytes (and at most 2 x TAIL_KEEP), and the frames one packet releases
stream out one at a time instead of being collected first. Memory and time are measured in
bench/engine_memory.py and bench/hostile.py."""

from __future__ import annotations

from pathlib import Path

from analyzer.api import Direction, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.flows import Side
from analyzer.pcapwrite import TcpConversation, write_capture
from analyzer.reassembly import TAIL_KEEP, Data, Note, StreamReassembler
from tests.toy import ToyDissector


def quiet_side(side: Side) -> None:
    """What one direction of an open, quiet, fully acknowledged conversation may hold (its last
    frame lies in one segment: only that segment is kept, inline, with no list of older ones)."""
    r = side  # a side is its own reassembler
    assert r.tail is None and r.pending is None and r.order is None and r.pending_bytes == 0
    assert side.sniff_buf is None
    assert side.older is None and side.head == 0 and len(side.segments) == 1


def test_a_quiet_conversation_keeps_no_stream_bytes(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    c.handshake()
    for i in range(50):
        c.send("c2s", b"LINE %d\n" % i)
        c.send("c2s", b"PING %d\n" % i)
        c.send("s2c", b"PONG\n", ack=True)  # the client acknowledges the answer
    p = tmp_path / "quiet.pcap"
    write_capture(str(p), [c])
    a = Analyzer({"toy": ToyDissector()})
    frames = sum(isinstance(e, Frame) for e in a.run(read_packets(str(p)), final=False))
    assert frames == 150 and a.live == 1
    conv = next(iter(a._live.values()))
    assert conv.pending is None and not conv.undecided
    quiet_side(conv.c2s)
    quiet_side(conv.s2c)
    assert len(a._fast) == 2


def test_an_undecided_conversation_drops_its_sniffing_bytes_once_decided(tmp_path: Path):
    c = TcpConversation(("10.1.1.3", 9000), ("10.1.1.4", 40001), ts=100.0)  # no known port
    c.handshake()
    c.send("s2c", b"WELCOME\n", ack=True)
    c.send("c2s", b"PUBLISH a\n", ack=True)
    p = tmp_path / "sniffed.pcap"
    write_capture(str(p), [c])
    a = Analyzer({"toy": ToyDissector()})
    list(a.run(read_packets(str(p)), final=False))
    conv = next(iter(a._live.values()))
    assert a.flows[0].protocol == "toy" and conv.pending is None
    quiet_side(conv.c2s)
    quiet_side(conv.s2c)


def test_the_tail_holds_only_unacknowledged_bytes():
    r = StreamReassembler()
    r.syn(0)
    r.segment(1, b"hello world", False, 1, 0.0)
    assert r.tail == b"hello world" and r.tail_start == 0
    assert r.peer_ack(1 + 6, 2, 0.1) == []  # "hello " acknowledged
    assert r.tail == b"world" and r.tail_start == 6
    # A differing retransmission of unacknowledged bytes is still reported ...
    out = r.segment(1 + 6, b"WORLD", False, 3, 0.2)
    assert [e.finding.id for e in out if isinstance(e, Note)] == ["tcp.overlap_mismatch"]
    r.peer_ack(1 + 11, 4, 0.3)
    assert r.tail is None and r.tail_start == 11
    # ... one of acknowledged bytes is not compared any more: the trade-off for keeping nothing
    # for quiet conversations (see analyzer.reassembly).
    assert r.segment(1, b"HELLO", False, 5, 0.4) == []
    out = r.segment(1 + 11, b"!", False, 6, 0.5)
    assert [(e.offset, e.data) for e in out if isinstance(e, Data)] == [(11, b"!")]
    assert r.tail == b"!" and r.tail_start == 11


def test_without_acknowledgements_the_tail_is_bounded():
    r = StreamReassembler()
    r.syn(0)
    chunk = bytes(range(256)) * 4
    for i in range(300):  # 300 KiB, the peer's acknowledgements never seen
        r.segment(1 + i * len(chunk), chunk, False, i + 1, 0.0)
        assert r.tail is not None and len(r.tail) <= 2 * TAIL_KEEP
        assert r.tail_start + len(r.tail) == r.next_abs
    # The most recent bytes are still compared.
    end = 300 * len(chunk)
    out = r.segment(1 + end - 10, b"X" * 10, False, 999, 1.0)
    assert [e.finding.id for e in out if isinstance(e, Note)] == ["tcp.overlap_mismatch"]


def test_a_drained_out_of_order_buffer_is_dropped():
    r = StreamReassembler(max_buffer=1 << 30)
    r.syn(0)
    n = 1000
    for i in reversed(range(1, n)):
        assert r.segment(1 + i * 10, b"%010d" % i, False, n - i, 0.0) == []
    assert r.pending is not None and len(r.pending) == n - 1
    out = r.segment(1, b"%010d" % 0, False, n, 0.0)
    assert len([e for e in out if isinstance(e, Data)]) == n
    assert r.pending is None and r.order is None and r.pending_bytes == 0


def _reversed_lines(tmp_path: Path, lines: int, *, hole: bool) -> tuple[list, int]:
    """One toy conversation whose client lines (one segment each) arrive last first, so the
    packet that fills the first hole (or, with ``hole``, the server's acknowledgement proving it
    lost) releases them all; returns the packets and that packet's number."""
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    c.handshake()
    segs = c.send("c2s", b"".join(b"LINE %05d\n" % i for i in range(lines)), mss=11)
    first = c.segments.index(segs[0])
    c.segments[first:] = reversed(c.segments[first:])
    if hole:
        c.segments.pop()  # the first line never captured
        c.send("s2c", b"OK\n")  # its acknowledgement proves the loss
    p = tmp_path / "reversed.pcap"
    write_capture(str(p), [c])
    return list(read_packets(str(p))), len(c.segments)


def _fed_at_first_release(tmp_path: Path, *, hole: bool) -> tuple[int, int, int]:
    lines = 2000
    packets, releasing = _reversed_lines(tmp_path, lines, hole=hole)
    toy = ToyDissector()
    a = Analyzer({"toy": toy})
    fed_then = None
    frames = 0
    for ev in a.run(packets):
        if isinstance(ev, Frame) and ev.direction is Direction.C2S:
            frames += 1
            if fed_then is None:
                assert a.packets == releasing  # nothing came out before that packet
                fed_then = len(toy.connections[0].raw[Direction.C2S])
    assert fed_then is not None
    return fed_then, frames, lines


def test_frames_released_by_one_segment_stream_out_one_at_a_time(tmp_path: Path):
    fed_then, frames, lines = _fed_at_first_release(tmp_path, hole=False)
    assert frames == lines
    # When the first released frame came out, the dissector had been given only the first
    # segments, not the whole released stream (collected first, it would have had all 22,000 bytes).
    assert fed_then <= 2 * 11


def test_frames_released_by_an_acknowledgement_stream_out_one_at_a_time(tmp_path: Path):
    fed_then, frames, lines = _fed_at_first_release(tmp_path, hole=True)
    assert frames == lines - 2  # the lost line, and the next one the toy skips to resynchronise
    assert fed_then <= 2 * 11


def test_a_side_keeps_a_list_only_while_earlier_segments_hold_unmade_frames():
    s = Side(1 << 20)
    assert s.packets_for(0, 10) == (0, 0, 0.0)  # nothing delivered yet
    s.add(10, 1, 1.0)
    assert s.older is None and s.segments == [(10, 1, 1.0)]  # one segment: inline, no list
    s.add(20, 2, 2.0)
    s.add(30, 3, 3.0)
    assert s.segments == [(10, 1, 1.0), (20, 2, 2.0), (30, 3, 3.0)]
    assert s.packets_for(5, 25) == (1, 3, 3.0)  # a frame spanning all three
    assert s.packets_for(12, 18) == (2, 2, 2.0)  # the first is consumed now
    assert s.segments == [(20, 2, 2.0), (30, 3, 3.0)]
    restored = Side(1 << 20)  # checkpoints keep the unconsumed ones
    restored.load(s.to_plain())
    assert restored.segments == s.segments and restored.older == [(20, 2, 2.0)]
    assert s.packets_for(30, 40) == (3, 3, 3.0)  # past the older ones: the list goes
    assert s.older is None and s.segments == [(30, 3, 3.0)]
