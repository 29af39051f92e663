"""Checkpoints: stop after any packet, save the analyzer as JSON, restore it in a new analyzer and
go on; the output is the straight run's, frame for frame and finding for finding."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analyzer.api import Connection, Event, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.engine import Analyzer
from analyzer.jsonout import finding_json, frame_json
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.toy import ToyDissector

ROOT = Path(__file__).resolve().parent.parent


def normal(events: list[Event]) -> list[str]:
    return [json.dumps(frame_json(e) if isinstance(e, Frame) else finding_json(e), sort_keys=True, default=str)
            for e in events]


def toy_capture(tmp_path: Path) -> list[RawPacket]:
    """Everything a checkpoint must carry: a deadline, out-of-order data, a loss, bytes held
    back while the protocol is unknown, a role swap, an idle expiry, a close, a straggler."""
    a = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0, step=0.5)
    a.handshake()
    a.send("c2s", b"HELLO\nPING 1\n", mss=4)
    segs = a.send("c2s", b"LINE 1\nLINE 2\nBAD x\nLINE 3\n", mss=5, ack=True)
    a.swap(a.segments.index(segs[0]), a.segments.index(segs[1]))
    a.drop(a.segments.index(segs[3]))
    a.send("s2c", b"PING 2\n")
    a.send("c2s", b"PONG\n")
    a.close()
    # Unknown port: the protocol is recognised only from the content; mid-stream, from the side
    # with the higher port, so the roles swap.
    b = TcpConversation(("10.1.1.3", 9000), ("10.1.1.4", 40001), ts=100.2, step=0.7)
    b.handshake()
    b.send("s2c", b"WEL")
    b.send("c2s", b"PUBLISH a\n")
    b.send("s2c", b"COME\nOK\n")
    b.segments = b.segments[3:]
    # Silent for longer than the idle timeout, then more bytes: a new conversation.
    c = TcpConversation(("10.1.1.5", 50002), ("10.1.1.2", 7777), ts=101.0, step=0.3)
    c.handshake()
    c.send("c2s", b"HELLO\nPING 3\n")
    c.ts += 40
    c.send("c2s", b"LATE\n")
    c.close()
    p = tmp_path / "toy.pcap"
    write_capture(str(p), [a, b, c])
    return list(read_packets(str(p)))


def resumed_run(make: callable, packets: list[RawPacket], cut: int) -> tuple[list[str], list, Analyzer]:
    first = make()
    events = list(first.run(packets[:cut], final=False))
    state = json.loads(json.dumps(first.checkpoint()))  # through JSON, as to another process
    second = make()
    second.restore(state)
    events += list(second.run(packets[cut:]))
    return normal(events), [f.to_plain() for f in second.flows], second


def test_checkpoint_at_every_packet_boundary_of_a_toy_capture(tmp_path: Path):
    packets = toy_capture(tmp_path)

    def make() -> Analyzer:
        return Analyzer({"toy": ToyDissector()}, idle_timeout=30)

    straight = make()
    expected = normal(list(straight.run(packets)))
    flows = [f.to_plain() for f in straight.flows]
    ids = {json.loads(x)["id"] for x in expected if json.loads(x)["type"] == "finding"}
    # The capture exercises what it should.
    assert {"toy.ping.unanswered", "tcp.gap", "toy.stream.gap"} <= ids
    assert len(flows) == 4 and straight.flows[2].server == ("10.1.1.4", 40001)
    for cut in range(len(packets) + 1):
        got, got_flows, _ = resumed_run(make, packets, cut)
        assert got == expected, f"cut after packet {cut}"
        assert got_flows == flows, f"cut after packet {cut}"


def test_a_checkpoint_is_plain_json_and_restores_only_into_a_fresh_analyzer(tmp_path: Path):
    packets = toy_capture(tmp_path)
    a = Analyzer({"toy": ToyDissector()})
    list(a.run(packets[:20], final=False))
    state = a.checkpoint()
    assert json.loads(json.dumps(state)) == state
    assert state["live"]
    with pytest.raises(ValueError):
        a.restore(state)
    with pytest.raises(ValueError):
        Analyzer({}).restore(state)  # the toy dissector is needed


def test_a_conversation_whose_dissector_cannot_snapshot_is_finished_with_a_note(tmp_path: Path):
    class Opaque(ToyDissector):
        def connection(self, midstream: bool) -> Connection:
            conn = super().connection(midstream)
            conn.snapshot = Connection.snapshot.__get__(conn)  # type: ignore[method-assign]
            return conn

    packets = toy_capture(tmp_path)
    toy = Opaque()
    a = Analyzer({"toy": toy})
    events = list(a.run(packets[:12], final=False))
    notes = [e for e in events if not isinstance(e, Frame) and e.id == "engine.checkpoint_finished"]
    assert notes and len(notes) == len(toy.connections) and all(c.ended for c in toy.connections)
    assert all(c.conn is None for c in a._live.values())  # what stays open is still undecided
    json.dumps(a.checkpoint())


CAPTURES = sorted(str(p.relative_to(ROOT / "captures")) for p in (ROOT / "captures").glob("*/*.pcap*"))


@pytest.mark.parametrize("capture", CAPTURES)
def test_checkpoint_inside_real_captures(capture: str):
    packets = list(read_packets(str(ROOT / "captures" / capture)))
    straight = Analyzer()
    expected = normal(list(straight.run(packets)))
    rng = random.Random(capture)
    for cut in sorted({1, len(packets) // 2, *rng.sample(range(len(packets)), 6)}):
        got, flows, _ = resumed_run(Analyzer, packets, cut)
        assert got == expected, f"cut after packet {cut}"
        assert flows == [f.to_plain() for f in straight.flows]
