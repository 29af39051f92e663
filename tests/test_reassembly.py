"""TCP reassembly: ordering, retransmission, overlap, loss, wraparound, bounded buffering."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert [(e.offset, e.length, e.packet) for e in out if isinstance(e, Gap)] == [(4, 4, 4)]
    assert stream_of(out) == b"cccc"


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
