"""Writing test captures: pcap or pcapng, several link types, TCP conversations under full control.

Tests and benchmarks build synthetic traffic with this: a :class:`TcpConversation` turns
application bytes into TCP segments (with the handshake, chosen segment sizes, FIN or RST), the
test may then reorder, duplicate, overlap or drop segments, and a :class:`CaptureWriter` writes them
with the link layer of choice.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import BinaryIO

from analyzer.capture import RawPacket
from analyzer.packets import ACK, FIN, PSH, RST, SYN

LINKTYPES = {"ethernet": 1, "vlan": 1, "qinq": 1, "sll": 113, "sll2": 276, "null": 0, "raw": 101}


@dataclass(slots=True)
class Segment:
    ts: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    payload: bytes = b""


class CaptureWriter:
    """Writes IP packets with a link-layer header into a pcap or pcapng file."""

    def __init__(self, f: BinaryIO, *, fmt: str = "pcap", link: str = "ethernet", snaplen: int = 262144,
                 nanosecond: bool = False, big_endian: bool = False) -> None:
        if link not in LINKTYPES:
            raise ValueError(f"unknown link type {link!r}")
        self.f = f
        self.fmt = fmt
        self.link = link
        self.snaplen = snaplen
        self.nano = nanosecond
        self.e = ">" if big_endian else "<"
        lt = LINKTYPES[link]
        if fmt == "pcap":
            magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
            f.write(struct.pack(self.e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, lt))
        elif fmt == "pcapng":
            shb = struct.pack(self.e + "IHHq", 0x1A2B3C4D, 1, 0, -1)
            self._block(0x0A0D0D0A, shb)
            opts = b""
            if nanosecond:
                opts = struct.pack(self.e + "HHB3x", 9, 1, 9) + struct.pack(self.e + "HH", 0, 0)
            self._block(1, struct.pack(self.e + "HHI", lt, 0, snaplen) + opts)
        else:
            raise ValueError(f"unknown format {fmt!r}")

    def _block(self, btype: int, body: bytes) -> None:
        body += b"\x00" * (-len(body) % 4)
        n = len(body) + 12
        self.f.write(struct.pack(self.e + "II", btype, n) + body + struct.pack(self.e + "I", n))

    def write_ip(self, ts: float, ip: bytes) -> None:
        v6 = ip[0] >> 4 == 6
        frame = self._link_header(v6) + ip
        self.write_raw(ts, frame)

    def write_raw(self, ts: float, frame: bytes, orig_len: int | None = None) -> None:
        """One link-layer frame; ``orig_len`` when it was already cut (copying a capture)."""
        orig = len(frame) if orig_len is None else orig_len
        data = frame[:self.snaplen]
        units = 1_000_000_000 if self.nano else 1_000_000
        t = round(ts * units)
        if self.fmt == "pcap":
            self.f.write(struct.pack(self.e + "IIII", t // units, t % units, len(data), orig) + data)
        else:
            self._block(6, struct.pack(self.e + "IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(data), orig) + data)

    def _link_header(self, v6: bool) -> bytes:
        etype = 0x86DD if v6 else 0x0800
        macs = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"
        if self.link == "ethernet":
            return macs + struct.pack("!H", etype)
        if self.link == "vlan":
            return macs + struct.pack("!HHH", 0x8100, 42, etype)
        if self.link == "qinq":
            return macs + struct.pack("!HHHHH", 0x88A8, 7, 0x8100, 42, etype)
        if self.link == "sll":
            return struct.pack("!HHH8sH", 0, 772, 6, b"\x00" * 8, etype)
        if self.link == "sll2":
            return struct.pack("!HHIHBB8s", etype, 0, 1, 772, 0, 6, b"\x00" * 8)
        if self.link == "null":
            return struct.pack(self.e + "I", 30 if v6 else 2)
        return b""

    def write_segments(self, segments: Iterable[Segment]) -> int:
        n = 0
        for s in segments:
            self.write_ip(s.ts, ip_packet(s))
            n += 1
        return n


def ip_packet(s: Segment) -> bytes:
    """An IPv4 or IPv6 packet carrying the TCP segment (checksums left zero)."""
    tcp = struct.pack("!HHIIBBHHH", s.src[1], s.dst[1], s.seq % (1 << 32), s.ack % (1 << 32),
                      5 << 4, s.flags, 65535, 0, 0) + s.payload
    src = ipaddress.ip_address(s.src[0])
    dst = ipaddress.ip_address(s.dst[0])
    if src.version == 6:
        return struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64) + src.packed + dst.packed + tcp
    return struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0) + src.packed + dst.packed + tcp


class TcpConversation:
    """One TCP connection as a list of segments the test can then rearrange.

    ``send`` cuts data into segments of at most ``mss`` bytes; with ``ack=True`` the peer
    acknowledges each one (needed when a test wants the loss of a segment to be provable).
    """

    def __init__(self, client: tuple[str, int] = ("10.0.0.1", 40000), server: tuple[str, int] = ("10.0.0.2", 9000),
                 *, isn_client: int = 1000, isn_server: int = 5000, ts: float = 1_700_000_000.0,
                 step: float = 0.001) -> None:
        self.client = client
        self.server = server
        self.seq = {"c2s": isn_client, "s2c": isn_server}
        self.ts = ts
        self.step = step
        self.segments: list[Segment] = []

    def _ends(self, direction: str) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.client, self.server) if direction == "c2s" else (self.server, self.client)

    def _add(self, direction: str, flags: int, payload: bytes = b"", seq: int | None = None) -> Segment:
        src, dst = self._ends(direction)
        other = "s2c" if direction == "c2s" else "c2s"
        s = Segment(self.ts, src, dst, self.seq[direction] if seq is None else seq, self.seq[other], flags, payload)
        self.ts += self.step
        self.segments.append(s)
        return s

    def handshake(self) -> None:
        self._add("c2s", SYN, b"")
        self.segments[-1].ack = 0
        self.seq["c2s"] += 1
        self._add("s2c", SYN | ACK)
        self.seq["s2c"] += 1
        self._add("c2s", ACK)

    def send(self, direction: str, data: bytes, mss: int = 1448, *, ack: bool = False) -> list[Segment]:
        out = []
        other = "s2c" if direction == "c2s" else "c2s"
        for i in range(0, len(data), mss):
            chunk = data[i:i + mss]
            out.append(self._add(direction, ACK | PSH, chunk))
            self.seq[direction] += len(chunk)
            if ack:
                self._add(other, ACK)
        return out

    def fin(self, direction: str) -> Segment:
        s = self._add(direction, FIN | ACK)
        self.seq[direction] += 1
        return s

    def close(self) -> None:
        self.fin("c2s")
        self.fin("s2c")
        self._add("c2s", ACK)

    def rst(self, direction: str) -> Segment:
        return self._add(direction, RST | ACK)

    # Rearrangements a test applies to the segment list.
    def duplicate(self, index: int) -> None:
        self.segments.insert(index + 1, replace(self.segments[index]))

    def swap(self, i: int, j: int) -> None:
        self.segments[i], self.segments[j] = self.segments[j], self.segments[i]

    def drop(self, index: int) -> Segment:
        return self.segments.pop(index)

    def overlap(self, index: int, back: int, replacement: bytes | None = None) -> None:
        """Insert after segment ``index`` a copy starting ``back`` bytes earlier (optionally altered)."""
        s = self.segments[index]
        prev = next((p for p in reversed(self.segments[:index]) if p.src == s.src and p.payload), None)
        if prev is None:
            raise ValueError("no earlier segment to overlap")
        data = prev.payload[-back:] + s.payload
        if replacement is not None:
            data = replacement + data[len(replacement):]
        self.segments.insert(index + 1, replace(s, seq=s.seq - back, payload=data))


def write_packets(path: str, packets: Iterable[RawPacket], link: str, **kw: object) -> int:
    """Copy captured packets (e.g. a slice of a capture) into a new file."""
    n = 0
    with open(path, "wb") as f:
        w = CaptureWriter(f, link=link, **kw)  # type: ignore[arg-type]
        for pkt in packets:
            w.write_raw(pkt.ts, pkt.data, pkt.orig_len)
            n += 1
    return n


def write_capture(path: str, conversations: Iterable[TcpConversation], **kw: object) -> int:
    """Write the segments of all conversations, in list order per conversation, merged by time."""
    queues = [list(conv.segments) for conv in conversations]
    pos = [0] * len(queues)
    merged: list[Segment] = []
    live = [i for i, q in enumerate(queues) if q]
    while live:
        # Stable by list position within a conversation, so a test's rearrangements survive the merge.
        ci = min(live, key=lambda c: (queues[c][pos[c]].ts, c))
        merged.append(queues[ci][pos[ci]])
        pos[ci] += 1
        if pos[ci] == len(queues[ci]):
            live.remove(ci)
    with open(path, "wb") as f:
        w = CaptureWriter(f, **kw)  # type: ignore[arg-type]
        return w.write_segments(merged)
