"""The Osiris chunk carried by Deliver, and the message entries shared with Publish.

Hot path: a Deliver frame holds one chunk of possibly thousands of records. The header is read
with one ``struct.unpack_from``; each record becomes one small :class:`RecordField` whose AMQP 1.0
section tree is only built when someone looks at it (renderers, JSON output, tests).
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from analyzer.api import Field
from analyzer.jsonout import field_json, fields_json
from dissectors.kit import inflate
from dissectors.kit.lazy import BASE_CHILDREN, LazyChildren, LazyField
from dissectors.kit.memo import OctetMemo, remember
from dissectors.rabbitmq_stream import amqp, amqp_json

#: Magic/version, chunk type, entries, records, timestamp, epoch, first offset, CRC, data length,
#: trailer length, Bloom size, 3 reserved bytes = 48 bytes.
HEADER = struct.Struct(">BBHIqQQIIIB3s")
#: The 2020 draft chunk: magic/version, entries, records, epoch, first offset, CRC, data length (31 bytes).
DRAFT_HEADER = struct.Struct(">BHIQQiI")
#: The same with the timestamp servers of mid-2020 already wrote after NumRecords (39 bytes).
DRAFT_HEADER_TS = struct.Struct(">BHIqQQiI")
SUB_BATCH = struct.Struct(">BHII")
DRAFT_SUB_BATCH = struct.Struct(">BHI")
U32 = struct.Struct(">I")

CHUNK_TYPES = {0: "user data", 1: "tracking delta", 2: "tracking snapshot"}
COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd", 5: "reserved", 6: "reserved",
               7: "user-defined"}
#: Bytes a sub-batch may expand to beyond its declared uncompressed length before decoding stops
#: (reported either way: a length that does not match is a finding).
TOLERANCE = 1024
#: Codec of each compression code the kit decodes (:mod:`dissectors.kit.inflate`).
CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


# ------------------------------------------------------------------------------ codecs
def _none(data: bytes, limit: int) -> bytes:
    return data[:limit]


def _codec(name: str) -> Callable[[bytes, int], bytes] | None:
    """At most ``limit`` bytes of ``data`` decompressed (None: the codec's library is missing)."""
    if not inflate.available(name):
        return None
    return functools.partial(inflate.inflate, name)  # not a lambda: a Python call less per sub-batch


class _Decompressors(dict):  # type: ignore[type-arg]
    """Compression code -> decompressor (None: the codec's library is missing), each looked up when
    first needed: importing snappy, lz4 and zstandard costs 30 ms, on every start otherwise."""

    def __missing__(self, code: int) -> Callable[[bytes, int], bytes] | None:
        dec = self[code] = _codec(CODECS[code])
        return dec


DECOMPRESSORS: dict[int, Callable[[bytes, int], bytes] | None] = _Decompressors({0: _none})


def gzip_compress(data: bytes) -> bytes:
    import gzip  # the encoder's alone: kept off the start of every run

    # mtime 0: the same bytes every time (gzip's header otherwise holds the current second, and a
    # test that encodes one session twice saw two chunk CRCs when a second turned between them).
    return gzip.compress(data, mtime=0)


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


class ChunkProblem:
    """Problems met while decoding entries (the connection turns them into findings), and what
    the frame may still expand to: one per frame, so that many sub-batches together stay under
    the decompression limit too."""

    __slots__ = ("crc_mismatch", "errors", "notes", "limits", "budget")

    def __init__(self) -> None:
        self.crc_mismatch: tuple[int, int] | None = None
        self.errors: list[str] = []
        self.notes: list[str] = []
        #: Sub-batches not decoded because they would expand past the decompression limit.
        self.limits: list[str] = []
        #: Bytes the frame may still expand to; -1 until its first compressed sub-batch asks for
        #: the limit (most frames have none).
        self.budget = -1

    def room(self) -> int:
        """Bytes the frame's sub-batches may still expand to (the limit, at the first ask)."""
        if self.budget < 0:
            self.budget = inflate.limit()
        return self.budget

    def said(self) -> int:
        """How many problems were recorded so far (budget aside)."""
        return len(self.errors) + len(self.notes) + len(self.limits) + (self.crc_mismatch is not None)


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
        head = _sub_batch_head(buf, pos, end, draft, problems, i - 1)
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
        elif comp and _seen_clean(bytes(buf[pos:body + dlen]), ulen, problems):  # a Publish the checks just read
            records, got = [], count
        else:
            records, got = _sub_batch_records(buf, body, dlen, comp, count, ulen, base, problems, i - 1)
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


def _sub_batch_head(buf: bytes, pos: int, end: int, draft: bool, problems: ChunkProblem,
                    entry: int) -> tuple[int, int, int | None, int] | None:
    """(flags, record count, uncompressed length or None in the draft, data length) of the
    sub-batch entry at ``pos``; None (said in ``problems``) when its header or data does not fit."""
    sub = DRAFT_SUB_BATCH if draft else SUB_BATCH
    body = pos + sub.size
    if body > end:
        problems.errors.append(f"entry {entry}: sub-batch header cut off")
        return None
    if draft:
        flags, count, dlen = sub.unpack_from(buf, pos)
        ulen = None
    else:
        flags, count, ulen, dlen = sub.unpack_from(buf, pos)
    if body + dlen > end:
        problems.errors.append(f"entry {entry}: sub-batch data length {dlen} overruns the data by "
                               f"{body + dlen - end} bytes")
        return None
    return flags, count, ulen, dlen


def check_sub_batch(buf: bytes, pos: int, end: int, problems: ChunkProblem, entry: int = 0) -> tuple[int, int]:
    """What decode_entries checks of the one (today's) sub-batch entry at ``pos`` without building
    anything: (its end, its record count), or (``pos``, 0) when its header or data does not fit
    (said in ``problems``)."""
    head = _sub_batch_head(buf, pos, end, False, problems, entry)
    if head is None:
        return pos, 0
    flags, count, ulen, dlen = head
    body = pos + SUB_BATCH.size
    comp = (flags >> 4) & 7
    if not comp:
        _sub_batch_records(buf, body, dlen, 0, count, ulen, 0, problems, entry)
        return body + dlen, count
    key = bytes(buf[pos:body + dlen])
    if _seen_clean(key, ulen, problems):
        return body + dlen, count
    said = problems.said()
    _sub_batch_records(buf, body, dlen, comp, count, ulen, 0, problems, entry)
    if problems.said() == said:
        _CLEAN_SUB_BATCHES.remember(key, True)
    return body + dlen, count


def _seen_clean(key: bytes, ulen: int | None, problems: ChunkProblem) -> bool:
    """Whether the compressed sub-batch entry ``key`` (its header and data octets) was found
    clean already, its decompression budget then spent. A consumer receives the sub-batches a
    publisher sent, and a view decodes the Publish the checks just read: the same octets
    decompress to the same ``ulen`` bytes and records, so only the frame's budget is spent again,
    when it has room for them (else the full check says what is wrong)."""
    if ulen is None or key not in _CLEAN_SUB_BATCHES:
        return False
    room = problems.room()
    if ulen > room:
        return False
    problems.budget = room - ulen
    return True


#: The compressed sub-batches (header and data) check_sub_batch found clean, the latest 8 MiB of
#: them: a consumer reading at most that far behind its publishers has each checked once.
_CLEAN_SUB_BATCHES: OctetMemo = OctetMemo(8 << 20)


def scan_entries(buf: bytes, pos: int, end: int, n_entries: int, problems: ChunkProblem) -> tuple[int, int, int]:
    """Check today's entries without building Fields: returns (entries, records, end position).

    The hot path of Deliver (the draft's chunks are decoded whole): simple entries are only
    measured; sub-batches (they may fail to decompress) get decode_entries' checks through
    check_sub_batch, so their problems are found now.
    """
    unpack = U32.unpack_from
    i = rec = 0
    while pos < end and i < n_entries:
        if buf[pos] & 0x80:
            new, r = check_sub_batch(buf, pos, end, problems, i)
            if new == pos:  # the sub-batch's header or data did not fit (said in problems)
                break
            i += 1
            rec += r
            pos = new
            continue
        if pos + 4 > end:
            problems.errors.append(f"entry {i}: length cut off")
            break
        nxt = pos + 4 + unpack(buf, pos)[0]
        if nxt > end:
            problems.errors.append(f"entry {i}: message length {nxt - pos - 4} overruns the data by {nxt - end} bytes")
            break
        pos = nxt
        rec += 1
        i += 1
    return i, rec, pos


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
    got = _sub_batch_data(buf, body, dlen, comp, ulen, base, problems, entry)
    if type(got) is list:
        return got
    data, dbase, start, stop = got  # type: ignore[misc]
    whole = _check_records(data, start, stop, count, problems, entry)
    return RecordsField(whole, body - base, dlen, data, start, dbase, first)


def _sub_batch_records(buf: bytes, body: int, dlen: int, comp: int, count: int, ulen: int | None, base: int,
                       problems: ChunkProblem, entry: int) -> tuple[list[Field], int]:
    """A sub-batch's records checked (problems recorded), none made: ([], how many are whole), or
    the one "compressed" field shown when they cannot be decompressed, and 0."""
    got = _sub_batch_data(buf, body, dlen, comp, ulen, base, problems, entry)
    if type(got) is list:
        return got, 0
    data, _dbase, start, stop = got  # type: ignore[misc]
    return [], _check_records(data, start, stop, count, problems, entry)


def _sub_batch_data(buf: bytes, body: int, dlen: int, comp: int, ulen: int | None, base: int,
                    problems: ChunkProblem, entry: int) -> tuple[bytes, int, int, int] | list[Field]:
    """(data, dbase, start, stop) of a sub-batch's records (decompressed when they are; ``dbase``
    -1: not on the wire), or the one "compressed" field shown when they cannot be decoded."""
    if comp == 0:
        return buf, -base, body, body + dlen
    dec = DECOMPRESSORS[comp] if comp in CODECS else None
    if dec is None:
        problems.notes.append(f"entry {entry}: {COMPRESSION[comp]} sub-batch shown compressed "
                              f"(no decoder available)")
        return [Field("compressed", bytes(buf[body:body + dlen]), body - base, dlen)]
    data = _inflate(dec, bytes(buf[body:body + dlen]), comp, ulen, problems, entry)
    if data is None:
        return [Field("compressed", bytes(buf[body:body + dlen]), body - base, dlen)]
    return data, -1, 0, len(data)


def _check_records(data: bytes, start: int, stop: int, count: int, problems: ChunkProblem, entry: int) -> int:
    """How many of ``count`` length-prefixed records from ``start`` are whole by ``stop``;
    what is wrong goes to ``problems``."""
    pos = _uniform_end(data, start, stop, count) if count else -1
    if pos < 0:
        # Record by record (the shortcut above is what this loop finds when the records all have
        # the first one's length: a producer's batch of like messages, the usual case).
        pos = start
        unpack = U32.unpack_from
        for whole in range(count):  # records whole so far
            if pos + 4 > stop:
                problems.errors.append(f"entry {entry}: sub-batch holds {whole} of its {count} records")
                return whole
            (n,) = unpack(data, pos)
            nxt = pos + 4 + n
            if n & 0x80000000 or nxt > stop:
                problems.errors.append(f"entry {entry}: sub-batch record {whole} length {n} overruns the sub-batch")
                return whole
            pos = nxt
    if pos != stop:
        problems.errors.append(f"entry {entry}: {stop - pos} bytes after the sub-batch's {count} records")
    return count


#: (record length, count) -> the struct that reads the length prefixes of ``count`` records of
#: that length back to back, in one call (a producer's sub-batches are mostly of a few shapes).
_PREFIXES: dict[tuple[int, int], struct.Struct] = {}
_PREFIXES_MAX = 64
#: Sub-batches of more records are compared octet by octet (a struct's format grows with them).
_PREFIXES_COUNT_MAX = 256


def _uniform_end(data: bytes | memoryview, start: int, stop: int, count: int) -> int:
    """Where ``count`` records from ``start`` end when they all carry the first one's length (top
    bit clear) and end by ``stop``; -1 otherwise. Every length prefix is read by one struct call,
    or for many records compared four octets at once, a strided slice per octet, in C."""
    if start + 4 > stop:
        return -1
    (n,) = U32.unpack_from(data, start)
    if n & 0x80000000:
        return -1
    step = 4 + n
    end = start + count * step
    if end > stop:
        return -1
    if count <= _PREFIXES_COUNT_MAX:
        key = (n, count)
        prefixes = _PREFIXES.get(key)
        if prefixes is None:
            prefixes = remember(_PREFIXES, key, struct.Struct(">" + f"I{n}x" * count), _PREFIXES_MAX)
        return end if prefixes.unpack_from(data, start).count(n) == count else -1
    first = bytes(data[start:start + 4])
    for j in range(4):
        if bytes(data[start + j:end:step]) != first[j:j + 1] * count:
            return -1
    return end


def _over(room: int) -> str:
    return f"the decompression limit ({room} bytes left for this frame; {inflate.ENV} sets it)"


def _inflate(dec: Callable[[bytes, int], bytes], payload: bytes, comp: int, ulen: int | None,
             problems: ChunkProblem, entry: int) -> bytes | None:
    """A sub-batch's records, decompressed within the frame's budget; None (and why, in
    ``problems``) when they are not to be decoded.

    What the header declares bounds the output before anything is decompressed: a declared size
    over the budget is not expanded at all, and the output stops a little past the declared size
    (``TOLERANCE``), so neither a lying header nor a bomb can make us allocate more than the limit.
    """
    name = COMPRESSION[comp]
    room = problems.room()
    if ulen is not None and ulen > room:
        over = _over(room)
        problems.limits.append(f"entry {entry}: {name} sub-batch declares {ulen} bytes uncompressed, over "
                               f"{over}; its records are not decoded")
        return None
    want = room if ulen is None else min(ulen + TOLERANCE, room)
    try:
        data = dec(payload, want + 1)  # one byte more tells whether it expands past what we want
    except inflate.Excess as exc:
        over = _over(room)
        if ulen is None:
            problems.limits.append(f"entry {entry}: {name} sub-batch states {exc.size} bytes uncompressed, over "
                                   f"{over}; its records are not decoded")
        else:
            problems.errors.append(f"entry {entry}: {name} sub-batch states {exc.size} bytes uncompressed, "
                                   f"its header {ulen}; its records are not decoded")
        return None
    except Exception as exc:  # any codec failure is the data's fault, not ours
        problems.errors.append(f"entry {entry}: {name} sub-batch does not decompress: {exc}")
        return None
    problems.budget -= min(len(data), want)
    if len(data) > want:
        over = _over(room)
        if ulen is None or want < ulen + TOLERANCE:
            problems.limits.append(f"entry {entry}: {name} sub-batch expands past {over}; decoding stopped there "
                                   f"and its records are not decoded")
        else:
            problems.errors.append(f"entry {entry}: {name} sub-batch expands past its declared {ulen} bytes "
                                   f"(decoding stopped {TOLERANCE} bytes later); its records are not decoded")
        return None
    if ulen is not None and len(data) != ulen:
        problems.errors.append(f"entry {entry}: sub-batch uncompressed length is {len(data)}, header says {ulen}")
    return data


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
