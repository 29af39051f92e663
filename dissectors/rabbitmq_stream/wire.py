"""Primitive wire types of the RabbitMQ Stream protocol (all big-endian) and its irregular values.

Strings are int16-length-prefixed (-1 = null), bytes int32-prefixed (-1 = null), arrays int32-counted.
Types here plug into ``dissectors.schema`` so the same description decodes, encodes and documents.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from analyzer.api import Field
from dissectors.schema import Array, DecodeError, F, Int, Prefixed, Struct, WireType

U8 = Int("uint8", ">B")
U16 = Int("uint16", ">H")
U32 = Int("uint32", ">I")
U64 = Int("uint64", ">Q")
I8 = Int("int8", ">b")
I16 = Int("int16", ">h")
I32 = Int("int32", ">i")
I64 = Int("int64", ">q")
STRING = Prefixed("string", ">h", text=True, null=-1)
BYTES = Prefixed("bytes", ">i", text=False, null=-1)


def array(element: WireType) -> Array:
    return Array(">i", element)


#: Response codes of today's protocol (rabbit_stream.hrl), by the names the clients use.
CODES: dict[int, str] = {
    0x01: "OK",
    0x02: "STREAM_DOES_NOT_EXIST",
    0x03: "SUBSCRIPTION_ID_ALREADY_EXISTS",
    0x04: "SUBSCRIPTION_ID_DOES_NOT_EXIST",
    0x05: "STREAM_ALREADY_EXISTS",
    0x06: "STREAM_NOT_AVAILABLE",
    0x07: "SASL_MECHANISM_NOT_SUPPORTED",
    0x08: "AUTHENTICATION_FAILURE",
    0x09: "SASL_ERROR",
    0x0A: "SASL_CHALLENGE",
    0x0B: "SASL_AUTHENTICATION_FAILURE_LOOPBACK",
    0x0C: "VIRTUAL_HOST_ACCESS_FAILURE",
    0x0D: "UNKNOWN_FRAME",
    0x0E: "FRAME_TOO_LARGE",
    0x0F: "INTERNAL_ERROR",
    0x10: "ACCESS_REFUSED",
    0x11: "PRECONDITION_FAILED",
    0x12: "PUBLISHER_DOES_NOT_EXIST",
    0x13: "NO_OFFSET",
    0x14: "SASL_CANNOT_CHANGE_MECHANISM",
    0x15: "SASL_CANNOT_CHANGE_USERNAME",
}

#: The 2020 draft numbered its response codes from 0.
DRAFT_CODES: dict[int, str] = {
    0: "OK",
    1: "STREAM_DOES_NOT_EXIST",
    2: "SUBSCRIPTION_ID_ALREADY_EXISTS",
    3: "SUBSCRIPTION_ID_DOES_NOT_EXIST",
    4: "STREAM_ALREADY_EXISTS",
    5: "STREAM_NOT_AVAILABLE",
    6: "SASL_MECHANISM_NOT_SUPPORTED",
    7: "AUTHENTICATION_FAILURE",
    8: "SASL_ERROR",
    9: "SASL_CHALLENGE",
    10: "SASL_AUTHENTICATION_FAILURE_LOOPBACK",
    11: "VIRTUAL_HOST_ACCESS_FAILURE",
    12: "UNKNOWN_FRAME",
    13: "FRAME_TOO_LARGE",
    14: "INTERNAL_ERROR",
    15: "ACCESS_REFUSED",
    16: "PRECONDITION_FAILED",
    17: "PUBLISHER_DOES_NOT_EXIST",
}

OFFSET_TYPES: dict[int, str] = {0: "none", 1: "first", 2: "last", 3: "next", 4: "offset", 5: "timestamp"}
DRAFT_OFFSET_TYPES: dict[int, str] = {0: "first", 1: "last", 2: "next", 3: "offset", 4: "timestamp"}


class Properties(WireType):
    """An int32-counted list of (string key, value) pairs, shown as one node per key.

    Decodes to a mapping (``field_values`` gives a dict) so JSON shows ``{"product": "RabbitMQ"}``.
    """

    __slots__ = ("doc", "value_type")

    def __init__(self, value_type: WireType = STRING, doc: str = "{string:string}") -> None:
        self.value_type = value_type
        self.doc = doc

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        start = off
        if off + 4 > end:
            raise DecodeError(f"{name}: count needs 4 bytes, {max(end - off, 0)} left", off)
        (n,) = struct.unpack_from(">i", buf, off)
        off += 4
        if n < 0:
            if n == -1:
                return Field(name, None, start, 4, "null", []), off
            raise DecodeError(f"{name}: negative count {n}", start)
        items: list[Field] = []
        for i in range(n):
            if off >= end:
                raise DecodeError(f"{name}: count {n} but the frame ends after {i} pairs", off)
            at = off
            k, off = STRING.read("key", buf, off, end)
            v, off = self.value_type.read("value", buf, off, end)
            key = k.value if isinstance(k.value, str) else repr(k.value)
            items.append(Field(key, v.value, at, off - at, v.display))
        return Field(name, n, start, off - start, None, items), off

    def write(self, value: Mapping[str, Any] | None) -> bytes:
        if value is None:
            return struct.pack(">i", -1)
        parts = [struct.pack(">i", len(value))]
        for k, v in value.items():
            parts.append(STRING.write(k))
            parts.append(self.value_type.write(v))
        return b"".join(parts)


class OffsetSpec(WireType):
    """uint16 OffsetType, then a uint64 offset (type 4) or an int64 timestamp in ms (type 5)."""

    __slots__ = ("doc", "types", "offset_code", "timestamp_code")

    def __init__(self, types: Mapping[int, str] = OFFSET_TYPES, offset_code: int = 4, timestamp_code: int = 5):
        self.types = types
        self.offset_code = offset_code
        self.timestamp_code = timestamp_code
        self.doc = "OffsetSpecification"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        start = off
        t, off = U16.read("type", buf, off, end)
        kind = self.types.get(t.value)
        t.display = kind or f"unknown ({t.value})"
        children = [t]
        display = t.display
        if t.value == self.offset_code:
            v, off = U64.read("offset", buf, off, end)
            children.append(v)
            display = f"offset {v.value}"
        elif t.value == self.timestamp_code:
            v, off = I64.read("timestamp", buf, off, end)
            children.append(v)
            display = f"timestamp {v.value}"
        return Field(name, t.value, start, off - start, display, children), off

    def write(self, value: Mapping[str, Any] | int) -> bytes:
        if isinstance(value, int):
            value = {"type": value}
        out = U16.write(value["type"])
        if value["type"] == self.offset_code:
            out += U64.write(value["offset"])
        elif value["type"] == self.timestamp_code:
            out += I64.write(value["timestamp"])
        return out


class SaslData(WireType):
    """SaslAuthenticate response challenge: the server writes a uint16 length, the document and
    the Java client an int32 one. Accept whichever makes the lengths add up."""

    doc = "bytes (uint16 or int32 length)"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        left = end - off
        if left >= 2:
            (n,) = struct.unpack_from(">H", buf, off)
            if 2 + n == left:
                return Field(name, bytes(buf[off + 2:end]), off, left, "uint16 length"), end
        if left >= 4:
            (n,) = struct.unpack_from(">i", buf, off)
            if 4 + n == left:
                return Field(name, bytes(buf[off + 4:end]), off, left, "int32 length"), end
            if n == -1 and left == 4:
                return Field(name, None, off, 4, "null"), end
        raise DecodeError(f"{name}: neither a uint16 nor an int32 length fits the {left} bytes left", off)

    def write(self, value: Any) -> bytes:
        raw = bytes(value)
        return struct.pack(">H", len(raw)) + raw


class RouteStreams(WireType):
    """Route response streams: an array of strings (3.10+) or one string (3.9.x)."""

    doc = "[string] (3.9: string)"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        try:
            f, new = _STRINGS.read(name, buf, off, end)
            if new == end:
                return f, new
        except DecodeError:
            pass
        f, new = STRING.read("[0]", buf, off, end)
        # Still a list (of one), so the field keeps one JSON type whichever broker answered.
        return Field(name, 1, off, new - off, "single string (RabbitMQ 3.9)", [f], True), new

    def write(self, value: Any) -> bytes:
        if isinstance(value, str) or value is None:
            return STRING.write(value)
        return _STRINGS.write(value)


_STRINGS = array(STRING)


def struct_of(*fields: F, doc: str = "struct") -> Struct:
    return Struct(*fields, doc=doc)
