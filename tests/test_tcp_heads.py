"""The engine loop's reading of a packet's IP and TCP headers (analyzer/tcp_heads.py, compiled where
it can be) gives what the link decoder gives, and exactly what the loop's struct reading gave
before it (kept here as the reference), on IPv4 and IPv6 over every fixed-length link header, and
on the same packets cut at every length and corrupted at every header byte: the same segment or
the same None, never an exception."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from analyzer.capture import RawPacket
from analyzer.packets import ACK, FIN, IP4TCP_BY_LINK, PSH, RST, SYN, LinkDecoder
from analyzer.pcapwrite import LINKTYPES, CaptureWriter, Segment, ip_packet
from analyzer.tcp_heads import known_segment

SEG4 = Segment(0.0, ("192.0.2.1", 40000), ("192.0.2.2", 5552), 7, 0xFFFFFFF0, ACK | PSH, b"payload")
SEG6 = Segment(0.0, ("2001:db8::1", 40000), ("2001:db8::2", 5672), 0x80000001, 9, ACK | PSH, b"payload6")
FIXED = ["ethernet", "sll", "sll2"]

_IP4 = {lt: struct.Struct(f"!H{off - at - 2}xBxH2xHxB2x12xIIBB") for lt, (at, off) in IP4TCP_BY_LINK.items()}
_IP6 = struct.Struct("!IHBx36xIIBB")


def reference(data: bytes, at: int, off: int, fast: dict[bytes, Any]) -> tuple | None:
    """The engine loop's header reading before tcp_heads (struct calls), for comparison."""
    lt = next(lt for lt, link in IP4TCP_BY_LINK.items() if link == (at, off))
    hit = None
    try:
        if data[at] == 0x86 and data[at + 1] == 0xDD:
            vtf, plen, proto, seq, ack, doff, flags = _IP6.unpack_from(data, off)
            if vtf >> 28 == 6 and proto == 6:
                hit = fast.get(data[off + 8:off + 44])
                end = off + 40 + plen
                start = off + 40 + (doff >> 4) * 4
        else:
            etype, vihl, total, frag, proto, seq, ack, doff, flags = _IP4[lt].unpack_from(data, at)
            if etype == 0x0800 and vihl == 0x45 and proto == 6 and not frag & 0x3FFF:
                hit = fast.get(data[off + 12:off + 24])
                end = off + total
                start = off + 20 + (doff >> 4) * 4
    except (struct.error, IndexError):
        return None
    if hit is not None and doff >= 0x50 and start <= end <= len(data):
        return hit, seq, ack, flags, start, end
    return None


def framed(link: str, ip: bytes) -> RawPacket:
    w = CaptureWriter.__new__(CaptureWriter)
    w.link, w.e = link, "<"
    data = w._link_header(ip[0] >> 4 == 6) + ip
    return RawPacket(1, 0.0, LINKTYPES[link], data, len(data))


def known(pkt: RawPacket) -> tuple[dict[bytes, Any], Any]:
    """The conversation table the engine would have for ``pkt``'s direction, and the decoder's segment."""
    d = LinkDecoder()
    seg = d.decode(pkt)
    assert seg is not None
    return {d.key: "side"}, seg


@pytest.mark.parametrize("link", FIXED)
@pytest.mark.parametrize("base", [SEG4, SEG6], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("flags", [ACK, ACK | PSH, SYN | ACK, FIN | ACK, RST])
def test_the_decoders_segment(link: str, base: Segment, flags: int) -> None:
    seg = Segment(base.ts, base.src, base.dst, base.seq, base.ack, flags, base.payload)
    pkt = framed(link, ip_packet(seg))
    fast, decoded = known(pkt)
    got = known_segment(pkt.data, IP4TCP_BY_LINK[pkt.linktype], fast)
    assert got is not None
    side, seq, ack, fl, start, end = got
    assert (side, seq, ack, fl, pkt.data[start:end]) == ("side", decoded.seq, decoded.ack, decoded.flags,
                                                          decoded.payload)
    assert got == reference(pkt.data, *IP4TCP_BY_LINK[pkt.linktype], fast)
    assert known_segment(pkt.data, IP4TCP_BY_LINK[pkt.linktype], {}) is None  # not a known conversation
    padded = pkt.data + b"\x00" * 6  # Ethernet padding is not payload
    assert known_segment(padded, IP4TCP_BY_LINK[pkt.linktype], fast)[3:] == got[3:]


@pytest.mark.parametrize("link", FIXED)
@pytest.mark.parametrize("base", [SEG4, SEG6], ids=["ipv4", "ipv6"])
def test_cut_and_corrupted_alike(link: str, base: Segment) -> None:
    pkt = framed(link, ip_packet(base))
    fast, _ = known(pkt)
    at_off = IP4TCP_BY_LINK[pkt.linktype]
    data = pkt.data
    for n in range(len(data) + 1):
        assert known_segment(data[:n], at_off, fast) == reference(data[:n], *at_off, fast)
    rng = random.Random(3)
    headers = at_off[1] + (40 if base is SEG6 else 20) + 20
    nones = 0
    for at in range(headers):
        for value in (0, 0xFF, 0x45, 0x50, 0x86, rng.randrange(256)):
            bad = bytearray(data)
            bad[at] = value
            bad = bytes(bad)
            got = known_segment(bad, at_off, fast)
            assert got == reference(bad, *at_off, fast), (at, value)
            nones += got is None
    assert nones > 50  # the corruptions do reach the checks


def test_other_shapes_are_left_to_the_decoder() -> None:
    """IPv4 options, fragments, another protocol, a TCP offset below 5 words, a length past the end."""
    pkt = framed("ethernet", ip_packet(SEG4))
    fast, _ = known(pkt)
    at, off = IP4TCP_BY_LINK[1]
    ip = bytearray(pkt.data)
    assert known_segment(bytes(ip), (at, off), fast) is not None
    for where, value in ((off, 0x46), (off + 6, 0x20), (off + 7, 0x01), (off + 9, 17), (off + 32, 0x40)):
        bad = bytearray(ip)
        bad[where] = value
        assert known_segment(bytes(bad), (at, off), fast) is None, where
    longer = bytearray(ip)
    struct.pack_into("!H", longer, off + 2, len(ip) - off + 1)
    assert known_segment(bytes(longer), (at, off), fast) is None
    dont_fragment = bytearray(ip)
    dont_fragment[off + 6] = 0x40
    assert known_segment(bytes(dont_fragment), (at, off), fast) is not None
