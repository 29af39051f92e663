"""Iggy payload decoders: wire types, message formats of every dialect, response payloads.

Bytes come from two sources so that a mistake made the same way in decoder and encoder is caught:
the layouts' own ``write`` (round trips) and bytes assembled here by hand from the tables of
iggy.md (struct.pack, with checksums computed here with zlib / xxhash).
"""

from __future__ import annotations

import struct
import zlib

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors.iggy import messages as M
from dissectors.iggy import responses as R
from dissectors.iggy import types as T
from dissectors.schema import DecodeError, F, Struct, field_values

DIALECTS = ("L0", "L1", "Z1", "Z2", "C", "V")


def read(t, data: bytes, name: str = "x"):
    f, off = t.read(name, memoryview(data), 0, len(data))
    assert off == len(data)
    return f


def kinds(problems) -> list[str]:
    return [k for k, _ in problems]


# ------------------------------------------------------------------------------ wire types (section 2)


def test_identifier_numeric_and_string_from_spec_bytes():
    f = read(T.IDENTIFIER, b"\x01\x04" + struct.pack("<I", 7))
    assert f.value == 7 and f.size == 6 and T.problems_of([f]) == []
    assert [c.name for c in f.children] == ["kind", "length", "value"]
    f = read(T.IDENTIFIER, b"\x02\x06orders")
    assert f.value == "orders" and f.children[0].display == "string"
    assert T.IDENTIFIER.write(7) == b"\x01\x04\x07\x00\x00\x00"
    assert T.IDENTIFIER.write("orders") == b"\x02\x06orders"


def test_problems_are_walked_for_only_when_something_was_marked():
    """problems_of(fields, since) skips the walk when no problem was attached since ``since``."""
    since = T.MARKS[0]
    clean = read(T.IDENTIFIER, b"\x01\x04" + struct.pack("<I", 7))
    assert T.MARKS[0] == since and T.problems_of([clean], since) == []
    bad = read(T.IDENTIFIER, b"\x03\x04\x01\x00\x00\x00", "topic_id")
    assert T.MARKS[0] == since + 1
    assert T.problems_of([clean, bad], since) == T.problems_of([clean, bad]) == \
        [("value", "topic_id: invalid identifier kind 3")]
    # A payload decoder gives them the same way: a clean request none, a flagged one its problem.
    raw = bytearray(M.encode_send_messages("C", 1, 2, [{"id": 1, "payload": b"x"}]))
    assert M.decode_send_messages("C", bytes(raw), 0, len(raw)).problems == []
    raw[4] = 3  # the stream identifier's kind, after metadata_length
    got = M.decode_send_messages("C", bytes(raw), 0, len(raw))
    assert ("value", "stream_id: invalid identifier kind 3") in got.problems


@pytest.mark.parametrize("data, message", [
    (b"\x03\x04\x01\x00\x00\x00", "invalid identifier kind 3"),
    (b"\x01\x02\x01\x00", "numeric identifier length 2"),
    (b"\x02\x00", "empty string identifier"),
    (b"\x02\x02\xff\xfe", "not UTF-8"),
])
def test_identifier_invalid_values_are_flagged(data, message):
    f = read(T.IDENTIFIER, data, "stream_id")
    (problem,) = T.problems_of([f])
    assert problem[0] == "value" and message in problem[1] and problem[1].startswith("stream_id")


@pytest.mark.parametrize("data", [b"", b"\x01", b"\x01\x04\x01\x00", b"\x02\x09orders"])
def test_identifier_cut_off_raises_decode_error_only(data):
    with pytest.raises(DecodeError):
        T.IDENTIFIER.read("s", memoryview(data), 0, len(data))


def test_consumer_l0_is_u32_and_l1_is_identifier():
    f = read(T.CONSUMER_L0, b"\x02" + struct.pack("<I", 9))
    assert f.value == 9 and f.children[0].display == "consumer_group"
    f = read(T.CONSUMER, b"\x01\x02\x02cg")
    assert f.value == "cg" and f.display == "consumer cg"
    f = read(T.CONSUMER, b"\x05\x01\x04\x01\x00\x00\x00")
    assert kinds(T.problems_of([f])) == ["value"]
    assert T.CONSUMER.write({"kind": 1, "id": "cg"}) == b"\x01\x02\x02cg"
    assert T.CONSUMER_L0.write({"kind": 2, "id": 9}) == b"\x02\x09\x00\x00\x00"


def test_partitioning_kinds():
    assert read(T.PARTITIONING, b"\x01\x00").value is None
    f = read(T.PARTITIONING, b"\x02\x04\x03\x00\x00\x00")
    assert f.value == 3 and f.display == "partition 3"
    assert read(T.PARTITIONING, b"\x03\x03key").value == b"key"
    for bad in (b"\x04\x00", b"\x01\x01x", b"\x02\x02\x01\x00", b"\x03\x00"):
        assert kinds(T.problems_of([read(T.PARTITIONING, bad)])) == ["value"], bad
    assert T.PARTITIONING.write(None) == b"\x01\x00"
    assert T.PARTITIONING.write(3) == b"\x02\x04\x03\x00\x00\x00"


def test_polling_strategy():
    f = read(T.POLLING_STRATEGY, b"\x01" + struct.pack("<Q", 10))
    assert f.value == 10 and f.display == "offset 10"
    assert read(T.POLLING_STRATEGY, b"\x05" + bytes(8)).display == "next"
    f = read(T.POLLING_STRATEGY, b"\x06" + bytes(8))
    assert T.problems_of([f]) == [("value", "x: invalid polling kind 6")]
    with pytest.raises(DecodeError):
        T.POLLING_STRATEGY.read("x", memoryview(b"\x01" + bytes(7)), 0, 8)


def test_optional_partition_id_both_forms():
    assert read(T.PARTITION_U32, bytes(4)).value is None
    assert read(T.PARTITION_U32, b"\x02\x00\x00\x00").value == 2
    assert read(T.PARTITION_FLAGGED, b"\x01\x00\x00\x00\x00").value == 0  # 0-based ids: 0 is a partition
    assert read(T.PARTITION_FLAGGED, b"\x00\x00\x00\x00\x00").value is None
    assert T.PARTITION_FLAGGED.write(0) == b"\x01\x00\x00\x00\x00"
    assert T.PARTITION_FLAGGED.write(None) == bytes(5)


def test_names_and_strings():
    assert read(T.NAME8, b"\x03abc").value == "abc"
    assert kinds(T.problems_of([read(T.NAME8, b"\x00")])) == ["value"]
    assert kinds(T.problems_of([read(T.NAME8, b"\x02\xc3\x28")])) == ["value"]
    assert T.problems_of([read(T.STR32, b"\x00\x00\x00\x00")]) == []
    assert read(T.STR32, b"\x02\x00\x00\x00hi").value == "hi"
    with pytest.raises(DecodeError):
        T.STR32.read("s", memoryview(b"\xff\xff\xff\xffhi"), 0, 6)


def _perm_blob() -> bytes:
    # Hand-assembled from iggy.md 2.7: ten globals, has_streams, stream 5 (six bools, has_topics,
    # topic 2 (four bools, has_next_topic=0)), has_next_stream=1, stream 6 (no topics), last.
    g = bytes([1, 0, 0, 1, 0, 0, 0, 0, 1, 1])
    s5 = struct.pack("<I", 5) + bytes([0, 1, 0, 1, 1, 0]) + b"\x01" + struct.pack("<I", 2) + bytes([0, 1, 1, 0]) + b"\x00"
    s6 = struct.pack("<I", 6) + bytes(6) + b"\x00"
    return g + b"\x01" + s5 + b"\x01" + s6 + b"\x00"


def test_permissions_blob_from_spec_bytes_and_encoder():
    blob = _perm_blob()
    data = b"\x01" + struct.pack("<I", len(blob)) + blob
    f = read(T.PERMISSIONS, data)
    assert f.value is True and T.problems_of([f]) == []
    vals = field_values(f.children)
    assert vals["global"]["manage_servers"] and vals["global"]["read_users"] and not vals["global"]["manage_users"]
    s5, s6 = vals["streams"]
    assert s5["stream_id"] == 5 and s5["read_stream"] and s5["topics"][0]["topic_id"] == 2
    assert s5["topics"][0]["read_topic"] and not s5["topics"][0]["send_messages"]
    assert s6["stream_id"] == 6 and s6["topics"] == []
    assert T.PERMISSIONS.write(vals) == data  # the encoder writes the spec's bytes
    assert read(T.PERMISSIONS, b"\x00").value is False
    assert read(T.PERMISSIONS_RESPONSE, bytes(4)).value is False  # UserDetails: u32 0


def test_permissions_blob_cut_off_is_flagged():
    blob = _perm_blob()[:-3]
    f = read(T.PERMISSIONS, b"\x01" + struct.pack("<I", len(blob)) + blob)
    assert kinds(T.problems_of([f])) == ["size"]
    with pytest.raises(DecodeError):  # the length itself overruns
        T.PERMISSIONS.read("p", memoryview(b"\x01\xff\x00\x00\x00"), 0, 5)


def test_types_round_trip_inside_a_struct():
    layout = Struct(F("consumer", T.CONSUMER), F("stream", T.IDENTIFIER), F("topic", T.IDENTIFIER),
                    F("partition", T.PARTITION_FLAGGED), F("strategy", T.POLLING_STRATEGY), F("count", T.U32),
                    F("auto_commit", T.BOOL), F("p", T.PARTITIONING), F("status", T.USER_STATUS_T))
    value = {"consumer": {"kind": 2, "id": "g"}, "stream": 1, "topic": "orders", "partition": 0,
             "strategy": {"kind": 2, "value": 1_700_000_000_000_000}, "count": 10, "auto_commit": 1,
             "p": {"kind": 3, "value": b"k"}, "status": 2}
    data = layout.write(value)
    fields, end = layout.read_fields(memoryview(data), 0, len(data))
    assert end == len(data) and T.problems_of(fields) == []
    assert layout.write(field_values(fields)) == data
    assert fields[-1].display == "inactive"


# ------------------------------------------------------------------------------ messages: hand-assembled bytes


def _legacy_header(key: str, kind: int, value: bytes) -> bytes:
    k = key.encode()
    return struct.pack("<I", len(k)) + k + bytes([kind]) + struct.pack("<I", len(value)) + value


def _typed_header(key: str, kind: int, value: bytes) -> bytes:
    return b"\x02" + _legacy_header(key, kind, value)


def test_legacy_send_from_spec_bytes():
    hdr = _legacy_header("h", 2, b"v")
    msg = struct.pack("<QQ", 42, 0) + struct.pack("<I", len(hdr)) + hdr + struct.pack("<I", 3) + b"abc"
    data = b"\x01\x04\x01\x00\x00\x00" + b"\x02\x06orders" + b"\x01\x00" + msg
    for d in ("L0", "L1"):
        r = M.decode_send_messages(d, data, 0, len(data))
        assert r.problems == [] and r.info == "stream=1 topic=orders messages=1"
        (m,) = M.messages_of(r.fields)
        assert m == {"id": 42, "payload": b"abc", "headers": [{"key": "h", "kind": 2, "value": "v"}]}


def test_legacy_polled_from_spec_bytes_and_crc_of_payload_only():
    payload = b"payload!"
    hdr = _legacy_header("k", 11, struct.pack("<I", 9))
    prefix = struct.pack("<IQI", 1, 5, 1)
    msg = (struct.pack("<QBQ", 5, 1, 1_700_000_000_000_000) + (77).to_bytes(16, "little")
           + struct.pack("<I", zlib.crc32(payload)) + struct.pack("<I", len(hdr)) + hdr
           + struct.pack("<I", len(payload)) + payload)
    assert len(msg) == 45 + len(hdr) + len(payload)
    data = prefix + msg
    r = M.decode_polled("L1", data, 0, len(data))
    assert r.problems == [] and r.info == "messages=1"
    (m,) = M.messages_of(r.fields)
    assert m["id"] == 77 and m["offset"] == 5 and m["payload"] == payload and m["state"] == 1
    assert m["headers"] == [{"key": "k", "kind": 11, "value": 9}]
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    r = M.decode_polled("L1", flipped, 0, len(flipped))
    assert kinds(r.problems) == ["checksum"] and "message 0 (id 0x4d, offset 5)" in r.problems[0][1]


def _z_frame(dialect: str, mid: int, payload: bytes, headers: bytes, *, offset=0, ts=0, origin=0,
             checksum: bool = True) -> bytes:
    head = struct.pack("<Q", 0) + mid.to_bytes(16, "little") + struct.pack("<QQQII", offset, ts, origin, len(headers),
                                                                           len(payload))
    if dialect == "C":
        head += bytes(8)
    assert len(head) == (64 if dialect == "C" else 56)
    frame = head + payload + headers
    if checksum:
        body = frame[8:]
        ck = zlib.crc32(body) if dialect == "Z1" else xxhash.xxh3_64_intdigest(body)
        frame = struct.pack("<Q", ck) + body
    return frame


@pytest.mark.parametrize("dialect", ["Z1", "Z2", "C"])
def test_zero_copy_send_from_spec_bytes(dialect):
    mk = _typed_header if dialect == "C" else _legacy_header
    frames = [_z_frame(dialect, 1, b"one", mk("a", 2, b"x"), checksum=False),
              _z_frame(dialect, 2, b"second", b"", checksum=False)]
    meta = b"\x01\x04\x01\x00\x00\x00" + b"\x02\x06orders" + b"\x02\x04\x00\x00\x00\x00"
    index = (struct.pack("<IIQ", 0, len(frames[0]), 0) + struct.pack("<IIQ", 0, len(frames[0]) + len(frames[1]), 0))
    data = struct.pack("<I", len(meta) + 4) + meta + struct.pack("<I", 2) + index + b"".join(frames)
    r = M.decode_send_messages(dialect, data, 0, len(data))
    assert r.problems == [] and r.info == "stream=1 topic=orders messages=2"
    got = M.messages_of(r.fields)
    assert [m["payload"] for m in got] == [b"one", b"second"] and [m["id"] for m in got] == [1, 2]
    assert got[0]["headers"][0]["key"] == "a" and got[0]["headers"][0]["value"] == "x"
    # the encoder writes the same bytes
    msgs = [{"id": 1, "payload": b"one", "headers": [{"key": "a", "kind": 2, "value": "x"}]},
            {"id": 2, "payload": b"second"}]
    assert M.encode_send_messages(dialect, 1, "orders", msgs, 0) == data
    # and the messages start where the spec puts them: after 4 + metadata_length + 16 * count
    msgs_field = next(f for f in r.fields if f.name == "messages")
    assert msgs_field.offset == 4 + len(meta) + 4 + 32


@pytest.mark.parametrize("dialect", ["Z1", "Z2", "C"])
def test_zero_copy_polled_checksum_verified_and_flipped(dialect):
    mk = _typed_header if dialect == "C" else _legacy_header
    frames = [_z_frame(dialect, 10 + i, bytes([i]) * (i + 1), mk("h", 9, bytes([i])), offset=i, ts=1000 + i)
              for i in range(3)]
    data = struct.pack("<IQI", 0, 2, 3) + b"".join(frames)
    r = M.decode_polled(dialect, data, 0, len(data))
    assert r.problems == [] and r.info == "messages=3"
    got = M.messages_of(r.fields)
    assert [m["offset"] for m in got] == [0, 1, 2]
    checks = [c for f in r.fields if f.name == "messages" for m in f.children for c in m.children
              if c.name == "checksum"]
    assert [c.display for c in checks] == ["verified"] * 3
    # a payload byte of message 2, a header byte (its offset's high byte) of message 1
    for pos, named in ((len(data) - 1, "message 2 (id 0xc, offset 2): checksum"),
                       (16 + len(frames[0]) + 30, f"message 1 (id 0xb, offset {1 | 0x40 << 48}): checksum")):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        r = M.decode_polled(dialect, bytes(bad), 0, len(bad))
        assert kinds(r.problems) == ["checksum"], r.problems
        assert r.problems[0][1].startswith(named), r.problems  # the message named by index, id and offset
    assert M.encode_polled(dialect, got, partition_id=0, current_offset=2) == data


def test_z1_checksum_is_crc32_and_z2_is_xxh3():
    frame = _z_frame("Z1", 1, b"x", b"")
    assert struct.unpack_from("<Q", frame)[0] == zlib.crc32(frame[8:])
    frame = _z_frame("Z2", 1, b"x", b"")
    assert struct.unpack_from("<Q", frame)[0] == xxhash.xxh3_64_intdigest(frame[8:])
    # a Z1 frame read as Z2 does not verify
    data = struct.pack("<IQI", 0, 0, 1) + _z_frame("Z1", 1, b"x", b"")
    assert kinds(M.decode_polled("Z2", data, 0, len(data)).problems) == ["checksum"]


def _v_frame(mid: int, payload: bytes, headers: bytes, offset_delta: int, ts_delta: int) -> bytes:
    body = (mid.to_bytes(16, "little") + struct.pack("<IIII", offset_delta, ts_delta, len(headers), len(payload))
            + bytes(8) + payload + headers)
    assert len(body) == 40 + len(payload) + len(headers)
    return struct.pack("<Q", xxhash.xxh3_64_intdigest(body)) + body


def _v_batch(frames: list[bytes], *, partition=1, base_offset=100, base_ts=5, origin=1000) -> bytes:
    blob = b"".join(frames)
    blen = 256 + len(blob)
    h = xxhash.xxh3_64()
    h.update(struct.pack("<QQQQQI", partition, base_offset, base_ts, origin, blen, len(frames)))
    for f in frames:
        h.update(f[:8])
    head = struct.pack("<QQQQQQI", partition, base_offset, base_ts, origin, blen, h.intdigest(), len(frames))
    head += bytes(256 - len(head))
    return head + blob


def test_v_send_and_poll_from_spec_bytes():
    frames = [_v_frame(1, b"first", _typed_header("a", 3, b"\x01"), 0, 0), _v_frame(2, b"second", b"", 1, 7)]
    batch = _v_batch(frames)
    meta = b"\x01\x04\x01\x00\x00\x00" + b"\x01\x04\x02\x00\x00\x00" + b"\x01\x00"
    body = struct.pack("<I", len(meta) + 4) + meta + struct.pack("<I", 2) + batch
    r = M.decode_send_messages("V", body, 0, len(body))
    assert r.problems == [] and r.info == "stream=1 topic=2 messages=2"
    got = M.messages_of(r.fields)
    assert [(m["id"], m["payload"], m["offset"], m["origin_timestamp"]) for m in got] == [
        (1, b"first", 100, 1000), (2, b"second", 101, 1007)]
    assert got[0]["headers"] == [{"key_kind": 2, "key": "a", "kind": 3, "value": True}]
    batch_field = next(f for f in r.fields if f.name == "batch")
    assert batch_field.child("batch_checksum").display == "verified"
    # poll reply: the 16-byte prefix, then two stored batches
    second = _v_batch([_v_frame(3, b"third", b"", 0, 0)], base_offset=102)
    reply = struct.pack("<IQI", 1, 102, 3) + batch + second
    r = M.decode_polled("V", reply, 0, len(reply))
    assert r.problems == [] and r.info == "messages=3"
    assert [m["offset"] for m in M.messages_of(r.fields)] == [100, 101, 102]
    # a flipped payload byte: one message checksum fails; the batch checksum (over the stored
    # checksums only) still verifies
    bad = bytearray(reply)
    bad[16 + 256 + 48] ^= 1
    r = M.decode_polled("V", bytes(bad), 0, len(bad))
    assert kinds(r.problems) == ["checksum"] and "message 0" in r.problems[0][1]
    # a flipped stored checksum: that message and its batch
    bad = bytearray(reply)
    bad[16 + 256] ^= 1
    assert kinds(M.decode_polled("V", bytes(bad), 0, len(bad)).problems) == ["checksum", "checksum"]


def test_v_encoder_matches_hand_bytes():
    frames = [_v_frame(1, b"first", b"", 0, 0), _v_frame(2, b"second", b"", 1, 7)]
    msgs = [{"id": 1, "payload": b"first", "offset": 100, "origin_timestamp": 1000},
            {"id": 2, "payload": b"second", "offset": 101, "origin_timestamp": 1007}]
    assert M.encode_batch(msgs, partition_id=1, base_timestamp=5) == _v_batch(frames)


def test_v_reserved_bytes_must_be_zero():
    frame = bytearray(_v_frame(1, b"p", b"", 0, 0))
    frame[40] = 1
    body = bytes(frame[8:])
    frame[:8] = struct.pack("<Q", xxhash.xxh3_64_intdigest(body))
    batch = bytearray(_v_batch([bytes(frame)]))
    batch[200] = 9  # batch header reserved area (not covered by the batch checksum)
    reply = struct.pack("<IQI", 1, 100, 1) + bytes(batch)
    problems = M.decode_polled("V", reply, 0, len(reply)).problems
    assert sorted(kinds(problems)) == ["reserved", "reserved"]
    assert ("reserved", "message 0 (id 0x1, offset 100): reserved header bytes are 0x1, not 0") in problems


# ------------------------------------------------------------------------------ messages: encoder round trips

ALL_KINDS = [(1, b"\x00raw"), (2, "text"), (3, True), (4, -5), (5, -300), (6, -70000), (7, -(1 << 40)),
             (8, -(1 << 100)), (9, 200), (10, 60000), (11, 4_000_000_000), (12, 1 << 63), (13, 1 << 127),
             (14, 1.5), (15, -2.25)]


def _sample_messages() -> list[dict]:
    headers = [{"key": f"k{kind}", "kind": kind, "value": value} for kind, value in ALL_KINDS]
    return [
        {"id": 1, "payload": b"hello", "headers": headers, "offset": 0, "timestamp": 1_700_000_000_000_000,
         "origin_timestamp": 1_700_000_000_000_000},
        {"id": (1 << 128) - 1, "payload": bytes(range(256)) * 300, "offset": 1, "timestamp": 1_700_000_000_000_001,
         "origin_timestamp": 1_700_000_000_000_001},  # over 64 KB
        {"id": 3, "payload": b"x", "headers": [{"key": "only", "kind": 2, "value": "one"}], "offset": 2,
         "timestamp": 1_700_000_000_000_002, "origin_timestamp": 1_700_000_000_000_002},
    ]


def _plain_headers(m: dict) -> list:
    return [(h["key"], h["kind"], h["value"]) for h in m.get("headers", [])]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_round_trips_messages_with_every_header_kind(dialect):
    sent = _sample_messages()
    data = M.encode_send_messages(dialect, "s", 7, sent, {"kind": 3, "value": b"key"})
    r = M.decode_send_messages(dialect, data, 0, len(data))
    assert r.problems == [] and r.info == "stream=s topic=7 messages=3"
    got = M.messages_of(r.fields)
    assert [(m["id"], m["payload"], _plain_headers(m)) for m in got] == [
        (m["id"], m["payload"], _plain_headers(m)) for m in sent]
    polled = M.encode_polled(dialect, sent, partition_id=1)
    r = M.decode_polled(dialect, polled, 0, len(polled))
    assert r.problems == [] and r.info == "messages=3"
    back = M.messages_of(r.fields)
    assert [(m["id"], m["payload"], m["offset"], _plain_headers(m)) for m in back] == [
        (m["id"], m["payload"], m["offset"], _plain_headers(m)) for m in sent]
    # Field offsets are relative to the buffer the caller passes (the whole frame)
    frame = b"\x00" * 8 + polled
    r2 = M.decode_polled(dialect, frame, 8, len(frame))
    assert r2.problems == [] and r2.fields[0].offset == 8


@pytest.mark.parametrize("dialect", DIALECTS)
def test_header_kind_values_decode_to_python_values(dialect):
    sent = _sample_messages()[:1]
    polled = M.encode_polled(dialect, sent)
    got = M.messages_of(M.decode_polled(dialect, polled, 0, len(polled)).fields)
    values = {h["kind"]: h["value"] for h in got[0]["headers"]}
    assert values == dict(ALL_KINDS)


def test_unknown_header_kind_and_wrong_fixed_size():
    for dialect, mk in (("L1", _legacy_header), ("C", _typed_header)):
        hdrs = mk("a", 99, b"zz") + mk("b", 11, b"\x01\x02")
        if dialect == "L1":
            msg = struct.pack("<QBQ", 0, 1, 0) + (1).to_bytes(16, "little") + struct.pack("<I", zlib.crc32(b"p"))
            msg += struct.pack("<I", len(hdrs)) + hdrs + struct.pack("<I", 1) + b"p"
        else:
            msg = _z_frame("C", 1, b"p", hdrs)
        data = struct.pack("<IQI", 0, 0, 1) + msg
        r = M.decode_polled(dialect, data, 0, len(data))
        assert kinds(r.problems) == ["header_kind", "value"], r.problems


def test_empty_header_key_and_value():
    hdrs = _legacy_header("", 2, b"")
    data = struct.pack("<IQI", 0, 0, 1) + _z_frame("Z2", 1, b"p", hdrs)
    assert kinds(M.decode_polled("Z2", data, 0, len(data)).problems) == ["value", "value"]


# ------------------------------------------------------------------------------ inconsistent and hostile input


def test_count_disagrees_with_bytes():
    sent = _sample_messages()
    for dialect in DIALECTS:
        data = M.encode_polled(dialect, sent, messages_count=5)
        assert kinds(M.decode_polled(dialect, data, 0, len(data)).problems) == ["count"], dialect
    for dialect in ("Z1", "Z2", "C", "V"):
        data = M.encode_send_messages(dialect, 1, 1, sent[:1], messages_count=0)
        r = M.decode_send_messages(dialect, data, 0, len(data))
        assert "count" in kinds(r.problems), dialect


def test_huge_count_does_not_allocate():
    data = M.encode_send_messages("C", 1, 1, [{"id": 1, "payload": b"x"}], messages_count=0xFFFFFFFF)
    r = M.decode_send_messages("C", data, 0, len(data))
    assert kinds(r.problems) == ["count"]
    data = struct.pack("<IQI", 0, 0, 0xFFFFFFFF)
    for dialect in DIALECTS:
        assert kinds(M.decode_polled(dialect, data, 0, len(data)).problems) == ["count"]


def test_metadata_length_and_index_position_and_reserved():
    data = bytearray(M.encode_send_messages("C", 1, 1, [{"id": 1, "payload": b"x"}, {"id": 2, "payload": b"y"}]))
    bad = bytearray(data)
    bad[0] += 1
    assert kinds(M.decode_send_messages("C", bytes(bad), 0, len(bad)).problems) == ["size"]
    meta = struct.unpack_from("<I", data)[0]
    bad = bytearray(data)
    bad[4 + meta] = 1  # index entry 0: offset must be 0 (metadata_length counts messages_count)
    bad[4 + meta + 16 + 4] ^= 1  # index entry 1: wrong position
    assert kinds(M.decode_send_messages("C", bytes(bad), 0, len(bad)).problems) == ["value", "size"]
    bad = bytearray(data)
    first = 4 + meta + 32
    bad[first + 56] = 1  # reserved u64 of the 64-byte header
    assert kinds(M.decode_send_messages("C", bytes(bad), 0, len(bad)).problems) == ["reserved"]


def test_index_entries_are_made_when_read_with_what_the_check_said():
    """The index is checked from its numbers and its entries made later: the same fields, with
    each position's verdict, as reading them at once gives."""
    data = bytearray(M.encode_send_messages("Z2", 1, 1, [{"id": i, "payload": b"x" * i} for i in range(1, 4)]))
    meta = struct.unpack_from("<I", data)[0]
    data[4 + meta + 16 + 4] ^= 1  # entry 1: wrong position
    data[4 + meta + 32] = 7  # entry 2: offset not 0
    r = M.decode_send_messages("Z2", bytes(data), 0, len(data))
    assert [k for k, _ in r.problems] == ["size", "value"] and "index entry 2: offset is 7" in r.problems[1][1]
    index = next(f for f in r.fields if f.name == "index")
    want = []
    mv = memoryview(bytes(data))
    at = index.offset
    for i in range(3):
        kids, _ = M.INDEX_ENTRY.read_fields(mv, at + 16 * i, at + 16 * i + 16)
        want.append((f"[{i}]", kids[1].value, at + 16 * i, 16, [(k.name, k.value, k.offset, k.size) for k in kids]))
    got = index.children
    assert [(e.name, e.value, e.offset, e.size, [(k.name, k.value, k.offset, k.size) for k in e.children])
            for e in got] == want
    ends = [f.offset + f.size for f in next(f for f in r.fields if f.name == "messages").children
            if f.name.startswith("[")]
    assert got[0].display == "position ok" and got[2].display == "position ok"
    assert got[1].display == f"position should be {ends[1] - (index.offset + index.size)}"


def test_payload_over_limit_and_overrun():
    frame = bytearray(_z_frame("C", 1, b"x", b"", checksum=False))
    frame[52:56] = struct.pack("<I", 10_000_001)
    data = struct.pack("<IQI", 0, 0, 1) + bytes(frame)
    r = M.decode_polled("C", data, 0, len(data))
    assert kinds(r.problems) == ["size", "size"]  # the cut-off message still counts as found
    assert "limit" in r.problems[0][1] and "overrun" in r.problems[1][1]


def test_trailing_bytes():
    data = M.encode_polled("Z2", _sample_messages()[:1]) + b"junk"
    r = M.decode_polled("Z2", data, 0, len(data))
    assert kinds(r.problems) == ["size"] and r.fields[-1].name == "trailing"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_truncation_is_reported_without_exception(dialect):
    sent = _sample_messages()
    sent[1]["payload"] = b"p" * 40
    polled = M.encode_polled(dialect, sent)
    send = M.encode_send_messages(dialect, 1, "t", sent)
    for n in range(len(polled)):
        r = M.decode_polled(dialect, polled, 0, n)
        assert isinstance(r, M.Decoded)
        if n:
            assert r.problems, (dialect, n)
    for n in range(len(send)):
        r = M.decode_send_messages(dialect, send, 0, n)
        assert isinstance(r, M.Decoded)
        if dialect not in ("L0", "L1"):  # legacy SendMessages has no count: a cut at a message boundary is valid
            assert r.problems, (dialect, n)


def test_empty_poll_response_is_no_messages():
    assert M.decode_polled("C", b"", 0, 0) == M.Decoded([], "messages=0")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DIALECTS), st.binary(max_size=600))
def test_random_bytes_never_raise(dialect, data):
    for fn in (M.decode_send_messages, M.decode_polled):
        r = fn(dialect, data, 0, len(data))
        assert isinstance(r, T.Decoded)
        assert all(k in T.PROBLEM_KINDS for k in kinds(r.problems))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DIALECTS), st.integers(0, 10_000), st.integers(0, 255))
def test_mutated_messages_never_raise(dialect, pos, byte):
    for data in (M.encode_polled(dialect, _sample_messages()[:1]),
                 M.encode_send_messages(dialect, 1, 1, _sample_messages()[:1])):
        bad = bytearray(data)
        bad[pos % len(bad)] = byte
        for fn in (M.decode_send_messages, M.decode_polled):
            assert isinstance(fn(dialect, bytes(bad), 0, len(bad)), T.Decoded)


# ------------------------------------------------------------------------------ responses (section 5)


NOW = 1_700_000_000_000_000


def name8(s: str) -> bytes:
    return bytes([len(s)]) + s.encode()


def str32(s: str) -> bytes:
    return struct.pack("<I", len(s)) + s.encode()


def stream_header(sid: int, name: str, topics: int) -> bytes:
    out = struct.pack("<IQIQQ", sid, NOW, topics, 100, 5) + name8(name)
    assert len(out) == 33 + len(name)
    return out


def topic_header(tid: int, name: str, partitions: int) -> bytes:
    out = struct.pack("<IQIQBQBQQ", tid, NOW, partitions, 0, 1, (1 << 64) - 1, 1, 10, 2) + name8(name)
    assert len(out) == 51 + len(name)
    return out


def partition(pid: int) -> bytes:
    out = struct.pack("<IQIQQQ", pid, NOW, 1, 9, 100, 10)
    assert len(out) == 40
    return out


def decode(command: int, dialect: str, data: bytes) -> T.Decoded:
    return R.decode_response(command, dialect, b"HEADER!!" + data, 8, 8 + len(data))


@pytest.mark.parametrize("dialect", ["L1", "Z1", "Z2", "C", "V"])
def test_streams_and_stream_details(dialect):
    data = stream_header(1, "orders", 0) + stream_header(2, "events", 0)
    r = decode(201, dialect, data)
    assert r.problems == [] and r.info == "streams=2"
    (lst,) = r.fields
    assert [e.child("name").value for e in lst.children] == ["orders", "events"]
    assert lst.children[1].offset == 8 + 39  # offsets are positions in the buffer passed
    details = stream_header(1, "orders", 1) + topic_header(0, "t", 2)
    r = decode(200, dialect, details)
    assert r.problems == [] and r.info == "stream=orders id=1 topics=1"
    topics = next(f for f in r.fields if f.name == "topics")
    assert topics.children[0].child("name").value == "t"
    assert topics.children[0].child("max_topic_size").display == "unlimited"
    assert decode(202, dialect, details).info == "stream=orders id=1 topics=1"


def test_topic_details_with_partitions():
    data = topic_header(3, "orders", 2) + partition(0) + partition(1)
    r = decode(300, "C", data)
    assert r.problems == [] and r.info == "topic=orders id=3 partitions=2"
    parts = next(f for f in r.fields if f.name == "partitions")
    assert [p.child("id").value for p in parts.children] == [0, 1]
    assert parts.children[1].child("current_offset").value == 9
    r = decode(301, "C", topic_header(1, "a", 1) + topic_header(2, "b", 1))
    assert r.info == "topics=2" and r.problems == []
    # the count says 3 partitions, the bytes hold 2
    bad = topic_header(3, "orders", 3) + partition(0) + partition(1)
    assert kinds(decode(300, "C", bad).problems) == ["size"]


def test_l1_older_topic_layouts_are_recognised():
    # 0.2.13-0.2.24: message_expiry u32 seconds, compression, max_topic_size, replication_factor
    old = struct.pack("<IQIIBQBQQ", 1, NOW, 0, 60, 2, 0, 1, 0, 0) + name8("old")
    r = decode(301, "L1", old)
    assert r.problems == [] and r.fields[0].children[0].child("message_expiry").value == 60
    assert r.fields[0].children[0].child("compression").display == "gzip"
    # <= 0.1.8 (dialect L0): message_expiry u32 only
    oldest = struct.pack("<IQIIQQ", 1, NOW, 1, 0, 0, 0) + name8("x") + partition(1)
    r = decode(300, "L0", oldest)
    assert r.problems == [] and r.info == "topic=x id=1 partitions=1"


def test_consumer_offset_and_not_found():
    r = decode(120, "Z2", struct.pack("<IQQ", 1, 10, 7))
    assert r.problems == [] and r.info == "partition=1 current=10 stored=7"
    for command in (120, 200, 300, 600, 31, 21):
        assert decode(command, "C", b"") == T.Decoded([], "empty (not found)")
    for command, text in ((201, "streams=0"), (301, "topics=0"), (22, "clients=0"), (32, "users=0")):
        assert decode(command, "C", b"").info == text


def test_consumer_groups_and_members():
    group = struct.pack("<III", 1, 2, 2) + name8("cg")
    members = struct.pack("<II", 5, 1) + struct.pack("<I", 0) + struct.pack("<II", 6, 1) + struct.pack("<I", 1)
    r = decode(600, "C", group + members)
    assert r.problems == [] and r.info == "group=cg id=1 members=2"
    ms = next(f for f in r.fields if f.name == "members")
    assert [m.child("member_id").value for m in ms.children] == [5, 6]
    assert [c.value for c in ms.children[1].child("partitions").children] == [1]
    r = decode(601, "C", group + struct.pack("<III", 2, 1, 0) + name8("g2"))
    assert r.info == "groups=2" and r.problems == []
    # 0.0.x groups had no name (L0)
    r = decode(601, "L0", struct.pack("<III", 1, 1, 0) + struct.pack("<III", 2, 1, 0))
    assert r.info == "groups=2" and r.problems == []


def test_clients():
    client = struct.pack("<IIB", 7, 0xFFFFFFFF, 1) + str32("127.0.0.1:5000") + struct.pack("<I", 1)
    r = decode(20, "C", client + struct.pack("<III", 1, 2, 3))
    assert r.problems == [] and r.info == "client=7 address=127.0.0.1:5000"
    assert r.fields[1].display == "not logged in" and r.fields[2].display == "tcp"
    cg = next(f for f in r.fields if f.name == "consumer_groups").children[0]
    assert [c.value for c in cg.children] == [1, 2, 3] and cg.children[0].name == "stream_id"
    r = decode(22, "Z1", struct.pack("<IIB", 7, 0, 2) + str32("a") + struct.pack("<I", 0))
    assert r.info == "clients=1" and r.fields[0].children[0].child("user_id").display == "not logged in"
    bad = struct.pack("<IIB", 7, 1, 9) + str32("a") + struct.pack("<I", 0)
    assert kinds(decode(22, "C", bad).problems) == ["value"]  # transport 9


def test_users_with_and_without_permissions():
    header = struct.pack("<IQB", 1, NOW, 1) + name8("iggy")
    blob = _perm_blob()
    r = decode(31, "C", header + b"\x01" + struct.pack("<I", len(blob)) + blob)
    assert r.problems == [] and r.info == "user=iggy id=1"
    perms = r.fields[-1]
    assert perms.value is True and field_values(perms.children)["streams"][0]["stream_id"] == 5
    r = decode(33, "C", header + bytes(4))  # no permissions: a u32 0
    assert r.problems == [] and r.fields[-1].value is False
    r = decode(32, "C", header + struct.pack("<IQB", 2, NOW, 2) + name8("bob"))
    assert r.info == "users=2" and r.fields[0].children[1].child("status").display == "inactive"


def test_l1_user_created_at_big_endian_bug():
    header = struct.pack("<I", 1) + struct.pack(">Q", NOW) + b"\x01" + name8("iggy")
    r = decode(32, "L1", header)
    created = r.fields[0].children[0].child("created_at")
    assert created.value == NOW and "big-endian" in created.display


def test_tokens_logins_and_created_token():
    r = decode(41, "C", name8("ci") + struct.pack("<Q", 0) + name8("web") + struct.pack("<Q", NOW))
    assert r.info == "tokens=2" and r.fields[0].children[0].child("expiry_at").display == "never"
    r = decode(42, "C", name8("secret-token"))
    assert r.info == "token (12 bytes)" and r.problems == []
    for command in (38, 44):
        r = decode(command, "Z2", struct.pack("<I", 0))
        assert r.info == "user_id=0" and r.problems == []


def test_cluster_metadata():
    node = str32("n1") + str32("10.0.0.1") + struct.pack("<HHHHBB", 8090, 8080, 3000, 8092, 0, 0)
    r = decode(12, "C", str32("cluster") + struct.pack("<I", 1) + node)
    assert r.problems == [] and r.info == "cluster=cluster nodes=1"
    n = r.fields[1].children[0]
    assert n.child("tcp_port").value == 8090 and n.child("role").display == "leader"


def _stats_bytes(tail: bytes, cpu: bool = True) -> bytes:
    head = struct.pack("<If", 4242, 1.5) + (struct.pack("<f", 3.0) if cpu else b"")
    head += struct.pack("<QQQQQQQQ", 1, 2, 3, 4, NOW, 6, 7, 8) + struct.pack("<IIIIQII", 2, 3, 4, 5, 6, 7, 8)
    assert len(head) == (108 if cpu else 104)
    return head + str32("host") + str32("Linux") + str32("6.1") + str32("6.1.0") + tail


def test_stats_layouts_by_version():
    cache = struct.pack("<I", 1) + struct.pack("<IIIQQf", 1, 2, 3, 10, 5, 0.5)
    full = _stats_bytes(str32("0.8.0") + struct.pack("<I", 8000) + cache + struct.pack("<IQQ", 4, 10, 20))
    r = decode(10, "C", full)
    assert r.problems == [] and r.info == "streams=2 topics=3 clients=7 version=0.8.0"
    byname = {f.name: f for f in r.fields}
    assert byname["consumer_groups_count"].offset == 8 + 104  # the last field of the fixed block
    assert byname["iggy_server_semver"].display == "0.8.0" and byname["total_disk_space"].value == 20
    # 0.4.131-0.7.x with the semver omitted (unknown): the cache count follows the version string
    r = decode(10, "Z2", _stats_bytes(str32("0.6.0") + cache))
    assert r.problems == [] and "iggy_server_semver" not in {f.name for f in r.fields}
    assert next(f for f in r.fields if f.name == "cache_metrics").value == 1
    # 0.0.x (L0): no total_cpu_usage, nothing after the strings
    r = decode(10, "L0", _stats_bytes(b"", cpu=False))
    assert r.problems == [] and r.info == "streams=2 topics=3 clients=7"


def test_empty_responses_and_unknown_commands():
    for command in (1, 203, 101, 121, 604):
        assert decode(command, "C", b"") == T.Decoded([])
        assert kinds(decode(command, "C", b"\x00\x01").problems) == ["size"]
    # CREATE_* returned nothing before 0.4.0
    assert decode(202, "L1", b"").problems == []
    r = decode(9999, "C", b"\x01\x02")
    assert r.problems == [] and r.fields[0].value == b"\x01\x02"


def test_poll_response_is_delegated():
    data = M.encode_polled("C", _sample_messages()[:2])
    r = decode(100, "C", data)
    assert r.info == "messages=2" and r.problems == []


def test_cut_and_trailing_responses():
    data = stream_header(1, "orders", 0)
    assert kinds(decode(200, "C", data[:-2]).problems) == ["size"]
    r = decode(200, "C", data + b"xx")
    assert kinds(r.problems) == ["size"] and r.fields[-1].name == "trailing"
    assert kinds(decode(201, "C", data + data[:10]).problems) == ["size"]


RESPONSE_COMMANDS = (1, 10, 11, 12, 20, 21, 22, 31, 32, 33, 38, 41, 42, 44, 100, 101, 120, 200, 201, 202, 300, 301,
                     302, 600, 601, 602, 9999)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(RESPONSE_COMMANDS), st.sampled_from(DIALECTS), st.binary(max_size=400))
def test_random_response_bytes_never_raise(command, dialect, data):
    r = R.decode_response(command, dialect, data, 0, len(data))
    assert isinstance(r, T.Decoded)
    assert all(k in T.PROBLEM_KINDS for k in kinds(r.problems))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 400), st.integers(0, 255))
def test_mutated_responses_never_raise(pos, byte):
    samples = [(200, stream_header(1, "orders", 1) + topic_header(0, "t", 2) + partition(0) + partition(1)),
               (10, _stats_bytes(str32("0.8.0") + struct.pack("<II", 8000, 0) + struct.pack("<IQQ", 4, 10, 20))),
               (600, struct.pack("<III", 1, 2, 1) + name8("cg") + struct.pack("<III", 5, 1, 0))]
    for command, data in samples:
        bad = bytearray(data)
        bad[pos % len(bad)] = byte
        for dialect in DIALECTS:
            assert isinstance(R.decode_response(command, dialect, bytes(bad), 0, len(bad)), T.Decoded)


@pytest.mark.parametrize("dialect, offsets", [
    ("L1", {"offset": 0, "state": 8, "timestamp": 9, "id": 17, "checksum": 33, "headers_length": 37, "headers": 41,
            "payload_length": 41, "payload": 45}),
    ("Z1", {"checksum": 0, "id": 8, "offset": 24, "timestamp": 32, "origin_timestamp": 40, "user_headers_length": 48,
            "payload_length": 52, "payload": 56}),
    ("C", {"checksum": 0, "id": 8, "offset": 24, "timestamp": 32, "origin_timestamp": 40, "user_headers_length": 48,
           "payload_length": 52, "reserved": 56, "payload": 64}),
    ("V", {"checksum": 0, "id": 8, "offset_delta": 24, "timestamp_delta": 28, "user_headers_length": 32,
           "payload_length": 36, "reserved": 40, "payload": 48}),
])
def test_message_fields_sit_at_the_spec_offsets(dialect, offsets):
    data = M.encode_polled(dialect, [{"id": 5, "payload": b"abc", "offset": 3, "origin_timestamp": 9}])
    r = M.decode_polled(dialect, data, 0, len(data))
    msg = next(f for f in M._flatten_messages(r.fields))
    at = msg.offset
    got = {c.name: c.offset - at for c in msg.children if c.offset >= 0 and c.name in offsets}
    assert got == offsets
    assert msg.child("payload").value == b"abc" and msg.child("id").value == 5


def test_v_stream_and_topic_layouts_with_options():
    option = b"\x02" + struct.pack("<I", 3) + b"ttl" + b"\x0c" + struct.pack("<I", 8) + struct.pack("<Q", 60)
    stream = struct.pack("<IQIQQ", 0, NOW, 1, 0, 0) + name8("orders") + struct.pack("<I", 0)
    topic = (struct.pack("<IQIQBQQQ", 0, NOW, 1, 0, 1, 0, 0, 0) + name8("t") + struct.pack("<I", len(option))
             + option + struct.pack("<I", 0))
    assert len(topic) == 50 + 1 + 4 + len(option) + 4  # no replication_factor in V
    r = decode(202, "V", stream + topic)
    assert r.problems == [] and r.info == "stream=orders id=0 topics=1"
    t = next(f for f in r.fields if f.name == "topics").children[0]
    (pair,) = t.child("options").children
    assert pair.child("key").value == "ttl" and pair.child("value").value == 60
    part = struct.pack("<IQIQQQ", 0, NOW, 1, 0, 0, 0) + struct.pack("<QQQ", 23, 0, 101)
    r = decode(302, "V", topic + part)
    assert r.problems == [] and r.info == "topic=t id=0 partitions=1"
    assert next(f for f in r.fields if f.name == "partitions").children[0].child("incarnation").value == 23
    # a V server writing the spec's (C) layouts still decodes
    assert decode(200, "V", stream_header(1, "orders", 1) + topic_header(0, "t", 0)).problems == []
    bad_option = struct.pack("<I", 3) + b"\x02\x09\x00"  # a pair cut short inside the block
    bad_topic = struct.pack("<IQIQBQQQ", 0, NOW, 0, 0, 1, 0, 0, 0) + name8("t") + bad_option + struct.pack("<I", 0)
    assert "size" in kinds(decode(301, "V", bad_topic).problems)


def test_v_send_messages_reply_confirmations():
    body = struct.pack("<I", 1) + struct.pack("<IIIQ", 0, 0, 1, 40)
    r = decode(101, "V", body)
    assert r.problems == [] and r.info == "partition=1 base_offset=40"
    assert decode(101, "V", struct.pack("<I", 0)).problems == []
    assert kinds(decode(101, "V", struct.pack("<I", 2) + struct.pack("<IIIQ", 0, 0, 1, 40)).problems) == ["size"]
    assert kinds(decode(101, "C", body).problems) == ["size"]  # classic SEND_MESSAGES answers nothing


def _header_strategy():
    ints = {4: 8, 5: 16, 6: 32, 7: 64, 8: 128}
    uints = {9: 8, 10: 16, 11: 32, 12: 64, 13: 128}
    values = [st.tuples(st.just(1), st.binary(min_size=1, max_size=40)),
              st.tuples(st.just(2), st.text(min_size=1, max_size=20)),
              st.tuples(st.just(3), st.booleans()),
              st.tuples(st.just(14), st.floats(width=32, allow_nan=False)),
              st.tuples(st.just(15), st.floats(allow_nan=False))]
    values += [st.tuples(st.just(k), st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)) for k, b in ints.items()]
    values += [st.tuples(st.just(k), st.integers(0, (1 << b) - 1)) for k, b in uints.items()]
    return st.builds(lambda key, kv: {"key": key, "kind": kv[0], "value": kv[1]},
                     st.text(min_size=1, max_size=12), st.one_of(values))


MESSAGE_LISTS = st.lists(st.builds(lambda mid, payload, headers, delta: {
    "id": mid, "payload": payload, "headers": headers, "origin_timestamp": 1_700_000_000_000_000 + delta},
    st.integers(0, (1 << 128) - 1), st.binary(min_size=1, max_size=200), st.lists(_header_strategy(), max_size=4),
    st.integers(0, 1 << 31)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DIALECTS), MESSAGE_LISTS)
def test_random_messages_round_trip_in_every_dialect(dialect, msgs):
    for i, m in enumerate(msgs):
        m["offset"] = 100 + i
    want = [(m["id"], m["payload"], _plain_headers(m)) for m in msgs]
    data = M.encode_send_messages(dialect, 3, "s", msgs)
    r = M.decode_send_messages(dialect, data, 0, len(data))
    assert r.problems == []
    assert [(m["id"], m["payload"], _plain_headers(m)) for m in M.messages_of(r.fields)] == want
    data = M.encode_polled(dialect, msgs)
    r = M.decode_polled(dialect, data, 0, len(data))
    assert r.problems == []
    got = M.messages_of(r.fields)
    assert [(m["id"], m["payload"], _plain_headers(m)) for m in got] == want
    assert [m["offset"] for m in got] == [m["offset"] for m in msgs]
