"""The Osiris chunk carried by Deliver, and the message entries shared with Publish.

Hot path: a Deliver frame holds one chunk of possibly thousands of records. The header is read
with one ``struct.unpack_from``; each record becomes one small :class:`RecordField` whose AMQP 1.0
section tree is only built when someone looks at it (renderers, JSON output, tests).
"""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime
from typing import Any

from analyzer.api import Field
from analyzer.jsonout import field_json, fields_json
from dissectors.kit.lazy import BASE_CHILDREN, LazyChildren, LazyField
from dissectors.rabbitmq_stream import amqp, amqp_json
from dissectors.rabbitmq_stream.codecs import COMPRESSION, gzip_compress
from dissectors.rabbitmq_stream.sub_batch import (
    DRAFT_SUB_BATCH,
    SUB_BATCH,
    U32,
    ChunkProblem,
    check_records,
    scan_entries,
    seen_clean,
    sub_batch_data,
    sub_batch_head,
    sub_batch_records,
)

#: Magic/version, chunk type, entries, records, timestamp, epoch, first offset, CRC, data length,
#: trailer length, Bloom size, 3 reserved bytes = 48 bytes.
HEADER = struct.Struct(">BBHIqQQIIIB3s")
#: The 2020 draft chunk: magic/version, entries, records, epoch, first offset, CRC, data length (31 bytes).
DRAFT_HEADER = struct.Struct(">BHIQQiI")
#: The same with the timestamp servers of mid-2020 already wrote after NumRecords (39 bytes).
DRAFT_HEADER_TS = struct.Struct(">BHIqQQiI")
CHUNK_TYPES = {0: "user data", 1: "tracking delta", 2: "tracking snapshot"}

# ------------------------------------------------------------------------------ records


class RecordField(LazyChildren):
    """One message of a chunk or Publish, with its section tree built on first access.

    ``value`` is the record's offset (Deliver) or None; the message bytes stay in the frame buffer
    until ``children`` is read.
    """

    __slots__ = ("_buf", "_at", "_len", "_base", "_extra")

    def __init__(self, name: str, value: Any, offset: int, size: int, buf: bytes, at: int, length: int,
                 base: int, extra: list[Field] | None = None) -> None:
        self.name = name
        self.value = value
        self.offset = offset
        self.size = size
        self.display = None
        self.is_list = False
        BASE_CHILDREN.__set__(self, None)
        self._buf = buf
        self._at = at
        self._len = length
        self._base = base
        self._extra = extra

    @property
    def message(self) -> bytes:
        return bytes(self._buf[self._at:self._at + self._len])

    def _build(self) -> list[Field]:
        at, n, base = self._at, self._len, self._base
        wire = base >= 0
        kids = list(self._extra or ())
        if self.value is not None and self.name == "record":
            kids.insert(0, Field("offset", self.value))
        kids.append(Field("length", n, at - 4 + base if wire else -1, 4 if wire else 0))
        sections = amqp.message_fields(self._buf, at, at + n, at + base if wire else -1)
        if sections is None:
            kids.append(Field("message", bytes(self._buf[at:at + n]), at + base if wire else -1, n if wire else 0))
        else:
            kids.append(Field("amqp", None, at + base if wire else -1, n if wire else 0, "AMQP 1.0 message",
                              sections))
        return kids

    def json_value(self) -> dict[str, Any] | None:
        """The record's JSON value without its field tree (see :func:`analyzer.jsonout.field_json`);
        None: the tree's way (a message that is not AMQP 1.0, or a tree already built)."""
        if BASE_CHILDREN.__get__(self) is not None:
            return None
        at, n = self._at, self._len
        sections = amqp_json.message_json(self._buf, at, at + n)
        if sections is None:
            return None
        value = self.value
        offset = value is not None and self.name == "record"
        if self._extra is None and (type(value) is int or not offset):  # JSON as they are
            return {"offset": value, "length": n, "amqp": sections} if offset else {"length": n, "amqp": sections}
        kids = list(self._extra or ())
        if offset:
            kids.insert(0, Field("offset", value))
        kids.append(Field("length", n))
        if any(k.name == "amqp" for k in kids):  # before anything is converted (and cut): the tree's way
            return None
        out = fields_json(kids)
        out["amqp"] = sections
        return out


class RecordsField(LazyChildren):
    """The records of a sub-batch (``value`` whole ones from ``start`` in ``data``), made as
    RecordFields on first access; its JSON value is theirs, made in one loop without them (a
    Deliver of sub-batches carries thousands). ``dbase``: what turns a position in ``data`` into
    a frame offset (-1: decompressed, not on the wire); ``first``: the first record's offset (None
    in a Publish)."""

    __slots__ = ("_data", "_start", "_dbase", "_first")

    def __init__(self, value: int, offset: int, size: int, data: bytes, start: int, dbase: int,
                 first: int | None) -> None:
        self.name = "records"
        self.value = value
        self.offset = offset
        self.size = size
        self.display = None
        self.is_list = True
        BASE_CHILDREN.__set__(self, None)
        self._data, self._start, self._dbase, self._first = data, start, dbase, first

    def _record(self, i: int, pos: int, n: int) -> RecordField:
        """Record ``i``, of ``n`` bytes after its length prefix at ``pos``."""
        dbase, first = self._dbase, self._first
        wire = dbase >= 0
        return RecordField("record", None if first is None else first + i, pos + dbase if wire else -1,
                           4 + n if wire else 0, self._data, pos + 4, n, dbase)

    def _build(self) -> list[Field]:
        data = self._data
        unpack = U32.unpack_from
        out: list[Field] = []
        pos = self._start
        for i in range(self.value):
            (n,) = unpack(data, pos)
            out.append(self._record(i, pos, n))
            pos += 4 + n
        return out

    def json_value(self) -> list[Any] | None:
        """What field_json makes of the records (RecordField.json_value's dicts; the tree's JSON
        for a record that is no AMQP 1.0 message); None once the records are built."""
        if BASE_CHILDREN.__get__(self) is not None:
            return None
        data = self._data
        if type(data) is not bytes:  # records_json takes bytes (compiled); none other is met here
            data = bytes(data)
        return amqp_json.records_json(data, self._start, self.value, self._first,
                                      lambda i, pos, n: field_json(self._record(i, pos, n), "records"))


def decode_entries(buf: bytes, pos: int, end: int, base: int, n_entries: int, first_offset: int | None,
                   problems: ChunkProblem, draft: bool = False, first_index: int = 0,
                   lazy: bool = False) -> tuple[list[Field], int, int]:
    """Entries in ``buf[pos:end]``; returns (entry fields, records seen, end position).

    ``base`` turns buffer positions into frame-relative offsets (frame start = ``-base``).
    Records get offsets ``first_offset + i`` when ``first_offset`` is known (Deliver).
    With ``lazy``, a sub-batch's records are checked now and their list is made when first read
    (a Publish of sub-batches is decoded eagerly; only a view that shows it needs its records).
    Only for callers that give up the frame's tree when ``problems`` has errors or limits: the
    list is made again with a budget of its own, which is then never the shortfall.
    """
    out: list[Field] = []
    append = out.append
    unpack = U32.unpack_from
    sub = DRAFT_SUB_BATCH if draft else SUB_BATCH
    rec = 0
    i = first_index
    n_entries += first_index
    while pos < end and i < n_entries:
        i += 1
        b0 = buf[pos]
        if not b0 & 0x80:
            if pos + 4 > end:
                problems.errors.append(f"entry {i - 1}: length cut off")
                break
            (n,) = unpack(buf, pos)
            if pos + 4 + n > end:
                problems.errors.append(f"entry {i - 1}: message length {n} overruns the data by "
                                       f"{pos + 4 + n - end} bytes")
                break
            off = None if first_offset is None else first_offset + rec
            append(RecordField("record", off, pos - base, 4 + n, buf, pos + 4, n, -base))
            rec += 1
            pos += 4 + n
            continue
        head = sub_batch_head(buf, pos, end, draft, problems, i - 1)
        if head is None:
            break
        flags, count, ulen, dlen = head
        body = pos + sub.size
        comp = (flags >> 4) & 7
        records: list[Field] | RecordsField
        if not lazy:
            records = _records_node(buf, body, dlen, comp, count, ulen, base,
                                    None if first_offset is None else first_offset + rec, problems, i - 1)
            got = records.value if type(records) is RecordsField else 0
        elif comp and seen_clean(bytes(buf[pos:body + dlen]), ulen, problems):  # a Publish the checks just read
            records, got = [], count
        else:
            records, got = sub_batch_records(buf, body, dlen, comp, count, ulen, base, problems, i - 1)
        f_off = pos - base
        kids = [
            Field("compression", comp, f_off, 1, COMPRESSION[comp]),
            Field("record_count", count, f_off + 1, 2),
        ]
        if ulen is not None:
            kids.append(Field("uncompressed_length", ulen, f_off + 3, 4))
        kids.append(Field("data_length", dlen, f_off + sub.size - 4, 4))
        if type(records) is RecordsField:
            kids.append(records)
        elif lazy and not records:  # checked, nothing built (else: shown compressed)
            kids.append(_records_later(buf, body, dlen, comp, count, ulen, base, first_offset, rec, i - 1, got))
        else:
            kids.append(Field("records", got, body - base, dlen, None, records, True))  # type: ignore[arg-type]
        append(Field("sub_batch", count, f_off, sub.size + dlen, f"{count} records, {COMPRESSION[comp]}", kids))
        rec += count
        pos = body + dlen
    return out, rec, pos


def _records_later(buf: bytes, body: int, dlen: int, comp: int, count: int, ulen: int | None, base: int,
                   first_offset: int | None, rec: int, entry: int, whole: int) -> LazyField:
    """The "records" node of a sub-batch checked already (``whole`` records whole): decompressed
    again (with a budget of its own) when a view asks for the records or their JSON."""
    first = None if first_offset is None else first_offset + rec

    def records() -> RecordsField | list[Field]:
        return _records_node(buf, body, dlen, comp, count, ulen, base, first, ChunkProblem(), entry)

    def build() -> list[Field]:
        got = records()
        return got if type(got) is list else got.children or []  # type: ignore[union-attr]

    def json() -> Any:
        got = records()
        return None if type(got) is list else got.json_value()  # type: ignore[union-attr]
    return LazyField("records", whole, body - base, dlen, build, json=json)


def _records_node(buf: bytes, body: int, dlen: int, comp: int, count: int, ulen: int | None, base: int,
                  first: int | None, problems: ChunkProblem, entry: int) -> RecordsField | list[Field]:
    """A sub-batch's records checked (problems recorded) as one node, its records made when
    read; or the one "compressed" field shown when they cannot be decompressed."""
    got = sub_batch_data(buf, body, dlen, comp, ulen, base, problems, entry)
    if type(got) is list:
        return got
    data, dbase, start, stop = got  # type: ignore[misc]
    whole = check_records(data, start, stop, count, problems, entry)
    return RecordsField(whole, body - base, dlen, data, start, dbase, first)


def ts_display(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return "out of range"


class ChunkInfo:
    """What the connection needs to know about one decoded chunk."""

    __slots__ = ("first_offset", "records", "entries", "chunk_type", "crc_ok", "header_len")

    def __init__(self) -> None:
        self.first_offset = 0
        self.records = 0
        self.entries = 0
        self.chunk_type = 0
        self.crc_ok: bool | None = None
        self.header_len = 48


def decode_chunk(buf: bytes, pos: int, end: int, problems: ChunkProblem, info: ChunkInfo,
                 draft: bool = False) -> list[Field]:
    """The chunk in ``buf[pos:end]`` (``pos`` is frame-relative: buf is the whole frame)."""
    if draft:
        return _decode_draft_chunk(buf, pos, end, problems, info)
    if pos + 48 > end:
        problems.errors.append(f"chunk header needs 48 bytes, {end - pos} left")
        return [Field("chunk_bytes", bytes(buf[pos:end]), pos, end - pos)]
    (magic, ctype, n_entries, n_records, ts, epoch, first, crc, dlen, tlen, bloom,
     reserved) = HEADER.unpack_from(buf, pos)
    info.first_offset, info.records, info.entries, info.chunk_type = first, n_records, n_entries, ctype
    data = pos + 48
    f = [
        Field("magic_version", magic, pos, 1, f"magic {magic >> 4:#x}, version {magic & 15}"),
        Field("chunk_type", ctype, pos + 1, 1, CHUNK_TYPES.get(ctype, f"unknown ({ctype})")),
        Field("num_entries", n_entries, pos + 2, 2),
        Field("num_records", n_records, pos + 4, 4),
        Field("timestamp", ts, pos + 8, 8, ts_display(ts)),
        Field("epoch", epoch, pos + 16, 8),
        Field("chunk_first_offset", first, pos + 24, 8),
    ]
    if magic != 0x50:
        problems.errors.append(f"chunk magic/version is {magic:#04x}, expected 0x50")
    if ctype not in CHUNK_TYPES:
        problems.errors.append(f"unknown chunk type {ctype}")
    crc_field = Field("crc", crc, pos + 32, 4)
    f.append(crc_field)
    f += [
        Field("data_length", dlen, pos + 36, 4),
        Field("trailer_length", tlen, pos + 40, 4),
        Field("bloom_size", bloom, pos + 44, 1),
        Field("reserved", int.from_bytes(reserved, "big"), pos + 45, 3),
    ]
    if data + dlen > end:
        problems.errors.append(f"chunk data length {dlen} overruns the frame by {data + dlen - end} bytes")
        crc_field.display = "not checked (data cut off)"
        dend = end
    else:
        dend = data + dlen
        computed = zlib.crc32(memoryview(buf)[data:dend])
        info.crc_ok = computed == crc
        if info.crc_ok:
            crc_field.display = "verified"
        else:
            crc_field.display = f"mismatch: data has {computed:#010x}"
            problems.crc_mismatch = (crc, computed)
    before = len(problems.errors)
    n_seen, recs, stop = scan_entries(buf, data, dend, n_entries, problems)
    if len(problems.errors) == before:  # the entries themselves parsed: compare them with the header
        if n_seen != n_entries:
            problems.errors.append(f"chunk says {n_entries} entries, data holds {n_seen}")
        elif stop != dend:
            problems.errors.append(f"{dend - stop} bytes left in the data section after {n_entries} entries")
        elif recs != n_records and not problems.notes and not problems.limits:
            problems.errors.append(f"chunk says {n_records} records, entries hold {recs}")
    f.append(LazyField("entries", n_seen, data, dend - data,
                       lambda: decode_entries(buf, data, dend, 0, n_entries, first, ChunkProblem())[0]))
    if dend < end:
        trailer = bytes(buf[dend:end])
        disp = None if len(trailer) == tlen else f"{len(trailer)} bytes, header says {tlen}"
        f.append(Field("trailer", trailer, dend, end - dend, disp))
        if disp is not None:
            problems.errors.append(f"{end - dend} bytes after the chunk data, trailer length is {tlen}")
    return f


def clean_chunk(buf: bytes, pos: int, end: int) -> bool:
    """Whether decode_chunk would find nothing wrong with today's chunk in ``buf[pos:end]``
    (header, CRC, entries, trailer); when not, decode_chunk says what is wrong. The hot path of
    Deliver checks a chunk with it without making its Fields (tests/test_rabbitmq_stream_hotpath.py
    holds the two to each other)."""
    if pos + 48 > end:
        return False
    magic, ctype, n_entries, n_records, _ts, _epoch, _first, crc, dlen, tlen, _bloom, _reserved = \
        HEADER.unpack_from(buf, pos)
    data = pos + 48
    dend = data + dlen
    if magic != 0x50 or ctype not in CHUNK_TYPES or dend > end or (dend < end and end - dend != tlen):
        return False
    if zlib.crc32(memoryview(buf)[data:dend]) != crc:
        return False
    problems = ChunkProblem()
    n_seen, recs, stop = scan_entries(buf, data, dend, n_entries, problems)
    return not (problems.errors or problems.notes or problems.limits or n_seen != n_entries or stop != dend
                or recs != n_records)


def _decode_draft_chunk(buf: bytes, pos: int, end: int, problems: ChunkProblem, info: ChunkInfo) -> list[Field]:
    left = end - pos
    st = DRAFT_HEADER
    if left >= DRAFT_HEADER_TS.size:
        (n,) = U32.unpack_from(buf, pos + DRAFT_HEADER_TS.size - 4)
        if DRAFT_HEADER_TS.size + n == left:
            st = DRAFT_HEADER_TS
    if left < st.size:
        problems.errors.append(f"chunk header needs {st.size} bytes, {left} left")
        return [Field("chunk_bytes", bytes(buf[pos:end]), pos, left)]
    f: list[Field] = []
    if st is DRAFT_HEADER_TS:
        magic, n_entries, n_records, ts, epoch, first, crc, dlen = st.unpack_from(buf, pos)
    else:
        magic, n_entries, n_records, epoch, first, crc, dlen = st.unpack_from(buf, pos)
        ts = None
    info.first_offset, info.records, info.entries, info.header_len = first, n_records, n_entries, st.size
    f.append(Field("magic_version", magic, pos, 1))
    f.append(Field("num_entries", n_entries, pos + 1, 2))
    f.append(Field("num_records", n_records, pos + 3, 4))
    at = pos + 7
    if ts is not None:
        f.append(Field("timestamp", ts, at, 8, ts_display(ts)))
        at += 8
    f.append(Field("epoch", epoch, at, 8))
    f.append(Field("chunk_first_offset", first, at + 8, 8))
    crc_field = Field("crc", crc, at + 16, 4)
    f.append(crc_field)
    f.append(Field("data_length", dlen, at + 20, 4))
    data = pos + st.size
    dend = min(end, data + dlen)
    if data + dlen > end:
        problems.errors.append(f"chunk data length {dlen} overruns the frame by {data + dlen - end} bytes")
    else:
        computed = zlib.crc32(memoryview(buf)[data:dend])
        info.crc_ok = computed == (crc & 0xFFFFFFFF)
        crc_field.display = "verified" if info.crc_ok else f"mismatch: data has {computed:#010x}"
        if not info.crc_ok:
            problems.crc_mismatch = (crc & 0xFFFFFFFF, computed)
    entries, _recs, _stop = decode_entries(buf, data, dend, 0, n_entries, first, problems, draft=True)
    f.append(Field("entries", len(entries), data, dend - data, None, entries, True))
    return f


# ------------------------------------------------------------------------------ encoding (tests, bench)
def simple_entry(message: bytes) -> bytes:
    return U32.pack(len(message)) + message


def sub_batch_entry(messages: list[bytes], compression: int = 0) -> bytes:
    raw = b"".join(simple_entry(m) for m in messages)
    if compression == 0:
        data = raw
    elif compression == 1:
        data = gzip_compress(raw)
    elif compression == 2:
        import snappy  # type: ignore[import-not-found]  # framed, as the Java client writes it

        data = snappy.StreamCompressor().compress(raw)
    elif compression == 3:
        import lz4.frame  # type: ignore[import-not-found]

        data = lz4.frame.compress(raw)
    elif compression == 4:
        import zstandard  # type: ignore[import-not-found]

        data = zstandard.ZstdCompressor().compress(raw)
    else:
        raise ValueError(f"the test encoder has no codec {compression}")
    return SUB_BATCH.pack(0x80 | compression << 4, len(messages), len(raw), len(data)) + data


def build_chunk(entries: list[bytes], records: int, first_offset: int, *, timestamp: int = 1_700_000_000_000,
                epoch: int = 1, chunk_type: int = 0, crc: int | None = None, trailer: bytes = b"",
                bloom_size: int = 0, magic: int = 0x50, num_entries: int | None = None) -> bytes:
    data = b"".join(entries)
    c = zlib.crc32(data) if crc is None else crc
    head = HEADER.pack(magic, chunk_type, len(entries) if num_entries is None else num_entries, records, timestamp,
                       epoch, first_offset, c, len(data), len(trailer), bloom_size, b"\0\0\0")
    return head + data + trailer
