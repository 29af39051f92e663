"""Packets sampled across a capture file without reading all of it: blocks spread evenly over the
file's bytes, each read from the first whole record in it. For guesses that the start of a capture
would get wrong (how the work spreads over conversations that come one after another), never for
decoding.

A block starts anywhere, so its first record is the first place where CHAIN records in a row are
plausible (lengths that fit, each starting where the one before ends; pcapng: the block's length
repeated at its end). Only places where a record's marker lies are tried, found by ``bytes.find``:
a pcap record's seconds share their upper 16 bits with the record before (or are one more), a
pcapng packet block starts with its type. A compressed file, or one that is not plain pcap or
pcapng, is sampled from its start only.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Callable, Iterator

from analyzer.capture import (
    MAX_RECORD,
    PCAP_MAGIC,
    PCAPNG_SHB,
    CaptureError,
    RawPacket,
    _parse_idb,
    read_packets,
)

#: Records in a row that must be plausible for a block's first record to be taken as one.
CHAIN = 4
#: Blocks read, spread over the file (the first one at its start).
WINDOWS = 32
#: Bytes of records sampled per block, from its first record on.
SPAN = 8 << 10
#: Bytes read per block at first: enough to find the first record among small ones.
FIRST_READ = 4 * SPAN
#: Bytes read per block when that was not enough: room for the records that find the first one
#: (up to 64 KiB each on a loopback interface) and SPAN after it.
BLOCK = SPAN + (CHAIN + 1) * (64 << 10)


def sample_windows(path: str, head: int) -> Iterator[list[RawPacket]]:
    """The packets of WINDOWS blocks spread over the file at ``path``, block by block (the records
    starting in the SPAN bytes from each block's first one; a block where none is found gives
    nothing), in file order (``number`` is 0: not known). Each block stands for the same share
    of the file, however many packets it has. A file smaller than twice those spans is one block
    read from its start, as is a compressed or other file: at most ``head`` packets then. Raises
    CaptureError."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = f.read(24)
            if size >= 2 * WINDOWS * SPAN and len(start) == 24:
                if start[:4] in PCAP_MAGIC:
                    yield from _sample_pcap(f, start, size)
                    return
                if start[:4] == PCAPNG_SHB:
                    yield from _sample_pcapng(f, size)
                    return
    except OSError as exc:
        raise CaptureError(f"cannot read {path}: {exc.strerror or exc}") from None
    yield list(itertools.islice(read_packets(path), head))


def _blocks(f, size: int, first: int, find: Callable[[bytes, bool], int]) -> Iterator[tuple[bytes, int]]:  # noqa: ANN001
    """The WINDOWS blocks of ``f`` (an open binary file), each with the offset of its first
    record (``find`` gives it, or -1, told whether the block ends the file), the first block at
    ``first``, where a record starts."""
    step = (size - first) // WINDOWS
    for k in range(WINDOWS):
        f.seek(first + k * step)
        if k == 0:
            yield f.read(BLOCK), 0
            continue
        buf = f.read(FIRST_READ)
        pos = find(buf, len(buf) < FIRST_READ)
        if pos < 0 and len(buf) == FIRST_READ:
            buf += f.read(BLOCK - FIRST_READ)
            pos = find(buf, len(buf) < BLOCK)
        yield buf, pos


def _sample_pcap(f, start: bytes, size: int) -> Iterator[list[RawPacket]]:  # noqa: ANN001 - an open binary file
    endian, unit = PCAP_MAGIC[start[:4]]
    snaplen, network = struct.unpack_from(endian + "II", start, 16)
    linktype = network & 0x03FFFFFF
    most = max(snaplen, 65535) if snaplen else MAX_RECORD
    frac_limit = round(1 / unit)
    unpack = struct.Struct(endian + "IIII").unpack_from

    def plausible(buf: bytes, pos: int) -> int:
        """The end of the record at ``pos`` if its header is plausible and it is whole, else -1."""
        if pos + 16 > len(buf):
            return -1
        _sec, frac, incl, orig = unpack(buf, pos)
        end = pos + 16 + incl
        if frac >= frac_limit or not 0 < incl <= most or incl > orig or orig > MAX_RECORD or end > len(buf):
            return -1
        return end

    hi_at = 2 if endian == "<" else 0  # where a record's seconds keep their upper 16 bits
    sec = -1

    def find(buf: bytes, last: bool) -> int:
        hi = sec >> 16
        return _first_record(buf, last, plausible, [(struct.pack(endian + "H", h), hi_at) for h in (hi, hi + 1)])

    for buf, pos in _blocks(f, size, 24, find):
        window = []
        for at, end in _records(buf, pos, plausible):
            sec, frac, _incl, orig = unpack(buf, at)
            window.append(RawPacket(0, sec + frac * unit, linktype, buf[at + 16:end], orig))
        if window:
            yield window
        if sec < 0:
            return  # not even the file's first records are plausible: not what this reads


def _sample_pcapng(f, size: int) -> Iterator[list[RawPacket]]:  # noqa: ANN001 - an open binary file
    """Enhanced Packet Blocks of the file's first section, on the interfaces described before its
    first packet; a file whose sections or interfaces come later is sampled less well, not wrongly
    (a block naming an unknown interface is not taken)."""
    f.seek(0)
    head = f.read(BLOCK)
    bom = head[8:12]
    endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
    if not endian:
        return
    hdr = struct.Struct(endian + "II").unpack_from
    epb = struct.Struct(endian + "IIIIIII").unpack_from
    ifaces = []
    pos = 0
    while pos + 12 <= len(head):
        btype, blen = hdr(head, pos)
        if blen < 12 or blen % 4 or pos + blen > len(head) or btype in (2, 3, 6):
            break
        if btype == 1:
            ifaces.append(_parse_idb(head, pos + 8, pos + blen - 4, endian))
        pos += blen
    if not ifaces:
        return
    first = pos

    def plausible(buf: bytes, pos: int) -> int:
        """The end of the block at ``pos`` if it is whole and its two lengths agree, else -1."""
        if pos + 12 > len(buf):
            return -1
        _btype, blen = hdr(buf, pos)
        end = pos + blen
        if blen < 12 or blen % 4 or blen > MAX_RECORD or end > len(buf) or hdr(buf, end - 8)[1] != blen:
            return -1
        return end

    marks = [(struct.pack(endian + "I", 6), 0)]
    for buf, pos in _blocks(f, size, first, lambda buf, last: _first_record(buf, last, plausible, marks)):
        window = []
        for at, end in _records(buf, pos, plausible):
            if end - at >= 32:
                btype, _blen, iface, hi, lo, cap, orig = epb(buf, at)
                if btype == 6 and iface < len(ifaces) and at + 28 + cap <= end - 4:
                    info = ifaces[iface]
                    window.append(RawPacket(0, ((hi << 32) | lo) / info.units + info.offset, info.linktype,
                                            buf[at + 28:at + 28 + cap], orig))
        if window:
            yield window


def _records(buf: bytes, pos: int, plausible: Callable[[bytes, int], int]) -> Iterator[tuple[int, int]]:
    """(start, end) of the records of ``buf`` from its first one at ``pos`` (-1: none) that start
    in the SPAN bytes from it, as long as each is plausible and whole."""
    stop = pos + SPAN
    while 0 <= pos < stop:
        end = plausible(buf, pos)
        if end < 0:
            return
        yield pos, end
        pos = end


def _first_record(buf: bytes, last: bool, plausible, marks: list[tuple[bytes, int]]) -> int:  # noqa: ANN001
    """The first offset of ``buf`` from which CHAIN records in a row are plausible (fewer when
    they end the file: ``last`` says ``buf`` does), or -1: tried where one of ``marks`` (bytes,
    their offset in a record) lies. ``plausible(buf, pos)`` gives a record's end or -1."""
    best = -1
    for mark, offset in marks:
        i = buf.find(mark, offset)
        while i >= 0 and (best < 0 or i - offset < best):
            at = pos = i - offset
            for _ in range(CHAIN):
                at = plausible(buf, at)
                if at < 0 or (last and at == len(buf)):
                    break
            if at >= 0:
                best = pos
                break
            i = buf.find(mark, i + 1)
    return best
