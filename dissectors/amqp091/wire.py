"""AMQP 0-9-1 wire types as schema WireTypes: integers, short/long strings, timestamps, field tables.

Field tables follow the tags RabbitMQ really encodes (spec §5.2, "RabbitMQ" column: ``s`` is a
signed 16-bit integer, ``l`` a signed 64-bit one, ``x`` a byte array). The spec-only tags ``U`` and
``L`` are decoded too, but noted, because RabbitMQ itself cannot parse ``U``.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from analyzer.api import Field
from dissectors.amqp091 import clean_tables
from dissectors.kit.memo import remember
from dissectors.schema import DecodeError, F, Int, Prefixed, WireType

OCTET = Int("octet", ">B")
SHORT = Int("short", ">H")
LONG = Int("long", ">I")
LONGLONG = Int("longlong", ">Q")
SHORTSTR = Prefixed("shortstr", ">B", text=True)
LONGSTR = Prefixed("longstr", ">I", text=True)

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

#: Largest timestamp a datetime can hold (year 9999); bigger ones stay plain integers.
_MAX_TS = 253402300799


#: ts_value's answers by seconds: a publisher stamps message after message with the same second
#: or the next (datetimes are immutable: one object serves every field). Emptied when full.
_TS_SEEN: dict[int, tuple[Any, str]] = {}
_TS_SEEN_MAX = 256


def ts_value(seconds: int) -> tuple[Any, str]:
    """A u64 timestamp as an aware datetime (the value) and its ISO form (the display)."""
    got = _TS_SEEN.get(seconds)
    if got is not None:
        return got
    if seconds <= _MAX_TS:
        dt = datetime.fromtimestamp(seconds, UTC)
        got = dt, dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    else:
        got = seconds, f"{seconds} (beyond year 9999)"
    return remember(_TS_SEEN, seconds, got, _TS_SEEN_MAX)


class Timestamp(WireType):
    """u64 seconds since the epoch, shown as a date."""

    doc = "timestamp"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 8 > end:
            raise DecodeError(f"{name}: needs 8 bytes, {max(end - off, 0)} left", off)
        value, display = ts_value(_U64.unpack_from(buf, off)[0])
        return Field(name, value, off, 8, display), off + 8

    def write(self, value: Any) -> bytes:
        return _U64.pack(_seconds(value))


def _seconds(value: Any) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp())
    return int(value)


TIMESTAMP = Timestamp()


@dataclass(frozen=True, slots=True)
class Tagged:
    """A field-table value with an explicit type tag (the encoder infers one otherwise)."""

    tag: str
    value: Any


#: Tag -> (description, fixed size or 0 for length-prefixed/compound).
TAGS: dict[str, str] = {
    "t": "boolean", "b": "signed 8", "B": "unsigned 8", "U": "signed 16 (spec-only)", "u": "unsigned 16",
    "s": "signed 16", "I": "signed 32", "i": "unsigned 32", "L": "signed 64 (spec-only)", "l": "signed 64",
    "f": "float", "d": "double", "D": "decimal", "S": "long string", "A": "array", "T": "timestamp",
    "F": "table", "V": "void", "x": "byte array",
}
#: Tags the 0-9-1 spec defines but RabbitMQ never emits (and cannot parse, for U).
SPEC_ONLY_TAGS = frozenset("UL")

_FIXED: dict[int, tuple[struct.Struct, str]] = {
    ord("b"): (struct.Struct(">b"), "b"), ord("B"): (struct.Struct(">B"), "B"),
    ord("U"): (struct.Struct(">h"), "U"), ord("u"): (struct.Struct(">H"), "u"),
    ord("s"): (struct.Struct(">h"), "s"), ord("I"): (struct.Struct(">i"), "I"),
    ord("i"): (struct.Struct(">I"), "i"), ord("L"): (struct.Struct(">q"), "L"),
    ord("l"): (struct.Struct(">q"), "l"), ord("f"): (struct.Struct(">f"), "f"),
    ord("d"): (struct.Struct(">d"), "d"),
}


class TableNotes:
    """Problems met while decoding field tables of the current frame.

    WireType.read has no side channel, and a bad tag must not abort the whole method (the
    table is length-prefixed, so the rest of the frame still decodes); the connection clears
    this before decoding a frame and turns what it holds into findings afterwards.
    """

    spec_only: list[str] = []
    unknown: list[str] = []

    @classmethod
    def reset(cls) -> None:
        if cls.spec_only:
            cls.spec_only = []
        if cls.unknown:
            cls.unknown = []


def _read_value(name: str, buf: memoryview, off: int, end: int, depth: int) -> tuple[Field, int]:
    """One tagged value at ``off`` (the tag octet). Raises DecodeError when it cannot be read."""
    if off >= end:
        raise DecodeError(f"{name}: missing type tag", off)
    tag = buf[off]
    start = off
    off += 1
    fixed = _FIXED.get(tag)
    if fixed is not None:
        st, letter = fixed
        if off + st.size > end:
            raise DecodeError(f"{name}: '{letter}' value needs {st.size} bytes, {max(end - off, 0)} left", start)
        (v,) = st.unpack_from(buf, off)
        display = None
        if letter in SPEC_ONLY_TAGS:
            TableNotes.spec_only.append(f"{name}: tag '{letter}' ({TAGS[letter]})")
            display = f"{v} ('{letter}': {TAGS[letter]})"
        return Field(name, v, start, 1 + st.size, display), off + st.size
    if tag == 0x74:  # t
        if off >= end:
            raise DecodeError(f"{name}: boolean needs 1 byte", start)
        return Field(name, buf[off] != 0, start, 2), off + 1
    if tag == 0x53 or tag == 0x78:  # S, x
        if off + 4 > end:
            raise DecodeError(f"{name}: length needs 4 bytes", start)
        (n,) = _U32.unpack_from(buf, off)
        if off + 4 + n > end:
            raise DecodeError(f"{name}: length {n} overruns the table by {off + 4 + n - end} bytes", start)
        raw = bytes(buf[off + 4:off + 4 + n])
        value: Any = raw
        if tag == 0x53:
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return Field(name, value, start, 5 + n, None if tag == 0x53 else "byte array"), off + 4 + n
    if tag == 0x46 or tag == 0x41:  # F, A
        if depth > 32:
            raise DecodeError(f"{name}: tables nested too deeply", start)
        if off + 4 > end:
            raise DecodeError(f"{name}: length needs 4 bytes", start)
        (n,) = _U32.unpack_from(buf, off)
        if off + 4 + n > end:
            raise DecodeError(f"{name}: length {n} overruns the enclosing data by {off + 4 + n - end} bytes", start)
        if tag == 0x46:
            children = _read_entries(buf, off + 4, off + 4 + n, depth + 1)
            return Field(name, None, start, 5 + n, None, children), off + 4 + n
        items = _read_items(buf, off + 4, off + 4 + n, depth + 1)
        return Field(name, len(items), start, 5 + n, None, items, True), off + 4 + n
    if tag == 0x54:  # T
        if off + 8 > end:
            raise DecodeError(f"{name}: timestamp needs 8 bytes", start)
        value, display = ts_value(_U64.unpack_from(buf, off)[0])
        return Field(name, value, start, 9, display), off + 8
    if tag == 0x44:  # D: scale octet + signed 32-bit integer (errata §3)
        if off + 5 > end:
            raise DecodeError(f"{name}: decimal needs 5 bytes", start)
        scale = buf[off]
        (raw_int,) = struct.unpack_from(">i", buf, off + 1)
        # Imported here: decimal values are rare, and the module is a percent of every start.
        from decimal import Decimal
        return Field(name, Decimal(raw_int).scaleb(-scale), start, 6), off + 5
    if tag == 0x56:  # V
        return Field(name, None, start, 1, "void"), off
    shown = chr(tag) if 0x20 < tag < 0x7F else f"0x{tag:02x}"
    raise _UnknownTag(f"{name}: unknown field-table tag {shown!r}", start)


class _UnknownTag(DecodeError):
    pass


def _read_entries(buf: memoryview, off: int, end: int, depth: int) -> list[Field]:
    """Entries ``name | tag | value`` filling [off, end). A bad entry ends the table (noted)."""
    out: list[Field] = []
    while off < end:
        n = buf[off]
        if off + 1 + n > end:
            TableNotes.unknown.append(f"entry name overruns the table at offset {off}")
            out.append(Field("<undecodable>", bytes(buf[off:end]), off, end - off, "name overruns the table"))
            return out
        raw = bytes(buf[off + 1:off + 1 + n])
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            key = raw.decode("latin-1")
        try:
            f, after = _read_value(key, buf, off + 1 + n, end, depth)
        except DecodeError as exc:
            TableNotes.unknown.append(str(exc))
            out.append(Field(key, bytes(buf[off:end]), off, end - off, f"undecodable: {exc}"))
            return out
        f.offset = off
        f.size = after - off
        out.append(f)
        off = after
    return out


def _read_items(buf: memoryview, off: int, end: int, depth: int) -> list[Field]:
    out: list[Field] = []
    i = 0
    while off < end:
        try:
            f, off2 = _read_value(f"[{i}]", buf, off, end, depth)
        except DecodeError as exc:
            TableNotes.unknown.append(str(exc))
            out.append(Field(f"[{i}]", bytes(buf[off:end]), off, end - off, f"undecodable: {exc}"))
            return out
        out.append(f)
        off = off2
        i += 1
    return out


class Table(WireType):
    """u32 byte length, then ``name | tag | value`` entries."""

    doc = "table"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 4 > end:
            raise DecodeError(f"{name}: table length needs 4 bytes, {max(end - off, 0)} left", off)
        (n,) = _U32.unpack_from(buf, off)
        if off + 4 + n > end:
            raise DecodeError(f"{name}: table length {n} overruns the frame by {off + 4 + n - end} bytes", off)
        children = _read_entries(buf, off + 4, off + 4 + n, 0) if n else []
        return Field(name, None, off, 4 + n, None, children), off + 4 + n

    def write(self, value: Mapping[str, Any] | None) -> bytes:
        body = encode_entries(value or {})
        return _U32.pack(len(body)) + body


TABLE = Table()


def encode_entries(table: Mapping[str, Any]) -> bytes:
    parts = []
    for k, v in table.items():
        key = k.encode("utf-8")
        parts.append(_U8.pack(len(key)) + key + encode_value(v))
    return b"".join(parts)


def encode_value(v: Any) -> bytes:
    """Tag + value; the tag is inferred the way RabbitMQ clients do, unless ``v`` is Tagged."""
    if isinstance(v, Tagged):
        return _encode_tagged(v.tag, v.value)
    if isinstance(v, bool):
        return _encode_tagged("t", v)
    if isinstance(v, int):
        if -2**31 <= v < 2**31:
            return _encode_tagged("I", v)
        return _encode_tagged("l", v)
    if isinstance(v, float):
        return _encode_tagged("d", v)
    decimal = sys.modules.get("decimal")  # not imported yet: v is no Decimal (see _read_value)
    if decimal is not None and isinstance(v, decimal.Decimal):
        return _encode_tagged("D", v)
    if isinstance(v, str):
        return _encode_tagged("S", v)
    if isinstance(v, (bytes, bytearray)):
        return _encode_tagged("x", v)
    if isinstance(v, datetime):
        return _encode_tagged("T", v)
    if isinstance(v, Mapping):
        return _encode_tagged("F", v)
    if isinstance(v, (list, tuple)):
        return _encode_tagged("A", v)
    if v is None:
        return b"V"
    raise TypeError(f"no field-table type for {type(v).__name__}")


def _encode_tagged(tag: str, v: Any) -> bytes:
    t = tag.encode("latin-1")
    fixed = _FIXED.get(t[0]) if len(t) == 1 else None
    if fixed is not None:
        return t + fixed[0].pack(v)
    if tag == "t":
        return t + (b"\x01" if v else b"\x00")
    if tag in ("S", "x"):
        raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        return t + _U32.pack(len(raw)) + raw
    if tag == "F":
        body = encode_entries(v)
        return t + _U32.pack(len(body)) + body
    if tag == "A":
        body = b"".join(encode_value(x) for x in v)
        return t + _U32.pack(len(body)) + body
    if tag == "T":
        return t + _U64.pack(_seconds(v))
    if tag == "D":
        from decimal import Decimal  # see _read_value

        d = Decimal(v)
        exp = d.as_tuple().exponent
        scale = -exp if isinstance(exp, int) and exp < 0 else 0
        return t + _U8.pack(scale) + struct.pack(">i", int(d.scaleb(scale)))
    if tag == "V":
        return t
    # Anything else: raw bytes after the tag (for deliberately broken tables in tests).
    return t + bytes(v or b"")


# ---------------------------------------------------------------------------------------------
# Validation without building fields (hot path: message headers of every published message).
_SIZES = {t: st.size for t, (st, _l) in _FIXED.items()}
_SIZES[0x74] = 1  # t
_SIZES[0x54] = 8  # T
_SIZES[0x44] = 5  # D
_SIZES[0x56] = 0  # V
_SPEC_ONLY_CODES = {ord("U"), ord("L")}


def check_table(buf: bytes, off: int, end: int) -> int:
    """Check the table at ``off`` like Table.read would (same notes, same errors); returns its end."""
    if off + 4 > end:
        raise DecodeError(f"table length needs 4 bytes, {max(end - off, 0)} left", off)
    (n,) = _U32.unpack_from(buf, off)
    stop = off + 4 + n
    if stop > end:
        raise DecodeError(f"table length {n} overruns the frame by {stop - end} bytes", off)
    if n:
        _check_entries(buf, off + 4, stop, 0, True)
    return stop


def _check_entries(buf: bytes, off: int, end: int, depth: int, named: bool) -> None:
    while off < end:
        name = ""
        if named:
            k = buf[off]
            if off + 1 + k > end:
                TableNotes.unknown.append(f"entry name overruns the table at offset {off}")
                return
            name = bytes(buf[off + 1:off + 1 + k]).decode("utf-8", "replace")
            off += 1 + k
        if off >= end:
            TableNotes.unknown.append(f"{name}: missing type tag")
            return
        tag = buf[off]
        off += 1
        size = _SIZES.get(tag)
        if size is not None:
            if tag in _SPEC_ONLY_CODES:
                TableNotes.spec_only.append(f"{name}: tag '{chr(tag)}' ({TAGS[chr(tag)]})")
            off += size
            if off > end:
                TableNotes.unknown.append(f"{name}: '{chr(tag)}' value needs {size} bytes")
                return
            continue
        if tag in (0x53, 0x78, 0x46, 0x41):  # S x F A
            if off + 4 > end:
                TableNotes.unknown.append(f"{name}: length needs 4 bytes")
                return
            (n,) = _U32.unpack_from(buf, off)
            stop = off + 4 + n
            if stop > end:
                TableNotes.unknown.append(f"{name}: length {n} overruns the enclosing data by {stop - end} bytes")
                return
            if tag == 0x46 or tag == 0x41:
                if depth > 32:
                    TableNotes.unknown.append(f"{name}: tables nested too deeply")
                    return
                _check_entries(buf, off + 4, stop, depth + 1, tag == 0x46)
            off = stop
            continue
        shown = chr(tag) if 0x20 < tag < 0x7F else f"0x{tag:02x}"
        TableNotes.unknown.append(f"{name}: unknown field-table tag {shown!r}")
        return


#: Fixed-size tags that carry no note (the spec-only U and L are left to check_table).
_CLEAN_SIZES = {t: n for t, n in _SIZES.items() if t not in _SPEC_ONLY_CODES}
# entries_are_clean (compiled: dissectors/amqp091/clean_tables.py) looks each value's tag up in
# its table, filled here: a fixed size, or how a u32-prefixed value goes on.
for _tag, _size in _CLEAN_SIZES.items():
    clean_tables.SIZES[_tag] = _size
for _tag, _how in ((0x53, clean_tables.LONG), (0x78, clean_tables.LONG), (0x46, clean_tables.TABLE),
                   (0x41, clean_tables.ARRAY)):
    clean_tables.SIZES[_tag] = _how


def table_string_entries(buf: bytes, off: int, names: tuple[str, ...]) -> tuple[Any, ...] | None:
    """The values of the first top-level entries called ``names`` of the clean table at ``off``
    (one that entries_are_clean accepts), as its tree gives them (Field.child(name).value, None
    for an absent one), without building it: for long-string entries, the text (or the bytes when
    not UTF-8). None when one of them is of another type: then the tree has to say."""
    wanted = {name.encode(): i for i, name in enumerate(names)}
    found: list[Any] = [None] * len(names)
    end = off + 4 + _U32.unpack_from(buf, off)[0]
    off += 4
    sizes = _CLEAN_SIZES
    while off < end:
        k = buf[off]
        i = wanted.pop(bytes(buf[off + 1:off + 1 + k]), None)
        off += 1 + k
        tag = buf[off]
        off += 1
        size = sizes.get(tag)
        if size is not None:
            if i is not None:
                return None
            off += size
            continue
        n = _U32.unpack_from(buf, off)[0]
        if i is not None:
            if tag != 0x53:  # S
                return None
            raw = bytes(buf[off + 4:off + 4 + n])
            try:
                found[i] = raw.decode("utf-8")
            except UnicodeDecodeError:
                found[i] = raw
            if not wanted:
                break
        off += 4 + n
    return tuple(found)
