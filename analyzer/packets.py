"""From a captured packet to its TCP segment: link layers, IPv4/IPv6, TCP.

Plain ``struct`` over bytes; no scapy on this path. Anything that is not TCP is counted and skipped.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from analyzer.capture import RawPacket

try:  # the C module's own functions: socket.py's enum conversions were 15M instructions of every start
    from _socket import AF_INET, AF_INET6, inet_ntop, inet_pton
except ImportError:  # a Python without it
    from socket import AF_INET, AF_INET6, inet_ntop, inet_pton

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_SLL2 = 276

ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
VLAN_TAGS = frozenset((0x8100, 0x88A8, 0x9100))
# IPv6 extension headers skipped on the way to TCP (the fragment header is handled apart).
IPV6_EXT = frozenset((0, 43, 60, 51, 135, 139, 140))

_u16 = struct.Struct("!H").unpack_from
_tcp = struct.Struct("!HHIIBB").unpack_from
_FIXED_LINKS = {LINKTYPE_ETHERNET: (14, 12), LINKTYPE_SLL2: (20, 0), LINKTYPE_SLL: (16, 14)}
#: Link types whose header has a fixed length and a fixed EtherType position -> (EtherType position,
#: IP header position): the engine's packet loop reads the IPv4 or IPv6 and TCP headers of their
#: packets in one call (analyzer/tcp_heads.py), the flow key as one slice: the addresses and then
#: the ports are contiguous on the wire when the IP header has no options or extension headers.
IP4TCP_BY_LINK = {lt: (at, off) for lt, (off, at) in _FIXED_LINKS.items()}
_ports = struct.Struct("!HH").pack


def flow_key(src: tuple[str, int], dst: tuple[str, int]) -> bytes:
    """One direction of a TCP conversation as packets carry it: source address, destination
    address (4 or 16 bytes each), source port, destination port. One bytes object is the cheapest
    dictionary key for it (a tuple of strings and ints costs three times as much), and the packet
    loop cuts it from a packet with one slice."""
    return packed_address(src[0]) + packed_address(dst[0]) + _ports(src[1], dst[1])


def packed_address(ip: str) -> bytes:
    """An address as packets carry it (4 bytes for IPv4, 16 for IPv6)."""
    return inet_pton(AF_INET6 if ":" in ip else AF_INET, ip)


def reverse_key(key: bytes) -> bytes:
    """The flow key of the other direction."""
    a = (len(key) - 4) // 2
    return key[a:2 * a] + key[:a] + key[-2:] + key[-4:-2]


#: Entries of each address cache of the link decoder.
_CACHE = 4096


class TcpSegment(NamedTuple):
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    truncated: bool  # the capture holds fewer bytes than the IP header announces


class LinkDecoder:
    """Decodes packets to TCP segments and keeps count of what it skipped."""

    __slots__ = ("non_tcp", "unsupported", "unknown_linktype", "malformed", "fragments", "_v4", "_v6",
                 "pairs", "key")

    def __init__(self) -> None:
        self.non_tcp = 0
        self.unsupported = 0
        self.unknown_linktype: set[int] = set()
        self.malformed = 0
        self.fragments = 0
        # Text forms of addresses, so that every conversation with one host shares one string.
        self._v4: dict[bytes, str] = {}
        self._v6: dict[bytes, str] = {}
        self.pairs: dict[bytes, tuple[str, str]] = {}  # 8 address bytes of IPv4 -> (src, dst)
        #: The flow key (:func:`flow_key`) of the segment :meth:`decode` last returned.
        self.key = b""

    def pair(self, addrs: bytes) -> tuple[str, str]:
        """The text forms of an IPv4 source and destination (``addrs``: both, packed), cached.

        These caches only spare the slow path's string conversions (the packet loop looks
        conversations up by packed addresses): small bounds do, and a scan over many hosts must
        not grow them forever."""
        if len(self.pairs) > _CACHE:
            self.pairs.clear()
        pair = (self._addr(self._v4, AF_INET, addrs[:4]), self._addr(self._v4, AF_INET, addrs[4:]))
        self.pairs[addrs] = pair
        return pair

    def _addr6(self, raw: bytes) -> str:
        return self._addr(self._v6, AF_INET6, raw)

    @staticmethod
    def _addr(cache: dict[bytes, str], family: int, raw: bytes) -> str:
        text = cache.get(raw)
        if text is None:
            if len(cache) > _CACHE:
                cache.clear()
            text = cache[raw] = inet_ntop(family, raw)
        return text

    def decode(self, pkt: RawPacket) -> TcpSegment | None:
        """``pkt``: a RawPacket, or a plain tuple of its fields (read_packets' ``plain``)."""
        _, _, lt, data, orig_len = pkt
        try:
            if lt == LINKTYPE_ETHERNET:
                off, etype = 12, _u16(data, 12)[0]
                while etype in VLAN_TAGS:
                    off += 4
                    etype = _u16(data, off)[0]
                off += 2
            elif lt == LINKTYPE_SLL2:
                off, etype = 20, _u16(data, 0)[0]
            elif lt == LINKTYPE_SLL:
                off, etype = 16, _u16(data, 14)[0]
            elif lt == LINKTYPE_NULL or lt == LINKTYPE_LOOP:
                off, etype = 4, _null_family(data, lt)
            elif lt == LINKTYPE_RAW or lt == 12 or lt == 14:
                off, etype = 0, ETH_IPV4 if data[0] >> 4 == 4 else ETH_IPV6
            elif lt == LINKTYPE_IPV4:
                off, etype = 0, ETH_IPV4
            elif lt == LINKTYPE_IPV6:
                off, etype = 0, ETH_IPV6
            else:
                self.unsupported += 1
                self.unknown_linktype.add(lt)
                return None
            if etype == ETH_IPV4:
                return self._ipv4(data, off, orig_len - len(data))
            if etype == ETH_IPV6:
                return self._ipv6(data, off, orig_len - len(data))
            self.non_tcp += 1
            return None
        except (struct.error, IndexError):
            self.malformed += 1
            return None

    def _ipv4(self, data: bytes, off: int, cut: int) -> TcpSegment | None:
        vihl = data[off]
        if vihl >> 4 != 4:
            self.malformed += 1
            return None
        ihl = (vihl & 0x0F) * 4
        total = _u16(data, off + 2)[0]
        if data[off + 9] != 6:
            self.non_tcp += 1
            return None
        if _u16(data, off + 6)[0] & 0x3FFF:  # more-fragments or a fragment offset
            self.fragments += 1
            return None
        addrs = data[off + 12:off + 20]
        if len(addrs) < 8:
            raise IndexError
        src, dst = self.pairs.get(addrs) or self.pair(addrs)
        # TSO captures carry a total length of 0; trust the captured bytes then.
        end = off + total if total else len(data) + cut
        return self._tcp(data, off + ihl, end, src, dst, addrs)

    def _ipv6(self, data: bytes, off: int, cut: int) -> TcpSegment | None:
        if data[off] >> 4 != 6:
            self.malformed += 1
            return None
        plen = _u16(data, off + 4)[0]
        nxt = data[off + 6]
        raw_src, raw_dst = data[off + 8:off + 24], data[off + 24:off + 40]
        if len(raw_dst) < 16:
            raise IndexError
        src, dst = self._addr6(raw_src), self._addr6(raw_dst)
        end = off + 40 + plen if plen else len(data) + cut
        off += 40
        for _ in range(16):  # a bounded walk over extension headers
            if nxt == 6:
                return self._tcp(data, off, end, src, dst, raw_src + raw_dst)
            if nxt == 44:  # fragment header
                if _u16(data, off + 2)[0] & 0xFFF9:
                    self.fragments += 1
                    return None
                nxt, off = data[off], off + 8
            elif nxt == 51:  # AH counts 4-byte words
                nxt, off = data[off], off + (data[off + 1] + 2) * 4
            elif nxt in IPV6_EXT:
                nxt, off = data[off], off + (data[off + 1] + 1) * 8
            else:
                break
        self.non_tcp += 1
        return None

    def _tcp(self, data: bytes, off: int, end: int, src: str, dst: str, addrs: bytes) -> TcpSegment | None:
        sport, dport, seq, ack, doff, flags = _tcp(data, off)
        start = off + (doff >> 4) * 4
        if start < off + 20 or start > end:
            self.malformed += 1
            return None
        self.key = addrs + data[off:off + 4]
        have = len(data)
        payload = data[start:end] if end <= have else data[start:]
        return TcpSegment(src, dst, sport, dport, seq, ack, flags, payload, end > have)


def _null_family(data: bytes, lt: int) -> int:
    """BSD loopback: an address family, host byte order for NULL, network order for LOOP."""
    fam = struct.unpack_from(">I" if lt == LINKTYPE_LOOP else "<I", data, 0)[0]
    if fam > 0xFFFF:
        fam = struct.unpack_from(">I", data, 0)[0]
    if fam == 2:
        return ETH_IPV4
    if fam in (10, 24, 28, 30):
        return ETH_IPV6
    return -1
