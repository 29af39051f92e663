"""The engine with a toy dissector: conversations, roles, protocol choice, gaps, findings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.engine import Analyzer, NoDecodableLinkType
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.toy import ToyDissector


def run(path: Path, decode_as: dict[int, str] | None = None, toy: ToyDissector | None = None):
    toy = toy or ToyDissector()
    a = Analyzer({"toy": toy}, decode_as)
    events = list(a.run(read_packets(str(path))))
    frames = [e for e in events if isinstance(e, Frame)]
    findings = [e for e in events if isinstance(e, Finding)]
    return a, toy, frames, findings


def conv(port: int = 7777, **kw) -> TcpConversation:
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", port), **kw)
    return c


def test_frames_carry_packets_times_and_endpoints(tmp_path: Path):
    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO there\nPUBLISH one\n", mss=10)  # segments of 10 bytes: frames span packets
    c.send("s2c", b"OK 1\n")
    c.close()
    p = tmp_path / "a.pcap"
    write_capture(str(p), [c])
    a, toy, frames, findings = run(p)
    assert [(f.command, f.direction, f.packets) for f in frames] == [
        ("HELLO", "c2s", (4, 5)), ("PUBLISH", "c2s", (5, 6)), ("OK", "s2c", (7, 7))]
    assert frames[0].src == "10.1.1.1:50000" and frames[0].dst == "10.1.1.2:7777"
    assert frames[2].src == "10.1.1.2:7777"
    assert frames[0].ts == pytest.approx(c.segments[4].ts)
    assert all(f.protocol == "toy" and f.flow == 1 for f in frames)
    assert findings == []
    assert len(a.flows) == 1 and a.flows[0].complete and a.flows[0].frames == 3
    assert toy.connections[0].ended


def test_reordered_and_duplicated_segments(tmp_path: Path):
    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO\n" + b"".join(b"LINE %d\n" % i for i in range(50)), mss=7)
    c.swap(5, 9)
    c.duplicate(12)
    c.overlap(20, 3)
    c.close()
    p = tmp_path / "r.pcap"
    write_capture(str(p), [c])
    _, toy, frames, findings = run(p)
    assert [f.info for f in frames] == ["HELLO"] + [f"LINE {i}" for i in range(50)]
    assert findings == []


def test_loss_is_one_gap_finding_and_the_dissector_resynchronises(tmp_path: Path):
    c = conv()
    c.handshake()
    lines = b"HELLO\n" + b"".join(b"LINE %02d\n" % i for i in range(10))  # 8 bytes each after HELLO
    segs = c.send("c2s", lines, mss=8, ack=True)
    c.close()
    lost = c.segments.index(segs[4])
    c.drop(lost)
    p = tmp_path / "g.pcap"
    write_capture(str(p), [c])
    _, toy, frames, findings = run(p)
    gaps = [f for f in findings if f.id == "tcp.gap"]
    assert len(gaps) == 1 and gaps[0].flow == 1 and gaps[0].category == "capture"
    assert "8 bytes missing" in gaps[0].message
    assert toy.connections[0].gaps == [("c2s", 8)]
    infos = [f.info for f in frames]
    # Bytes 32..39 are lost: LINE 03 and LINE 04 are broken; the rest decodes.
    assert infos == ["HELLO", "LINE 00", "LINE 01", "LINE 02", "LINE 05", "LINE 06", "LINE 07", "LINE 08", "LINE 09"]


def test_port_reuse_after_close_starts_a_new_conversation(tmp_path: Path):
    a1 = conv(isn_client=100)
    a1.handshake()
    a1.send("c2s", b"HELLO first\n")
    a1.close()
    a2 = conv(isn_client=900000, ts=a1.ts + 1)
    a2.handshake()
    a2.send("c2s", b"HELLO second\n")
    a2.rst("s2c")
    p = tmp_path / "reuse.pcap"
    write_capture(str(p), [a1, a2])
    a, _, frames, _ = run(p)
    assert [(f.flow, f.info) for f in frames] == [(1, "HELLO first"), (2, "HELLO second")]
    assert len(a.flows) == 2


def test_midstream_capture_roles_from_the_default_port(tmp_path: Path):
    c = conv()
    c.handshake()
    c.send("s2c", b"OK 0\nPARTIAL")
    c.send("c2s", b"PUBLISH x\n")
    c.segments = c.segments[3:]  # the capture starts after the handshake
    p = tmp_path / "mid.pcap"
    write_capture(str(p), [c])
    a, _, frames, _ = run(p)
    assert a.flows[0].server == ("10.1.1.2", 7777)
    assert [(f.direction, f.info) for f in frames] == [("s2c", "OK 0"), ("c2s", "PUBLISH x")]


def test_heuristic_on_a_non_standard_port_and_role_swap(tmp_path: Path):
    c = conv(port=9000)
    c.handshake()
    c.send("c2s", b"HELLO\n")
    p = tmp_path / "sniff.pcap"
    write_capture(str(p), [c])
    _, _, frames, _ = run(p)
    assert [(f.protocol, f.direction) for f in frames] == [("toy", "c2s")]

    # Mid-stream, the first bytes come from the side with the higher port: the heuristic says it is
    # the server, so the roles swap.
    m = TcpConversation(("10.1.1.1", 9000), ("10.1.1.2", 40001))
    m.handshake()
    m.send("s2c", b"WELCOME\n")
    m.send("c2s", b"PUBLISH a\n")
    m.segments = m.segments[3:]
    p2 = tmp_path / "swap.pcap"
    write_capture(str(p2), [m])
    a, _, frames, _ = run(p2)
    assert a.flows[0].server == ("10.1.1.2", 40001)
    assert [(f.direction, f.info) for f in frames] == [("s2c", "WELCOME"), ("c2s", "PUBLISH a")]


def test_decode_as_overrides_ports_and_heuristics(tmp_path: Path):
    c = conv(port=9001)
    c.handshake()
    c.send("c2s", b"NOT A GREETING\n")
    p = tmp_path / "da.pcap"
    write_capture(str(p), [c])
    assert run(p)[2] == []
    assert [f.command for f in run(p, {9001: "toy"})[2]] == ["NOT"]


def test_frame_findings_get_flow_and_packet(tmp_path: Path):
    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO\nBAD thing\n")
    p = tmp_path / "bad.pcap"
    write_capture(str(p), [c])
    a, _, frames, _ = run(p)
    f = frames[1].findings[0]
    assert (f.id, f.flow, f.frame) == ("toy.line.bad", 1, 4)
    assert a.flows[0].findings == {"error": 0, "warning": 1, "note": 0}


def test_snaplen_cut_packet_is_a_capture_finding(tmp_path: Path):
    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO " + b"x" * 300 + b"\nNEXT\n")
    p = tmp_path / "snap.pcap"
    write_capture(str(p), [c], snaplen=200)
    _, _, frames, findings = run(p)
    assert [f.id for f in findings][:1] == ["capture.truncated_packet"]
    assert findings[0].frame == 4


def test_a_crashing_dissector_is_a_finding_not_a_crash(tmp_path: Path):
    class Boom(ToyDissector):
        def connection(self, midstream):
            conn = super().connection(midstream)

            def feed(direction, data, ts):
                raise RuntimeError("kaput")
            conn.feed = feed  # type: ignore[method-assign]
            return conn

    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO\n")
    p = tmp_path / "boom.pcap"
    write_capture(str(p), [c])
    _, _, frames, findings = run(p, toy=Boom())
    assert [f.id for f in findings] == ["engine.dissector_error"]
    assert "kaput" in findings[0].message


def test_only_unknown_link_types_is_an_error():
    a = Analyzer({"toy": ToyDissector()})
    with pytest.raises(NoDecodableLinkType):
        list(a.run([RawPacket(1, 0.0, 147, b"abc", 3), RawPacket(2, 0.0, 147, b"abc", 3)]))


@settings(max_examples=100, deadline=None)
@given(c2s=st.binary(min_size=1, max_size=2000), s2c=st.binary(min_size=1, max_size=2000),
       mss=st.integers(1, 300), rnd=st.randoms(use_true_random=False), dups=st.integers(0, 5),
       link=st.sampled_from(["ethernet", "vlan", "sll", "sll2", "null", "raw"]),
       fmt=st.sampled_from(["pcap", "pcapng"]),
       hosts=st.sampled_from([("10.1.1.1", "10.1.1.2"), ("2001:db8::1", "2001:db8::2")]))
def test_both_streams_reassemble_exactly_through_the_engine(tmp_path_factory, c2s, s2c, mss, rnd, dups, link, fmt,
                                                            hosts):
    c = TcpConversation((hosts[0], 50000), (hosts[1], 7777), isn_client=rnd.randrange(2**32),
                        isn_server=rnd.randrange(2**32))
    c.handshake()
    c.send("c2s", c2s, mss=mss)
    c.send("s2c", s2c, mss=mss)
    body = c.segments[3:]
    # Acknowledgements stay at the start of each stream: a peer acknowledging bytes the capture has
    # not shown yet is evidence of loss (tested apart), which a free reordering would fake.
    for seg in body:
        seg.ack = c.segments[1 if seg.src == c.client else 0].seq + 1
    for _ in range(dups):
        body.append(rnd.choice(body))
    rnd.shuffle(body)
    c.segments = c.segments[:3] + body
    c.close()
    p = tmp_path_factory.mktemp("prop") / "p.pcap"
    write_capture(str(p), [c], link=link, fmt=fmt)
    a, toy, _, findings = run(p)
    assert len(a.flows) == 1
    assert bytes(toy.connections[0].raw["c2s"]) == c2s
    assert bytes(toy.connections[0].raw["s2c"]) == s2c
    assert not [f for f in findings if f.id.startswith("tcp.")]


def test_a_dissector_failing_to_start_is_a_finding(tmp_path: Path):
    class NoStart(ToyDissector):
        def connection(self, midstream):
            raise ValueError("cannot start")

    c = conv()
    c.handshake()
    c.send("c2s", b"HELLO\n")
    p = tmp_path / "nostart.pcap"
    write_capture(str(p), [c])
    a, _, frames, findings = run(p, toy=NoStart())
    assert frames == [] and [f.id for f in findings] == ["engine.dissector_error"]
    assert a.flows[0].findings["error"] == 1
