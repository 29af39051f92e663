"""TCP reassembly: ordering, retransmission, overlap, loss, wraparound, bounded buffering."""

from __future__ import annotations

from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer import reassembly
from analyzer.reassembly import GAP, Data, Gap, Note, StreamReassembler


def feed_all(r: StreamReassembler, segs: list[tuple[int, bytes]], fin_at: int | None = None) -> list:
    out: list = []
    for i, (seq, payload) in enumerate(segs):
        out += r.segment(seq, payload, False, i + 1, float(i))
    out += r.flush(99.0)
    return out


def stream_of(events: list) -> bytes:
    data = [e for e in events if isinstance(e, Data)]
    offsets = [e.offset for e in data]
    assert offsets == sorted(offsets)
    return b"".join(e.data for e in data)


def cut(data: bytes, sizes: list[int]) -> list[tuple[int, bytes]]:
    segs, pos, i = [], 0, 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        segs.append((pos, data[pos:pos + n]))
        pos += n
        i += 1
    return segs


streams = st.binary(min_size=1, max_size=3000)
sizes = st.lists(st.integers(1, 400), min_size=1, max_size=20)
isns = st.integers(0, 2**32 - 1)


@settings(max_examples=300, deadline=None)
@given(data=streams, sizes=sizes, isn=isns, perm=st.randoms(use_true_random=False),
       dups=st.lists(st.integers(0, 1000), max_size=5))
def test_any_segmentation_order_and_duplication_reassembles_exactly(data, sizes, isn, perm, dups):
    segs = cut(data, sizes)
    segs += [segs[d % len(segs)] for d in dups]
    perm.shuffle(segs)
    r = StreamReassembler()
    r.syn(isn)
    events = feed_all(r, [((isn + 1 + off) % 2**32, p) for off, p in segs])
    assert stream_of(events) == data
    assert not [e for e in events if isinstance(e, (Gap, Note))]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=30, max_size=3000), sizes=sizes, isn=isns, perm=st.randoms(use_true_random=False),
       pick=st.integers(0, 10**6), shuffle=st.booleans())
def test_one_loss_gives_exactly_one_gap_at_the_right_place(data, sizes, isn, perm, pick, shuffle):
    segs = cut(data, sizes)
    if len(segs) < 2:
        segs = cut(data, [len(data) // 2])
    lost = pick % len(segs)
    lost_off, lost_data = segs.pop(lost)
    if shuffle:
        perm.shuffle(segs)
    r = StreamReassembler()
    r.syn(isn)
    events = []
    for i, (off, p) in enumerate(segs):
        events += r.segment((isn + 1 + off) % 2**32, p, False, i + 1, float(i))
    # The FIN tells where the stream ended, so even a lost last segment is provable.
    events += r.segment((isn + 1 + len(data)) % 2**32, b"", True, 999, 9.0)
    events += r.flush(10.0)
    gaps = [e for e in events if isinstance(e, Gap)]
    assert [(g.offset, g.length) for g in gaps] == [(lost_off, len(lost_data))]
    assert stream_of(events) == data[:lost_off] + data[lost_off + len(lost_data):]


def test_sequence_wraparound():
    r = StreamReassembler()
    r.syn(2**32 - 3)
    out = r.segment(2**32 - 2, b"ab", False, 1, 0.0) + r.segment(0, b"cd", False, 2, 0.0)
    out += r.segment(2, b"ef", False, 3, 0.0)
    assert [(e.offset, e.data) for e in out] == [(0, b"ab"), (2, b"cd"), (4, b"ef")]


def test_midstream_start_without_syn():
    r = StreamReassembler()
    out = r.segment(123456, b"xyz", False, 1, 0.0) + r.segment(123459, b"123", False, 2, 0.0)
    assert stream_of(out) == b"xyz123"


def test_peer_ack_proves_a_loss_before_waiting_data():
    r = StreamReassembler()
    r.syn(0)
    assert r.segment(1, b"aaaa", False, 1, 0.0)
    assert r.segment(9, b"cccc", False, 3, 0.0) == []  # bytes 4..8 may still come
    out = r.peer_ack(13, 4, 1.0)
    # The acknowledgement (packet 4) proves the loss; the gap is reported where the stream resumes,
    # packet 3, as Wireshark's "previous segment not captured".
    assert [(e.offset, e.length, e.packet) for e in out if isinstance(e, Gap)] == [(4, 4, 3)]
    assert stream_of(out) == b"cccc"


def test_an_acknowledged_hole_with_nothing_after_it_is_reported_at_the_acknowledgement():
    r = StreamReassembler()
    r.syn(0)
    r.segment(1, b"aaaa", False, 1, 0.0)
    r.segment(13, b"dddd", False, 2, 0.0)  # bytes 4..12 missing, data waits at 12
    out = r.peer_ack(9, 3, 1.0)  # the peer has 4..8: lost, but nothing resumes at 8 yet
    assert [(e.offset, e.length, e.packet) for e in out if isinstance(e, Gap)] == [(4, 4, 3)]
    out = r.flush(2.0)
    assert [(e.offset, e.length, e.packet) for e in out if isinstance(e, Gap)] == [(8, 4, 2)]
    assert stream_of(out) == b"dddd"


def test_a_hole_at_the_end_of_a_stream_belongs_to_no_packet():
    r = StreamReassembler()
    r.syn(0)
    r.segment(1, b"aaaa", False, 1, 0.0)
    r.segment(9, b"", True, 2, 0.0)  # the FIN says 4 bytes were sent that the capture never saw
    out = r.flush(2.0)
    assert [(e.offset, e.length, e.packet) for e in out if isinstance(e, Gap)] == [(4, 4, None)]


def test_reversed_segments_reassemble_in_n_log_n():
    # 100,000 segments delivered last first: each insertion must be O(log n) (a min() over the
    # waiting segments per insertion made this quadratic: minutes instead of a fraction of a second).
    import time
    n = 100_000
    r = StreamReassembler(max_buffer=1 << 30)
    r.syn(0)
    t = time.perf_counter()
    out = []
    for i in reversed(range(n)):
        out += r.segment(1 + i * 10, b"%010d" % i, False, n - i, 0.0)
    elapsed = time.perf_counter() - t
    assert stream_of(out) == b"".join(b"%010d" % i for i in range(n))
    assert not r.pending and not r.order
    assert elapsed < 20, elapsed  # generous: quadratic takes minutes, n log n well under a second


def test_reassembly_state_round_trips_through_json():
    import json
    data = bytes(range(256)) * 4
    segs = cut(data, [7, 13, 100])
    segs.reverse()
    straight, resumed = StreamReassembler(), StreamReassembler()
    straight.syn(41)
    resumed.syn(41)
    out_a: list = []
    out_b: list = []
    for i, (off, p) in enumerate(segs):
        out_a += straight.segment(42 + off, p, False, i + 1, float(i))
        out_b += resumed.segment(42 + off, p, False, i + 1, float(i))
        resumed = StreamReassembler.from_plain(json.loads(json.dumps(resumed.to_plain())))
    assert stream_of(out_a + straight.flush(9.0)) == stream_of(out_b + resumed.flush(9.0)) == data


def test_retransmission_with_different_bytes_is_reported():
    r = StreamReassembler()
    r.syn(0)
    r.segment(1, b"hello", False, 1, 0.0)
    assert r.segment(1, b"hello", False, 2, 0.0) == []
    out = r.segment(3, b"LLo world", False, 3, 0.0)
    notes = [e.finding for e in out if isinstance(e, Note)]
    assert [n.id for n in notes] == ["tcp.overlap_mismatch"]
    assert stream_of(out) == b" world"


def test_out_of_order_buffer_is_bounded():
    r = StreamReassembler(max_buffer=1000)
    r.syn(0)
    out = []
    for i in range(20):  # everything after a hole at offset 0..99
        out += r.segment(101 + 100 + i * 100, b"x" * 100, False, i + 1, 0.0)
    assert r.pending_bytes <= 1000 + 100
    notes = [e.finding.id for e in out if isinstance(e, Note)]
    assert "tcp.buffer_overflow" in notes
    gaps = [e for e in out if isinstance(e, Gap)]
    assert gaps and gaps[0].offset == 0 and gaps[0].length == 200


def test_gap_rule_is_a_capture_finding():
    assert GAP.id == "tcp.gap" and GAP.category == "capture"


def _source() -> object:
    """analyzer/reassembly.py, loaded apart from its source: the module may run compiled, and a
    compiled class cannot be subclassed (tests/test_native.py holds both builds alike)."""
    spec = spec_from_file_location("reassembly_source", Path(reassembly.__file__).with_name("reassembly.py"))
    assert spec is not None and spec.loader is not None
    source = module_from_spec(spec)
    spec.loader.exec_module(source)
    return source


class _General(_source().StreamReassembler):  # type: ignore[attr-defined, misc]
    """A reassembler without shortcuts: acknowledgements and in-order data go the general way."""

    __slots__ = ()

    def peer_ack(self, ack, packet, ts):
        return self._acknowledged(ack, packet, ts)

    def in_order(self, seq, payload):
        return -1


def _engine_segment(r: StreamReassembler, seq: int, payload: bytes, fin: bool, packet: int, ts: float) -> list:
    """A segment as the engine's fast path gives it: in_order first, then segment()."""
    if payload and not fin:
        offset = r.in_order(seq, payload)
        if offset >= 0:
            return [Data(offset, payload, packet, ts)]
    return r.segment(seq, payload, fin, packet, ts)


# Steps on one direction: ("seg", offset from the ISN, length, fin), ("ack", offset from the ISN),
# and the two at exactly where the stream stands, which the shortcuts take.
_steps = st.lists(st.one_of(
    st.tuples(st.just("seg"), st.integers(-20, 400), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("ack"), st.integers(-20, 460)),
    st.just(("ack_next",)),  # exactly where the stream stands: peer_ack's shortcut
    st.tuples(st.just("seg_next"), st.integers(1, 60), st.booleans()),  # the next bytes: in_order's case
), max_size=40)


@settings(max_examples=400, deadline=None)
@given(steps=_steps, isn=isns, syn=st.booleans())
def test_shortcuts_agree_with_the_general_way(steps, isn, syn):
    # The same steps on two reassemblers, one without peer_ack's and in_order's shortcuts (segments
    # fed as the engine's fast path feeds them): the same events and the same state after every
    # step (in order, out of order, lost, retransmitted, mid-stream, FIN).
    data = bytes(range(256)) * 2
    fast, general = StreamReassembler(max_buffer=300), _General(max_buffer=300)
    for r in (fast, general):
        if syn:
            r.syn(isn)
    for i, step in enumerate(steps):
        outs = []
        for r in (fast, general):
            if step[0] == "seg":
                _, off, n, fin = step
                payload = data[max(off, 0):max(off, 0) + n]
                outs.append(_engine_segment(r, (isn + 1 + off) % 2**32, payload, fin, i, float(i)))
            elif step[0] == "seg_next":
                _, n, fin = step
                seq = r.next_seq if r.next_seq is not None else (isn + 1) % 2**32
                payload = data[r.next_abs % 256:r.next_abs % 256 + n]
                outs.append(_engine_segment(r, seq, payload, fin, i, float(i)))
            else:
                if step[0] == "ack_next":
                    ack = r.next_seq if r.next_seq is not None else (isn + 1) % 2**32
                else:
                    ack = (isn + 1 + step[1]) % 2**32
                outs.append(r.peer_ack(ack, i, float(i)))
        assert outs[0] == outs[1], (i, step)
        assert fast.to_plain() == general.to_plain(), (i, step)
    assert fast.flush(99.0) == general.flush(99.0)
    assert fast.to_plain() == general.to_plain()


def test_peer_ack_shortcut_is_taken_and_drops_the_acknowledged_tail():
    r = StreamReassembler()
    r.syn(0)
    r.segment(1, b"abcd", False, 1, 0.0)
    assert r.tail == bytearray(b"abcd")
    assert r.peer_ack(5, 2, 0.0) == []
    assert (r.acked_abs, r.tail) == (4, None)


def test_partial_acknowledgement_keeps_only_the_unacknowledged_tail():
    """One segment's bytes are held as they came (not copied), several are joined: either way a
    partial acknowledgement leaves exactly the unacknowledged bytes, and only those are compared
    with a retransmission."""
    for segs in ([b"abcdefgh"], [b"abc", b"defgh"]):
        r = StreamReassembler()
        r.syn(0)
        seq = 1
        for s in segs:
            r.segment(seq, s, False, 1, 0.0)
            seq += len(s)
        assert bytes(r.tail) == b"abcdefgh"
        assert r.peer_ack(4, 2, 0.0) == []  # bytes 0-2 acknowledged
        assert (r.acked_abs, r.tail_start, bytes(r.tail)) == (3, 3, b"defgh")
        # acknowledged bytes sent again with other content: not compared
        assert r.segment(1, b"XYZ", False, 3, 0.0) == []
        # unacknowledged ones are
        notes = r.segment(4, b"dXf", False, 4, 0.0)
        assert len(notes) == 1 and isinstance(notes[0], Note) and "3 bytes at stream offset 3" in notes[0].finding.message
        assert r.peer_ack(9, 5, 0.0) == [] and r.tail is None
