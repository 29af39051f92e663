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
        if big:
            sec = (buf[pos] << 24) | (buf[pos + 1] << 16) | (buf[pos + 2] << 8) | buf[pos + 3]
            frac = (buf[pos + 4] << 24) | (buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]
            incl = (buf[pos + 8] << 24) | (buf[pos + 9] << 16) | (buf[pos + 10] << 8) | buf[pos + 11]
            orig = (buf[pos + 12] << 24) | (buf[pos + 13] << 16) | (buf[pos + 14] << 8) | buf[pos + 15]
        else:
            sec = (buf[pos + 3] << 24) | (buf[pos + 2] << 16) | (buf[pos + 1] << 8) | buf[pos]
            frac = (buf[pos + 7] << 24) | (buf[pos + 6] << 16) | (buf[pos + 5] << 8) | buf[pos + 4]
            incl = (buf[pos + 11] << 24) | (buf[pos + 10] << 16) | (buf[pos + 9] << 8) | buf[pos + 8]
            orig = (buf[pos + 15] << 24) | (buf[pos + 14] << 16) | (buf[pos + 13] << 8) | buf[pos + 12]
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
        if big:
            btype = (buf[pos] << 24) | (buf[pos + 1] << 16) | (buf[pos + 2] << 8) | buf[pos + 3]
            blen = (buf[pos + 4] << 24) | (buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]
            iface = (buf[pos + 8] << 24) | (buf[pos + 9] << 16) | (buf[pos + 10] << 8) | buf[pos + 11]
            hi = (buf[pos + 12] << 24) | (buf[pos + 13] << 16) | (buf[pos + 14] << 8) | buf[pos + 15]
            lo = (buf[pos + 16] << 24) | (buf[pos + 17] << 16) | (buf[pos + 18] << 8) | buf[pos + 19]
            cap = (buf[pos + 20] << 24) | (buf[pos + 21] << 16) | (buf[pos + 22] << 8) | buf[pos + 23]
            orig = (buf[pos + 24] << 24) | (buf[pos + 25] << 16) | (buf[pos + 26] << 8) | buf[pos + 27]
        else:
            btype = (buf[pos + 3] << 24) | (buf[pos + 2] << 16) | (buf[pos + 1] << 8) | buf[pos]
            blen = (buf[pos + 7] << 24) | (buf[pos + 6] << 16) | (buf[pos + 5] << 8) | buf[pos + 4]
            iface = (buf[pos + 11] << 24) | (buf[pos + 10] << 16) | (buf[pos + 9] << 8) | buf[pos + 8]
            hi = (buf[pos + 15] << 24) | (buf[pos + 14] << 16) | (buf[pos + 13] << 8) | buf[pos + 12]
            lo = (buf[pos + 19] << 24) | (buf[pos + 18] << 16) | (buf[pos + 17] << 8) | buf[pos + 16]
            cap = (buf[pos + 23] << 24) | (buf[pos + 22] << 16) | (buf[pos + 21] << 8) | buf[pos + 20]
            orig = (buf[pos + 27] << 24) | (buf[pos + 26] << 16) | (buf[pos + 25] << 8) | buf[pos + 24]
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
