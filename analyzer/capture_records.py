"""The packet records of a capture file's window, many at a time: the loops that read nearly every
packet of a pcap or pcapng file (analyzer/capture.py hands each window to them and yields what
they read). Compiled where it can be: the reader is paid for every packet of every view, and in
``--jobs`` by every worker for the whole capture, its own conversations' packets or not.

Each loop takes only records that are whole in the window and plainly valid, and stops at the first
that is not: capture.py reads that one through its general path, which refills the window, reads
any other block and raises every error, as it did alone before. So this module raises nothing and
reads nothing a file holds beyond the window it is given. Numbers are read octet by octet (an
indexing of ``bytes`` is a C operation compiled; a struct call is a generic call)."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Any, Final

#: Records read by one call at most: a window can hold thousands of small ones, and a list of
#: them all kept alive until the last is taken costs the garbage collector more than the calls
#: it saves.
BATCH: Final = 64


def pcap_records(buf: bytes, pos: int, number: int, big: bool, unit: float, linktype: int, new: Any,
                 kind: Any, out: list[Any]) -> int:
    """The pcap records wholly in ``buf`` from ``pos`` on, each appended to ``out`` as ``new(kind,
    (number, ts, linktype, data, orig_len))`` (a RawPacket made by tuple.__new__), or as that plain
    tuple when ``kind`` is None, numbered on from ``number``; ``big``: the file's byte order;
    ``unit``: seconds per fraction of a timestamp.
    Gives back where the first record not read starts: one that is not whole in ``buf``, or the
    one after BATCH records."""
    have = len(buf)
    last = number + BATCH
    while pos + 16 <= have and number < last:
        sec = _u32(buf, pos, big)
        frac = _u32(buf, pos + 4, big)
        incl = _u32(buf, pos + 8, big)
        orig = _u32(buf, pos + 12, big)
        start = pos + 16
        end = start + incl
        if end > have:
            break
        number += 1
        if kind is None:
            out.append((number, sec + frac * unit, linktype, buf[start:end], orig))
        else:
            out.append(new(kind, (number, sec + frac * unit, linktype, buf[start:end], orig)))
        pos = end
    return pos


def pcapng_records(buf: bytes, pos: int, number: int, big: bool, linktypes: list[int], units: list[float],
                   offsets: list[float], limit: int, new: Any, kind: Any, out: list[Any]) -> int:
    """The Enhanced Packet Blocks wholly in ``buf`` from ``pos`` on, of the section's known
    interfaces (``linktypes``, ``units``: timestamp units per second, ``offsets``: seconds added,
    by interface), appended to ``out`` as :func:`pcap_records` does; ``limit``: the longest block
    taken. Stops at the first other block, or one not whole in ``buf``, or one whose lengths do
    not fit, or after BATCH blocks, and gives back where it starts."""
    have = len(buf)
    known = len(linktypes)
    last = number + BATCH
    while pos + 28 <= have and number < last:
        btype = _u32(buf, pos, big)
        blen = _u32(buf, pos + 4, big)
        iface = _u32(buf, pos + 8, big)
        hi = _u32(buf, pos + 12, big)
        lo = _u32(buf, pos + 16, big)
        cap = _u32(buf, pos + 20, big)
        orig = _u32(buf, pos + 24, big)
        if (btype != 6 or not 32 + cap <= blen <= limit or blen % 4 or pos + blen > have
                or iface >= known):
            break
        number += 1
        ts = ((hi << 32) | lo) / units[iface] + offsets[iface]
        if kind is None:
            out.append((number, ts, linktypes[iface], buf[pos + 28:pos + 28 + cap], orig))
        else:
            out.append(new(kind, (number, ts, linktypes[iface], buf[pos + 28:pos + 28 + cap], orig)))
        pos += blen
    return pos


def _u32(buf: bytes, at: int, big: bool) -> int:
    """The unsigned 32-bit number at ``at``, in the file's byte order (``big``)."""
    if big:
        return (buf[at] << 24) | (buf[at + 1] << 16) | (buf[at + 2] << 8) | buf[at + 3]
    return (buf[at + 3] << 24) | (buf[at + 2] << 16) | (buf[at + 1] << 8) | buf[at]
