"""The checks of a sub-batch entry (a Publish's or a chunk's): its header, its data decompressed
within the frame's budget, its records' lengths; and the scan of a chunk's entries that uses them.
A producer of sub-batches sends two or more in every Publish, and each is checked once when
published and, from memory, when delivered: this is the per-message work of a sub-batch
workload, compiled where it can be (chunk.py builds the fields from the same checks)."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from analyzer.api import Field
from dissectors.kit import inflate
from dissectors.kit.memo import OctetMemo, remember
from dissectors.rabbitmq_stream.codecs import CODECS, COMPRESSION, DECOMPRESSORS

SUB_BATCH: Final = struct.Struct(">BHII")
DRAFT_SUB_BATCH: Final = struct.Struct(">BHI")
U32: Final = struct.Struct(">I")
#: Bytes a sub-batch may expand to beyond its declared uncompressed length before decoding stops
#: (reported either way: a length that does not match is a finding).
TOLERANCE: Final = 1024


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


def _u32(buf: bytes, pos: int) -> int:
    """The big-endian 32-bit number at ``pos`` (read octet by octet: compiled, no struct call)."""
    return buf[pos] << 24 | buf[pos + 1] << 16 | buf[pos + 2] << 8 | buf[pos + 3]


def sub_batch_head(buf: bytes, pos: int, end: int, draft: bool, problems: ChunkProblem,
                   entry: int) -> tuple[int, int, int | None, int] | None:
    """(flags, record count, uncompressed length or None in the draft, data length) of the
    sub-batch entry at ``pos``; None (said in ``problems``) when its header or data does not fit."""
    body = pos + (DRAFT_SUB_BATCH.size if draft else SUB_BATCH.size)
    if body > end:
        problems.errors.append(f"entry {entry}: sub-batch header cut off")
        return None
    flags = buf[pos]
    count = buf[pos + 1] << 8 | buf[pos + 2]
    ulen: int | None = None
    if draft:
        dlen = _u32(buf, pos + 3)
    else:
        ulen = _u32(buf, pos + 3)
        dlen = _u32(buf, pos + 7)
    if body + dlen > end:
        problems.errors.append(f"entry {entry}: sub-batch data length {dlen} overruns the data by "
                               f"{body + dlen - end} bytes")
        return None
    return flags, count, ulen, dlen


def check_sub_batch(buf: bytes, pos: int, end: int, problems: ChunkProblem, entry: int = 0) -> tuple[int, int]:
    """What decode_entries checks of the one (today's) sub-batch entry at ``pos`` without building
    anything: (its end, its record count), or (``pos``, 0) when its header or data does not fit
    (said in ``problems``)."""
    head = sub_batch_head(buf, pos, end, False, problems, entry)
    if head is None:
        return pos, 0
    flags, count, ulen, dlen = head
    body = pos + SUB_BATCH.size
    comp = (flags >> 4) & 7
    if not comp:
        sub_batch_records(buf, body, dlen, 0, count, ulen, 0, problems, entry)
        return body + dlen, count
    key = buf[pos:body + dlen]
    if seen_clean(key, ulen, problems):
        return body + dlen, count
    said = problems.said()
    sub_batch_records(buf, body, dlen, comp, count, ulen, 0, problems, entry)
    if problems.said() == said:
        _CLEAN_SUB_BATCHES.remember(key, True)
    return body + dlen, count


def seen_clean(key: bytes, ulen: int | None, problems: ChunkProblem) -> bool:
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
#: them: a consumer reading at most that far behind its publishers has each checked once. (A plain
#: global: tests put a memory that forgets in its place.)
_CLEAN_SUB_BATCHES: OctetMemo = OctetMemo(8 << 20)


def publish_scan(raw: bytes, off: int, end: int) -> list[int] | None:
    """layouts.PublishEntries.scan of today's version 1: the publishing ids of the entries in
    ``raw[off:end]`` (their count first) when read would decode them without a problem and they
    fill it exactly; None otherwise. A sub-batch's records are checked (check_sub_batch), one
    ChunkProblem for the frame: its sub-batches share a decompression budget."""
    if off + 4 > end:
        return None
    count = _u32(raw, off)
    off += 4
    published: list[int] = []
    problems: ChunkProblem | None = None
    for _ in range(count):
        if off + 12 > end:  # the publishing id and a length or a sub-batch's first octets
            return None
        published.append(_u32(raw, off) << 32 | _u32(raw, off + 4))
        off += 8
        if raw[off] & 0x80:  # a sub-batch: its records checked, none built
            if problems is None:
                problems = ChunkProblem()
            new = check_sub_batch(raw, off, end, problems)[0]
            if problems.errors or problems.limits or problems.notes or new == off:
                return None
            off = new
            continue
        off += 4 + _u32(raw, off)
        if off > end:
            return None
    return published if off == end else None


def scan_entries(buf: bytes, pos: int, end: int, n_entries: int, problems: ChunkProblem) -> tuple[int, int, int]:
    """Check today's entries without building Fields: returns (entries, records, end position).

    The hot path of Deliver (the draft's chunks are decoded whole): simple entries are only
    measured; sub-batches (they may fail to decompress) get decode_entries' checks through
    check_sub_batch, so their problems are found now.
    """
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
        nxt = pos + 4 + _u32(buf, pos)
        if nxt > end:
            problems.errors.append(f"entry {i}: message length {nxt - pos - 4} overruns the data by {nxt - end} bytes")
            break
        pos = nxt
        rec += 1
        i += 1
    return i, rec, pos


def sub_batch_records(buf: bytes, body: int, dlen: int, comp: int, count: int, ulen: int | None, base: int,
                      problems: ChunkProblem, entry: int) -> tuple[list[Field], int]:
    """A sub-batch's records checked (problems recorded), none made: ([], how many are whole), or
    the one "compressed" field shown when they cannot be decompressed, and 0."""
    got = sub_batch_data(buf, body, dlen, comp, ulen, base, problems, entry)
    if isinstance(got, list):
        return got, 0
    data, _dbase, start, stop = got
    return [], check_records(data, start, stop, count, problems, entry)


def sub_batch_data(buf: bytes, body: int, dlen: int, comp: int, ulen: int | None, base: int,
                   problems: ChunkProblem, entry: int) -> tuple[bytes, int, int, int] | list[Field]:
    """(data, dbase, start, stop) of a sub-batch's records (decompressed when they are; ``dbase``
    -1: not on the wire), or the one "compressed" field shown when they cannot be decoded."""
    if comp == 0:
        return buf, -base, body, body + dlen
    dec = DECOMPRESSORS[comp] if comp in CODECS else None
    if dec is None:
        problems.notes.append(f"entry {entry}: {COMPRESSION[comp]} sub-batch shown compressed "
                              f"(no decoder available)")
        return [Field("compressed", buf[body:body + dlen], body - base, dlen)]
    data = _inflate(dec, buf[body:body + dlen], comp, ulen, problems, entry)
    if data is None:
        return [Field("compressed", buf[body:body + dlen], body - base, dlen)]
    return data, -1, 0, len(data)


#: False: records are checked one by one, never by _uniform_end (the shortcut's reference, for
#: the test that holds the two to each other).
SHORTCUT = True


def check_records(data: bytes, start: int, stop: int, count: int, problems: ChunkProblem, entry: int) -> int:
    """How many of ``count`` length-prefixed records from ``start`` are whole by ``stop``;
    what is wrong goes to ``problems``."""
    pos = _uniform_end(data, start, stop, count) if count and SHORTCUT else -1
    if pos < 0:
        # Record by record (the shortcut above is what this loop finds when the records all have
        # the first one's length: a producer's batch of like messages, the usual case).
        pos = start
        for whole in range(count):  # records whole so far
            if pos + 4 > stop:
                problems.errors.append(f"entry {entry}: sub-batch holds {whole} of its {count} records")
                return whole
            n = _u32(data, pos)
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
#: Plain globals, as the next two: tests read and change them.
_PREFIXES: dict[tuple[int, int], struct.Struct] = {}
_PREFIXES_MAX = 64
#: Sub-batches of more records are compared octet by octet (a struct's format grows with them).
_PREFIXES_COUNT_MAX = 256


def _uniform_end(data: bytes, start: int, stop: int, count: int) -> int:
    """Where ``count`` records from ``start`` end when they all carry the first one's length (top
    bit clear) and end by ``stop``; -1 otherwise. Every length prefix is read by one struct call,
    or for many records compared four octets at once, a strided slice per octet, in C."""
    if start + 4 > stop:
        return -1
    n = _u32(data, start)
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
    first = data[start:start + 4]
    for j in range(4):
        if data[start + j:end:step] != first[j:j + 1] * count:
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
