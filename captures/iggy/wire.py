"""Iggy wire primitives for the capture responder: dialects, a byte reader, encoders, checksums.

Everything here follows /work/shared/specs/iggy.md (section numbers in the comments). Little-endian
throughout. This is a test fixture, not the dissector: it only needs to understand what the real
client libraries send, and to answer in the layout each dialect's client expects.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import xxhash


@dataclass(frozen=True)
class Dialect:
    """The wire traits that differ between the dialects of iggy.md section 0."""

    name: str
    legacy_messages: bool  # L1: u128 id + headers + payload, 45-byte polled prefix (§4.1, §5.2)
    message_header: int  # bytes of the per-message header: 56 (Z1, Z2), 64 (C), 48 (V frames)
    xxh3: bool  # message checksum: XXH3-64 (Z2 on) or CRC32 (L1 payload only, Z1 zero-extended)
    zero_based: bool  # stream, topic, partition and group ids start at 0 (Z2 on)
    create_ids: bool  # CREATE_STREAM/TOPIC/CONSUMER_GROUP carry an explicit id (L1, Z1: §4.4-4.6)
    partition_flag: bool  # optional partition id is flag u8 + u32 (§2.5, Z2 on)
    typed_header_keys: bool  # user-header keys carry a kind byte (§5.5, C on)
    vsr: bool = False  # 256-byte consensus header framing (§9)


DIALECTS = {
    d.name: d
    for d in (
        Dialect("L1", True, 0, False, False, True, False, False),
        Dialect("Z1", False, 56, False, False, True, False, False),
        Dialect("Z2", False, 56, True, True, False, True, False),
        Dialect("C", False, 64, True, True, False, True, True),
        Dialect("V", False, 48, True, True, False, True, True, vsr=True),
    )
}

# Status codes used by the responder (iggy.md §6).
OK = 0
INVALID_COMMAND = 3
FEATURE_UNAVAILABLE = 5
INVALID_IDENTIFIER = 6
UNAUTHENTICATED = 40
INVALID_CREDENTIALS = 42
STREAM_ID_NOT_FOUND = 1009
STREAM_NAME_NOT_FOUND = 1010
STREAM_ID_ALREADY_EXISTS = 1011  # only up to server-0.4.300 (L1); the code means something else later
STREAM_NAME_ALREADY_EXISTS = 1012
TOPIC_ID_NOT_FOUND = 2010
TOPIC_NAME_NOT_FOUND = 2011
TOPIC_ID_ALREADY_EXISTS = 2012  # removed after 0.4.300
TOPIC_NAME_ALREADY_EXISTS = 2013
PARTITION_NOT_FOUND = 3007
INVALID_MESSAGES_COUNT = 4009
CONSUMER_GROUP_ID_NOT_FOUND = 5000
CONSUMER_GROUP_NAME_NOT_FOUND = 5003
CONSUMER_GROUP_NAME_ALREADY_EXISTS = 5004
CONSUMER_GROUP_MEMBER_NOT_FOUND = 5006


class Malformed(Exception):
    """The request does not parse; the responder answers status 3 (InvalidCommand)."""


class Reader:
    """A cursor over a request payload; every read checks the bounds."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Malformed(f"need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def u128(self) -> int:
        return int.from_bytes(self.take(16), "little")

    def name8(self) -> str:
        return self.take(self.u8()).decode("utf-8")

    def str32(self) -> str:
        return self.take(self.u32()).decode("utf-8")

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def rest(self) -> bytes:
        return self.take(self.remaining())

    def identifier(self) -> int | str:
        """§2.1: kind 1 numeric (u32), kind 2 string."""
        kind, length = self.u8(), self.u8()
        value = self.take(length)
        if kind == 1 and length == 4:
            return struct.unpack("<I", value)[0]
        if kind == 2 and length > 0:
            return value.decode("utf-8")
        raise Malformed(f"identifier kind {kind} length {length}")

    def consumer(self) -> tuple[int, int | str]:
        """§2.2 (L1 on): kind u8 (1 consumer, 2 group) + Identifier."""
        return self.u8(), self.identifier()

    def optional_partition(self, dialect: Dialect) -> int | None:
        """§2.5: u32 with 0 = none (1-based dialects) or flag u8 + u32 (Z2 on)."""
        if dialect.partition_flag:
            flag, value = self.u8(), self.u32()
            return value if flag == 1 else None
        value = self.u32()
        return value or None

    def partitioning(self) -> tuple[int, bytes]:
        """§2.3: kind u8, length u8, value."""
        kind, length = self.u8(), self.u8()
        return kind, self.take(length)


def u8(v: int) -> bytes:
    return struct.pack("<B", v)


def u16(v: int) -> bytes:
    return struct.pack("<H", v)


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def u128(v: int) -> bytes:
    return v.to_bytes(16, "little")


def name8(s: str) -> bytes:
    b = s.encode("utf-8")
    return u8(len(b)) + b


def str32(s: str) -> bytes:
    b = s.encode("utf-8")
    return u32(len(b)) + b


def checksum(dialect: Dialect, data: bytes) -> int:
    """The message checksum of the dialect over ``data`` (what it covers is the caller's business)."""
    if dialect.xxh3:
        return xxhash.xxh3_64_intdigest(data)
    return zlib.crc32(data)


HEADER_KINDS = {1: "raw", 2: "string", 3: "bool", 4: "int8", 5: "int16", 6: "int32", 7: "int64",
                8: "int128", 9: "uint8", 10: "uint16", 11: "uint32", 12: "uint64", 13: "uint128",
                14: "float32", 15: "float64"}


def parse_user_headers(dialect: Dialect, blob: bytes) -> list[dict]:
    """§5.5: the user-header map, legacy (string keys) or typed (key kind byte, C and V)."""
    r = Reader(blob)
    out = []
    while r.remaining():
        key_kind = r.u8() if dialect.typed_header_keys else 2
        key = r.take(r.u32())
        value_kind = r.u8()
        value = r.take(r.u32())
        out.append({"key_kind": HEADER_KINDS.get(key_kind, str(key_kind)), "key_hex": key.hex(),
                    "kind": HEADER_KINDS.get(value_kind, str(value_kind)), "value_hex": value.hex()})
    return out
