"""Message formats for the capture responder: what SEND_MESSAGES carries, what POLL_MESSAGES returns.

Legacy L1 (iggy.md §4.1, §5.2), the zero-copy frames of Z1/Z2/C (§4.1, §5.1, §5.3) and the V
batch records (§9.6) with their XXH3 frame and batch checksums. User headers are kept as the raw
bytes the client sent: the same client polls them back, so they go out in the same dialect's
encoding.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import xxhash
from wire import Dialect, Malformed, Reader, checksum, u8, u32, u64, u128

__all__ = ["Malformed", "Stored", "parse_send", "encode_polled"]

AVAILABLE = 1  # legacy MessageState (§2.6)


@dataclass
class Stored:
    id: int
    payload: bytes
    headers: bytes  # the user-header map, encoded as the client sent it
    origin_timestamp: int = 0
    offset: int = 0
    timestamp: int = 0
    # V only: where the message sat in the batch it was sent in (§9.6); polls serve that batch back.
    batch_base: int = 0
    batch_origin: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0

    def size(self) -> int:
        return len(self.payload) + len(self.headers)


def parse_send(d: Dialect, r: Reader) -> list[Stored]:
    """The messages of a SEND_MESSAGES payload, the reader placed after the Partitioning."""
    if d.legacy_messages:
        return _parse_legacy(r)
    if d.vsr:
        return parse_batch(r)[0]
    count = r.u32()
    index = [struct.unpack_from("<IIQ", r.take(16)) for _ in range(count)]
    area = Reader(r.rest())
    out = []
    for i, (_offset, end, _ts) in enumerate(index):
        m = _parse_frame(d, area)
        if area.pos != end:  # index positions are cumulative end positions (§4.1)
            raise Malformed(f"message {i} ends at {area.pos}, index says {end}")
        out.append(m)
    if area.remaining():
        raise Malformed(f"{area.remaining()} bytes after the last indexed message")
    return out


def _parse_legacy(r: Reader) -> list[Stored]:
    """§4.1 L0/L1: id u128, headers_length u32, headers, payload_length u32, payload; to the end."""
    out = []
    while r.remaining():
        mid = r.u128()
        headers = r.take(r.u32())
        payload = r.take(r.u32())
        out.append(Stored(mid, payload, headers))
    return out


def _parse_frame(d: Dialect, r: Reader) -> Stored:
    """§5.3: checksum, id, offset, timestamp, origin_timestamp, header and payload lengths
    (then 8 reserved bytes in C), payload, user headers."""
    _checksum, mid, _offset, _ts, origin = r.u64(), r.u128(), r.u64(), r.u64(), r.u64()
    headers_len, payload_len = r.u32(), r.u32()
    if d.message_header == 64:
        r.u64()  # reserved
    payload = r.take(payload_len)
    headers = r.take(headers_len)
    return Stored(mid, payload, headers, origin)


def encode_frame(d: Dialect, m: Stored) -> bytes:
    """One §5.3 frame with the server-side fields set and the checksum over bytes [8 .. end]."""
    body = (u128(m.id) + u64(m.offset) + u64(m.timestamp) + u64(m.origin_timestamp)
            + u32(len(m.headers)) + u32(len(m.payload)))
    if d.message_header == 64:
        body += u64(0)
    body += m.payload + m.headers
    return u64(checksum(d, body)) + body


def encode_legacy(m: Stored) -> bytes:
    """§5.2: offset, state, timestamp, id, CRC32 of the payload only, headers, payload."""
    return (u64(m.offset) + u8(AVAILABLE) + u64(m.timestamp) + u128(m.id) + u32(zlib.crc32(m.payload))
            + u32(len(m.headers)) + m.headers + u32(len(m.payload)) + m.payload)


def encode_polled(d: Dialect, partition_id: int, current_offset: int, batch: list[Stored]) -> bytes:
    """§5.1/§5.2: partition_id u32, current_offset u64, count u32, then the messages."""
    if d.vsr:
        return encode_polled_batches(partition_id, current_offset, batch)
    prefix = u32(partition_id) + u64(current_offset) + u32(len(batch))
    enc = encode_legacy if d.legacy_messages else (lambda m: encode_frame(d, m))
    return prefix + b"".join(enc(m) for m in batch)


# ---- dialect V: the 256-byte batch header and 48-byte frames (§9.6) --------------------------------

BATCH_HEADER = 256
FRAME_HEADER = 48


def frame_checksum(frame_meta: bytes, payload: bytes, headers: bytes) -> int:
    """XXH3-64 over frame[8..48] + payload + user headers."""
    return xxhash.xxh3_64_intdigest(frame_meta + payload + headers)


def batch_checksum(fields: tuple[int, int, int, int, int], count: int, frame_checksums: list[int]) -> int:
    """XXH3-64 over partition_id, base_offset, base_timestamp, origin_timestamp, batch_length (u64 each),
    message_count (u32), then every frame's stored 8-byte checksum in order. The spec's §9.6 does not
    say what the batch checksum covers; this is what apache-iggy 0.9.0 accepts."""
    data = struct.pack("<5QI", *fields, count) + b"".join(u64(c) for c in frame_checksums)
    return xxhash.xxh3_64_intdigest(data)


def parse_batch(r: Reader) -> tuple[list[Stored], dict]:
    """SEND_MESSAGES in V after the Partitioning: messages_count u32, then one batch."""
    count = r.u32()
    head = r.take(BATCH_HEADER)
    partition, base_offset, base_ts, origin, length, stored_sum = struct.unpack_from("<6Q", head)
    header_count = struct.unpack_from("<I", head, 48)[0]
    blob = Reader(r.take(length - BATCH_HEADER))
    out, sums, frames_ok = [], [], True
    while blob.remaining():
        meta_start = blob.pos + 8
        frame_sum = blob.u64()
        mid, delta_off, delta_ts = blob.u128(), blob.u32(), blob.u32()
        headers_len, payload_len, _reserved = blob.u32(), blob.u32(), blob.u64()
        meta = blob.data[meta_start:blob.pos]
        payload = blob.take(payload_len)
        headers = blob.take(headers_len)
        frames_ok &= frame_checksum(meta, payload, headers) == frame_sum
        sums.append(frame_sum)
        out.append(Stored(mid, payload, headers, origin + delta_ts, batch_origin=origin,
                          offset_delta=delta_off, timestamp_delta=delta_ts))
    if r.remaining():
        raise Malformed(f"{r.remaining()} bytes after the batch")
    if not (count == header_count == len(out)):
        raise Malformed(f"messages_count {count}, batch header {header_count}, frames {len(out)}")
    seen = {"messages_count": count, "frame_checksums_ok": frames_ok,
            "batch_checksum_ok": batch_checksum((partition, base_offset, base_ts, origin, length), count, sums)
            == stored_sum, "batch_checksum": stored_sum}
    return out, seen


def encode_batch_record(partition_id: int, group: list[Stored]) -> bytes:
    """One stored batch record as a poll serves it: the batch it was sent in, sliced to ``group``,
    with the server-owned fields stamped (partition, base offset, base timestamp, checksums)."""
    frames, sums = [], []
    for m in group:
        meta = (u128(m.id) + u32(m.offset_delta) + u32(m.timestamp_delta) + u32(len(m.headers))
                + u32(len(m.payload)) + u64(0))
        c = frame_checksum(meta, m.payload, m.headers)
        sums.append(c)
        frames.append(u64(c) + meta + m.payload + m.headers)
    blob = b"".join(frames)
    first = group[0]
    fields = (partition_id, first.batch_base, first.timestamp, first.batch_origin, BATCH_HEADER + len(blob))
    head = bytearray(BATCH_HEADER)
    struct.pack_into("<6QI", head, 0, *fields, batch_checksum(fields, len(group), sums), len(group))
    return bytes(head) + blob


def encode_polled_batches(partition_id: int, current_offset: int, batch: list[Stored]) -> bytes:
    """V poll reply: the 16-byte prefix, then one record per stored batch the messages came from."""
    out = [u32(partition_id) + u64(current_offset) + u32(len(batch))]
    group: list[Stored] = []
    for m in batch:
        if group and m.batch_base != group[0].batch_base:
            out.append(encode_batch_record(partition_id, group))
            group = []
        group.append(m)
    if group:
        out.append(encode_batch_record(partition_id, group))
    return b"".join(out)


def polled_checksum(d: Dialect, m: Stored) -> int:
    """The checksum a poll reply carries for ``m`` (recorded in the facts for the tests)."""
    if d.legacy_messages:
        return zlib.crc32(m.payload)
    if d.vsr:
        meta = (u128(m.id) + u32(m.offset_delta) + u32(m.timestamp_delta) + u32(len(m.headers))
                + u32(len(m.payload)) + u64(0))
        return frame_checksum(meta, m.payload, m.headers)
    return struct.unpack_from("<Q", encode_frame(d, m))[0]
