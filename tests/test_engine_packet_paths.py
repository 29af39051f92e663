"""The packet loop's shortcuts against its general path: a packet of a known conversation in the
usual shape (IPv4 without options or IPv6 without extension headers, on a fixed-length link
header) is taken without building a TcpSegment: data and acknowledgements by the fast path,
SYN-ACK, FIN and RST straight to the conversation's general steps. With the shortcuts turned off
(no link type has a fixed-length header), every packet goes through the link decoder and the
conversation lookup; the events, every conversation's row and the counters must be the same, on
every bundled capture and on made-up conversations that end in every way, whole and sharded as
``--jobs`` runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analyzer import segment_feed
from analyzer.api import Frame
from analyzer.engine import Analyzer
from analyzer.packets import FIN
from analyzer.pcapwrite import TcpConversation, write_capture

ROOT = Path(__file__).parent.parent
CAPTURES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "captures").rglob("*.pcap*"))


def _event(ev: Any) -> tuple[Any, ...]:
    if isinstance(ev, Frame):
        return ("frame", ev.flow, ev.packets, ev.ts, ev.direction, ev.offset, ev.size, ev.protocol, ev.dialect,
                ev.info, tuple((f.id, f.frame, f.message) for f in ev.findings))
    return ("finding", ev.id, ev.flow, ev.frame, ev.severity, ev.message)


def _run(path: str, shard: tuple[int, int] | None = None) -> tuple[list[tuple], list[list], tuple]:
    a = Analyzer(shard=shard)
    events = [_event(ev) for ev in a.run_files([path])]
    rows = [f.to_plain() for f in a.flows if a.owns(f.id)]
    return events, rows, (a.packets, a.conversations, a.truncated_packets, dict(a.capture_findings))


def _both(path: str, monkeypatch: pytest.MonkeyPatch, shard: tuple[int, int] | None = None) -> tuple:
    shortcut = _run(path, shard)
    with monkeypatch.context() as m:
        m.setattr(segment_feed, "IP4TCP_BY_LINK", {})  # the packet loop's (compiled: a plain global)
        general = _run(path, shard)
    return shortcut, general


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_bundled_capture_decodes_alike_on_both_paths(capture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shortcut, general = _both(str(ROOT / capture), monkeypatch)
    assert shortcut == general


#: Client and server addresses of the made-up conversations, over IPv4 and over IPv6.
HOSTS = {"ipv4": ("10.9.0.{}", "10.9.1.1"), "ipv6": ("2001:db8::{}", "2001:db8:1::1")}


def _endings(hosts: tuple[str, str] = HOSTS["ipv4"]) -> list[TcpConversation]:
    """Conversations that end in every way the general steps tell apart."""
    convs = []

    def conv(i: int) -> TcpConversation:
        c = TcpConversation((hosts[0].format(i), 41000 + i), (hosts[1], 5672), ts=1_000.0 + i)
        convs.append(c)
        return c

    c = conv(1)  # an orderly close, both FINs acknowledged
    c.handshake()
    c.send("c2s", b"AMQP\x00\x00\x09\x01")
    c.close()
    c = conv(2)  # FIN carrying the last bytes, from the server, then from the client
    c.handshake()
    c.send("c2s", b"AMQP\x00\x00\x09\x01")
    for d, data in (("s2c", bytes.fromhex("0100000000000c000a000a0009000000000000ce")), ("c2s", b"x" * 300)):
        last = c.send(d, data)[-1]
        last.flags |= FIN
        c.seq[d] += 1
    c = conv(3)  # reset mid-stream by the client
    c.handshake()
    c.send("c2s", b"z" * 500, mss=100)
    c.rst("c2s")
    c = conv(4)  # the FIN ahead of data it follows (out of order), then a retransmitted FIN
    c.handshake()
    c.send("c2s", b"a" * 400, mss=100)
    fin = c.fin("c2s")
    c.swap(len(c.segments) - 1, len(c.segments) - 2)
    c.segments.append(fin)
    c.fin("s2c")
    c = conv(5)  # the SYN-ACK sent twice, then a loss before the close
    c.handshake()
    c.duplicate(1)
    c.send("s2c", b"b" * 300, mss=100)
    c.drop(len(c.segments) - 2)
    c.close()
    c = conv(6)  # a reset refusing the connection: the SYN, then the server's RST
    c.handshake()
    del c.segments[1:]
    c.rst("s2c")
    return convs


@pytest.mark.parametrize("family", sorted(HOSTS))
@pytest.mark.parametrize("shard", [None, (0, 2), (1, 2)])
def test_every_ending_alike_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          shard: tuple[int, int] | None, family: str) -> None:
    hosts = HOSTS[family]
    path = tmp_path / "endings.pcap"
    write_capture(str(path), _endings(hosts))
    # The port of a closed conversation used again: a new conversation on the same 4-tuple.
    again = TcpConversation((hosts[0].format(1), 41001), (hosts[1], 5672), ts=2_000.0, isn_client=90_000)
    again.handshake()
    again.send("c2s", b"AMQP\x00\x00\x09\x01")
    again.close()
    both = tmp_path / "both.pcap"
    write_capture(str(both), [*_endings(hosts), again])
    for p in (path, both):
        shortcut, general = _both(str(p), monkeypatch, shard)
        assert shortcut == general
        assert shortcut[2][1] == (7 if p is both else 6)
