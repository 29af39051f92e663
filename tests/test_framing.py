"""ByteQueue: cutting a byte stream into length-prefixed frames, resynchronising after junk and gaps."""

import struct

from hypothesis import given
from hypothesis import strategies as st

from dissectors.kit.framing import ByteQueue

MAGIC = b"\xab\xcd"


def measure(buf: memoryview, pos: int) -> int:
    if len(buf) - pos < 4:
        return 0
    if bytes(buf[pos:pos + 2]) != MAGIC:
        return -1
    return 4 + struct.unpack_from(">H", buf, pos + 2)[0]


def resync(buf: memoryview, pos: int) -> tuple[int, bool]:
    i = bytes(buf[pos:]).find(MAGIC)
    if i < 0:
        return len(buf) - 1, False  # the last byte may start a magic
    return pos + i, True


def frame(payload: bytes) -> bytes:
    return MAGIC + struct.pack(">H", len(payload)) + payload


@given(st.lists(st.binary(max_size=20).filter(lambda b: MAGIC not in b), max_size=20),
       st.lists(st.integers(1, 50), min_size=1, max_size=10))
def test_any_split_gives_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    q = ByteQueue()
    got = []
    pos, i = 0, 0
    while pos < len(stream):
        n = cuts[i % len(cuts)]
        q.append(stream[pos:pos + n])
        pos += n
        i += 1
        got += [(p.offset, p.data, p.junk) for p in q.cut(measure, resync)]
    expected, off = [], 0
    for p in payloads:
        expected.append((off, frame(p), False))
        off += len(frame(p))
    assert got == expected
    assert len(q) == 0


def test_junk_is_skipped_and_reported() -> None:
    q = ByteQueue(synced=False)
    q.append(b"xyz" + frame(b"hi"))
    pieces = list(q.cut(measure, resync))
    assert [(p.offset, p.data, p.junk) for p in pieces] == [(0, b"xyz", True), (3, frame(b"hi"), False)]


def test_gap_drops_partial_frame_and_resyncs() -> None:
    q = ByteQueue()
    q.append(frame(b"one")[:5])
    assert list(q.cut(measure, resync)) == []
    assert q.lost(10) == 5
    q.append(b"tail" + frame(b"two"))
    pieces = list(q.cut(measure, resync))
    assert pieces[-1].data == frame(b"two") and pieces[-1].offset == 5 + 10 + 4
    assert pieces[0].junk


def test_drain_returns_leftovers() -> None:
    q = ByteQueue()
    q.append(frame(b"abc")[:3])
    assert list(q.cut(measure, resync)) == []
    left = q.drain()
    assert left is not None and left.junk and left.data == frame(b"abc")[:3]
