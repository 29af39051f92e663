"""From packets to protocol frames: conversations, roles, protocol choice, reassembly, dissection.

Protocol-agnostic. The engine owns everything that touches packets (numbers, timestamps,
addresses) and hands each dissector only ordered bytes per direction.
"""

from __future__ import annotations

import socket
import struct
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from analyzer.api import Category, Connection, Direction, Dissector, Event, Finding, Frame, Rule, Severity
from analyzer.capture import RawPacket, read_packets
from analyzer.packets import ACK, FIN, IP4TCP_BY_LINK, IP6TCP, RST, SYN, LinkDecoder, TcpSegment
from analyzer.reassembly import GAP, Data, Gap, Note, StreamReassembler
from analyzer.reassembly import RULES as TCP_RULES
from analyzer.registry import load_dissectors

TRUNCATED_PACKET = Rule("capture.truncated_packet", Severity.WARNING, Category.TRUNCATED,
                        "A packet was cut by the capture's snap length; the rest of its bytes are missing")
UNKNOWN_LINKTYPE = Rule("capture.unknown_linktype", Severity.WARNING, Category.CAPTURE,
                        "Packets of a link type the analyzer cannot decode were skipped")
DISSECTOR_ERROR = Rule("engine.dissector_error", Severity.ERROR, Category.MALFORMED,
                       "A dissector raised an exception; the rest of that conversation may be undecoded")
ENGINE_RULES: tuple[Rule, ...] = (*TCP_RULES, TRUNCATED_PACKET, UNKNOWN_LINKTYPE, DISSECTOR_ERROR)

#: Bytes of one direction kept for heuristics before giving up on recognising the protocol.
SNIFF_LIMIT = 4096
SNIFF_THRESHOLD = 0.5
#: Closed conversations remembered to absorb their trailing packets.
CLOSED_KEEP = 4096
_SYN_FIN_RST = SYN | FIN | RST


class NoDecodableLinkType(Exception):
    """Every packet of the capture had a link type the analyzer cannot decode."""


@dataclass(slots=True)
class FlowInfo:
    """One TCP conversation, as `streamproto flows` shows it."""

    id: int
    client: tuple[str, int]
    server: tuple[str, int]
    protocol: str | None = None
    dialect: str | None = None
    packets: int = 0
    frames: int = 0
    bytes: dict[Direction, int] = field(default_factory=lambda: {Direction.C2S: 0, Direction.S2C: 0})
    findings: dict[str, int] = field(default_factory=lambda: {"error": 0, "warning": 0, "note": 0})
    first_ts: float = 0.0
    last_ts: float = 0.0
    complete: bool = False  # both SYN and FIN/RST seen

    @property
    def name(self) -> str:
        return f"{fmt_endpoint(self.client)} <-> {fmt_endpoint(self.server)}"


def fmt_endpoint(ep: tuple[str, int]) -> str:
    ip, port = ep
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class _Side:
    """One direction: reassembly plus the map from stream offsets back to packets."""

    __slots__ = ("reasm", "segments", "sniff_buf", "fin", "endpoint", "peer", "last_ack")

    def __init__(self, max_buffer: int) -> None:
        self.reasm = StreamReassembler(max_buffer)
        # (end offset, packet number, ts) of delivered data, oldest first.
        self.segments: deque[tuple[int, int, float]] = deque()
        self.sniff_buf = bytearray()
        self.fin = False
        self.endpoint = ""
        self.peer = ""  # the other side's endpoint
        self.last_ack: int | None = None  # the last acknowledgement number this side sent

    def packets_for(self, start: int, end: int) -> tuple[int, int, float]:
        """Packet numbers holding stream bytes [start, end) and the time of the last one."""
        segs = self.segments
        while len(segs) > 1 and segs[0][0] <= start:
            segs.popleft()
        first = segs[0][1] if segs else 0
        last, ts = first, segs[0][2] if segs else 0.0
        for seg_end, pkt, seg_ts in segs:
            last, ts = pkt, seg_ts
            if seg_end >= end:
                break
        return first, last, ts


class _Conversation:
    __slots__ = ("info", "sides", "dissector", "conn", "pending", "undecided", "midstream", "closed",
                 "isn_client")

    def __init__(self, info: FlowInfo, max_buffer: int, midstream: bool) -> None:
        self.info = info
        self.sides = {Direction.C2S: _Side(max_buffer), Direction.S2C: _Side(max_buffer)}
        c, s = self.sides[Direction.C2S], self.sides[Direction.S2C]
        c.endpoint = s.peer = fmt_endpoint(info.client)
        s.endpoint = c.peer = fmt_endpoint(info.server)
        self.dissector: Dissector | None = None
        self.conn: Connection | None = None
        # Stream events held back while the protocol is not yet known.
        self.pending: list[tuple[Direction, Data | Gap]] = []
        self.undecided = True
        self.midstream = midstream
        self.closed = False
        self.isn_client: int | None = None


class Analyzer:
    """Runs packets through reassembly and dissectors. Iterate :meth:`run` for events."""

    def __init__(self, dissectors: dict[str, Dissector] | None = None, decode_as: dict[int, str] | None = None,
                 max_buffer: int = 8 * 1024 * 1024) -> None:
        self.dissectors = dissectors if dissectors is not None else load_dissectors()
        self.decode_as = dict(decode_as or {})
        self.max_buffer = max_buffer
        self.by_port: dict[int, str] = {}
        for d in self.dissectors.values():
            for p in d.default_ports:
                self.by_port.setdefault(p, d.name)
        self.flows: list[FlowInfo] = []
        self._live: dict[tuple[str, int, str, int], _Conversation] = {}
        # Conversations closed by FIN/RST, so their last ACKs do not open a new one.
        self._closed: OrderedDict[tuple[str, int, str, int], FlowInfo] = OrderedDict()
        # For decided live conversations: (src, dst, sport, dport) -> (conversation, direction, its side, the other side, flow info).
        self._fast: dict[tuple[str, str, int, int], tuple[_Conversation, Direction, _Side, _Side, FlowInfo]] = {}
        # The same keyed as packets carry it: (packed src + dst addresses, sport, dport).
        self._fast_raw: dict[tuple[bytes, int, int], tuple[_Conversation, Direction, _Side, _Side, FlowInfo]] = {}
        self.linkdec = LinkDecoder()
        self.packets = 0
        self.first_ts: float | None = None
        self.last_ts = 0.0
        self.truncated_packets = 0
        #: Findings about the capture itself (no conversation), by severity.
        self.capture_findings = {"error": 0, "warning": 0, "note": 0}
        self._startup_errors: list[Finding] = []

    # ----------------------------------------------------------------- driving
    def run(self, packets: Iterable[RawPacket]) -> Iterator[Event]:
        decode = self.linkdec.decode
        fastmap = self._fast
        rawmap = self._fast_raw
        fast = self._fast_segment
        by_link = IP4TCP_BY_LINK
        ip6tcp = IP6TCP.unpack_from
        struct_error = struct.error
        # Counters live in locals in the loop and are written back before anything is yielded.
        count = self.packets
        ts = self.last_ts
        started = self.first_ts is not None
        try:
            for pkt in packets:
                count += 1
                number, ts, linktype, data, _orig = pkt
                if not started:
                    self.first_ts, started = ts, True
                # The shape of nearly every packet (IPv4 without options, TCP, on a fixed-length link
                # header, in a conversation already under way) goes without building a TcpSegment.
                link = by_link.get(linktype)
                if link is not None:
                    at, off, layout = link
                    hit = None
                    try:
                        if data[at] == 0x86 and data[at + 1] == 0xDD:  # IPv6
                            vtf, plen, proto, addrs, sport, dport, seq, ack, doff, flags = \
                                ip6tcp(data, off)
                            if vtf >> 28 == 6 and proto == 6:
                                hit = rawmap.get((addrs, sport, dport))
                                end = off + 40 + plen
                                start = off + 40 + (doff >> 4) * 4
                        else:
                            etype, vihl, total, frag, proto, addrs, sport, dport, seq, ack, doff, flags = \
                                layout.unpack_from(data, at)
                            if etype == 0x0800 and vihl == 0x45 and proto == 6 and not frag & 0x3FFF:
                                hit = rawmap.get((addrs, sport, dport))
                                end = off + total
                                start = off + 20 + (doff >> 4) * 4
                    except (struct_error, IndexError):
                        hit = None
                    if (hit is not None and not flags & _SYN_FIN_RST and doff >= 0x50
                            and start <= end <= len(data)):
                        out = fast(hit, seq, ack, flags, data[start:end], number, ts)
                        if out:
                            self.packets, self.last_ts = count, ts
                            yield from out
                        continue
                seg = decode(pkt)
                if seg is None:
                    continue
                if seg.truncated:
                    self.packets, self.last_ts = count, ts
                    self.truncated_packets += 1
                    f = TRUNCATED_PACKET(f"packet {number} was cut by the snap length "
                                         f"({len(data)} of {pkt.orig_len} bytes captured)")
                    f.frame = number
                    self.capture_findings[f.severity] += 1
                    yield f
                hit = fastmap.get(seg[:4])
                if hit is not None and not seg.flags & _SYN_FIN_RST:
                    out = fast(hit, seg.seq, seg.ack, seg.flags, seg.payload, number, ts)
                    if out:
                        self.packets, self.last_ts = count, ts
                        yield from out
                    continue
                self.packets, self.last_ts = count, ts
                yield from self._segment(seg, number, ts)
                if self._startup_errors:
                    yield from self._pop_startup_errors()
        finally:
            self.packets, self.last_ts = count, ts
        yield from self.finish()

    def _fast_segment(self, hit: tuple[_Conversation, Direction, _Side, _Side, FlowInfo], seq: int, ack: int,
                      flags: int, payload: bytes, number: int, ts: float) -> list[Event] | None:
        """A segment of a known, decided conversation without SYN, FIN or RST: no generators here."""
        conv, direction, side, other_side, info = hit
        info.packets += 1
        info.last_ts = ts
        out: list[Event] | None = None
        if flags & ACK and ack != side.last_ack:
            side.last_ack = ack
            peer = other_side.reasm.peer_ack(ack, number, ts)
            if peer:
                out = list(self._stream(conv, direction.other, peer, ts))
        if payload:
            events = side.reasm.segment(seq, payload, False, number, ts)
            if events:
                if out is None:
                    out = []
                if len(events) != 1 or type(events[0]) is not Data:
                    out.extend(self._stream(conv, direction, events, ts))
                else:  # the common case, without _stream's generator
                    info.bytes[direction] += len(events[0].data)
                    if conv.conn is not None:
                        out.extend(self._deliver(conv, direction, events[0]))
        return out

    def _index(self, conv: _Conversation) -> None:
        """(Re)register a conversation's 4-tuples for the fast path."""
        (cip, cport), (sip, sport) = conv.info.client, conv.info.server
        if conv.undecided:
            return
        c, s = conv.sides[Direction.C2S], conv.sides[Direction.S2C]
        to_server = (conv, Direction.C2S, c, s, conv.info)
        to_client = (conv, Direction.S2C, s, c, conv.info)
        self._fast[(cip, sip, cport, sport)] = to_server
        self._fast[(sip, cip, sport, cport)] = to_client
        craw, sraw = _packed(cip), _packed(sip)
        if len(craw) == len(sraw):
            self._fast_raw[(craw + sraw, cport, sport)] = to_server
            self._fast_raw[(sraw + craw, sport, cport)] = to_client

    def _unindex(self, conv: _Conversation) -> None:
        (cip, cport), (sip, sport) = conv.info.client, conv.info.server
        for k in ((cip, sip, cport, sport), (sip, cip, sport, cport)):
            if self._fast.get(k, (None,))[0] is conv:
                del self._fast[k]
        craw, sraw = _packed(cip), _packed(sip)
        for r in ((craw + sraw, cport, sport), (sraw + craw, sport, cport)):
            if self._fast_raw.get(r, (None,))[0] is conv:
                del self._fast_raw[r]

    def flow(self, flow_id: int | None) -> FlowInfo | None:
        """The conversation with this id (ids count from 1 in order of appearance)."""
        if flow_id is None or not 0 < flow_id <= len(self.flows):
            return None
        return self.flows[flow_id - 1]

    def _pop_startup_errors(self) -> Iterator[Event]:
        errors, self._startup_errors = self._startup_errors, []
        yield from errors

    def finish(self) -> Iterator[Event]:
        for conv in list(self._live.values()):
            yield from self._close(conv, self.last_ts)
        self._live.clear()
        yield from self._pop_startup_errors()
        if self.linkdec.unknown_linktype:
            if self.packets and self.linkdec.unsupported == self.packets:
                kinds = ", ".join(str(x) for x in sorted(self.linkdec.unknown_linktype))
                raise NoDecodableLinkType(f"unsupported link type {kinds}")
            f = UNKNOWN_LINKTYPE(f"{self.linkdec.unsupported} packets of link type(s) "
                                 f"{sorted(self.linkdec.unknown_linktype)} were skipped")
            self.capture_findings[f.severity] += 1
            yield f

    # ------------------------------------------------------------ conversations
    def _segment(self, seg: TcpSegment, number: int, ts: float) -> Iterator[Event]:
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        rkey = (seg.dst, seg.dport, seg.src, seg.sport)
        conv = self._live.get(key) or self._live.get(rkey)
        syn_only = seg.flags & (SYN | ACK) == SYN
        if conv is not None and syn_only and conv.isn_client is not None and conv.isn_client != seg.seq:
            # Port reuse: a fresh SYN on the same 4-tuple starts a new conversation.
            yield from self._close(conv, ts)
            conv = None
        if conv is None:
            old = self._closed.get(key) or self._closed.get(rkey)
            if old is not None and not seg.flags & SYN:
                old.packets += 1  # a straggler (last ACK, late retransmission) of a closed one
                old.last_ts = ts
                return
            conv = self._open(seg, ts)
        info = conv.info
        direction = Direction.C2S if (seg.src, seg.sport) == info.client else Direction.S2C
        info.packets += 1
        info.last_ts = ts
        side = conv.sides[direction]
        events: list[Data | Gap | Note] = []
        if seg.flags & SYN:
            side.reasm.syn(seg.seq)
            if direction is Direction.C2S:
                conv.isn_client = seg.seq
        if seg.flags & ACK:
            events_peer = conv.sides[direction.other].reasm.peer_ack(seg.ack, number, ts)
            if events_peer:
                yield from self._stream(conv, direction.other, events_peer, ts)
        if seg.payload or seg.flags & FIN:
            events = side.reasm.segment(seg.seq, seg.payload, bool(seg.flags & FIN), number, ts)
            if events:
                yield from self._stream(conv, direction, events, ts)
                # Heuristics may have swapped the roles.
                direction = Direction.C2S if conv.sides[Direction.C2S] is side else Direction.S2C
        if seg.flags & FIN:
            side.fin = True
        if seg.flags & RST or (side.fin and conv.sides[direction.other].fin):
            info.complete = not conv.midstream
            yield from self._close(conv, ts)

    def _open(self, seg: TcpSegment, ts: float) -> _Conversation:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        midstream = not seg.flags & SYN
        if seg.flags & SYN:
            client, server = (a, b) if not seg.flags & ACK else (b, a)
        elif self._port_proto(b[1]) or not self._port_proto(a[1]) and b[1] < a[1]:
            client, server = a, b
        else:
            client, server = b, a
        info = FlowInfo(id=len(self.flows) + 1, client=client, server=server, first_ts=ts, last_ts=ts)
        self.flows.append(info)
        conv = _Conversation(info, self.max_buffer, midstream)
        name = self._port_proto(server[1]) or self._port_proto(client[1])
        if name:
            self._choose(conv, self.dissectors[name])
        self._live[(client[0], client[1], server[0], server[1])] = conv
        if not self.dissectors:
            conv.undecided = False  # nothing could decode it: only reassemble
            self._index(conv)
        return conv

    def _port_proto(self, port: int) -> str | None:
        return self.decode_as.get(port) or self.by_port.get(port)

    def _choose(self, conv: _Conversation, dissector: Dissector) -> None:
        conv.dissector = dissector
        try:
            conv.conn = dissector.connection(conv.midstream)
        except Exception as exc:  # a broken plugin leaves the conversation undecoded, not the run dead
            conv.conn = None
            conv.info.protocol = dissector.name
            self._startup_errors.append(self._account(conv, _dissector_crash(conv, exc)))
        conv.info.protocol = dissector.name
        conv.undecided = False
        self._index(conv)

    def _sniff(self, conv: _Conversation, direction: Direction) -> bool:
        """Try the heuristics; True when it swapped the client and server roles."""
        data = bytes(conv.sides[direction].sniff_buf)
        best: tuple[float, Dissector | None, bool | None] = (0.0, None, None)
        for d in self.dissectors.values():
            try:
                verdict = d.sniff(data)
            except Exception:  # a heuristic must never take the engine down
                continue
            if verdict.confidence > best[0]:
                best = (verdict.confidence, d, verdict.from_client)
        confidence, dissector, from_client = best
        if dissector is None or confidence < SNIFF_THRESHOLD:
            if len(data) >= SNIFF_LIMIT:
                conv.undecided = False  # give up: the conversation stays undecoded
                self._index(conv)
            return False
        swap = conv.midstream and from_client is not None and from_client != (direction is Direction.C2S)
        if swap:
            self._swap_roles(conv)
        self._choose(conv, dissector)
        return swap

    def _swap_roles(self, conv: _Conversation) -> None:
        info = conv.info
        info.client, info.server = info.server, info.client
        info.bytes = {Direction.C2S: info.bytes[Direction.S2C], Direction.S2C: info.bytes[Direction.C2S]}
        c, s = conv.sides[Direction.C2S], conv.sides[Direction.S2C]
        conv.sides = {Direction.C2S: s, Direction.S2C: c}
        conv.pending = [(d.other, ev) for d, ev in conv.pending]
        key_old = next(k for k, v in self._live.items() if v is conv)
        del self._live[key_old]
        self._live[(info.client[0], info.client[1], info.server[0], info.server[1])] = conv

    # ------------------------------------------------------------------ streams
    def _stream(self, conv: _Conversation, direction: Direction, events: list[Data | Gap | Note],
                ts: float) -> Iterator[Event]:
        info = conv.info
        for ev in events:
            if isinstance(ev, Note):
                ev.finding.flow = info.id
                yield self._account(conv, ev.finding)
                continue
            if isinstance(ev, Gap):
                f = GAP(f"{ev.length} bytes missing from the {direction} stream at offset {ev.offset} "
                        f"(capture loss)")
                f.flow, f.frame = info.id, ev.packet
                yield self._account(conv, f)
            else:
                info.bytes[direction] += len(ev.data)
            if conv.undecided:
                conv.pending.append((direction, ev))
                if isinstance(ev, Data):
                    buf = conv.sides[direction].sniff_buf
                    if len(buf) < SNIFF_LIMIT:
                        buf += ev.data[:SNIFF_LIMIT - len(buf)]
                    if self._sniff(conv, direction):
                        direction = direction.other
                if conv.conn is not None:
                    pending, conv.pending = conv.pending, []
                    for d, p in pending:
                        yield from self._deliver(conv, d, p)
                elif not conv.undecided:
                    conv.pending.clear()
                continue
            if conv.conn is not None:
                yield from self._deliver(conv, direction, ev)

    def _deliver(self, conv: _Conversation, direction: Direction, ev: Data | Gap) -> list[Event]:
        """Hand stream bytes (or a hole) to the dissector; what it returns, stamped."""
        conn = conv.conn
        assert conn is not None
        try:
            if type(ev) is Data:
                segs = conv.sides[direction].segments
                segs.append((ev.offset + len(ev.data), ev.packet, ev.ts))
                if len(segs) > 100_000:
                    segs.popleft()
                out = conn.feed(direction, ev.data, ev.ts)
            else:
                out = conn.gap(direction, ev.length, ev.ts)
            return self._emit(conv, out) if out else []
        except Exception as exc:  # a dissector bug must not end the whole analysis
            return [self._account(conv, _dissector_crash(conv, exc))]

    def _emit(self, conv: _Conversation, out: Iterable[Event]) -> list[Event]:
        """Stamp a dissector's frames and findings with where they came from."""
        info = conv.info
        sides = conv.sides
        fid = info.id
        protocol = info.protocol or ""
        counts = info.findings
        result: list[Event] = []
        n_frames = 0
        for ev in out:
            if isinstance(ev, Frame):
                side = sides[ev.direction]
                segs = side.segments
                start = ev.offset
                while len(segs) > 1 and segs[0][0] <= start:
                    segs.popleft()
                if segs and segs[0][0] >= start + ev.size:  # the frame lies in one segment
                    _, last, ts = segs[0]
                    ev.packets = (last, last)
                else:
                    first, last, ts = side.packets_for(start, start + ev.size)
                    ev.packets = (first, last)
                ev.ts = ts
                ev.flow = fid
                ev.src = side.endpoint
                ev.dst = side.peer
                ev.protocol = protocol
                if ev.dialect:
                    info.dialect = ev.dialect
                n_frames += 1
                for f in ev.findings:
                    f.flow, f.frame = fid, last
                    counts[f.severity] += 1
                result.append(ev)
            else:
                ev.flow = fid
                if ev.related is not None:
                    ev.frame = ev.related.packets[1]
                    ev.related = None
                counts[ev.severity] += 1
                result.append(ev)
        info.frames += n_frames
        return result

    def _account(self, conv: _Conversation, f: Finding) -> Finding:
        """Count a finding against its conversation."""
        conv.info.findings[f.severity] += 1
        return f

    def _close(self, conv: _Conversation, ts: float) -> Iterator[Event]:
        if conv.closed:
            return
        conv.closed = True
        self._unindex(conv)
        for direction, side in conv.sides.items():
            events = side.reasm.flush(ts)
            if events:
                yield from self._stream(conv, direction, events, ts)
        if conv.undecided and conv.pending and self.dissectors:
            # Short conversation: decide on whatever arrived.
            for direction in (Direction.C2S, Direction.S2C):
                if conv.sides[direction].sniff_buf and conv.conn is None:
                    self._sniff(conv, direction)
            if conv.conn is not None:
                pending, conv.pending = conv.pending, []
                for d, p in pending:
                    yield from self._deliver(conv, d, p)
        if conv.conn is not None:
            try:
                yield from self._emit(conv, conv.conn.end(ts))
            except Exception as exc:
                yield self._account(conv, _dissector_crash(conv, exc))
            if conv.conn.dialect:
                conv.info.dialect = conv.conn.dialect
        for k, v in list(self._live.items()):
            if v is conv:
                del self._live[k]
                self._closed[k] = conv.info  # only the summary: the stream state is freed
                if len(self._closed) > CLOSED_KEEP:
                    self._closed.popitem(last=False)


def _packed(ip: str) -> bytes:
    """An address as packets carry it (4 bytes for IPv4, 16 for IPv6)."""
    return socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)


def _dissector_crash(conv: _Conversation, exc: Exception) -> Finding:
    f = DISSECTOR_ERROR(f"{conv.info.protocol} dissector failed: {type(exc).__name__}: {exc}")
    f.flow = conv.info.id
    return f



def analyze_file(path: str, decode_as: dict[int, str] | None = None) -> Iterator[Event]:
    """Convenience: every frame and finding of one capture file, in order."""
    return Analyzer(decode_as=decode_as).run(read_packets(path))
