"""A small AMQP 1.0 type decoder (and encoder, for tests) for messages carried by the stream protocol.

Stream messages are normally AMQP 1.0 *bare messages*: a run of described sections
(``00 53 <code> <value>``). :func:`message_fields` turns one into Field nodes, or returns None when
the bytes are not such a message (plain payloads are then shown raw). Never raises on bad input.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from analyzer.api import Field
from analyzer.jsonout import fields_json, max_value
from analyzer.jsonout import plain as json_plain
from dissectors.kit.memo import remember

SECTIONS: dict[int, str] = {
    0x70: "header",
    0x71: "delivery_annotations",
    0x72: "message_annotations",
    0x73: "properties",
    0x74: "application_properties",
    0x75: "data",
    0x76: "amqp_sequence",
    0x77: "amqp_value",
    0x78: "footer",
}
SYMBOLIC = {
    "amqp:header:list": 0x70,
    "amqp:delivery-annotations:map": 0x71,
    "amqp:message-annotations:map": 0x72,
    "amqp:properties:list": 0x73,
    "amqp:application-properties:map": 0x74,
    "amqp:data:binary": 0x75,
    "amqp:amqp-sequence:list": 0x76,
    "amqp:amqp-value:*": 0x77,
    "amqp:footer:map": 0x78,
}
HEADER_FIELDS = ("durable", "priority", "ttl", "first_acquirer", "delivery_count")
PROPERTY_FIELDS = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
                   "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
                   "reply_to_group_id")
_TIME_FIELDS = {"absolute_expiry_time", "creation_time"}
MAX_DEPTH = 32


class AmqpError(Exception):
    pass


class Symbol(str):
    """An AMQP symbol (ASCII); a plain ``str`` encodes as an AMQP string."""


class Timestamp(int):
    """Milliseconds since the Unix epoch."""


class Described:
    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: Any, value: Any) -> None:
        self.descriptor = descriptor
        self.value = value

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


_FIXED: dict[int, tuple[struct.Struct, Any]] = {
    0x50: (struct.Struct(">B"), int), 0x51: (struct.Struct(">b"), int),
    0x60: (struct.Struct(">H"), int), 0x61: (struct.Struct(">h"), int),
    0x70: (struct.Struct(">I"), int), 0x71: (struct.Struct(">i"), int),
    0x52: (struct.Struct(">B"), int), 0x54: (struct.Struct(">b"), int),
    0x80: (struct.Struct(">Q"), int), 0x81: (struct.Struct(">q"), int),
    0x53: (struct.Struct(">B"), int), 0x55: (struct.Struct(">b"), int),
    0x72: (struct.Struct(">f"), float), 0x82: (struct.Struct(">d"), float),
    0x83: (struct.Struct(">q"), Timestamp),
}
_CONST = {0x40: None, 0x41: True, 0x42: False, 0x43: 0, 0x44: 0, 0x45: []}
_RAW_FIXED = {0x74: 4, 0x84: 8, 0x94: 16}


def decode_value(buf: bytes | memoryview, off: int, end: int, depth: int = 0) -> tuple[Any, int]:
    """One AMQP value at ``off``; returns (python value, next offset). Raises AmqpError."""
    if depth > MAX_DEPTH:
        raise AmqpError("nesting too deep")
    if off >= end:
        raise AmqpError("value cut off")
    code = buf[off]
    if code == 0x00:
        desc, off = decode_value(buf, off + 1, end, depth + 1)
        val, off = decode_value(buf, off, end, depth + 1)
        return Described(desc, val), off
    return _body(code, buf, off + 1, end, depth)


def _body(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    """The value after constructor ``code`` (arrays share one constructor for all elements)."""
    handler = _DISPATCH.get(code)
    if handler is None:
        raise AmqpError(f"unknown type code {code:#04x}")
    return handler(code, buf, off, end, depth)


def _const(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    v = _CONST[code]
    return (list(v) if isinstance(v, list) else v), off


def _make_fixed(st: struct.Struct, kind: Any) -> Any:
    size = st.size
    unpack = st.unpack_from

    def fixed(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
        if off + size > end:
            raise AmqpError("fixed-width value cut off")
        return kind(unpack(buf, off)[0]), off + size

    return fixed


def _bool_byte(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    if off >= end:
        raise AmqpError("boolean cut off")
    return buf[off] != 0, off + 1


def _raw_fixed(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    n = _RAW_FIXED[code]
    if off + n > end:
        raise AmqpError("decimal cut off")
    return bytes(buf[off:off + n]), off + n


def _char(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    if off + 4 > end:
        raise AmqpError("char cut off")
    (cp,) = struct.unpack_from(">I", buf, off)
    return (chr(cp) if cp < 0x110000 else cp), off + 4


def _uuid(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    if off + 16 > end:
        raise AmqpError("uuid cut off")
    return str(uuid.UUID(bytes=bytes(buf[off:off + 16]))), off + 16


_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")


def _variable(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    if code < 0xB0:
        if off >= end:
            raise AmqpError("length cut off")
        n = buf[off]
        off += 1
    else:
        if off + 4 > end:
            raise AmqpError("length cut off")
        n = _U32.unpack_from(buf, off)[0]
        off += 4
    stop = off + n
    if stop > end:
        raise AmqpError("variable-width value overruns")
    raw = bytes(buf[off:stop])
    low = code & 0x0F
    if low == 0:
        return raw, stop
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw, stop
    return (Symbol(text) if low == 3 else text), stop


def _compound(code: int, buf: bytes | memoryview, off: int, end: int, depth: int) -> tuple[Any, int]:
    small = code in (0xC0, 0xC1, 0xE0)
    w = 1 if small else 4
    if off + 2 * w > end:
        raise AmqpError("compound header cut off")
    if small:
        size, count = buf[off], buf[off + 1]
    else:
        size, count = _U32X2.unpack_from(buf, off)
    body_end = off + w + size
    if size < w or body_end > end:
        raise AmqpError("compound size overruns")
    off += 2 * w
    if code in (0xE0, 0xF0):
        return _array(buf, off, body_end, count, depth), body_end
    items: list[Any] = []
    for _ in range(count):
        if off >= body_end:
            raise AmqpError("compound count exceeds its size")
        v, off = decode_value(buf, off, body_end, depth + 1)
        items.append(v)
    if code in (0xC1, 0xD1):
        return _pairs(items), body_end
    return items, body_end


_DISPATCH: dict[int, Any] = {c: _const for c in _CONST}
_DISPATCH.update({c: _make_fixed(st, kind) for c, (st, kind) in _FIXED.items()})
_DISPATCH.update({0x56: _bool_byte, 0x73: _char, 0x98: _uuid})
_DISPATCH.update({c: _raw_fixed for c in _RAW_FIXED})
_DISPATCH.update({c: _variable for c in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3)})
_DISPATCH.update({c: _compound for c in (0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0)})


def _array(buf: bytes | memoryview, off: int, end: int, count: int, depth: int) -> list[Any]:
    if count == 0:
        return []
    if off >= end:
        raise AmqpError("array constructor cut off")
    desc = None
    if buf[off] == 0x00:
        desc, off = decode_value(buf, off + 1, end, depth + 1)
        if off >= end:
            raise AmqpError("array constructor cut off")
    code = buf[off]
    off += 1
    if code in _CONST and count > end - off + 64:
        # Zero-width elements: a count from the wire must not decide how much we build.
        raise AmqpError("array of zero-width elements with an implausible count")
    out: list[Any] = []
    for _ in range(count):
        if off >= end and code not in _CONST:
            raise AmqpError("array count exceeds its size")
        v, off = _body(code, buf, off, end, depth + 1)
        out.append(Described(desc, v) if desc is not None else v)
    return out


def _pairs(items: list[Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for i in range(0, len(items) - 1, 2):
        k = items[i]
        try:
            hash(k)
        except TypeError:
            k = repr(k)
        out[k] = items[i + 1]
    return out


def plain(v: Any) -> Any:
    """JSON-friendly value (keys as strings, described values as dicts)."""
    if isinstance(v, Described):
        return {"descriptor": plain(v.descriptor), "value": plain(v.value)}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def _ts_display(v: Any) -> str | None:
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return datetime.fromtimestamp(v / 1000, UTC).isoformat(timespec="milliseconds")
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _value_field(name: str, v: Any, off: int, size: int) -> Field:
    display = _ts_display(v) if isinstance(v, Timestamp) or name in _TIME_FIELDS else None
    if isinstance(v, dict):
        kids = [_value_field(str(k), x, -1, 0) for k, x in v.items()]
        return Field(name, len(v), off, size, display, kids)
    if isinstance(v, Described):
        return Field(name, plain(v), off, size, display)
    if isinstance(v, list):
        return Field(name, plain(v), off, size, display)
    return Field(name, v, off, size, display)


#: Constructors whose value's extent its first bytes say (variable-width values and compounds):
#: a one-octet size at the next octet, or a four-octet one.
_SIZE8 = frozenset((0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0))
_SIZE32 = frozenset((0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0))
#: A section given with its JSON value remembered (see _sections' ``seen``).
_HIT = b""
#: Section bytes -> the section's JSON value, for the sections a producer repeats message after
#: message (application properties, properties, annotations of one batch): made once. Short
#: sections only (_SEEN_SIZE), _SEEN_MAX of them, emptied when full. A short data section (a
#: message's body, 0xA0) is not remembered, bodies differing from message to message: its bytes
#: are cut out as they are.
_JSON_SEEN: dict[bytes, Any] = {}
_SEEN_SIZE: Final = 256
_SEEN_MAX: Final = 256


def _sections(buf: bytes | memoryview, off: int, end: int,
              seen: dict[bytes, Any] | None = None) -> list[tuple[str, Any, int, int, bytes | None]] | None:
    """The described sections of an AMQP 1.0 message in ``buf[off:end]``: (name, value, start
    relative to ``off``, size, key) each; None if the bytes are not such a message.

    With ``seen`` (section bytes -> JSON value), a section found there is not decoded: its value
    is that JSON value and its key is ``_HIT``; a section that could be remembered has its bytes as
    key (else None). A section's value depends on its bytes alone, and a section no longer than the
    JSON value limit has no value the JSON could cut."""
    if end - off < 3 or buf[off] != 0x00:
        return None
    out: list[tuple[str, Any, int, int, bytes | None]] = []
    pos = off
    limit = max_value() if seen is not None else 0
    try:
        while pos < end:
            if buf[pos] != 0x00:
                raise AmqpError("not a described section")
            key = None
            if pos + 2 < end and buf[pos + 1] == 0x53:  # the usual smallulong descriptor
                code, p = buf[pos + 2], pos + 3
                if code == 0x75 and p + 1 < end and buf[p] == 0xA0:  # a short data section: its bytes
                    stop = p + 2 + buf[p + 1]
                    if stop <= end:
                        out.append(("data", bytes(buf[p + 2:stop]), pos - off, stop - pos, None))
                        pos = stop
                        continue
                elif seen is not None and p + 1 < end:
                    c = buf[p]
                    stop = p + 2 + buf[p + 1] if c in _SIZE8 else \
                        p + 5 + _U32.unpack_from(buf, p + 1)[0] if c in _SIZE32 and p + 5 <= end else end + 1
                    if stop <= end and stop - pos <= _SEEN_SIZE and (not limit or stop - pos <= limit):
                        key = bytes(buf[pos:stop])
                        known = seen.get(key, seen)
                        if known is not seen:
                            out.append((SECTIONS[code], known, pos - off, stop - pos, _HIT))
                            pos = stop
                            continue
            else:
                desc, p = decode_value(buf, pos + 1, end, 1)
                code = SYMBOLIC.get(desc) if isinstance(desc, str) else desc
            # A descriptor is a ulong or a symbol; any other value (a list, a map: unhashable) is no
            # section (found by the fuzz campaign).
            if type(code) is not int or code not in SECTIONS:
                raise AmqpError(f"unknown section descriptor {code!r}")
            val, p = decode_value(buf, p, end, 1)
            out.append((SECTIONS[code], val, pos - off, p - pos, key))
            pos = p
    except AmqpError:
        return None
    return out


def message_fields(buf: bytes | memoryview, off: int, end: int, base: int) -> list[Field] | None:
    """Sections of an AMQP 1.0 message in ``buf[off:end]``; Field offsets are ``base``-relative
    (pass -1 as base to mark the bytes as not on the wire, e.g. decompressed). None if not AMQP."""
    sections = _sections(buf, off, end)
    if sections is None:
        return None
    return _tree(sections, base)


def _tree(sections: list[tuple[str, Any, int, int, bytes | None]], base: int) -> list[Field]:
    """:func:`_sections`' sections (decoded: none remembered) as Field nodes, offsets
    ``base``-relative (-1: not on the wire)."""
    return _lists([_section(name, val, at + base if base >= 0 else -1, size) for name, val, at, size, _key in sections])


def general_message_json(buf: bytes | memoryview, off: int, end: int) -> dict[str, Any] | None:
    """amqp_json.message_json of a message its usual_message_json gave up on: its sections decoded (and
    remembered, so that the next like it takes the one pass)."""
    sections = _sections(buf, off, end, _JSON_SEEN)
    if sections is None:
        return None
    if len(sections) == 1 or len({s[0] for s in sections}) == len(sections):
        # Each section once (the usual message): the tree's order is the wire's.
        return {name: [_json_of(name, val, key)] if name in REPEATABLE else _json_of(name, val, key)
                for name, val, _at, _size, key in sections}
    once = [s[0] for s in sections if s[0] not in REPEATABLE]
    if len(set(once)) != len(once):  # a section repeated that may not be: the tree's way
        return fields_json(_tree(_sections(buf, off, end), -1))  # type: ignore[arg-type]
    # Values in the tree's order (which is the order values are cut in): a repeatable section's
    # occurrences as one list where the first one stands, as _lists makes it.
    out: dict[str, Any] = {}
    for name, val, _at, _size, key in sections:
        if name not in REPEATABLE:
            out[name] = (val, key)
        elif name in out:
            out[name].append((val, key))
        else:
            out[name] = [(val, key)]
    for name, got in out.items():
        out[name] = [_json_of(name, v, k) for v, k in got] if name in REPEATABLE else _json_of(name, *got)
    return out


def _json_of(name: str, val: Any, key: bytes | None) -> Any:
    """One section's JSON value (:func:`_section_json`), remembered by its bytes when ``key``
    says it may be, or as remembered (``_HIT``: ``val`` is the JSON value)."""
    if key is None:
        return json_plain(val, name) if type(val) is bytes else _section_json(name, val)
    if key is _HIT:
        return val
    return remember(_JSON_SEEN, key, _section_json(name, val), _SEEN_MAX)


def _section_json(name: str, val: Any) -> Any:
    """The JSON value of :func:`_section`'s node (as a list element too: its leaves are named by
    the section, the list's name, either way)."""
    if name in ("header", "properties") and isinstance(val, list):
        names = HEADER_FIELDS if name == "header" else PROPERTY_FIELDS
        out: dict[str, Any] = {}
        for i, v in enumerate(val):
            if v is not None:
                key = names[i] if i < len(names) else f"[{i}]"
                out[key] = _value_json(key, v)
        return out
    if isinstance(val, dict):
        return _map_json(val)
    return _value_json(name, val)


def _map_json(val: dict[Any, Any]) -> dict[str, Any]:
    for k in val:
        if type(k) is not str:
            break
    else:  # text keys (the usual application properties): distinct as they are
        return {k: _value_json(k, x) for k, x in val.items()}
    keys = [str(k) for k in val]
    if len(set(keys)) != len(keys):  # keys alike as text: the tree's rule for repeated names
        return fields_json([_value_field(k, x, -1, 0) for k, x in zip(keys, val.values(), strict=True)])
    return {k: _value_json(k, x) for k, x in zip(keys, val.values(), strict=True)}


def _value_json(name: str, v: Any) -> Any:
    """The JSON value of :func:`_value_field`'s node."""
    if v is None or type(v) in _JSON_SCALARS:
        return v
    if isinstance(v, dict):
        return _map_json(v)
    if isinstance(v, (Described, list)):
        return json_plain(plain(v), name)
    return json_plain(v, name)


_JSON_SCALARS = (int, str, bool)  # as analyzer.jsonout writes them: as they are


#: Sections a message may carry more than once: always a list node, so their JSON type is stable.
REPEATABLE = ("data", "amqp_sequence")


def _lists(sections: list[Field]) -> list[Field]:
    """Every repeatable section as one list node (in place of its first occurrence), elements ``[i]``."""
    for name in REPEATABLE:
        items = [f for f in sections if f.name == name]
        if not items:
            continue
        first, last = items[0], items[-1]
        wire = first.offset >= 0
        node = Field(name, len(items), first.offset, last.offset + last.size - first.offset if wire else 0,
                     None, items, True)
        for i, f in enumerate(items):
            f.name = f"[{i}]"
        ids = {id(f) for f in items[1:]}
        sections = [node if f is first else f for f in sections if id(f) not in ids]
    return sections


def _section(name: str, val: Any, at: int, size: int) -> Field:
    if name in ("header", "properties") and isinstance(val, list):
        names = HEADER_FIELDS if name == "header" else PROPERTY_FIELDS
        kids = [_value_field(names[i] if i < len(names) else f"[{i}]", v, -1, 0)
                for i, v in enumerate(val) if v is not None]
        return Field(name, None, at, size, None, kids)
    if isinstance(val, dict):
        kids = [_value_field(str(k), v, -1, 0) for k, v in val.items()]
        return Field(name, len(val), at, size, None, kids)
    return _value_field(name, val, at, size)


# --------------------------------------------------------------------------- encoding (tests, bench)
def encode_value(v: Any) -> bytes:
    if v is None:
        return b"\x40"
    if isinstance(v, bool):
        return b"\x41" if v else b"\x42"
    if isinstance(v, Timestamp):
        return b"\x83" + struct.pack(">q", v)
    if isinstance(v, int):
        if -128 <= v <= 127:
            return b"\x55" + struct.pack(">b", v)
        return b"\x81" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\x82" + struct.pack(">d", v)
    if isinstance(v, Symbol):
        raw = v.encode("ascii")
        return (b"\xa3" + bytes([len(raw)]) if len(raw) < 256 else b"\xb3" + struct.pack(">I", len(raw))) + raw
    if isinstance(v, str):
        raw = v.encode("utf-8")
        return (b"\xa1" + bytes([len(raw)]) if len(raw) < 256 else b"\xb1" + struct.pack(">I", len(raw))) + raw
    if isinstance(v, (bytes, bytearray)):
        raw = bytes(v)
        return (b"\xa0" + bytes([len(raw)]) if len(raw) < 256 else b"\xb0" + struct.pack(">I", len(raw))) + raw
    if isinstance(v, Described):
        return b"\x00" + encode_value(v.descriptor) + encode_value(v.value)
    if isinstance(v, Mapping):
        body = b"".join(encode_value(k) + encode_value(x) for k, x in v.items())
        return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(v)) + body
    if isinstance(v, Sequence):
        body = b"".join(encode_value(x) for x in v)
        return b"\xd0" + struct.pack(">II", len(body) + 4, len(v)) + body
    raise TypeError(f"cannot encode {type(v).__name__}")


def _section_bytes(code: int, value: bytes) -> bytes:
    return b"\x00\x53" + bytes([code]) + value


def encode_message(body: bytes | None = None, *, properties: Mapping[str, Any] | None = None,
                   application_properties: Mapping[str, Any] | None = None,
                   message_annotations: Mapping[str, Any] | None = None,
                   header: Mapping[str, Any] | None = None, value: Any = None) -> bytes:
    """A bare AMQP 1.0 message; ``properties``/``header`` keys are the field names above."""
    out = []
    if header:
        out.append(_section_bytes(0x70, encode_value(_as_list(header, HEADER_FIELDS))))
    if message_annotations:
        out.append(_section_bytes(0x72, encode_value({Symbol(k): v for k, v in message_annotations.items()})))
    if properties:
        out.append(_section_bytes(0x73, encode_value(_as_list(properties, PROPERTY_FIELDS))))
    if application_properties:
        out.append(_section_bytes(0x74, encode_value(dict(application_properties))))
    if body is not None:
        out.append(_section_bytes(0x75, encode_value(bytes(body))))
    elif value is not None:
        out.append(_section_bytes(0x77, encode_value(value)))
    return b"".join(out)


def _as_list(values: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
    last = max(names.index(k) for k in values)
    return [values.get(n) for n in names[:last + 1]]
