"""Message formats for the capture responder: what SEND_MESSAGES carries, what POLL_MESSAGES returns.

Legacy L1 (iggy.md §4.1, §5.2), the zero-copy frames of Z1/Z2/C (§4.1, §5.1, §5.3). The V batch
(§9.6) is in vsr.py. User headers are kept as the raw bytes the client sent: the same client polls
them back, so they go out in the same dialect's encoding.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

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

    def size(self) -> int:
        return len(self.payload) + len(self.headers)


def parse_send(d: Dialect, r: Reader) -> list[Stored]:
    """The messages of a SEND_MESSAGES payload, the reader placed after the Partitioning."""
    if d.legacy_messages:
        return _parse_legacy(r)
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
    prefix = u32(partition_id) + u64(current_offset) + u32(len(batch))
    enc = encode_legacy if d.legacy_messages else (lambda m: encode_frame(d, m))
    return prefix + b"".join(enc(m) for m in batch)
