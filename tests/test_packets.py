"""Link layers, IPv4/IPv6 and TCP header decoding."""

from __future__ import annotations

import struct

import pytest

from analyzer.capture import RawPacket
from analyzer.packets import ACK, PSH, LinkDecoder
from analyzer.pcapwrite import LINKTYPES, CaptureWriter, Segment, ip_packet

SEG4 = Segment(0.0, ("192.0.2.1", 40000), ("192.0.2.2", 5552), 7, 9, ACK | PSH, b"payload")
SEG6 = Segment(0.0, ("2001:db8::1", 40000), ("2001:db8::2", 5672), 7, 9, ACK | PSH, b"payload6")


def framed(link: str, ip: bytes) -> RawPacket:
    w = CaptureWriter.__new__(CaptureWriter)
    w.link, w.e = link, "<"
    data = w._link_header(ip[0] >> 4 == 6) + ip
    return RawPacket(1, 0.0, LINKTYPES[link], data, len(data))


@pytest.mark.parametrize("link", sorted(LINKTYPES))
@pytest.mark.parametrize("seg", [SEG4, SEG6], ids=["ipv4", "ipv6"])
def test_every_link_type(link, seg):
    s = LinkDecoder().decode(framed(link, ip_packet(seg)))
    assert s is not None
    assert (s.src, s.sport, s.dst, s.dport) == (seg.src[0], seg.src[1], seg.dst[0], seg.dst[1])
    assert (s.seq, s.ack, s.flags, s.payload, s.truncated) == (7, 9, ACK | PSH, seg.payload, False)


def test_ethernet_padding_is_not_payload():
    ip = ip_packet(Segment(0.0, ("10.0.0.1", 1), ("10.0.0.2", 2), 0, 0, ACK, b""))
    pkt = framed("ethernet", ip + b"\x00" * 6)
    assert LinkDecoder().decode(pkt).payload == b""


def test_ipv6_extension_headers_are_skipped():
    ip = ip_packet(SEG6)
    tcp = ip[40:]
    hop = bytes([60, 0]) + b"\x00" * 6  # hop-by-hop, next: destination options
    dst = bytes([6, 0]) + b"\x00" * 6  # destination options, next: TCP
    hdr = bytearray(ip[:40])
    hdr[6] = 0
    struct.pack_into("!H", hdr, 4, len(tcp) + 16)
    s = LinkDecoder().decode(framed("raw", bytes(hdr) + hop + dst + tcp))
    assert s is not None and s.payload == b"payload6"


def test_non_tcp_fragments_unknown_and_malformed_are_counted():
    d = LinkDecoder()
    udp = bytearray(ip_packet(SEG4))
    udp[9] = 17
    assert d.decode(framed("ethernet", bytes(udp))) is None
    frag = bytearray(ip_packet(SEG4))
    struct.pack_into("!H", frag, 6, 0x2000)
    assert d.decode(framed("ethernet", bytes(frag))) is None
    arp = RawPacket(2, 0.0, 1, b"\xff" * 12 + b"\x08\x06" + b"\x00" * 28, 42)
    assert d.decode(arp) is None
    assert d.decode(RawPacket(3, 0.0, 147, b"abc", 3)) is None
    assert d.decode(RawPacket(4, 0.0, 1, b"\x00" * 12 + b"\x08\x00\x45", 15)) is None
    assert (d.non_tcp, d.fragments, d.unsupported, d.unknown_linktype, d.malformed) == (2, 1, 1, {147}, 1)


def test_packet_cut_by_snaplen_is_flagged_truncated():
    pkt = framed("ethernet", ip_packet(SEG4))
    cut = RawPacket(1, 0.0, 1, pkt.data[:-3], pkt.orig_len)
    s = LinkDecoder().decode(cut)
    assert s.truncated and s.payload == b"payl"
