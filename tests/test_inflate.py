"""Bounded decompression (dissectors/kit/inflate.py) and its use by RabbitMQ Stream sub-batches:
real codec bytes, bombs that would expand to hundreds of MiB, lying headers, cut-off data."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import lz4.frame
import pytest
import snappy
import zstandard

from analyzer.api import Finding, Frame
from dissectors.kit import inflate as I
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.chunk import simple_entry
from dissectors.rabbitmq_stream.encode import (
    Script,
    all_findings,
    build_chunk,
    deliver,
    encode_message,
    handshake,
    request,
    response,
    run,
)
from dissectors.rabbitmq_stream.sub_batch import SUB_BATCH, TOLERANCE

RAW = b"".join(bytes([i % 251]) * (i % 97) for i in range(4000))  # compressible, not trivial
MIB = 1 << 20


@pytest.fixture
def setting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """Sets STREAMPROTO_MAX_DECOMPRESSED (None: unset) as a new process would see it: limit()
    reads it once and keeps it, so it is read again after each change and after the test."""

    def put(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(I.ENV, raising=False)
        else:
            monkeypatch.setenv(I.ENV, value)
        I.limit.cache_clear()

    yield put
    I.limit.cache_clear()

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zlib": zlib.compress,
    "deflate": lambda b: zlib.compress(b, wbits=-15),
    "snappy": snappy.compress,  # raw
    "snappy-framed": lambda b: snappy.StreamCompressor().compress(b),
    "lz4": lz4.frame.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}
CODEC_OF = {"snappy-framed": "snappy"}
STREAMING = [n for n in COMPRESS if n != "snappy"]  # raw snappy states its size and cannot stop early


def codec(name: str) -> str:
    return CODEC_OF.get(name, name)


@pytest.mark.parametrize("name", list(COMPRESS))
def test_round_trip(name: str) -> None:
    packed = COMPRESS[name](RAW)
    assert I.inflate(codec(name), packed, len(RAW) + 1) == RAW
    assert I.inflate(codec(name), packed, len(RAW)) == RAW


@pytest.mark.parametrize("name", STREAMING)
def test_output_stops_at_the_limit(name: str) -> None:
    assert I.inflate(codec(name), COMPRESS[name](RAW), 1000) == RAW[:1000]


@pytest.mark.parametrize("name", STREAMING)
def test_bomb_never_allocates_past_the_limit(name: str) -> None:
    bomb = COMPRESS[name](bytes(256 * MIB))  # 256 MiB of zeros: a few hundred KiB or less packed
    tracemalloc.start()
    try:
        out = I.inflate(codec(name), bomb, MIB + 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == MIB + 1
    assert peak < 8 * MIB  # the output, its copy and the steps of at most 2 MiB past it


def test_raw_snappy_stating_more_than_the_limit_is_not_decoded() -> None:
    packed = snappy.compress(bytes(64 * MIB))
    with pytest.raises(I.Excess) as exc:
        I.inflate("snappy", packed, MIB)
    assert exc.value.size == 64 * MIB


def test_raw_snappy_preamble_that_lies_is_an_error() -> None:
    packed = snappy.compress(RAW)
    n = len(RAW) - 10
    varint = bytearray()
    while True:
        varint.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    preamble_len = 1
    while packed[preamble_len - 1] & 0x80:
        preamble_len += 1
    with pytest.raises(I.InflateError):
        I.inflate("snappy", bytes(varint) + packed[preamble_len:], len(RAW) + 1)


@pytest.mark.parametrize("name", list(COMPRESS))
def test_cut_off_data_is_an_error(name: str) -> None:
    packed = COMPRESS[name](RAW)
    with pytest.raises(I.InflateError):
        I.inflate(codec(name), packed[: len(packed) // 2], len(RAW) + 1)


@pytest.mark.parametrize("name", ["gzip", "zlib", "lz4", "zstd"])
def test_junk_data_is_an_error(name: str) -> None:
    with pytest.raises(I.InflateError):
        I.inflate(codec(name), b"\x00not compressed at all" * 10, 10_000)


def test_zlib_junk_after_the_end_is_an_error_and_gzip_members_concatenate() -> None:
    with pytest.raises(I.InflateError, match="after the end"):
        I.inflate("zlib", zlib.compress(RAW) + b"junk", len(RAW) + 1)
    assert I.inflate("gzip", gzip.compress(RAW) + gzip.compress(RAW), 3 * len(RAW)) == RAW + RAW


def test_zstd_frame_asking_for_a_huge_window_is_refused() -> None:
    # Long-distance mode with a 1 GiB window: the decoder would reserve it before any output.
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=30, enable_ldm=True)
    streaming = zstandard.ZstdCompressor(compression_params=params).compressobj(size=-1)  # size unknown
    packed = streaming.compress(RAW) + streaming.flush()
    assert zstandard.get_frame_parameters(packed).window_size == 1 << 30
    with pytest.raises(I.InflateError):
        I.inflate("zstd", packed, MIB)


def test_snappy_framed_reserved_chunk_is_an_error() -> None:
    packed = snappy.StreamCompressor().compress(RAW)
    with pytest.raises(I.InflateError, match="reserved"):
        I.inflate("snappy", packed + b"\x02\x01\x00\x00x", len(RAW) + 1)


def test_an_unknown_codec_is_a_value_error() -> None:
    for call in (lambda: I.inflate("brotli", b"x", 10), lambda: I.available("brotli")):
        with pytest.raises(ValueError, match="unknown codec 'brotli' \\(known: gzip, zlib"):
            call()


def test_limit_setting(setting: Callable[[str | None], None], monkeypatch: pytest.MonkeyPatch) -> None:
    setting(None)
    assert I.limit() == I.DEFAULT_LIMIT
    setting("64M")
    assert I.limit() == 64 * MIB
    monkeypatch.setenv(I.ENV, "1M")  # read once: a change without a new reading is not seen
    assert I.limit() == 64 * MIB
    setting("512k")
    assert I.limit() == 512 << 10
    setting("lots")
    assert I.limit() == I.DEFAULT_LIMIT  # a bad setting keeps the default bound, never none


# ------------------------------------------------------------------------------ RabbitMQ Stream
MSGS = [encode_message(f"message {i} ".encode() * 8) for i in range(10)]
RECORDS = b"".join(simple_entry(m) for m in MSGS)
CODE = {"gzip": 1, "snappy": 2, "snappy-framed": 2, "lz4": 3, "zstd": 4}


def sub_batch(name: str, payload: bytes, declared: int, count: int = len(MSGS)) -> bytes:
    data = COMPRESS[name](payload)
    return SUB_BATCH.pack(0x80 | CODE[name] << 4, count, declared, len(data)) + data


def subscribed() -> Script:
    s = Script().extend(handshake())
    s.c(request("Subscribe", correlation_id=20, subscription_id=0, stream="s", offset_spec={"type": 1}, credit=5))
    return s.s(response("Subscribe", correlation_id=20, response_code=1))


def deliver_findings(entries: list[bytes], records: int) -> tuple[list[Finding], Frame]:
    s = subscribed()
    s.s(deliver(0, build_chunk(entries, records, 100)))
    s.c(request("Heartbeat"))  # decoding goes on after the frame
    events = run(s)
    d = next(e for e in events if isinstance(e, Frame) and e.command == "Deliver")
    assert any(isinstance(e, Frame) and e.command == "Heartbeat" for e in events)
    return all_findings(events), d


def records_of(d: Frame) -> list[list[Frame]]:
    entries = d.fields[-1].child("entries")
    assert entries is not None
    return [[r for r in sb.child("records").children or () if r.name == "record"]  # type: ignore[union-attr]
            for sb in entries.children or ()]


@pytest.mark.parametrize("name", list(CODE))
def test_bomb_under_a_small_declared_size_stops_there(name: str) -> None:
    # Framed snappy packs 64 KiB chunks at best ~20:1, so its bomb is smaller to keep the frame small;
    # raw snappy states its size and is refused before decoding.
    payload = RECORDS + bytes({"snappy": 4, "snappy-framed": 40}.get(name, 200) * MIB)
    entry = sub_batch(name, payload, len(RECORDS))
    del payload
    tracemalloc.start()
    try:
        found, d = deliver_findings([entry], len(MSGS))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB
    ids = [f.id for f in found]
    assert ids.count(R.CHUNK_MALFORMED.id) == 1, found
    msg = next(f.message for f in found if f.id == R.CHUNK_MALFORMED.id)
    assert ("expands past its declared" in msg) if name != "snappy" else ("states" in msg)
    assert records_of(d) == [[]]  # its records are skipped


@pytest.mark.parametrize("name", list(CODE))
def test_declared_size_over_the_limit_is_not_expanded(name: str, setting: Callable[[str | None], None]) -> None:
    setting("1M")
    payload = RECORDS + bytes(2 * MIB)
    found, d = deliver_findings([sub_batch(name, payload, len(payload))], len(MSGS))
    assert [f.id for f in found] == [R.LIMIT.id]
    assert f"declares {len(payload)} bytes" in found[0].message and I.ENV in found[0].message
    assert records_of(d) == [[]]


def test_sub_batches_of_one_frame_share_the_limit(setting: Callable[[str | None], None]) -> None:
    setting(str(3 * len(RECORDS) + 10))
    entries = [sub_batch("gzip", RECORDS, len(RECORDS)) for _ in range(4)]
    found, d = deliver_findings(entries, 4 * len(MSGS))
    assert [f.id for f in found] == [R.LIMIT.id]
    assert found[0].message.startswith("chunk 100: entry 3:")
    assert [len(r) for r in records_of(d)] == [len(MSGS)] * 3 + [0]


def test_expansion_within_the_tolerance_is_decoded_and_reported() -> None:
    payload = RECORDS + bytes(TOLERANCE // 2)  # half the tolerance more than declared
    found, d = deliver_findings([sub_batch("zstd", payload, len(RECORDS))], len(MSGS))
    assert [f.id for f in found] == [R.CHUNK_MALFORMED.id] * 2
    assert f"uncompressed length is {len(payload)}, header says {len(RECORDS)}" in found[0].message
    assert f"{TOLERANCE // 2} bytes after the sub-batch's" in found[1].message
    assert len(records_of(d)[0]) == len(MSGS)


def test_honest_sub_batches_decode_with_every_codec() -> None:
    entries = [sub_batch(name, RECORDS, len(RECORDS)) for name in CODE]
    found, d = deliver_findings(entries, len(CODE) * len(MSGS))
    assert found == []
    assert [len(r) for r in records_of(d)] == [len(MSGS)] * len(CODE)


def test_publish_bomb_is_a_finding_and_the_next_frame_decodes() -> None:
    s = Script().extend(handshake())
    s.c(request("DeclarePublisher", correlation_id=3, publisher_id=1, publisher_reference="", stream="s"))
    s.s(response("DeclarePublisher", correlation_id=3, response_code=1))
    bomb = sub_batch("gzip", RECORDS + bytes(100 * MIB), len(RECORDS))
    messages = struct.pack(">I", 1) + struct.pack(">Q", 1) + bomb
    s.c(struct.pack(">IHHB", 5 + len(messages), 2, 1, 1) + messages)
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 2, "message": MSGS[0]}]))
    events = run(s)
    found = all_findings(events)
    assert len(found) == 1 and "expands past its declared" in found[0].message, found
    publishes = [e for e in events if isinstance(e, Frame) and e.command == "Publish"]
    assert len(publishes) == 2 and not publishes[1].findings
