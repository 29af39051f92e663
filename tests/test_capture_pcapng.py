"""The pcapng reader's hot loop (whole Enhanced Packet Blocks straight from the window, read by
analyzer/capture_records.py, compiled where it can be) reads
exactly what its general path reads: the same packets, then the same error, on every bundled
capture rewritten as pcapng and on files built to hit every other branch (byte orders, several
sections and interfaces, other block types, corruption at every byte, cuts, refills that split
blocks anywhere)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import pytest

from analyzer import capture
from analyzer.capture import RawPacket, read_packets
from tests.capture_reading import corrupted_alike, same

ROOT = Path(__file__).parent.parent
BUNDLED = sorted(p for p in (ROOT / "captures").rglob("*.pcap") if p.read_bytes()[:4] == b"\xd4\xc3\xb2\xa1")


def block(btype: int, body: bytes, endian: str = "<") -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(endian + "II", btype, n) + body + struct.pack(endian + "I", n)


def shb(endian: str = "<") -> bytes:
    return block(0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1), endian)


def idb(linktype: int, endian: str = "<", tsresol: int | None = None, offset: int | None = None) -> bytes:
    opts = b""
    if tsresol is not None:
        opts += struct.pack(endian + "HHB3x", 9, 1, tsresol)
    if offset is not None:
        opts += struct.pack(endian + "HHq", 14, 8, offset)
    if opts:
        opts += struct.pack(endian + "HH", 0, 0)
    return block(1, struct.pack(endian + "HHI", linktype, 0, 0) + opts, endian)


def epb(iface: int, ts_units: int, data: bytes, endian: str = "<", orig: int | None = None) -> bytes:
    return block(6, struct.pack(endian + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data),
                                len(data) if orig is None else orig) + data, endian)


def as_pcapng(packets: Iterable[RawPacket], endian: str = "<") -> bytes:
    out = [shb(endian), idb(1, endian)]
    out += [epb(0, round(p.ts * 1e6), p.data, endian, p.orig_len) for p in packets]
    return b"".join(out)


@pytest.mark.parametrize("path", BUNDLED[::4], ids=lambda p: p.name)
def test_bundled_captures_as_pcapng(path: Path) -> None:
    packets = list(read_packets(str(path)))
    for endian in "<>":
        got, err = same(as_pcapng(packets, endian))
        assert err is None
        # The pcapng copy reads as the pcap it came from (microsecond timestamps both).
        assert [(p[0], p[2], p[3], p[4]) for p in got] == [(p[0], p[2], p[3], p[4]) for p in packets]
        assert all(abs(a[1] - b.ts) < 1e-6 for a, b in zip(got, packets, strict=True))


def mixed() -> bytes:
    """Two sections of opposite byte order; interfaces with their own link types, resolutions and
    offsets; Simple, obsolete and unknown blocks between Enhanced Packet Blocks."""
    eth = b"\x00" * 12 + b"\x08\x00" + bytes(range(60))
    ip = bytes(range(40, 100))
    parts = [shb("<"), idb(1), idb(101, tsresol=9, offset=100)]
    for i in range(20):
        parts.append(epb(i % 2, 1_700_000_000_000_000 + i * 1000, eth if i % 2 == 0 else ip))
        if i % 5 == 0:
            parts.append(block(3, struct.pack("<I", len(eth)) + eth))
        if i % 7 == 0:
            parts.append(block(5, b"interface statistics"))
        if i % 9 == 0:
            t = 1_700_000_000_000_000 + i
            parts.append(block(2, struct.pack("<HHIIII", 0, 0, t >> 32, t & 0xFFFFFFFF, len(eth), len(eth)) + eth))
    parts += [shb(">"), idb(228, ">", tsresol=0x80 | 20)]
    for i in range(10):
        parts.append(epb(0, (1_700_000_000 << 20) + i, ip[: 20 + i], ">", orig=1000 + i))
    return b"".join(parts)


def test_every_branch_reads_the_same() -> None:
    data = mixed()
    for chunk in (None, 1, 7, 31, 64, 100, 333):
        got, err = same(data, chunk)
        assert err is None and len(got) == 37  # 20 + 4 Simple + 3 obsolete + 10
    assert {p[2] for p in got} == {1, 101, 228}


def test_cut_anywhere_reads_the_same() -> None:
    data = mixed()
    for n in range(4, len(data)):
        same(data[:n], chunk=97 if n % 2 else None)


def test_corruption_anywhere_reads_the_same() -> None:
    assert corrupted_alike(mixed(), 1) > 100  # the corruptions do reach the checks


@pytest.mark.parametrize("case", ["iface", "cap", "blen_small", "blen_odd", "blen_huge"])
def test_bad_packet_blocks_are_the_same_error(case: str) -> None:
    data = b"x" * 60
    good = epb(0, 5, data)
    btype, blen, iface, hi, lo, cap, orig = struct.unpack_from("<IIIIIII", good)
    if case == "iface":
        iface = 3
    elif case == "cap":
        cap = len(data) + 4
    elif case == "blen_small":
        blen = 28
    elif case == "blen_odd":
        blen += 2
    else:
        blen = capture.MAX_RECORD + 4
    bad = struct.pack("<IIIIIII", btype, blen, iface, hi, lo, cap, orig) + good[28:]
    got, err = same(shb() + idb(1) + good + bad + good)
    assert len(got) == 1 and err is not None
