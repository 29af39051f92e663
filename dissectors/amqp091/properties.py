"""The content header (frame type 2) and the 14 properties of class basic (spec §4)."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from analyzer.api import Field
from dissectors.amqp091 import clean_properties
from dissectors.amqp091.wire import OCTET, SHORTSTR, TABLE, TIMESTAMP, check_table
from dissectors.kit.catalog import snake
from dissectors.schema import DecodeError, F

#: Property order on the wire with the flag bit of each (bit 15 of the first word = first property).
PROPERTIES: tuple[tuple[int, F], ...] = (
    (0x8000, F("content_type", SHORTSTR, doc="MIME type")),
    (0x4000, F("content_encoding", SHORTSTR, doc="MIME encoding")),
    (0x2000, F("headers", TABLE, doc="application headers")),
    (0x1000, F("delivery_mode", OCTET, enum={1: "transient", 2: "persistent"})),
    (0x0800, F("priority", OCTET)),
    (0x0400, F("correlation_id", SHORTSTR)),
    (0x0200, F("reply_to", SHORTSTR)),
    (0x0100, F("expiration", SHORTSTR, doc="per-message TTL in ms, as text")),
    (0x0080, F("message_id", SHORTSTR)),
    (0x0040, F("timestamp", TIMESTAMP)),
    (0x0020, F("type", SHORTSTR)),
    (0x0010, F("user_id", SHORTSTR)),
    (0x0008, F("app_id", SHORTSTR)),
    (0x0004, F("cluster_id", SHORTSTR, doc="reserved, must be empty")),
)
PROPERTY_NAMES = tuple(spec.name for _, spec in PROPERTIES)
_MASKS = {spec.name: bit for bit, spec in PROPERTIES}

_HEAD = struct.Struct(">HHQH")


def _continuation(buf: bytes | memoryview, off: int, end: int, flags: int, problems: list[str]) -> int:
    """Skip continuation flag words and note flag bits class basic does not have; returns the new offset."""
    extra = flags & 1
    # Continuation words cover properties 16+; class basic has none, so they must be zero.
    while extra:
        if off + 2 > end:
            raise DecodeError("continuation flag word needs 2 bytes", off)
        word = buf[off] << 8 | buf[off + 1]
        if word & 0xFFFE:
            problems.append(f"continuation flag word {word:#06x} names properties class basic does not have")
        extra = word & 1
        off += 2
    if flags & 0x0002:
        problems.append("reserved property flag bit 1 is set")
    return off


def decode_properties(buf: memoryview, off: int, end: int) -> tuple[list[Field], list[str], int]:
    """Flag word(s) and property values from ``off`` (frame-relative). Returns (fields, problems, end).

    Raises DecodeError when a property value overruns the frame.
    """
    problems: list[str] = []
    if off + 2 > end:
        raise DecodeError("property flags need 2 bytes", off)
    (flags,) = struct.unpack_from(">H", buf, off)
    flags_at = off
    off += 2
    off = _continuation(buf, off, end, flags, problems)
    present = _PRESENT.get(flags)
    if present is None:
        specs = tuple(spec for bit, spec in PROPERTIES if flags & bit)
        present = _PRESENT[flags] = (", ".join(spec.name for spec in specs) or "none", specs)
    shown, specs = present
    out = [Field("property_flags", flags, flags_at, off - flags_at, shown)]
    for spec in specs:
        f, off = spec.type.read(spec.name, buf, off, end, spec)
        out.append(f)
    return out, problems, off


#: flag word -> (its display, the specs of the properties it names, in wire order); at most 65,536.
_PRESENT: dict[int, tuple[str, tuple[F, ...]]] = {}


def encode_properties(props: Mapping[str, Any], extra_flags: int = 0) -> bytes:
    flags = extra_flags
    parts: list[bytes] = []
    props = {snake(k): v for k, v in props.items()}  # ``content-type`` (AMQP's spelling) or ``content_type``
    for bit, spec in PROPERTIES:
        if spec.name in props and props[spec.name] is not None:
            flags |= bit
            parts.append(spec.type.write(props[spec.name]))
    return struct.pack(">H", flags) + b"".join(parts)


def encode_header_payload(body_size: int, props: Mapping[str, Any] | None = None, class_id: int = 60,
                          weight: int = 0) -> bytes:
    return struct.pack(">HHQ", class_id, weight, body_size) + encode_properties(props or {})


_SHORTSTR_MASKS = 0x8000 | 0x4000 | 0x0400 | 0x0200 | 0x0100 | 0x0080 | 0x0020 | 0x0010 | 0x0008 | 0x0004


def scan_properties(buf: bytes, off: int, end: int) -> tuple[str, list[str], int]:
    """What decode_properties checks, without building fields: (content-type, problems, end).

    Raises DecodeError where decode_properties would.
    """
    problems: list[str] = []
    if off + 2 > end:
        raise DecodeError("property flags need 2 bytes", off)
    flags = buf[off] << 8 | buf[off + 1]
    off += 2
    if flags & 0x0003:
        off = _continuation(buf, off, end, flags, problems)
    content_type = ""
    plan = _PLANS.get(flags)
    if plan is None:
        plan = _PLANS[flags] = _plan(flags)
    for bit, kind in plan:
        if kind == 0:  # shortstr
            if off >= end:
                raise DecodeError(f"{_NAMES[bit]}: length prefix needs 1 bytes, 0 left", off)
            n = buf[off]
            if off + 1 + n > end:
                raise DecodeError(f"{_NAMES[bit]}: length {n} overruns the frame by {off + 1 + n - end} bytes", off)
            if bit == 0x8000:
                content_type = bytes(buf[off + 1:off + 1 + n]).decode("utf-8", "replace")
            off += 1 + n
        elif kind == -1:  # table
            off = check_table(buf, off, end)
        else:
            if off + kind > end:
                raise DecodeError(f"{_NAMES[bit]}: needs {kind} bytes, {max(end - off, 0)} left", off)
            off += kind
    return content_type, problems, off


_NAMES = {bit: spec.name for bit, spec in PROPERTIES}

#: flag word -> ((bit, kind), ...) of the properties present; kind 0 = shortstr, -1 = table, else a size.
_PLANS: dict[int, tuple[tuple[int, int], ...]] = {}


def _plan(flags: int) -> tuple[tuple[int, int], ...]:
    out = []
    for bit, _spec in PROPERTIES:
        if flags & bit:
            if bit & _SHORTSTR_MASKS:
                kind = 0
            elif bit == 0x2000:
                kind = -1
            else:
                kind = 8 if bit == 0x0040 else 1
            out.append((bit, kind))
    return tuple(out)


def _rest_kinds(flags: int) -> tuple[int, ...] | None:
    if flags & 0x0003:  # a continuation word or the reserved bit: scan_properties has a word to say
        return None
    # Fixed-size properties next to each other make one step.
    kinds: list[int] = []
    for bit, kind in _plan(flags):
        if bit == 0x8000:
            continue
        if kind > 0 and kinds and kinds[-1] > 0:
            kinds[-1] += kind
        else:
            kinds.append(kind)
    return tuple(kinds)


#: The hot path's property test (clean_properties) learns each flag word's kinds from here.
clean_properties.KINDS_OF.append(_rest_kinds)
