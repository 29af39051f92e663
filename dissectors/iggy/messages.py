"""Iggy messages: SEND_MESSAGES payloads and POLL_MESSAGES responses in every dialect.

Formats (iggy.md 4.1, 5.1-5.3, 5.5, 9.6):

* L0/L1 (legacy): SendMessages is stream, topic, partitioning, then ``id u128, headers_length u32,
  headers, payload_length u32, payload`` until the end. A polled message has a 45-byte prefix
  (offset, state, timestamp, id, checksum u32 = CRC32 of the payload only).
* Z1/Z2/C: SendMessages is ``metadata_length u32``, stream, topic, partitioning,
  ``messages_count u32``, a 16-byte index entry per message, then the frames. A frame is a 56-byte
  (Z1, Z2) or 64-byte (C: 8 reserved bytes) header, the payload, then the user headers. Its
  checksum u64 covers frame[8:]: CRC32 in Z1, XXH3-64 from Z2 on. Clients send 0, which is not a
  mismatch; a non-zero one from a client is checked like a server's.
* V: SendMessages is ``metadata_length u32``, stream, topic, partitioning, ``messages_count u32``,
  then one batch: a 256-byte batch header and frames with 48-byte headers. The caller passes the
  request BODY (the bytes after the 256-byte consensus header) as ``buf[start:end]``; for a poll
  the reply body after the consensus header (no result section: polls are non-replicated reads),
  which is the 16-byte prefix and then batch records back to back. Frame checksums are XXH3-64 of
  frame[8:]. The batch checksum is XXH3-64 of partition_id, base_offset, base_timestamp,
  origin_timestamp, batch_length (u64 each), message_count (u32), then every frame's stored 8
  checksum bytes; iggy.md does not give this range, it was read from the Apache Iggy sources
  (core/binary_protocol/src/batch.rs), as was ``batch_length`` = 256 + frames. The batches
  apache-iggy 0.9.0 sends verify.
* User headers: legacy pairs (``key_len u32``, UTF-8 key, ``kind u8``, ``len u32``, value) in
  L0-Z2; typed keys (``key_kind u8`` first) in C and V (the spec does not say for V; the headers
  apache-iggy 0.9.0 sends in captures/iggy decode this way).

Each message is a Field named ``[i]`` (value = its id) with children such as ``id``, ``offset``,
``checksum`` (display "verified" or the mismatch), ``payload`` (bytes) and ``headers`` (pairs
``[j]`` with ``key``, ``kind``, ``value``). :func:`messages_of` turns a decode back into plain dicts,
the same shape the encoders (:func:`encode_send_messages`, :func:`encode_polled`, ...) take:
``{"id", "payload", "headers": [{"key", "kind", "value"(, "key_kind")}], "offset", "timestamp",
"origin_timestamp", "state"}``.

Z1/Z2/C/V messages are :class:`MessageField` objects whose children are built on first access,
in a :class:`MessagesField` that makes them only when a view reads it (its JSON needs neither);
everything that can be wrong with a message is found when it is decoded, so ``Decoded.problems``
is complete without looking at the trees.

Nothing here allocates from a wire count or length: every loop stops when the bytes do.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xxhash

from analyzer.api import Field
from analyzer.jsonout import field_json, leaves_json
from analyzer.jsonout import plain as json_plain
from dissectors.iggy.ends import identifier_end, partitioning_end
from dissectors.iggy.scan import batch_checksum, index_clean, usual_run
from dissectors.iggy.types import (
    HEADER_KINDS,
    IDENTIFIER,
    MARKS,
    MESSAGE_STATE,
    PARTITIONING,
    TIMESTAMP,
    U32,
    U64,
    U128,
    Checked,
    Decoded,
    problems_of,
)
from dissectors.iggy.types import wide as as_wide  # (the JSON plans have a value named wide)
from dissectors.kit.lazy import BASE_CHILDREN, LazyChildren, LazyField
from dissectors.schema import DecodeError, F, Fixed, Int, Struct

LEGACY = ("L0", "L1")

#: Server limits (iggy.md 5.3): errors 4022 and 4017.
MAX_PAYLOAD = 10_000_000
MAX_USER_HEADERS = 100_000

# ------------------------------------------------------------------------------ layouts (data)

INDEX_ENTRY = Struct(F("offset", U32, doc="must be 0"), F("position", U32, doc="cumulative end of the message"),
                     F("timestamp", U64, doc="must be 0"), doc="IndexEntry")
POLLED_PREFIX = Struct(F("partition_id", U32), F("current_offset", U64), F("messages_count", U32),
                       doc="PolledMessages prefix")
_Z_FIELDS = (F("checksum", U64), F("id", U128), F("offset", U64), F("timestamp", TIMESTAMP),
             F("origin_timestamp", TIMESTAMP), F("user_headers_length", U32), F("payload_length", U32))
#: The message frame header of Z1/Z2 (56 bytes) and C (64 bytes: 8 reserved bytes, must be 0).
FRAME_HEADER = {
    "Z1": Struct(*_Z_FIELDS, doc="MessageHeader(56)"),
    "Z2": Struct(*_Z_FIELDS, doc="MessageHeader(56)"),
    "C": Struct(*_Z_FIELDS, F("reserved", U64), doc="MessageHeader(64)"),
    "V": Struct(F("checksum", U64), F("id", U128), F("offset_delta", U32), F("timestamp_delta", U32),
                F("user_headers_length", U32), F("payload_length", U32), F("reserved", U64),
                doc="BatchMessageHeader(48)"),
}
HEADER_SIZE = {"Z1": 56, "Z2": 56, "C": 64, "V": 48}
BATCH_HEADER = Struct(F("partition_id", U64), F("base_offset", U64), F("base_timestamp", TIMESTAMP),
                      F("origin_timestamp", TIMESTAMP), F("batch_length", U64), F("batch_checksum", U64),
                      F("message_count", U32), F("reserved", Fixed(204)), doc="BatchHeader(256)")
BATCH_HEADER_SIZE = 256
#: The legacy polled message's fixed prefix before headers_length (37 bytes; 45 with both lengths).
LEGACY_POLLED = Struct(F("offset", U64), F("state", Checked("u8 message state", "<B", MESSAGE_STATE, "message state")),
                       F("timestamp", TIMESTAMP), F("id", U128), F("checksum", U32), doc="legacy polled message")
LEGACY_SENT = Struct(F("id", U128), doc="legacy message")
LEGACY_POLLED_SIZE = 37  # the 45-byte fixed part of 5.2 less headers_length and payload_length

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_BATCH_META = struct.Struct("<QQQQQ")


def _crc32(data: Any) -> int:
    return zlib.crc32(data)


def frame_checksum(dialect: str, frame: bytes | memoryview) -> int:
    """The checksum a Z1/Z2/C/V frame should carry (over frame[8:])."""
    return _sum_after_checksum(dialect, memoryview(frame)[8:])


def _sum_after_checksum(dialect: str, after: memoryview) -> int:
    """The checksum of a Z1/Z2/C/V frame over ``after``, its bytes after the checksum field."""
    return _checksum_function(dialect)(after)


def _checksum_function(dialect: str) -> Callable[[memoryview], int]:
    """What sums a Z1/Z2/C/V frame's bytes after its checksum field: CRC32 in Z1, XXH3-64 after."""
    return zlib.crc32 if dialect == "Z1" else xxhash.xxh3_64_intdigest


# ------------------------------------------------------------------------------ user headers


def _typed_keys(dialect: str) -> bool:
    return dialect in ("C", "V")


def _header_value(kind: int, raw: bytes) -> tuple[Any, str | None]:
    """(value, problem) of a user-header value of ``kind``; unknown kinds keep the raw bytes."""
    spec = HEADER_KINDS.get(kind)
    if spec is None:
        return raw, None
    name, size = spec
    if size is not None and len(raw) != size:
        return raw, f"{name} value of {len(raw)} bytes (must be {size})"
    if name == "raw":
        return raw, None
    if name == "string":
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError:
            return raw, "string value is not UTF-8"
    if name == "bool":
        return bool(raw[0]), None
    if name.startswith("int"):
        return as_wide(int.from_bytes(raw, "little", signed=True)), None
    if name.startswith("uint"):
        return as_wide(int.from_bytes(raw, "little")), None
    return struct.unpack("<f" if size == 4 else "<d", raw)[0], None


def encode_header_value(kind: int, value: Any) -> bytes:
    """The bytes of a user-header value (bytes are taken as they are, to build wrong ones)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    spec = HEADER_KINDS.get(kind)
    if spec is None:
        raise ValueError(f"unknown header kind {kind} needs raw bytes")
    name, size = spec
    if name == "string":
        return str(value).encode("utf-8")
    if name == "bool":
        return b"\x01" if value else b"\x00"
    if name.startswith("float"):
        return struct.pack("<f" if size == 4 else "<d", value)
    assert size is not None
    return int(value).to_bytes(size, "little", signed=name.startswith("int"))


def _show(value: Any) -> str:
    if isinstance(value, bytes):
        return value[:32].hex() + ("…" if len(value) > 32 else "")
    return str(value)


def decode_headers(mv: memoryview, off: int, end: int, typed: bool, label: Any,
                   problems: list[tuple[str, str]]) -> list[Field]:
    """The user-header pairs in ``mv[off:end]``; problems are appended, never raised."""
    return _headers(mv, off, end, typed, label, problems, True)


def check_headers(mv: memoryview, off: int, end: int, typed: bool, label: Any,
                  problems: list[tuple[str, str]]) -> int:
    """How many entries decode_headers gives, every problem appended the same, without making
    the Fields (a message's tree is built only when something shows it)."""
    return len(_headers(mv, off, end, typed, label, problems, False))


def _headers(mv: memoryview, off: int, end: int, typed: bool, label: Any, problems: list[tuple[str, str]],
             build: bool) -> list[Any]:
    """decode_headers' entries; without ``build``, None in place of each complete pair's Field."""
    out: list[Any] = []
    j = 0
    while off < end:
        at = off
        kids: list[Field] = []
        key_kind = 2
        need = 1 + 4 if typed else 4
        if off + need > end:
            problems.append(("size", f"{label}: user header {j} cut off ({end - off} bytes left)"))
            out.append(Field("rest", bytes(mv[off:end]), off, end - off))
            break
        if typed:
            key_kind = mv[off]
            if build:
                kids.append(Field("key_kind", key_kind, off, 1,
                                  HEADER_KINDS.get(key_kind, (f"unknown ({key_kind})",))[0]))
            off += 1
        (klen,) = _U32.unpack_from(mv, off)
        if off + 4 + klen + 5 > end:
            problems.append(("size", f"{label}: user header {j} key length {klen} overruns the headers"))
            out.append(Field("rest", bytes(mv[at:end]), at, end - at))
            break
        kraw = bytes(mv[off + 4:off + 4 + klen])
        if typed:
            key, kprob = _header_value(key_kind, kraw)
            if key_kind not in HEADER_KINDS:
                problems.append(("header_kind", f"{label}: user header {j} has unknown key kind {key_kind}"))
        else:
            key, kprob = _header_value(2, kraw)
            if kprob:
                kprob = "key is not UTF-8"
        if kprob:
            problems.append(("value", f"{label}: user header {j} key: {kprob}"))
        if klen == 0:
            problems.append(("value", f"{label}: user header {j} has an empty key"))
        elif klen > 255:
            problems.append(("size", f"{label}: user header {j} key of {klen} bytes (at most 255)"))
        if build:
            kids.append(Field("key", key, off, 4 + klen, _show(key)))
        off += 4 + klen
        kind = mv[off]
        (vlen,) = _U32.unpack_from(mv, off + 1)
        kname = HEADER_KINDS.get(kind, (None,))[0]
        if build:
            kids.append(Field("kind", kind, off, 1, kname or f"unknown ({kind})"))
        if off + 5 + vlen > end:
            problems.append(("size", f"{label}: user header {j} ({_show(key)}) value length {vlen} overruns the "
                                     f"headers by {off + 5 + vlen - end} bytes"))
            out.append(Field(f"[{j}]", key, at, end - at, f"{_show(key)}: cut off", kids))
            break
        vraw = bytes(mv[off + 5:off + 5 + vlen])
        value, vprob = _header_value(kind, vraw)
        if kname is None:
            problems.append(("header_kind", f"{label}: user header {j} ({_show(key)}) has unknown value kind {kind}"))
        if vprob:
            problems.append(("value", f"{label}: user header {j} ({_show(key)}): {vprob}"))
        if vlen == 0:
            problems.append(("value", f"{label}: user header {j} ({_show(key)}) has an empty value"))
        elif vlen > 255:
            problems.append(("size", f"{label}: user header {j} ({_show(key)}) value of {vlen} bytes (at most 255)"))
        if build:
            kids.append(Field("value", value, off + 1, 4 + vlen, _show(value)))
            out.append(Field(f"[{j}]", key, at, off + 5 + vlen - at, f"{_show(key)}={_show(value)} ({kname or kind})",
                             kids))
        else:
            out.append(None)
        off += 5 + vlen
        j += 1
    return out


def encode_headers(dialect: str, headers: Any) -> bytes:
    """User headers from a list of ``{"key", "kind", "value"(, "key_kind")}`` or a mapping
    ``key -> (kind, value)``; typed keys (C, V) default to key_kind 2 (string) or 1 (bytes)."""
    if not headers:
        return b""
    items = ([{"key": k, "kind": kv[0], "value": kv[1]} for k, kv in headers.items()]
             if isinstance(headers, Mapping) else list(headers))
    out = bytearray()
    typed = _typed_keys(dialect)
    for h in items:
        key = h["key"]
        if typed:
            kk = h.get("key_kind", 1 if isinstance(key, bytes) else 2)
            kraw = encode_header_value(kk, key)
            out.append(kk)
        else:
            kraw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        out += _U32.pack(len(kraw)) + kraw
        vraw = encode_header_value(h["kind"], h["value"])
        out.append(h["kind"])
        out += _U32.pack(len(vraw)) + vraw
    return bytes(out)


# ------------------------------------------------------------------------------ decoding helpers


class _Walk:
    """Shared state of one decode: the buffer, problems, and the messages found."""

    __slots__ = ("raw", "mv", "dialect", "problems", "polled")

    def __init__(self, dialect: str, buf: bytes | memoryview, polled: bool) -> None:
        # Bytes, not the caller's view: lazily built messages read them after the caller is done.
        self.raw = buf if isinstance(buf, bytes) else bytes(buf)
        self.mv = memoryview(self.raw)
        self.dialect = dialect
        self.problems: list[tuple[str, str]] = []
        self.polled = polled

    def read(self, layout: Struct, off: int, end: int) -> tuple[list[Field], int]:
        since = MARKS[0]
        fields, new = layout.read_fields(self.mv, off, end)
        self.problems += problems_of(fields, since)
        return fields, new

    def rest(self, name: str, off: int, end: int) -> Field:
        return Field(name, bytes(self.mv[off:end]), off, end - off)


def _verify(w: _Walk, f: Field, computed: int, label: str, what: str = "checksum") -> None:
    f.display = _verdict(w, f.value, computed, label, what)


def _verdict(w: _Walk, stored: int, computed: int, label: str, what: str) -> str:
    """How a checksum field that holds ``stored`` shows against ``computed``; a mismatch recorded."""
    if stored == computed:
        return "verified"
    w.problems.append(("checksum", f"{label}: {what} {stored:#x} does not verify (computed {computed:#x})"))
    return f"mismatch: computed {computed:#x}"


def _label(i: int, fields: Sequence[Field]) -> str:
    """The name of message ``i`` in problems, from its decoded header fields (as _MessageLabel)."""
    v = {f.name: f.value for f in fields}
    return str(_MessageLabel(i, v.get("id", 0), v.get("offset")))


def _limits(w: _Walk, label: str, plen: int, hlen: int) -> None:
    if plen > MAX_PAYLOAD:
        w.problems.append(("size", f"{label}: payload of {plen} bytes is over the {MAX_PAYLOAD}-byte limit"))
    if hlen > MAX_USER_HEADERS:
        w.problems.append(("size", f"{label}: user headers of {hlen} bytes are over the {MAX_USER_HEADERS}-byte "
                                   f"limit"))


#: The slot descriptor of Field.display, which MessageField words on first read.
_DISPLAY = Field.__dict__["display"]


class MessageField(LazyChildren):
    """A Z1/Z2/C/V message whose child tree is built on first access: a poll of thousands of
    messages costs one small object each until someone looks. Everything that can be wrong with
    the message (lengths, checksum, reserved bytes, user headers) was checked when it was made."""

    __slots__ = ("_raw", "_dialect", "_base", "_ck", "_plen", "_headers", "_moff")

    def __init__(self, name: str, value: int, offset: int, size: int, moff: int | None, raw: bytes, dialect: str,
                 base: tuple[int, int] | None, ck: str | None, plen: int, headers: list[Field] | int) -> None:
        """``ck``: what to show for the checksum (None: a legacy message as sent, which has none);
        ``moff``: a polled message's offset (None: a sent one, which has none yet)."""
        self.name, self.value, self.offset, self.size = name, value, offset, size
        _DISPLAY.__set__(self, None)  # worded when first read (see display)
        self.is_list = False
        BASE_CHILDREN.__set__(self, None)
        self._raw, self._dialect, self._base, self._ck = raw, dialect, base, ck
        self._plen, self._headers, self._moff = plen, headers, moff

    @property  # type: ignore[override]
    def display(self) -> str | None:
        """"offset 5, 7 bytes, 2 headers" (polled) or "7 bytes" (sent), worded when a view asks."""
        text = _DISPLAY.__get__(self)
        if text is None:
            headers = self._headers
            text = _msg_text(self._plen, headers if type(headers) is int else len(headers),  # type: ignore[arg-type]
                             self._moff)
            _DISPLAY.__set__(self, text)
        return text

    @display.setter
    def display(self, value: str | None) -> None:
        _DISPLAY.__set__(self, value)

    def json_value(self) -> dict[str, Any] | None:
        """The message's JSON value without its field tree (see :func:`analyzer.jsonout.field_json`):
        a poll gives thousands, and building their trees was most of a JSON run. None: the tree's
        way (a legacy message, one with user headers, or a tree already built).
        tests/test_iggy_json.py proves both equal on every message of every capture."""
        if BASE_CHILDREN.__get__(self) is not None:
            return None
        plan = _JSON_PLAN.get(self._dialect)
        headers = self._headers
        if plan is None or type(headers) is not int or headers:
            return None
        read = _json_reader(plan, self._base)
        return None if read is None else _plain_json(self._raw, self.offset, plan[1].size, read, self._base)

    def _build(self) -> list[Field]:
        d, off = self._dialect, self.offset
        if d in LEGACY:
            return self._build_legacy()
        kids, p = FRAME_HEADER[d].read_fields(memoryview(self._raw), off, off + HEADER_SIZE[d])
        kids[0].display = self._ck
        if self._base is not None:
            kids.insert(3, Field("offset", self._base[0] + kids[2].value, -1, 0))
            kids.insert(5, Field("origin_timestamp", self._base[1] + kids[4].value, -1, 0))
        plen = self._plen
        kids.append(Field("payload", self._raw[p:p + plen], p, plen))
        hsize = off + self.size - p - plen
        headers = self._headers
        if isinstance(headers, int):  # counted when checked; the pairs are made now
            headers = decode_headers(memoryview(self._raw), p + plen, off + self.size, _typed_keys(d), "", [])
        kids.append(Field("headers", len(headers), p + plen, hsize, None, headers, True))
        return kids

    def _build_legacy(self) -> list[Field]:
        # prefix (polled: offset, state, timestamp, id, checksum; sent: id), headers_length, headers,
        # payload_length, payload
        off, plen, raw = self.offset, self._plen, self._raw
        layout = LEGACY_SENT if self._ck is None else LEGACY_POLLED
        kids, q = layout.read_fields(memoryview(raw), off, off + self.size)
        if self._ck is not None:
            kids[-1].display = self._ck
        h = self.size - (q - off) - 8 - plen
        kids += [Field("headers_length", h, q, 4),
                 Field("headers", len(self._headers), q + 4, h, None, self._headers, True),
                 Field("payload_length", plen, q + 4 + h, 4),
                 Field("payload", raw[q + 8 + h:q + 8 + h + plen], q + 8 + h, plen)]
        return kids


#: A V header's deltas -> the absolute value shown after each (its name, and which of a batch's
#: (base_offset, origin_timestamp) it adds to), as MessageField._build inserts them.
_ABSOLUTE = {"offset_delta": ("offset", 0), "timestamp_delta": ("origin_timestamp", 1)}

#: What _json_plan gives: the field names, their struct, where the u128's low half is, the reader
#: of a header's values and the reader with a batch's absolute values (None: no deltas).
JsonPlan = tuple[tuple[str, ...], struct.Struct, int, Callable[[bytes, int, Any], dict[str, Any]],
                 Callable[[bytes, int, Any], dict[str, Any]] | None]


def _json_plan(layout: Struct) -> JsonPlan:
    """MessageField.json_value's readers of a frame header, from its layout: the field names, one
    little-endian struct for all of them (a u128 as two u64 halves), where the u128's low half is
    (0: none; a header starts with its u64 checksum), and the header's values as a dict (written
    out as code: a dict display of the unpacked values costs a third of a dict made with zip),
    alone and (V) with the absolute values after their deltas."""
    names: list[str] = []
    fmt = "<"
    wide = 0
    for spec in layout.fields:
        t = spec.type
        if t is U128:
            wide = len(names)
            fmt += "QQ"
        else:
            assert isinstance(t, Int) and t._st.format[0] == "<", spec.name  # a plain little-endian integer
            fmt += t._st.format[1:]
        names.append(spec.name)
    st = struct.Struct(fmt)
    alone, based = [], []
    for i, name in enumerate(names):
        value = f"_wide(v[{i}] | v[{i + 1}] << 64)" if wide and i == wide else f"v[{i + (bool(wide) and i > wide)}]"
        alone.append(f"{name!r}: {value}")
        based.append(alone[-1])
        if name in _ABSOLUTE:
            absolute, which = _ABSOLUTE[name]
            based.append(f"{absolute!r}: b[{which}] + {value}")
    code = (f"def read(raw, off, b=None, _unpack=_unpack, _wide=_wide):\n    v = _unpack(raw, off)\n"
            f"    return {{{', '.join(alone)}}}\n"
            f"def based(raw, off, b, _unpack=_unpack, _wide=_wide):\n    v = _unpack(raw, off)\n"
            f"    return {{{', '.join(based)}}}\n")
    scope: dict[str, Any] = {"_unpack": st.unpack_from, "_wide": as_wide}
    exec(code, scope)  # noqa: S102 - names and indexes from our own layout table
    return tuple(names), st, wide, scope["read"], scope["based"] if based != alone else None


#: Dialect -> MessageField.json_value's readers of its frame header.
_JSON_PLAN = {d: _json_plan(layout) for d, layout in FRAME_HEADER.items()}
assert all(_JSON_PLAN[d][1].size == HEADER_SIZE[d] for d in FRAME_HEADER)


def _json_reader(plan: JsonPlan, base: tuple[int, int] | None) -> Callable[[bytes, int, Any], dict[str, Any]] | None:
    """The reader _plain_json is to use: the header's values alone or (a V batch's message, given
    its ``base``) with the absolute values after their deltas; None where a base is given to a
    header without deltas (its tree's way)."""
    return plan[3] if base is None else plan[4]


def _plain_json(raw: bytes, off: int, hsize: int, read: Callable[[bytes, int, Any], dict[str, Any]],
                base: tuple[int, int] | None) -> dict[str, Any] | None:
    """The JSON value of the whole Z1/Z2/C/V message at ``off`` from its bytes (the header by the
    ``read`` _json_reader gives), as fields_json makes it of the message's tree; None for one with
    user headers, whose tree has more to say."""
    out = read(raw, off, base)  # u128 halves (low, high) made one value, as UInt128 reads them
    if out["user_headers_length"]:
        return None
    p = off + hsize
    plen = out["payload_length"]
    out["payload"] = json_plain(raw[p:p + plen], "payload")
    out["headers"] = []
    return out


def _head_plan(d: str) -> tuple[struct.Struct, int, int, int, int]:
    """_frame's reader of dialect ``d``'s frame header: json_value's one struct for all of it, and
    where its values hold the offset (V: offset_delta), user_headers_length, payload_length and the
    reserved u64 that must be 0 (0: none). The checksum is value 0 and the u128 id values 1 and 2."""
    names, st, wide, *_ = _JSON_PLAN[d]
    assert names[:2] == ("checksum", "id") and wide == 1
    at = {name: i + (i > wide) for i, name in enumerate(names)}  # the id's high half shifts the rest
    return st, at["offset_delta" if d == "V" else "offset"], at["user_headers_length"], at["payload_length"], \
        at.get("reserved", 0)


#: Dialect -> _frame's reader of its frame header (one unpack a message).
_HEAD_PLAN = {d: _head_plan(d) for d in FRAME_HEADER}


class _MessageLabel:
    """How problems name a message, worded only when there is a problem (the hot path has none)."""

    __slots__ = ("i", "mid", "moff")

    def __init__(self, i: int, mid: int, moff: int | None) -> None:
        self.i, self.mid, self.moff = i, mid, moff

    def __str__(self) -> str:
        if self.moff is None:
            return f"message {self.i} (id {self.mid:#x})"
        return f"message {self.i} (id {self.mid:#x}, offset {self.moff})"

    def __format__(self, spec: str) -> str:  # f"{label}: ..." words it
        return str(self)


#: What _frame gives for a whole message when told not to make its field (``make`` False).
_WHOLE = Field("", None)


def _frame(w: _Walk, i: int, off: int, end: int, base: tuple[int, int] | None = None,
           make: bool = True) -> tuple[Field | None, int]:
    """One Z1/Z2/C/V frame at ``off``; (None, off) when its header does not fit (problem recorded).

    ``base`` (V only): the batch's (base_offset, origin_timestamp), to show absolute values.
    ``make`` False: a whole message gives _WHOLE instead of its MessageField, every problem
    recorded the same (a list of messages makes them only when a view reads it, by this function).
    """
    d, mv = w.dialect, w.mv
    hsize = HEADER_SIZE[d]
    if off + hsize > end:
        w.problems.append(("size", f"message {i}: header needs {hsize} bytes, {end - off} left"))
        return None, off
    st, io, ih, ip, ir = _HEAD_PLAN[d]
    v = st.unpack_from(mv, off)
    stored = v[0]
    hlen, plen = v[ih], v[ip]
    # How problems name the message (its id and, polled, its offset): made only for a problem or
    # the message's field (the hot path has neither).
    if plen > MAX_PAYLOAD or hlen > MAX_USER_HEADERS:
        _limits(w, str(_frame_label(w, i, v, io, base)), plen, hlen)
    p = off + hsize
    stop = p + plen + hlen
    if stop > end:
        label = _frame_label(w, i, v, io, base)
        w.problems.append(("size", f"{label}: payload {plen} + user headers {hlen} bytes overrun the data by "
                                   f"{stop - end} bytes"))
        hf, _ = FRAME_HEADER[d].read_fields(mv, off, p)
        return Field(f"[{i}]", label.mid, off, end - off, "cut off", [*hf, w.rest("rest", p, end)]), end
    if ir:
        reserved = v[ir]
        if reserved:
            w.problems.append(("reserved", f"{_frame_label(w, i, v, io, base)}: reserved header bytes are {reserved:#x}, "
                                           f"not 0"))
    if w.polled or stored or d == "V":
        computed = _sum_after_checksum(d, mv[off + 8:stop])
        if stored == computed:
            ck = "verified"
        else:
            ck = f"mismatch: computed {computed:#x}"
            w.problems.append(("checksum", f"{_frame_label(w, i, v, io, base)}: checksum {stored:#x} does not verify "
                                           f"(computed {computed:#x})"))
    else:
        ck = "set by the server"
    headers = check_headers(mv, p + plen, stop, _typed_keys(d), _frame_label(w, i, v, io, base),
                            w.problems) if hlen else 0
    if not make:
        return _WHOLE, stop
    label = _frame_label(w, i, v, io, base)
    return MessageField(f"[{i}]", label.mid, off, stop - off, label.moff, w.raw, d, base, ck, plen, headers), stop


def _frame_label(w: _Walk, i: int, v: tuple[int, ...], io: int, base: tuple[int, int] | None) -> _MessageLabel:
    """How problems name message ``i`` of _frame, from its header's values ``v``: its id (the u128
    halves at 1 and 2) and, polled, its offset (at ``io``; V: a delta from the batch's base)."""
    moff = (v[io] if base is None else base[0] + v[io]) if w.polled else None
    return _MessageLabel(i, v[1] | v[2] << 64, moff)


def _msg_text(plen: int, nheaders: int, moff: int | None) -> str:
    """"offset 5, 7 bytes, 2 headers" for a polled message (``moff`` its offset); sent ones
    (``moff`` None) have no offset yet."""
    text = f"{plen} bytes, {nheaders} headers" if nheaders else f"{plen} bytes"
    return text if moff is None else f"offset {moff}, {text}"


def _msg_display(kids: Sequence[Field], plen: int, nheaders: int, polled: bool) -> str:
    """_msg_text for a message whose fields are made (its offset read from them)."""
    off = next((k.value for k in kids if k.name == "offset"), None)
    return _msg_text(plen, nheaders, off if polled else None)


def _frames(w: _Walk, off: int, end: int, count: int | None, first: int = 0,
            base: tuple[int, int] | None = None) -> tuple[MessagesField, int]:
    """Frames back to back in ``mv[off:end]``: up to ``count`` of them, or until ``end``; every
    problem recorded now, their fields made when a view reads the list (see MessagesField)."""
    starts, tail, stop = _scan(w, off, end, count, first, base)
    return MessagesField.lazy(off, stop, w, first, base, starts, tail), stop


def _scan(w: _Walk, off: int, end: int, count: int | None, first: int = 0,
          base: tuple[int, int] | None = None) -> tuple[list[int], Field | None, int]:
    """What _frames checks, without the list's field: (where each whole message starts, the
    message cut off or the rest of the bytes after them or None, where the scan stopped)."""
    starts: list[int] = []
    tail: Field | None = None
    d, mv = w.dialect, w.mv
    st, _, ih, ip, ir = _HEAD_PLAN[d]
    plan = (HEADER_SIZE[d], ih, ip, ir)
    summed = w.polled or d == "V"  # else a message's checksum is verified only when set
    checksum = _checksum_function(d)
    while True:
        # The usual messages are taken by usual_run; the first other goes through _frame, which
        # says what is wrong with it (tests/test_iggy_messages_lazy.py proves both ways alike).
        off = usual_run(mv, off, end, -1 if count is None else count - len(starts), st.unpack_from, plan, summed,
                        checksum, MAX_PAYLOAD, starts)
        if off >= end or count is not None and len(starts) >= count:
            break
        f, new = _frame(w, first + len(starts), off, end, base, False)
        if f is None:
            tail, off = w.rest("rest", off, end), end
            break
        if f is not _WHOLE:  # cut off: the last
            tail, off = f, new
            break
        starts.append(off)
        off = new
    return starts, tail, off


def _all_usual(dialect: str, polled: bool, mv: memoryview, off: int, end: int, count: int) -> list[int] | None:
    """Where each of the ``count`` messages from ``off`` starts when they are all usual (see
    usual_run: nothing _frame would say a word of) and fill the bytes up to ``end`` exactly; None
    otherwise (the scan then says what, if anything, is wrong). A clean send's or poll's usual
    case (V: a batch's), without the scan's state."""
    args = _USUAL_ARGS.get((dialect, polled))
    if args is None:
        st, _, ih, ip, ir = _HEAD_PLAN[dialect]
        args = _USUAL_ARGS[dialect, polled] = (st.unpack_from, (HEADER_SIZE[dialect], ih, ip, ir),
                                               polled or dialect == "V", _checksum_function(dialect))
    unpack, plan, summed, checksum = args
    starts: list[int] = []
    stop = usual_run(mv, off, end, count, unpack, plan, summed, checksum, MAX_PAYLOAD, starts)
    return starts if stop == end and len(starts) == count else None


#: (dialect, polled) -> usual_run's arguments for _all_usual.
_USUAL_ARGS: dict[tuple[str, bool], tuple[Any, tuple[int, int, int, int], bool, Callable[[memoryview], int]]] = {}


def _is_message(tail: Field | None) -> bool:
    """Whether a scan's ``tail`` is a message cut off (named ``[i]``), not the rest of the bytes."""
    return tail is not None and tail.name.startswith("[")


def _spans(starts: list[int], end: int, tail: Field | None) -> list[tuple[int, int]]:
    """(offset, end) of each message a scan found (see _scan: its starts, where it stopped, its
    tail), a cut-off one included."""
    stop = tail.offset if tail is not None else end
    spans = list(zip(starts, [*starts[1:], stop]))  # noqa: B905 - no start, no span
    if tail is not None and _is_message(tail):
        spans.append((tail.offset, tail.offset + tail.size))
    return spans


_LEGACY_POLLED_HEAD = struct.Struct("<QB")  # offset, state


def _legacy_message(w: _Walk, i: int, off: int, end: int) -> tuple[Field | None, int]:
    """One legacy message, its tree built on first access; anything cut off goes the eager way."""
    mv, polled = w.mv, w.polled
    pre = LEGACY_POLLED_SIZE if polled else 16
    if off + pre + 4 > end:
        return _legacy_eager(w, i, off, end)
    (h,) = _U32.unpack_from(mv, off + pre)
    q = off + pre + 4 + h
    if q + 4 > end:
        return _legacy_eager(w, i, off, end)
    (plen,) = _U32.unpack_from(mv, q)
    p = q + 4
    if p + plen > end:
        return _legacy_eager(w, i, off, end)
    mid = int.from_bytes(mv[off + 17:off + 33] if polled else mv[off:off + 16], "little")
    ck = None
    moff = None
    if polled:
        moff, state = _LEGACY_POLLED_HEAD.unpack_from(mv, off)
        label = _MessageLabel(i, mid, moff)
        if state not in MESSAGE_STATE:
            w.problems.append(("value", f"{label}: invalid message state {state}"))
        (stored,) = _U32.unpack_from(mv, off + 33)
        computed = _crc32(mv[p:p + plen])
        if stored == computed:
            ck = "verified"
        else:
            ck = f"mismatch: computed {computed:#x}"
            w.problems.append(("checksum", f"{label}: checksum {stored:#x} does not verify (computed {computed:#x})"))
    else:
        label = _MessageLabel(i, mid, None)
    if plen == 0:
        w.problems.append(("size", f"{label}: empty payload"))
    headers = decode_headers(mv, off + pre + 4, q, False, str(label), w.problems) if h else []
    return MessageField(f"[{i}]", mid, off, p + plen - off, moff, w.raw, w.dialect, None, ck, plen, headers), p + plen


def _legacy_eager(w: _Walk, i: int, off: int, end: int) -> tuple[Field | None, int]:
    """A legacy message that does not fit: decoded field by field, saying where it is cut."""
    at = off
    try:
        hf, off = w.read(LEGACY_POLLED if w.polled else LEGACY_SENT, off, end)
        hl, off = U32.read("headers_length", w.mv, off, end)
    except DecodeError as e:
        w.problems.append(("size", f"message {i}: {e}"))
        return None, at
    label = _label(i, hf)
    msg_id = next(f.value for f in hf if f.name == "id")
    h = hl.value
    if off + h + 4 > end:
        w.problems.append(("size", f"{label}: headers_length {h} overruns the data"))
        return Field(f"[{i}]", msg_id, at, end - at, "cut off", [*hf, hl, w.rest("rest", off, end)]), end
    headers = decode_headers(w.mv, off, off + h, False, label, w.problems)
    kids = [*hf, hl, Field("headers", len(headers), off, h, None, headers, True)]
    off += h
    (plen,) = _U32.unpack_from(w.mv, off)
    kids.append(Field("payload_length", plen, off, 4))
    off += 4
    if off + plen > end:
        w.problems.append(("size", f"{label}: payload_length {plen} overruns the data by {off + plen - end} bytes"))
        kids.append(w.rest("rest", off, end))
        return Field(f"[{i}]", msg_id, at, end - at, "cut off", kids), end
    if plen == 0:
        w.problems.append(("size", f"{label}: empty payload"))
    payload = w.mv[off:off + plen]
    kids.append(Field("payload", bytes(payload), off, plen))
    if w.polled:
        ck = next(f for f in hf if f.name == "checksum")
        _verify(w, ck, _crc32(payload), label)
    off += plen
    return Field(f"[{i}]", msg_id, at, off - at, _msg_display(kids, plen, len(headers), w.polled), kids), off


def _legacy_messages(w: _Walk, off: int, end: int, count: int | None) -> tuple[list[Field], int]:
    out: list[Field] = []
    i = 0
    while off < end and (count is None or i < count):
        f, new = _legacy_message(w, i, off, end)
        if f is None:
            out.append(w.rest("rest", off, end))
            return out, end
        out.append(f)
        off = new
        i += 1
    return out, off


class MessagesField(LazyChildren):
    """The list of a frame's messages, whose JSON value is its messages' in one loop (see
    :func:`analyzer.jsonout.field_json`): a poll gives thousands. Z1/Z2/C/V lists are made by
    :meth:`lazy` from where their messages start, checked: their MessageFields are made by
    _frame when the list's children are first read, the JSON goes without them."""

    __slots__ = ("_raw", "_dialect", "_polled", "_first", "_base", "_starts", "_stop", "_tail")

    def __init__(self, count: int, offset: int, size: int, items: list[Field] | None) -> None:
        # Not Field's __init__: its attribute stores are specialised for Field alone, and a second
        # type going through them cost every Field made after it (about 2,400 instructions per
        # MessagesField, 0.4 % of a findings-only Iggy run).
        self.name = "messages"
        self.value = count
        self.offset = offset
        self.size = size
        self.display = None
        BASE_CHILDREN.__set__(self, items)
        self.is_list = True
        self._starts: list[int] = []

    @classmethod
    def lazy(cls, offset: int, end: int, w: _Walk, first: int, base: tuple[int, int] | None, starts: list[int],
             tail: Field | None) -> MessagesField:
        """The list of the whole messages starting at ``starts`` (checked by _frame, numbered from
        ``first``) and ``tail`` (a message cut off, or the rest of the bytes) after them."""
        out = cls(len(starts) + _is_message(tail), offset, end - offset, None)
        out._raw, out._dialect, out._polled, out._first, out._base = w.raw, w.dialect, w.polled, first, base
        out._starts = starts
        out._stop = tail.offset if tail is not None else end
        out._tail = tail
        return out

    def _build(self) -> list[Field]:
        w = _Walk(self._dialect, self._raw, self._polled)  # its problems were recorded when checked
        out: list[Field] = []
        first, stop, base = self._first, self._stop, self._base
        for k, off in enumerate(self._starts):
            out.append(_frame(w, first + k, off, stop, base)[0])  # type: ignore[arg-type]
        if self._tail is not None:
            out.append(self._tail)
        return out

    def ends_in_rest(self) -> bool:
        """Whether bytes that are no message follow the messages (a list made by :meth:`lazy`)."""
        tail = self._tail
        return tail is not None and not _is_message(tail)

    def message_spans(self) -> list[tuple[int, int]]:
        """(offset, end) of each message of a list made by :meth:`lazy`, a cut-off one included."""
        return _spans(self._starts, self._stop, self._tail)

    def json_value(self) -> list[Any]:
        """What field_json makes of the list: each message's json_value, or its tree's JSON."""
        out: list[Any] = []
        append = out.append
        kids = BASE_CHILDREN.__get__(self)
        if kids is not None:
            for m in kids:
                value = m.json_value() if type(m) is MessageField else None
                append(value if value is not None else field_json(m, self.name))
            return out
        raw, base = self._raw, self._base
        plan = _JSON_PLAN[self._dialect]
        hsize, read = plan[1].size, _json_reader(plan, base)
        for k, off in enumerate(self._starts):
            value = None if read is None else _plain_json(raw, off, hsize, read, base)
            if value is None:  # a message with user headers (or no deltas for its base): its tree's JSON
                w = _Walk(self._dialect, raw, self._polled)
                value = field_json(_frame(w, self._first + k, off, self._stop, base)[0], self.name)  # type: ignore[arg-type]
            append(value)
        if self._tail is not None:
            append(field_json(self._tail, self.name))
        return out


def _messages_field(items: list[Field], off: int, end: int) -> Field:
    n = sum(1 for f in items if f.name.startswith("["))
    return MessagesField(n, off, end - off, items)


def _count_check(w: _Walk, announced: int, found: int, what: str = "messages_count") -> None:
    if announced != found:
        w.problems.append(("count", f"{what} is {announced} but {found} messages were found"))


def _batch(w: _Walk, off: int, end: int, bi: int, first: int, make: bool = True) -> tuple[Field | None, int, int]:
    """One V batch at ``off`` (its 256-byte header within ``end``): (field, end position, messages
    found); problems recorded. Checked from the header's numbers; the header's fields are made when
    a view reads the batch's children (_batch_children). ``make`` False: no field (None), every
    problem recorded the same (a findings-only run's clean test)."""
    at = off
    mv = w.mv
    _pid, base_offset, _base_ts, origin, blen, stored, count = _BATCH_HEAD.unpack_from(mv, off)
    # Sliced from the bytes, not the memoryview: a memoryview compares with bytes octet by octet
    # through its format (5,000 instructions for these 204 octets), bytes with memcmp.
    zero = w.raw[off + _RESERVED_AT:off + BATCH_HEADER_SIZE] == _RESERVED_ZERO
    if not zero:
        w.problems.append(("reserved", f"batch {bi}: reserved header bytes are not zero"))
    if blen < BATCH_HEADER_SIZE:
        w.problems.append(("size", f"batch {bi}: batch_length {blen} does not cover the 256-byte header"))
        stop = end
    elif at + blen > end:
        w.problems.append(("size", f"batch {bi}: batch_length {blen} overruns the data by {at + blen - end} bytes"))
        stop = end
    else:
        stop = at + blen
    base = (base_offset, origin)
    starts, tail, fend = _scan(w, off + BATCH_HEADER_SIZE, stop, None, first, base)
    cut = _is_message(tail)
    found = len(starts) + cut
    tiled = fend == stop and (tail is None or cut)
    _count_check(w, count, found, f"batch {bi} message_count")
    if stored == 0 and not w.polled:
        shown = "not set"
    elif tiled and stop == at + blen:
        computed = batch_checksum(mv, off, [*starts, tail.offset] if tail is not None and cut else starts)
        shown = _verdict(w, stored, computed, f"batch {bi}", "batch checksum")
    else:
        shown = "not checked (frames do not tile the batch)"
    if not make:
        return None, stop, found
    msgs = MessagesField.lazy(off + BATCH_HEADER_SIZE, fend, w, first, base, starts, tail)
    return (LazyField(f"[{bi}]", count, at, stop - at, _batch_children(w.raw, at, shown, zero, msgs), False,
                      f"{found} messages", _batch_json(w.raw, at, msgs)), stop, found)


_BATCH_HEAD = struct.Struct("<QQQQQQI")  # BATCH_HEADER up to its reserved bytes
_RESERVED_AT = _BATCH_HEAD.size
_RESERVED_ZERO = bytes(BATCH_HEADER_SIZE - _RESERVED_AT)
_BATCH_NAMES = tuple(f.name for f in BATCH_HEADER.fields)
assert _BATCH_NAMES[-1] == "reserved" and BATCH_HEADER.fields[-1].type.size == len(_RESERVED_ZERO)
assert struct.Struct("<" + "".join(f.type._st.format[1:] for f in BATCH_HEADER.fields[:-1])).format == _BATCH_HEAD.format


def _batch_json(raw: bytes, at: int, msgs: Field) -> Callable[[], dict[str, Any]]:
    """What analyzer.jsonout.field_json makes of a batch's children (_batch_children), made from
    the header's numbers: its fields are leaves, named once each."""
    def make() -> dict[str, Any]:
        values = (*_BATCH_HEAD.unpack_from(raw, at), raw[at + _RESERVED_AT:at + BATCH_HEADER_SIZE])
        out = leaves_json(zip(_BATCH_NAMES, values, strict=True), {})
        out[msgs.name] = field_json(msgs, msgs.name)
        return out
    return make


def _batch_children(raw: bytes, at: int, checksum: str, zero: bool, msgs: Field) -> Callable[[], list[Field]]:
    """A batch's children as _batch checked them: its header's fields (the checksum and reserved
    bytes shown as found), then its messages."""
    def build() -> list[Field]:
        header, _ = BATCH_HEADER.read_fields(memoryview(raw), at, at + BATCH_HEADER_SIZE)
        v = {f.name: f for f in header}
        v["batch_checksum"].display = checksum
        v["reserved"].display = "zero" if zero else "not zero"
        return [*header, msgs]
    return build


def _v_all_usual(buf: bytes, off: int, end: int, polled: bool, single: bool) -> tuple[int, int] | None:
    """(end position, messages) of the V batches from ``off`` (``single``: the one) when _batch
    would say nothing of any: reserved bytes zero, each batch's messages all usual (_all_usual),
    as many as its message_count and filling its batch_length, its checksum verifying (unset
    allowed in a send, as _batch allows it); None otherwise (_batches then says what is wrong)."""
    mv = memoryview(buf)
    found = 0
    while off < end:
        if off + BATCH_HEADER_SIZE > end or buf[off + _RESERVED_AT:off + BATCH_HEADER_SIZE] != _RESERVED_ZERO:
            return None
        _pid, _base_offset, _base_ts, _origin, blen, stored, count = _BATCH_HEAD.unpack_from(mv, off)
        stop = off + blen
        if blen < BATCH_HEADER_SIZE or stop > end:
            return None
        starts = _all_usual("V", polled, mv, off + BATCH_HEADER_SIZE, stop, count)
        if starts is None or ((stored != 0 or polled) and batch_checksum(mv, off, starts) != stored):
            return None
        found += count
        off = stop
        if single:
            break
    return off, found


def _batches(w: _Walk, off: int, end: int, single: bool,
             make: bool = True) -> tuple[list[Field], Field | None, int, int]:
    """Batch records from ``off``: (batch fields named ``[i]``, the cut-off rest or None, end,
    messages); ``make`` False: no fields (see _batch)."""
    out: list[Field] = []
    found = bi = 0
    while off < end:
        if off + BATCH_HEADER_SIZE > end:
            w.problems.append(("size", f"batch {bi}: header needs 256 bytes, {end - off} left"))
            return out, w.rest("rest", off, end), end, found
        f, off, n = _batch(w, off, end, bi, found, make)
        if f is not None:
            out.append(f)
        bi += 1
        found += n
        if single:
            break
    return out, None, off, found


# ------------------------------------------------------------------------------ public decoders


def _info(stream: Field | None, topic: Field | None, n: int) -> str:
    parts = []
    if stream is not None:
        parts.append(f"stream={stream.value}")
    if topic is not None:
        parts.append(f"topic={topic.value}")
    parts.append(f"messages={n}")
    return " ".join(parts)


def _trailing(w: _Walk, fields: list[Field], off: int, end: int) -> None:
    if off < end:
        w.problems.append(("size", f"{end - off} bytes after the messages"))
        fields.append(w.rest("trailing", off, end))


def decode_send_messages(dialect: str, buf: bytes | memoryview, start: int, end: int) -> Decoded:
    """The SEND_MESSAGES (101) request payload ``buf[start:end]`` (V: the request body)."""
    w = _Walk(dialect, buf, polled=False)
    end = max(start, min(end, len(w.mv)))
    fields: list[Field] = []
    stream = topic = None
    n = 0
    try:
        off = start
        since = MARKS[0]
        meta = None
        if dialect not in LEGACY:
            meta, off = U32.read("metadata_length", w.mv, off, end)
            fields.append(meta)
        stream, off = IDENTIFIER.read("stream_id", w.mv, off, end)
        topic, off = IDENTIFIER.read("topic_id", w.mv, off, end)
        part, off = PARTITIONING.read("partitioning", w.mv, off, end)
        fields += [stream, topic, part]
        w.problems += problems_of([stream, topic, part], since)
        if dialect in LEGACY:
            msg_at = off
            items, off = _legacy_messages(w, off, end, None)
            fields.append(_messages_field(items, msg_at, off))
            n = fields[-1].value
            _trailing(w, fields, off, end)
            return Decoded(fields, _info(stream, topic, n), w.problems)
        cf, off = U32.read("messages_count", w.mv, off, end)
        fields.append(cf)
        count = cf.value
        assert meta is not None
        if meta.value != off - start - 4:
            w.problems.append(("size", f"metadata_length is {meta.value}, the metadata takes {off - start - 4} bytes"))
        if dialect == "V":
            batches, rest, off, n = _batches(w, off, end, single=True)
            if batches:
                batches[0].name = "batch"
                fields.append(batches[0])
            if rest is not None:
                fields.append(rest)
            _count_check(w, count, n)
            _trailing(w, fields, off, end)
            return Decoded(fields, _info(stream, topic, n), w.problems)
        n = _index_and_frames(w, fields, off, end, count)
    except DecodeError as e:
        w.problems.append(("size", str(e)))
        at = fields[-1].offset + fields[-1].size if fields else start
        if at < end:
            fields.append(w.rest("rest", at, end))
    return Decoded(fields, _info(stream, topic, n), w.problems)


def _index_and_frames(w: _Walk, fields: list[Field], off: int, end: int, count: int, make: bool = True) -> int:
    """Z1/Z2/C: the index table at ``off`` (``count`` entries), then the frames, up to ``end``,
    their fields appended to ``fields`` and their problems recorded; how many messages there are.
    ``make`` False: no fields, every problem recorded the same (a findings-only run's clean test)."""
    if count * 16 > end - off:
        w.problems.append(("count", f"messages_count {count} needs a {count * 16}-byte index, "
                                    f"{end - off} bytes left"))
        fields.append(w.rest("rest", off, end))
        return 0
    # The index is checked from its numbers; its entries' fields are made when a view reads them
    # (a send of thousands of messages would otherwise make four Fields a message for nothing).
    idx_at = off
    off += count * 16
    index = list(_INDEX.iter_unpack(w.mv[idx_at:off]))
    displays: list[str] = []  # filled below, read when the entries are made
    if make:
        fields.append(LazyField("index", count, idx_at, off - idx_at, _index_entries(w.raw, idx_at, count, displays),
                                json=_index_json(index)))
    msg_at = off
    starts, tail, off = _scan(w, off, end, None)
    if make:
        fields.append(MessagesField.lazy(msg_at, off, w, 0, None, starts, tail))
    n = len(starts) + _is_message(tail)
    _count_check(w, count, n)
    displays += _check_index(w, index, _spans(starts, off, tail), msg_at)
    _trailing(w, fields, off, end)
    return n


def send_messages_clean(dialect: str, buf: bytes, start: int) -> bool:
    """Whether decode_send_messages would find nothing wrong with the SEND_MESSAGES payload
    ``buf[start:]`` of a Z1/Z2/C/V dialect, told without the metadata's Fields (ends.py checks
    them); the index and frames (V: the batch) are checked as the decode checks them. False for the
    legacy dialects (the caller then decodes). tests/test_iggy_leave_out.py holds it to the decode."""
    if dialect in LEGACY:
        return False
    end = len(buf)
    off = start + 4
    if off > end:
        return False
    off = identifier_end(None, buf, off, end)
    if off >= 0:
        off = identifier_end(None, buf, off, end)
    if off >= 0:
        off = partitioning_end(None, buf, off, end)
    if off < 0 or off + 4 > end:
        return False
    (meta,) = _U32.unpack_from(buf, start)
    (count,) = _U32.unpack_from(buf, off)
    off += 4
    if meta != off - start - 4:
        return False
    # The usual send (every message usual; the index right, V: the batch), else the check below
    # says what is wrong.
    if dialect == "V":
        if _v_all_usual(buf, off, end, False, True) == (end, count):
            return True
    elif count * 16 <= end - off:
        msg_at = off + count * 16
        starts = _all_usual(dialect, False, memoryview(buf), msg_at, end, count)
        if starts is not None and index_clean(buf, off, count, starts, end, msg_at):
            return True
    w = _Walk(dialect, buf, polled=False)
    try:
        if dialect == "V":
            _, _, off, n = _batches(w, off, end, single=True, make=False)
            _count_check(w, count, n)
            _trailing(w, [], off, end)
        else:
            _index_and_frames(w, [], off, end, count, make=False)
    except DecodeError:
        return False
    return not w.problems


def send_messages_info(dialect: str, buf: bytes, start: int) -> str:
    """decode_send_messages' Info line for a payload send_messages_clean passed, from its stream,
    topic and messages_count alone (clean: the count is what was found); a view that prints Info
    lines reads this, not the decode. tests/test_iggy_quick_info.py holds it to the decode."""
    end = len(buf)
    stream, off = IDENTIFIER.read("stream_id", buf, start + 4, end)  # type: ignore[arg-type]
    topic, off = IDENTIFIER.read("topic_id", buf, off, end)  # type: ignore[arg-type]
    (count,) = _U32.unpack_from(buf, partitioning_end(None, buf, off, end))
    return _info(stream, topic, count)


def polled_clean(dialect: str, buf: bytes, start: int) -> bool:
    """Whether decode_polled(dialect, buf, start, len(buf)) would find nothing wrong, told without
    its Fields, for the Z1/Z2/C/V dialects (False for the legacy ones: the caller then decodes):
    a findings-only run's test of a poll's answer. tests/test_iggy_leave_out.py holds it to the
    decode."""
    if dialect in LEGACY:
        return False
    end = len(buf)
    if start >= end:
        return True
    off = start + _POLLED_PREFIX.size
    if off > end:
        return False
    _, _, count = _POLLED_PREFIX.unpack_from(buf, start)
    if (_v_all_usual(buf, off, end, True, False) == (end, count) if dialect == "V"
            else _all_usual(dialect, True, memoryview(buf), off, end, count) is not None):
        return True  # the usual answer (else the scan below says what is wrong)
    w = _Walk(dialect, buf, polled=True)
    try:
        if dialect == "V":
            _, _, off, n = _batches(w, off, end, single=False, make=False)
        else:
            starts, tail, off = _scan(w, off, end, count)
            n = len(starts) + _is_message(tail)
    except DecodeError:
        return False
    _count_check(w, count, n)
    return off == end and not w.problems


_POLLED_PREFIX = struct.Struct("<IQI")  # POLLED_PREFIX: partition_id, current_offset, messages_count
assert struct.Struct("<" + "".join(f.type._st.format[1:] for f in POLLED_PREFIX.fields)).format == _POLLED_PREFIX.format


_INDEX = struct.Struct("<IIQ")  # INDEX_ENTRY's offset, position, timestamp


def _index_entries(raw: bytes, at: int, count: int, displays: list[str]) -> Any:
    """The index's entries as fields, made when first read; ``displays``: what _check_index said
    of each entry's position (the entries past the last message have nothing said)."""
    def build() -> list[Field]:
        mv = memoryview(raw)
        out: list[Field] = []
        off = at
        for i in range(count):
            kids, off = INDEX_ENTRY.read_fields(mv, off, off + 16)
            out.append(Field(f"[{i}]", kids[1].value, off - 16, 16, displays[i] if i < len(displays) else None, kids))
        return out
    return build


#: INDEX_ENTRY's field names, in the order _INDEX unpacks them.
_INDEX_NAMES = tuple(f.name for f in INDEX_ENTRY.fields)
assert struct.Struct("<" + "".join(f.type._st.format[1:] for f in INDEX_ENTRY.fields)).format == _INDEX.format


def _index_json(index: list[tuple[int, int, int]]) -> Any:
    """The index's JSON value, made from the numbers it was checked with (the entries' fields are
    integers: their JSON is their values)."""
    def make() -> list[dict[str, int]]:
        names = _INDEX_NAMES
        return [dict(zip(names, entry, strict=True)) for entry in index]
    return make


def _check_index(w: _Walk, index: list[tuple[int, int, int]], spans: list[tuple[int, int]],
                 msg_at: int) -> list[str]:
    """Index entries (offset, position, timestamp): offset and timestamp 0 (errors 4031/4032),
    position = cumulative message end (``spans``: each message's offset and end). One problem per
    kind, so a wrong table does not drown the others. Returns what to show beside each position,
    for the entries that have a message."""
    seen: set[str] = set()
    displays: list[str] = []
    for i, (o, pos, ts) in enumerate(index):
        if o and "o" not in seen:
            seen.add("o")
            w.problems.append(("value", f"index entry {i}: offset is {o}, must be 0"))
        if ts and "t" not in seen:
            seen.add("t")
            w.problems.append(("value", f"index entry {i}: timestamp is {ts}, must be 0"))
        if i < len(spans):
            want = spans[i][1] - msg_at
            displays.append("position ok" if pos == want else f"position should be {want}")
            if pos != want and "p" not in seen:
                seen.add("p")
                w.problems.append(("size", f"index entry {i}: position {pos}, message {i} ends at {want}"))
    return displays


def decode_polled(dialect: str, buf: bytes | memoryview, start: int, end: int) -> Decoded:
    """The POLL_MESSAGES (100) response payload ``buf[start:end]`` (V: the reply body)."""
    w = _Walk(dialect, buf, polled=True)
    end = max(start, min(end, len(w.mv)))
    if start >= end:
        return Decoded([], _polled_info(0))
    fields: list[Field] = []
    n = 0
    try:
        pf, off = w.read(POLLED_PREFIX, start, end)
        fields += pf
        count = pf[2].value
        if dialect in LEGACY:
            items, off = _legacy_messages(w, off, end, count)
            fields.append(_messages_field(items, start + 16, off))
            n = fields[-1].value
        elif dialect == "V":
            at = off
            batches, rest, off, n = _batches(w, off, end, single=False)
            fields.append(Field("batches", len(batches), at, off - at, None, batches, True))
            if rest is not None:
                fields.append(rest)
        else:
            msgs, off = _frames(w, off, end, count)
            fields.append(msgs)
            n = msgs.value
        _count_check(w, count, n)
        _trailing(w, fields, off, end)
    except DecodeError as e:
        w.problems.append(("size", str(e)))
        fields.append(w.rest("rest", start, end))
    return Decoded(fields, _polled_info(n), w.problems)


def polled_info(buf: bytes, start: int) -> str:
    """decode_polled's Info for an answer polled_clean passed (its count is what was found)."""
    return _polled_info(_POLLED_PREFIX.unpack_from(buf, start)[2] if len(buf) > start else 0)


def _polled_info(n: int) -> str:
    return f"messages={n}"


def _flatten_messages(fields: Sequence[Field]) -> list[Field]:
    """The message Fields of a decode, in order, batches flattened."""
    out: list[Field] = []
    for f in fields:
        if f.name == "messages":
            out += [m for m in f.children or () if m.name.startswith("[")]
        elif f.name == "batch":
            out += _flatten_messages(f.children or ())
        elif f.name == "batches":
            for b in f.children or ():
                out += _flatten_messages(b.children or ())
    return out


def messages_of(fields: Sequence[Field]) -> list[dict[str, Any]]:
    """Plain dicts of every message in a decode (in order, batches flattened)."""
    return [_message_dict(m) for m in _flatten_messages(fields)]


def _message_dict(m: Field) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k in m.children or ():
        if k.name == "headers":
            d["headers"] = [_header_dict(h) for h in k.children or () if h.name.startswith("[")]
        elif k.name in ("id", "payload", "offset", "timestamp", "origin_timestamp", "state", "checksum"):
            d[k.name] = k.value
    return d


def _header_dict(h: Field) -> dict[str, Any]:
    return {k.name: k.value for k in h.children or ()}


# ------------------------------------------------------------------------------ encoders (tests, synthetic captures)


def encode_frame(dialect: str, m: Mapping[str, Any], *, polled: bool, checksum: bool | None = None,
                 base: tuple[int, int] | None = None, index: int = 0) -> bytes:
    """One Z1/Z2/C/V frame. ``checksum``: compute it (default: when polled, and always in V),
    else write ``m.get("checksum", 0)``. ``base`` (V): the batch's (base_offset, origin_timestamp)."""
    payload = bytes(m.get("payload", b""))
    hdrs = encode_headers(dialect, m.get("headers"))
    fields: dict[str, Any] = {
        "checksum": 0, "id": m.get("id", 0), "user_headers_length": m.get("user_headers_length", len(hdrs)),
        "payload_length": m.get("payload_length", len(payload)), "reserved": m.get("reserved", 0),
    }
    if dialect == "V":
        b = base or (0, 0)
        fields["offset_delta"] = m.get("offset", b[0] + index) - b[0]
        fields["timestamp_delta"] = m.get("origin_timestamp", b[1]) - b[1]
    else:
        fields["offset"] = m.get("offset", 0)
        fields["timestamp"] = m.get("timestamp", 0)
        fields["origin_timestamp"] = m.get("origin_timestamp", 0)
    frame = bytearray(FRAME_HEADER[dialect].write(fields) + payload + hdrs)
    if checksum is None:
        checksum = polled or dialect == "V"
    ck = frame_checksum(dialect, frame) if checksum and "checksum" not in m else m.get("checksum", 0)
    frame[0:8] = _U64.pack(ck)
    return bytes(frame)


def encode_legacy_message(m: Mapping[str, Any], *, polled: bool) -> bytes:
    payload = bytes(m.get("payload", b""))
    hdrs = encode_headers("L1", m.get("headers"))
    if polled:
        ck = m.get("checksum", _crc32(payload))
        head = LEGACY_POLLED.write({"offset": m.get("offset", 0), "state": m.get("state", 1),
                                    "timestamp": m.get("timestamp", 0), "id": m.get("id", 0), "checksum": ck})
    else:
        head = LEGACY_SENT.write({"id": m.get("id", 0)})
    return head + _U32.pack(len(hdrs)) + hdrs + _U32.pack(m.get("payload_length", len(payload))) + payload


def encode_messages(dialect: str, messages: Sequence[Mapping[str, Any]], *, polled: bool = False) -> bytes:
    """The messages section (frames back to back; no index, prefix or batch header)."""
    if dialect in LEGACY:
        return b"".join(encode_legacy_message(m, polled=polled) for m in messages)
    if dialect == "V":
        return encode_batch(messages)
    return b"".join(encode_frame(dialect, m, polled=polled) for m in messages)


def encode_batch(messages: Sequence[Mapping[str, Any]], *, partition_id: int = 0, base_offset: int | None = None,
                 base_timestamp: int = 0, origin_timestamp: int | None = None, checksum: bool = True,
                 message_count: int | None = None) -> bytes:
    """A V batch: the 256-byte header (checksum computed) and 48-byte-header frames."""
    if base_offset is None:
        base_offset = messages[0].get("offset", 0) if messages else 0
    if origin_timestamp is None:
        origin_timestamp = min((m.get("origin_timestamp", 0) for m in messages), default=0)
    frames = [encode_frame("V", m, polled=False, base=(base_offset, origin_timestamp), index=i)
              for i, m in enumerate(messages)]
    blob = b"".join(frames)
    count = len(messages) if message_count is None else message_count
    blen = BATCH_HEADER_SIZE + len(blob)
    ck = 0
    if checksum:
        h = xxhash.xxh3_64()
        h.update(_BATCH_META.pack(partition_id, base_offset, base_timestamp, origin_timestamp, blen))
        h.update(_U32.pack(count))
        for f in frames:
            h.update(f[:8])
        ck = h.intdigest()
    head = BATCH_HEADER.write({"partition_id": partition_id, "base_offset": base_offset,
                               "base_timestamp": base_timestamp, "origin_timestamp": origin_timestamp,
                               "batch_length": blen, "batch_checksum": ck, "message_count": count,
                               "reserved": bytes(204)})
    return head + blob


def encode_send_messages(dialect: str, stream: Any, topic: Any, messages: Sequence[Mapping[str, Any]],
                         partitioning: Any = None, *, messages_count: int | None = None) -> bytes:
    """A whole SEND_MESSAGES payload (V: the request body) with index table and batch as the dialect has."""
    meta = IDENTIFIER.write(stream) + IDENTIFIER.write(topic) + PARTITIONING.write(partitioning)
    if dialect in LEGACY:
        return meta + encode_messages(dialect, messages)
    count = len(messages) if messages_count is None else messages_count
    head = _U32.pack(len(meta) + 4) + meta + _U32.pack(count)
    if dialect == "V":
        return head + encode_batch(messages)
    frames = [encode_frame(dialect, m, polled=False) for m in messages]
    index = bytearray()
    pos = 0
    for f in frames:
        pos += len(f)
        index += INDEX_ENTRY.write({"offset": 0, "position": pos, "timestamp": 0})
    return head + bytes(index) + b"".join(frames)


def encode_polled(dialect: str, messages: Sequence[Mapping[str, Any]], *, partition_id: int = 0,
                  current_offset: int | None = None, messages_count: int | None = None) -> bytes:
    """A POLL_MESSAGES response payload (V: the reply body) with checksums computed."""
    if current_offset is None:
        current_offset = max((m.get("offset", 0) for m in messages), default=0)
    count = len(messages) if messages_count is None else messages_count
    head = POLLED_PREFIX.write({"partition_id": partition_id, "current_offset": current_offset,
                                "messages_count": count})
    if dialect == "V":
        return head + (encode_batch(messages, partition_id=partition_id) if messages else b"")
    return head + encode_messages(dialect, messages, polled=True)
