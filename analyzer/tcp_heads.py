"""The IPv4 or IPv6 and TCP headers of a packet of a conversation under way, read for the engine's
packet loop (analyzer/engine.py) in one call: nearly every packet has that shape (a link header of
fixed length, IPv4 without options or IPv6 without extension headers, TCP), and the loop reads it
for every packet of the capture, in ``--jobs`` in every worker. Compiled where it can be: the
headers are read octet by octet (an indexing of ``bytes`` is a C operation compiled).

Anything else (another shape, a packet too short for its headers, a conversation not known) gives
None, and the loop's general path (analyzer/packets.py's LinkDecoder) reads the packet."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Any


def known_segment(data: bytes, link: tuple[int, int],
                  fast: dict[bytes, Any]) -> tuple[Any, int, int, int, int, int] | None:
    """(side, seq, ack, flags, start, end) of the TCP segment in ``data`` when it belongs to a
    conversation of ``fast`` (its flow key: the addresses and ports as they stand in the IP and TCP
    headers -> that direction's side): ``data[start:end]`` is its payload. ``link``: where the link
    header's EtherType is and where the IP header starts (packets.IP4TCP_BY_LINK). None for any
    other packet, or one whose TCP data offset is below 5 words or whose lengths do not fit in it."""
    at, off = link
    n = len(data)
    if at + 2 > n:
        return None
    if data[at] == 0x86 and data[at + 1] == 0xDD:  # IPv6
        if off + 54 > n or data[off] >> 4 != 6 or data[off + 6] != 6:
            return None
        tcp = off + 40
        end = tcp + ((data[off + 4] << 8) | data[off + 5])
        key = data[off + 8:off + 44]
    elif data[at] == 0x08 and data[at + 1] == 0x00:  # IPv4
        if (off + 34 > n or data[off] != 0x45 or data[off + 9] != 6
                or (data[off + 6] & 0x3F) or data[off + 7]):  # a fragment: offset or more-fragments
            return None
        tcp = off + 20
        end = off + ((data[off + 2] << 8) | data[off + 3])
        key = data[off + 12:off + 24]
    else:
        return None
    doff = data[tcp + 12]
    if doff < 0x50:
        return None
    start = tcp + (doff >> 4) * 4
    if not start <= end <= n:
        return None
    side = fast.get(key)
    if side is None:
        return None
    seq = (data[tcp + 4] << 24) | (data[tcp + 5] << 16) | (data[tcp + 6] << 8) | data[tcp + 7]
    ack = (data[tcp + 8] << 24) | (data[tcp + 9] << 16) | (data[tcp + 10] << 8) | data[tcp + 11]
    return side, seq, ack, data[tcp + 13], start, end
