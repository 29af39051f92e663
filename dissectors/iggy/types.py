"""Iggy's primitive wire types (iggy.md section 2), built on :mod:`dissectors.schema`.

Everything is little-endian. Each type here is a ``schema.WireType``: usable as the type of an
``F`` inside a ``schema.Struct`` layout, with ``read`` for the decoder and ``write`` for the test
encoder (``write`` takes what ``schema.field_values`` gives back, so decode/encode round-trips).

Problem convention (for every decoder of this package):

* Bytes that cannot be the type at all (cut off: a length that overruns ``end``, a fixed part that
  does not fit) make ``read`` raise ``schema.DecodeError`` and nothing else.
* Bytes that parse but hold an invalid value (identifier kind or length, an empty or non-UTF-8
  name, partitioning kind, polling kind, consumer kind...) are decoded anyway; the Field returned
  is a :class:`Flagged` (a ``Field`` subclass) carrying ``problems``: a list of ``(kind, message)``
  with the kinds of :class:`Decoded` ("value", "size", ...). Its ``display`` says what is wrong.
  After decoding a layout, call :func:`problems_of` on the fields to collect them all (given
  ``MARKS[0]`` from before the decode, it skips the walk when nothing was marked meanwhile).
* The payload decoders of :mod:`.messages` and :mod:`.responses` return a :class:`Decoded` whose
  ``problems`` already hold everything found, including those of the types below (do not call
  ``problems_of`` on ``Decoded.fields`` again).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from analyzer.api import Field
from analyzer.jsonout import WideInt
from dissectors.kit.lazy import BASE_CHILDREN, LazyChildren
from dissectors.schema import DecodeError, F, Int, Prefixed, WireType

# ------------------------------------------------------------------------------ results and problems

#: Problem kinds used in ``Decoded.problems`` and ``Flagged.problems``.
PROBLEM_KINDS = ("checksum", "size", "count", "value", "header_kind", "reserved")


@dataclass
class Decoded:
    """What a payload decoder returns.

    ``fields`` have offsets relative to the start of the frame (the caller says where the payload
    starts in the buffer it passes); ``info`` is an Info-line suffix such as ``messages=6``;
    ``problems`` are ``(kind, message)`` pairs, kinds as in :data:`PROBLEM_KINDS`.
    """

    fields: list[Field]
    info: str = ""
    problems: list[tuple[str, str]] = field(default_factory=list)


class Flagged(Field):
    """A decoded Field whose value is invalid: ``problems`` says why (see the module docstring)."""

    __slots__ = ("problems",)


#: How many problems :func:`mark` has attached, ever (per process): fields decoded while it did
#: not move carry none, and :func:`problems_of` says so without walking them.
MARKS = [0]


def mark(f: Field, kind: str, message: str, display: str | None = None) -> Flagged:
    """``f`` with the problem ``(kind, message)`` attached (a copy unless it is already Flagged)."""
    MARKS[0] += 1
    if isinstance(f, Flagged):
        out = f
    else:
        out = Flagged(f.name, f.value, f.offset, f.size, f.display, f.children, f.is_list)
        out.problems = []
    out.problems.append((kind, message))
    if display is not None:
        out.display = display
    return out


def problems_of(fields: Iterable[Field], since: int = -1) -> list[tuple[str, str]]:
    """Every problem attached to ``fields`` and their descendants, in tree order. ``since``:
    MARKS[0] before they were decoded; when it has not moved since, they carry none."""
    if since == MARKS[0]:
        return []
    out: list[tuple[str, str]] = []
    stack = list(fields)[::-1]
    while stack:
        f = stack.pop()
        if isinstance(f, Flagged):
            out.extend(f.problems)
        if f.children:
            stack.extend(reversed(f.children))
    return out


# ------------------------------------------------------------------------------ enums (section 2.6)

ID_KIND = {1: "numeric", 2: "string"}
CONSUMER_KIND = {1: "consumer", 2: "consumer_group"}
PARTITIONING_KIND = {1: "balanced", 2: "partition_id", 3: "messages_key"}
POLLING_KIND = {1: "offset", 2: "timestamp", 3: "first", 4: "last", 5: "next"}
USER_STATUS = {1: "active", 2: "inactive"}
COMPRESSION = {1: "none", 2: "gzip"}
TRANSPORT = {1: "tcp", 2: "quic", 3: "http", 4: "websocket"}
NODE_ROLE = {0: "leader", 1: "follower"}
NODE_STATUS = {0: "healthy", 1: "starting", 2: "stopping", 3: "unreachable", 4: "maintenance"}
SNAPSHOT_COMPRESSION = {1: "stored", 2: "deflated", 3: "bzip2", 4: "zstd", 5: "lzma", 6: "xz"}
SNAPSHOT_TYPE = {1: "filesystem_overview", 2: "process_list", 3: "resource_usage", 4: "test", 5: "server_logs",
                 6: "server_config", 100: "all"}
MESSAGE_STATE = {1: "available", 10: "unavailable", 20: "poisoned", 30: "marked_for_deletion"}
#: User-header value (and, in dialect C, key) kinds (section 5.5) -> (name, fixed size or None for 1..255).
HEADER_KINDS: dict[int, tuple[str, int | None]] = {
    1: ("raw", None), 2: ("string", None), 3: ("bool", 1), 4: ("int8", 1), 5: ("int16", 2), 6: ("int32", 4),
    7: ("int64", 8), 8: ("int128", 16), 9: ("uint8", 1), 10: ("uint16", 2), 11: ("uint32", 4), 12: ("uint64", 8),
    13: ("uint128", 16), 14: ("float32", 4), 15: ("float64", 8),
}
HEADER_KIND = {k: v[0] for k, v in HEADER_KINDS.items()}

U64_MAX = (1 << 64) - 1
I64_MIN = -(1 << 63)
U32_MAX = (1 << 32) - 1

# ------------------------------------------------------------------------------ integers


U8 = Int("u8", "<B")
U16 = Int("u16", "<H")
U32 = Int("u32", "<I")
U64 = Int("u64", "<Q")
I32 = Int("i32", "<i")
F32 = Int("f32", "<f")
F64 = Int("f64", "<d")


def wide(v: int) -> int:
    """A 128-bit integer's value as fields hold it: beyond 64 bits a WideInt, which orjson writes
    too (it refuses plain integers that wide, and the frame would go to the standard library whole)."""
    return WideInt(v) if v > U64_MAX or v < I64_MIN else v


def u128_display(v: int) -> str | None:
    """How a u128 is shown: 32 hex digits, none for 0."""
    return f"{v:#034x}" if v else None


class UInt128(WireType):
    """A 16-byte little-endian unsigned integer (message ids, V checksums)."""

    doc = "u128"
    size = 16

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 16 > end:
            raise DecodeError(f"{name}: needs 16 bytes, {max(end - off, 0)} left", off)
        v = wide(int.from_bytes(buf[off:off + 16], "little"))
        return Field(name, v, off, 16, u128_display(v)), off + 16

    def write(self, value: Any) -> bytes:
        return int(value).to_bytes(16, "little")


U128 = UInt128()


def micros_display(us: int) -> str:
    """A µs-since-epoch timestamp as ISO 8601 (UTC), or "0" / "out of range"."""
    if us == 0:
        return "0"
    try:
        return datetime.fromtimestamp(us / 1_000_000, UTC).isoformat(timespec="microseconds")
    except (OverflowError, OSError, ValueError):
        return "out of range"


class Micros(Int):
    """u64 µs since the Unix epoch, shown as a UTC date."""

    def __init__(self) -> None:
        super().__init__("u64 µs timestamp", "<Q")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        if f.value:  # 0 ("not set") needs no second rendering
            f.display = micros_display(f.value)
        return f, off


class Sentinel(Int):
    """An integer whose special values have names (0 = server default, u64::MAX = never...)."""

    def __init__(self, doc: str, fmt: str, names: Mapping[int, str]) -> None:
        super().__init__(doc, fmt)
        self.names = dict(names)

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        f.display = self.names.get(f.value, f.display)
        return f, off


TIMESTAMP = Micros()
#: message_expiry / PAT expiry (>= 0.3.0): µs duration, 0 = server default, u64::MAX = never.
EXPIRY = Sentinel("u64 µs (0 default, max never)", "<Q", {0: "server default", U64_MAX: "never expire"})
#: max_topic_size (>= 0.3.0): bytes, 0 = server default, u64::MAX = unlimited.
MAX_TOPIC_SIZE = Sentinel("u64 bytes (0 default, max unlimited)", "<Q", {0: "server default", U64_MAX: "unlimited"})
#: Before 0.3.0: u32 seconds, 0 = none.
EXPIRY_SECS = Sentinel("u32 seconds (0 none)", "<I", {0: "none"})


class Checked(Int):
    """An integer enum whose values outside ``enum`` are flagged ("value"), e.g. a polling kind."""

    def __init__(self, doc: str, fmt: str, enum: Mapping[int, str], what: str) -> None:
        super().__init__(doc, fmt)
        self.enum = dict(enum)
        self.what = what

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        v = f.value
        if v in self.enum:
            f.display = self.enum[v]
            return f, off
        return mark(f, "value", f"{name}: invalid {self.what} {v}", f"invalid ({v})"), off


USER_STATUS_T = Checked("u8 user status", "<B", USER_STATUS, "user status")


class Bool8(Int):
    """u8 boolean: 0 false, 1 true (others shown as true, like the Rust decoders)."""

    def __init__(self) -> None:
        super().__init__("u8 bool", "<B")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off >= end:
            raise DecodeError(f"{name}: needs 1 byte, 0 left", off)
        v = buf[off]
        return Field(name, v, off, 1, "true" if v else "false"), off + 1

    def write(self, value: Any) -> bytes:
        return bytes([int(value)])


BOOL = Bool8()

# ------------------------------------------------------------------------------ strings and bytes


class Text(Prefixed):
    """A length-prefixed UTF-8 string; ``name8`` (u8 length, 1..255) or ``str32`` (u32 length).

    Invalid UTF-8 is flagged ("value") and the raw bytes kept; so is an empty string when
    ``nonempty`` (names). A length prefix that overruns the bytes raises DecodeError.
    """

    __slots__ = ("nonempty",)

    def __init__(self, doc: str, length_fmt: str, *, nonempty: bool) -> None:
        super().__init__(doc, length_fmt, text=True)
        self.nonempty = nonempty

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        if isinstance(f.value, bytes):
            return mark(f, "value", f"{name}: not UTF-8", f"not UTF-8: {f.value[:32].hex()}"), off
        if self.nonempty and f.value == "":
            return mark(f, "value", f"{name}: empty", "empty"), off
        return f, off


class Blob(Prefixed):
    """Length-prefixed raw bytes."""

    def __init__(self, doc: str, length_fmt: str) -> None:
        super().__init__(doc, length_fmt, text=False)


NAME8 = Text("name8", "<B", nonempty=True)
#: u8-length string that may be empty (passwords, which the spec does not restrict).
STR8 = Text("str8", "<B", nonempty=False)
STR32 = Text("str32", "<I", nonempty=False)
BYTES32 = Blob("bytes32", "<I")
BYTES8 = Blob("bytes8", "<B")

# ------------------------------------------------------------------------------ Identifier (2.1)


def _u32(buf: memoryview, off: int) -> int:
    return int.from_bytes(buf[off:off + 4], "little")


class Identifier(WireType):
    """kind u8 (1 numeric, 2 string) + length u8 + value (u32 LE, or a 1..255-byte UTF-8 name).

    The Field's value is the id (int) or the name (str), raw bytes when it is neither; children
    are kind, length, value. Written from an int, a str, or a mapping with ``kind`` and ``value``
    (``length`` optional: give it to build a wrong length on purpose).
    """

    doc = "Identifier"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 2 > end:
            raise DecodeError(f"{name}: identifier needs 2 bytes, {max(end - off, 0)} left", off)
        kind, n = buf[off], buf[off + 1]
        if off + 2 + n > end:
            raise DecodeError(f"{name}: identifier length {n} overruns the frame by {off + 2 + n - end} bytes", off)
        raw = bytes(buf[off + 2:off + 2 + n])
        problem = None
        value: Any = raw
        if kind == 1:
            if n == 4:
                value = int.from_bytes(raw, "little")
            else:
                problem = f"numeric identifier length {n} (must be 4)"
        elif kind == 2:
            if n == 0:
                problem = "empty string identifier"
                value = ""
            else:
                try:
                    value = raw.decode("utf-8")
                except UnicodeDecodeError:
                    problem = "string identifier is not UTF-8"
        else:
            problem = f"invalid identifier kind {kind}"
        if problem is None:
            return IdentifierField(name, value, off, n, kind), off + 2 + n
        kids = [
            Field("kind", kind, off, 1, ID_KIND.get(kind, f"invalid ({kind})")),
            Field("length", n, off + 1, 1),
            Field("value", value, off + 2, n),
        ]
        f = Field(name, value, off, 2 + n, f"invalid: {problem}", kids)
        return mark(f, "value", f"{name}: {problem}"), off + 2 + n

    def write(self, value: Any) -> bytes:
        if isinstance(value, Mapping):
            v = value["value"]
            kind = value.get("kind", 2 if isinstance(v, str) else 1)
            raw = v.encode("utf-8") if isinstance(v, str) else (v.to_bytes(4, "little") if isinstance(v, int)
                                                                  else bytes(v))
            n = value.get("length", len(raw))
            return bytes([kind, n]) + raw
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(f"identifier from {value!r}")
        if isinstance(value, int):
            return b"\x01\x04" + value.to_bytes(4, "little")
        raw = value.encode("utf-8")
        return bytes([2, len(raw)]) + raw


class IdentifierField(LazyChildren):
    """A well-formed Identifier (numeric id of 4 bytes or a UTF-8 name) whose children kind,
    length and value are made when first read: requests name their stream and topic frame after
    frame, and checking them needs none. Its JSON is made without them."""

    __slots__ = ("_kind",)

    def __init__(self, name: str, value: int | str, offset: int, n: int, kind: int) -> None:
        # Not Field's __init__ (see MessagesField in .messages: a second type going through its
        # attribute stores costs every Field made after it).
        self.name = name
        self.value = value
        self.offset = offset
        self.size = 2 + n
        self.display = str(value)
        self.is_list = False
        BASE_CHILDREN.__set__(self, None)
        self._kind = kind

    def _build(self) -> list[Field]:
        off, n, kind = self.offset, self.size - 2, self._kind
        return [Field("kind", kind, off, 1, ID_KIND[kind]), Field("length", n, off + 1, 1),
                Field("value", self.value, off + 2, n)]

    def json_value(self) -> dict[str, Any] | None:
        """What field_json makes of the children (integers and text); None once they are made."""
        if BASE_CHILDREN.__get__(self) is not None:
            return None
        return {"kind": self._kind, "length": self.size - 2, "value": self.value}


IDENTIFIER = Identifier()

# ------------------------------------------------------------------------------ Consumer (2.2)


class Consumer(WireType):
    """kind u8 (1 consumer, 2 consumer group) + id: u32 in L0, an Identifier from L1 on.

    Value is the id (as the Identifier's value); children kind and id. Written from
    ``{"kind": 1|2, "id": <identifier value>}``.
    """

    __slots__ = ("doc", "legacy")

    def __init__(self, legacy: bool) -> None:
        self.legacy = legacy
        self.doc = "Consumer(kind u8, id u32)" if legacy else "Consumer(kind u8, id Identifier)"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off >= end:
            raise DecodeError(f"{name}: consumer kind needs 1 byte, 0 left", off)
        kind = buf[off]
        kf = Field("kind", kind, off, 1, CONSUMER_KIND.get(kind, f"invalid ({kind})"))
        if self.legacy:
            idf, new = U32.read("id", buf, off + 1, end)
        else:
            idf, new = IDENTIFIER.read("id", buf, off + 1, end)
        label = CONSUMER_KIND.get(kind, f"invalid kind {kind}")
        f = Field(name, idf.value, off, new - off, f"{label} {idf.display or idf.value}", [kf, idf])
        if kind not in CONSUMER_KIND:
            f = mark(f, "value", f"{name}: invalid consumer kind {kind}")
        return f, new

    def write(self, value: Mapping[str, Any]) -> bytes:
        kind = value.get("kind", 1)
        ident = value["id"]
        if self.legacy:
            return bytes([kind]) + int(ident).to_bytes(4, "little")
        return bytes([kind]) + IDENTIFIER.write(ident)


CONSUMER_L0 = Consumer(legacy=True)
CONSUMER = Consumer(legacy=False)

# ------------------------------------------------------------------------------ Partitioning (2.3)


class Partitioning(WireType):
    """kind u8 + length u8 + value: balanced (0 bytes), partition id (u32), messages key (1..255 bytes).

    Value: None (balanced), the partition id, or the key bytes. Written from
    ``{"kind": k, "value": v}`` (``length`` optional to force a wrong one), or ``None`` for balanced.
    """

    doc = "Partitioning"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 2 > end:
            raise DecodeError(f"{name}: partitioning needs 2 bytes, {max(end - off, 0)} left", off)
        kind, n = buf[off], buf[off + 1]
        if off + 2 + n > end:
            raise DecodeError(f"{name}: partitioning length {n} overruns the frame by {off + 2 + n - end} bytes",
                              off)
        raw = bytes(buf[off + 2:off + 2 + n])
        value: Any = raw
        problem = None
        if kind == 1:
            value = None
            text = "balanced"
            if n:
                problem = f"balanced partitioning with length {n} (must be 0)"
        elif kind == 2:
            if n == 4:
                value = int.from_bytes(raw, "little")
                text = f"partition {value}"
            else:
                text = f"partition id of {n} bytes"
                problem = f"partition-id partitioning length {n} (must be 4)"
        elif kind == 3:
            text = f"key {raw[:32].hex()}"
            if n == 0:
                problem = "empty messages key"
        else:
            text = f"invalid kind {kind}"
            problem = f"invalid partitioning kind {kind}"
        kids = [Field("kind", kind, off, 1, PARTITIONING_KIND.get(kind, f"invalid ({kind})")),
                Field("length", n, off + 1, 1)]
        if n:
            kids.append(Field("value", value, off + 2, n))
        f = Field(name, value, off, 2 + n, text, kids)
        if problem is not None:
            f = mark(f, "value", f"{name}: {problem}")
        return f, off + 2 + n

    def write(self, value: Any) -> bytes:
        if value is None:
            return b"\x01\x00"
        if isinstance(value, int):
            return b"\x02\x04" + value.to_bytes(4, "little")
        kind = value.get("kind", 1)
        v = value.get("value")
        raw = b"" if v is None else (v.to_bytes(4, "little") if isinstance(v, int) else bytes(v))
        return bytes([kind, value.get("length", len(raw))]) + raw


PARTITIONING = Partitioning()

# ------------------------------------------------------------------------------ PollingStrategy (2.4)


class PollingStrategy(WireType):
    """kind u8 (1 offset, 2 timestamp, 3 first, 4 last, 5 next) + value u64 (9 bytes).

    Value is the u64; display e.g. "offset 10", "next". Written from ``{"kind": k, "value": v}``.
    """

    doc = "PollingStrategy(kind u8, value u64)"
    _st = struct.Struct("<BQ")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 9 > end:
            raise DecodeError(f"{name}: polling strategy needs 9 bytes, {max(end - off, 0)} left", off)
        kind, value = self._st.unpack_from(buf, off)
        label = POLLING_KIND.get(kind)
        vdisp = micros_display(value) if kind == 2 else None
        kids = [Field("kind", kind, off, 1, label or f"invalid ({kind})"), Field("value", value, off + 1, 8, vdisp)]
        if label is None:
            text = f"invalid kind {kind} value {value}"
        elif kind in (1, 2):
            text = f"{label} {value}"
        else:
            text = label
        f = Field(name, value, off, 9, text, kids)
        if label is None:
            f = mark(f, "value", f"{name}: invalid polling kind {kind}")
        return f, off + 9

    def write(self, value: Mapping[str, Any]) -> bytes:
        return self._st.pack(value.get("kind", 1), value.get("value", 0))


POLLING_STRATEGY = PollingStrategy()

# ------------------------------------------------------------------------------ optional partition id (2.5)


class OptionalPartition(WireType):
    """L0/L1/Z1: u32 with 0 = none. Z2/C: flag u8 (1 = present) + u32 (padding when absent).

    Value is the partition id or None. Written from an int or None.
    """

    __slots__ = ("doc", "flagged")

    def __init__(self, flagged: bool) -> None:
        self.flagged = flagged
        self.doc = "flag u8 + partition_id u32" if flagged else "partition_id u32 (0 = none)"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        size = 5 if self.flagged else 4
        if off + size > end:
            raise DecodeError(f"{name}: needs {size} bytes, {max(end - off, 0)} left", off)
        if not self.flagged:
            v = _u32(buf, off)
            return Field(name, v or None, off, 4, str(v) if v else "none"), off + 4
        flag = buf[off]
        v = _u32(buf, off + 1)
        present = flag == 1
        kids = [Field("flag", flag, off, 1, "present" if present else "absent"), Field("partition_id", v, off + 1, 4)]
        return Field(name, v if present else None, off, 5, str(v) if present else "none", kids), off + 5

    def write(self, value: Any) -> bytes:
        if isinstance(value, Mapping):  # what field_values gives back for the flagged form
            return bytes([value["flag"]]) + int(value["partition_id"]).to_bytes(4, "little")
        if not self.flagged:
            return int(value or 0).to_bytes(4, "little")
        if value is None:
            return b"\x00\x00\x00\x00\x00"
        return b"\x01" + int(value).to_bytes(4, "little")


PARTITION_U32 = OptionalPartition(flagged=False)
PARTITION_FLAGGED = OptionalPartition(flagged=True)

# ------------------------------------------------------------------------------ Permissions (2.7)

GLOBAL_PERMISSIONS = ("manage_servers", "read_servers", "manage_users", "read_users", "manage_streams",
                      "read_streams", "manage_topics", "read_topics", "poll_messages", "send_messages")
STREAM_PERMISSIONS = ("manage_stream", "read_stream", "manage_topics", "read_topics", "poll_messages",
                      "send_messages")
TOPIC_PERMISSIONS = ("manage_topic", "read_topic", "poll_messages", "send_messages")


def _bools(names: Sequence[str], buf: memoryview, off: int, end: int, what: str) -> tuple[list[Field], int]:
    if off + len(names) > end:
        raise DecodeError(f"{what}: needs {len(names)} bytes, {max(end - off, 0)} left", off)
    return [Field(n, bool(buf[off + i]), off + i, 1) for i, n in enumerate(names)], off + len(names)


def _flag(name: str, buf: memoryview, off: int, end: int) -> tuple[Field, int]:
    if off >= end:
        raise DecodeError(f"{name}: needs 1 byte, 0 left", off)
    return Field(name, buf[off], off, 1), off + 1


def read_permissions_blob(buf: memoryview, off: int, end: int) -> list[Field]:
    """The blob of 2.7 in ``buf[off:end]``: ``global`` and ``streams`` fields. Raises DecodeError.

    The stream and topic lists are bounded by the blob: each entry takes at least 12 (stream) or
    9 (topic) bytes, so the loops end with the bytes.
    """
    start = off
    glob, off = _bools(GLOBAL_PERMISSIONS, buf, off, end, "global permissions")
    out = [Field("global", None, start, off - start, None, glob)]
    has, off = _flag("has_streams", buf, off, end)
    streams: list[Field] = []
    s_start = off
    more = has.value == 1
    while more:
        at = off
        sid, off = U32.read("stream_id", buf, off, end)
        perms, off = _bools(STREAM_PERMISSIONS, buf, off, end, f"stream {sid.value} permissions")
        has_t, off = _flag("has_topics", buf, off, end)
        topics: list[Field] = []
        t_start = off
        more_t = has_t.value == 1
        while more_t:
            t_at = off
            tid, off = U32.read("topic_id", buf, off, end)
            tperms, off = _bools(TOPIC_PERMISSIONS, buf, off, end, f"topic {tid.value} permissions")
            nxt, off = _flag("has_next_topic", buf, off, end)
            more_t = nxt.value == 1
            topics.append(Field(f"[{len(topics)}]", tid.value, t_at, off - t_at, None, [tid, *tperms]))
        kids = [sid, *perms, Field("topics", len(topics), t_start, off - t_start, None, topics, True)]
        nxt, off = _flag("has_next_stream", buf, off, end)
        more = nxt.value == 1
        streams.append(Field(f"[{len(streams)}]", sid.value, at, off - at, None, kids))
    out.append(Field("streams", len(streams), s_start, off - s_start, None, streams, True))
    if off != end:
        raise DecodeError(f"permissions: {end - off} bytes after the blob", off)
    return out


def write_permissions_blob(value: Mapping[str, Any]) -> bytes:
    """The blob from ``{"global": {name: bool}, "streams": [{"stream_id", perms..., "topics": [...]}]}``."""
    g = value.get("global", {})
    out = bytearray(int(bool(g.get(n))) for n in GLOBAL_PERMISSIONS)
    streams = value.get("streams") or []
    out.append(1 if streams else 0)
    for i, s in enumerate(streams):
        out += int(s["stream_id"]).to_bytes(4, "little")
        out += bytes(int(bool(s.get(n))) for n in STREAM_PERMISSIONS)
        topics = s.get("topics") or []
        out.append(1 if topics else 0)
        for j, t in enumerate(topics):
            out += int(t["topic_id"]).to_bytes(4, "little")
            out += bytes(int(bool(t.get(n))) for n in TOPIC_PERMISSIONS)
            out.append(1 if j + 1 < len(topics) else 0)
        out.append(1 if i + 1 < len(streams) else 0)
    return bytes(out)


class Permissions(WireType):
    """``has_permissions u8``; if 1, ``perm_len u32`` + the blob of 2.7.

    ``absent_u32``: the UserDetails response writes "no permissions" as a u32 0; decoders read the
    first byte as the flag, and this type then takes the other three zero bytes too (when present).
    Value: True when permissions are present. Written from None (absent) or the blob mapping
    (see :func:`write_permissions_blob`); ``"blob": bytes`` writes a raw blob.
    """

    __slots__ = ("doc", "absent_u32")

    def __init__(self, absent_u32: bool = False) -> None:
        self.absent_u32 = absent_u32
        self.doc = "has_permissions u8 [, perm_len u32, Permissions]"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        start = off
        has, off = _flag("has_permissions", buf, off, end)
        if has.value != 1:
            if self.absent_u32 and off + 3 <= end and not any(buf[off:off + 3]):
                off += 3
                has.size = 4
            f = Field(name, False, start, off - start, "none", [has])
            if has.value != 0:
                f = mark(f, "value", f"{name}: has_permissions is {has.value} (must be 0 or 1)")
            return f, off
        length, off = U32.read("length", buf, off, end)
        n = length.value
        if off + n > end:
            raise DecodeError(f"{name}: blob length {n} overruns the frame by {off + n - end} bytes", off)
        kids = [has, length]
        try:
            kids += read_permissions_blob(buf, off, off + n)
        except DecodeError as e:
            f = Field(name, True, start, off + n - start, f"malformed: {e}",
                      [*kids, Field("blob", bytes(buf[off:off + n]), off, n)])
            return mark(f, "size", f"{name}: {e}"), off + n
        return Field(name, True, start, off + n - start, "present", kids), off + n

    def write(self, value: Any) -> bytes:
        if value is None or value is False:
            return b"\x00\x00\x00\x00" if self.absent_u32 else b"\x00"
        if isinstance(value, Mapping) and "blob" in value:
            blob = bytes(value["blob"])
        else:
            blob = write_permissions_blob(value)
        return b"\x01" + len(blob).to_bytes(4, "little") + blob


PERMISSIONS = Permissions()
PERMISSIONS_RESPONSE = Permissions(absent_u32=True)

__all__ = [
    "BOOL", "BYTES8", "BYTES32", "COMPRESSION", "CONSUMER", "CONSUMER_KIND", "CONSUMER_L0", "EXPIRY", "EXPIRY_SECS",
    "F32", "F64", "HEADER_KIND", "HEADER_KINDS", "I32", "ID_KIND", "IDENTIFIER", "MAX_TOPIC_SIZE", "MESSAGE_STATE",
    "NAME8", "NODE_ROLE", "NODE_STATUS", "PARTITION_FLAGGED", "PARTITION_U32", "PARTITIONING", "PARTITIONING_KIND",
    "PERMISSIONS", "PERMISSIONS_RESPONSE", "POLLING_KIND", "POLLING_STRATEGY", "SNAPSHOT_COMPRESSION",
    "SNAPSHOT_TYPE", "STR8", "STR32", "TIMESTAMP", "TRANSPORT", "U8", "U16", "U32", "U64", "U128", "USER_STATUS",
    "USER_STATUS_T", "Checked", "Decoded", "Flagged", "MARKS", "mark", "micros_display", "problems_of",
]
