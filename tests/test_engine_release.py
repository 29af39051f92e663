"""Time and release: deadlines tick without bytes, closed conversations are finished at once,
idle ones expire, and 100,000 short conversations leave the engine's state bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.engine import CLOSED_KEEP, Analyzer
from analyzer.packets import ACK, FIN, PSH, SYN
from analyzer.pcapwrite import Segment, TcpConversation, ip_packet, write_capture
from tests.toy import PING_TIMEOUT, ToyDissector

ETH = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"


def packets_of(path: Path) -> list[RawPacket]:
    return list(read_packets(str(path)))


def step(a: Analyzer, packets: list[RawPacket]) -> list[tuple[int, object]]:
    """Every event with the number of the packet being processed when it came out."""
    # The analyzer pulls packets lazily and updates its count before each event it gives.
    return [(a.packets, ev) for ev in a.run(packets, final=False)]


def test_a_deadline_ticks_without_bytes_and_points_at_the_frame(tmp_path: Path):
    quiet = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    quiet.handshake()
    quiet.send("c2s", b"HELLO\nPING 1\n")  # packet 4; the server never answers
    busy = TcpConversation(("10.1.1.3", 50001), ("10.1.1.2", 7777), ts=101.0, step=1.0)
    busy.handshake()
    for i in range(10):  # one packet a second: capture time passes the ping's deadline
        busy.send("c2s", b"LINE %d\n" % i)
    p = tmp_path / "t.pcap"
    write_capture(str(p), [quiet, busy])
    pkts = packets_of(p)
    a = Analyzer({"toy": ToyDissector()})
    seen = step(a, pkts)
    unanswered = [(n, ev) for n, ev in seen if isinstance(ev, Finding) and ev.id == "toy.ping.unanswered"]
    assert len(unanswered) == 1
    n, f = unanswered[0]
    # Reported at the first packet at or after the deadline, long before the conversation ends.
    due = next(i for i, pk in enumerate(pkts, 1) if pk.ts >= quiet.segments[3].ts + PING_TIMEOUT)
    assert n == due
    assert (f.flow, f.frame, f.related) == (1, 4, None)  # frame: the PING's packet, from its FrameRef
    assert f.community_id == a.flows[0].community_id
    assert a.live == 2  # ticking did not finish it


def test_fin_on_both_sides_and_rst_release_at_once(tmp_path: Path):
    fin = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    fin.handshake()
    fin.send("c2s", b"HELLO\n")
    fin.close()
    rst = TcpConversation(("10.1.1.1", 50001), ("10.1.1.2", 7777), ts=100.0005)
    rst.handshake()
    rst.send("c2s", b"HELLO\n")
    rst.rst("s2c")
    p = tmp_path / "c.pcap"
    write_capture(str(p), [fin, rst])
    toy = ToyDissector()
    a = Analyzer({"toy": toy})
    live_after = []
    for pkt in packets_of(p):
        list(a.run([pkt], final=False))
        live_after.append(a.live)
    # Interleaved: the RST (packet 10) finishes one conversation, the second FIN (packet 11) the
    # other, without waiting for the end of the capture; the last ACK (12) is a straggler.
    assert live_after == [1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 0, 0]
    assert [c.ended for c in toy.connections] == [True, True]
    assert len(a._closed) == 2 and not a._fast and not a._live
    assert a.flows[0].packets == 7  # the straggler is counted on its conversation


def test_idle_conversations_expire_and_a_later_packet_starts_a_new_one(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    c.handshake()
    c.send("c2s", b"HELLO\n")
    c.ts += 120  # two minutes of silence
    c.send("c2s", b"AGAIN\n")
    p = tmp_path / "idle.pcap"
    write_capture(str(p), [c])
    pkts = packets_of(p)

    toy = ToyDissector()
    a = Analyzer({"toy": toy}, idle_timeout=60)
    events = list(a.run(pkts))
    assert [(e.flow, e.info) for e in events if isinstance(e, Frame)] == [(1, "HELLO"), (2, "AGAIN")]
    assert len(a.flows) == 2 and toy.connections[0].ended
    assert toy.connections[1].raw["c2s"] == b"AGAIN\n"
    assert a.flows[1].client == ("10.1.1.1", 50000)  # mid-stream: roles from the toy's port

    toy = ToyDissector()
    a = Analyzer({"toy": toy}, idle_timeout=None)  # never expire
    events = list(a.run(pkts))
    assert [(e.flow, e.info) for e in events if isinstance(e, Frame)] == [(1, "HELLO"), (1, "AGAIN")]


def _short_conversations(n: int, spacing: float) -> Iterator[RawPacket]:
    """``n`` established conversations: three in four closed with FIN on both sides, the others
    simply left open (only idle expiry can finish those). Built on the fly: the input holds no
    memory."""
    number = 0
    for i in range(n):
        ts = 1_000.0 + i * spacing
        client = (f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", 1024 + i % 50000)
        server = ("192.168.0.1", 7777)
        segs = [Segment(ts, client, server, 100, 0, SYN), Segment(ts, server, client, 900, 101, SYN | ACK),
                Segment(ts, client, server, 101, 901, ACK),
                Segment(ts, client, server, 101, 901, ACK | PSH, b"HELLO\n")]
        if i % 4:
            segs += [Segment(ts, client, server, 107, 901, FIN | ACK), Segment(ts, server, client, 901, 108, FIN | ACK),
                     Segment(ts, client, server, 108, 902, ACK)]
        for s in segs:
            number += 1
            data = ETH + ip_packet(s)
            yield RawPacket(number, s.ts, 1, data, len(data))


def test_100000_short_conversations_run_with_bounded_state():
    n, spacing, idle = 100_000, 0.01, 20.0
    toy = ToyDissector()
    toy.connections = _Counting()  # type: ignore[assignment]  # keep no connection objects alive
    a = Analyzer({"toy": toy}, idle_timeout=idle)
    # Conversations left open live at most `idle` seconds: about idle / spacing / 4 of them at once.
    bound = int(idle / spacing / 4) + 100
    peak = {"live": 0, "fast": 0, "heap": 0, "closed": 0}
    frames = 0
    for ev in a.run(_short_conversations(n, spacing), final=False):
        frames += isinstance(ev, Frame)
        if a.packets % 997 == 0:
            for k, v in (("live", a.live), ("fast", len(a._fast)), ("heap", len(a._heap)),
                         ("closed", len(a._closed))):
                peak[k] = max(peak[k], v)
    assert frames == n and toy.connections.made == n  # type: ignore[attr-defined]
    assert len(a.flows) == n
    assert peak["live"] <= bound, peak
    assert peak["fast"] <= 2 * bound, peak  # one entry per direction of each open conversation
    # Closed conversations leave stale heap entries: compaction keeps them below the valid ones
    # (without it the heap would hold every conversation of the last `idle` seconds, 2,000).
    assert peak["heap"] <= 2 * peak["live"] + 65, peak
    assert peak["closed"] <= CLOSED_KEEP, peak
    assert a.live <= bound
    list(a.finish())
    assert a.live == 0 and not a._fast


class _Counting(list):  # type: ignore[type-arg]
    """Stands in for ToyDissector.connections: counts connections without keeping them."""

    made = 0

    def append(self, _conn: object) -> None:
        self.made += 1
