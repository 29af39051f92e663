"""Community ID v1 of every conversation, checked against the spec's published vectors and the
reference implementation (the `communityid` package) as an oracle; stamped on frames, findings,
flows and fingerprints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import communityid
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.api import Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer, community_id
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.toy import ToyDissector

ROOT = Path(__file__).resolve().parent.parent


def test_published_vectors():
    # From the community-id-spec baseline (tcp lines of baseline/baseline_deflt.json).
    assert community_id(("128.232.110.120", 34855), ("66.35.250.204", 80)) == "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
    assert community_id(("66.35.250.204", 80), ("128.232.110.120", 34855)) == "1:LQU9qZlK+B5F3KDmev6m5PMibrg="


def _oracle(a: tuple[str, int], b: tuple[str, int]) -> str:
    return communityid.CommunityID().calc(communityid.FlowTuple.make_tcp(a[0], b[0], a[1], b[1]))


ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
ports = st.integers(0, 65535)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), v6=st.booleans(), same_ip=st.booleans())
def test_matches_the_reference_implementation(data, v6, same_ip):
    ip = ipv6 if v6 else ipv4
    a = (data.draw(ip), data.draw(ports))
    b = (a[0] if same_ip else data.draw(ip), data.draw(ports))
    assert community_id(a, b) == community_id(b, a) == _oracle(a, b)


def _toy_capture(tmp_path: Path, client_port: int, at: float, server: str = "10.1.1.2") -> Path:
    c = TcpConversation(("10.1.1.1", client_port), (server, 7777), ts=at)
    c.handshake()
    c.send("c2s", b"HELLO\nBAD one\n")
    c.send("s2c", b"OK\n")
    c.close()
    p = tmp_path / f"c{client_port}-{at}-{server}.pcap"
    write_capture(str(p), [c])
    return p


def test_stamped_on_flows_frames_and_findings_and_stable_in_fingerprints(tmp_path: Path):
    cid = _oracle(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    a = Analyzer({"toy": ToyDissector()})
    events = list(a.run(read_packets(str(_toy_capture(tmp_path, 50000, 1000.0)))))
    frames = [e for e in events if isinstance(e, Frame)]
    assert a.flows[0].community_id == cid
    assert frames and all(f.community_id == cid for f in frames)
    bad = [f for fr in frames for f in fr.findings]
    assert [f.id for f in bad] == ["toy.line.bad"] and bad[0].community_id == cid

    # The same behaviour at another time (another packet numbering) or from another client port (a
    # re-recording): the same fingerprint. The same behaviour with another server: another one.
    def fingerprints(path: Path) -> list[str]:
        evs = Analyzer({"toy": ToyDissector()}).run(read_packets(str(path)))
        return [f.fingerprint for e in evs if isinstance(e, Frame) for f in e.findings]

    assert fingerprints(_toy_capture(tmp_path, 50000, 5000.0)) == [bad[0].fingerprint]
    assert fingerprints(_toy_capture(tmp_path, 50001, 1000.0)) == [bad[0].fingerprint]
    assert fingerprints(_toy_capture(tmp_path, 50000, 1000.0, server="10.1.1.3")) != [bad[0].fingerprint]


def test_in_json_lines_and_flows(tmp_path: Path):
    p = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm_snaplen96.pcap"
    run = [sys.executable, "-m", "analyzer"]
    lines = [json.loads(x) for x in subprocess.run([*run, "inspect", str(p), "--format", "jsonl"], check=True,
                                                   capture_output=True, text=True).stdout.splitlines()]
    flows = [json.loads(x) for x in subprocess.run([*run, "flows", str(p), "--json"], check=True,
                                                   capture_output=True, text=True).stdout.splitlines()]
    by_flow = {f["flow"]: f["community_id"] for f in flows}
    assert by_flow == {f["flow"]: _oracle(tuple(_ep(f["client"])), tuple(_ep(f["server"]))) for f in flows}
    assert lines and all(x["community_id"] == by_flow.get(x["flow"]) for x in lines)
    assert "file" not in lines[0]  # only when several files are read
    table = subprocess.run([*run, "flows", str(p)], check=True, capture_output=True, text=True).stdout
    assert all(cid in table for cid in by_flow.values())


def _ep(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def test_flow_level_findings_have_no_frame_and_gaps_point_where_data_resumes(tmp_path: Path):
    p = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm_snaplen96.pcap"
    events = list(Analyzer().run(read_packets(str(p))))
    findings = [e for e in events if isinstance(e, Finding)]
    assert all(f.frame != 0 for f in findings)
    gaps = [f for f in findings if f.id == "tcp.gap"]
    # The last bytes of flow 1 were announced (FIN/ACK) but never captured: no packet resumes
    # the stream, so the gap belongs to the flow, not to a packet.
    assert any(f.frame is None and f.flow == 1 for f in gaps)

    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    c.handshake()
    segs = c.send("c2s", b"HELLO\n" + b"LINE\n" * 6, mss=5, ack=True)
    c.close()
    c.drop(c.segments.index(segs[2]))
    resumes = c.segments.index(segs[3]) + 1  # the segment after the hole, as a packet number
    q = tmp_path / "gap.pcap"
    write_capture(str(q), [c])
    events = list(Analyzer({"toy": ToyDissector()}).run(read_packets(str(q))))
    gaps = [e for e in events if isinstance(e, Finding) and e.id == "tcp.gap"]
    # The ACK after the next segment proves the loss; the gap is reported at that next segment.
    assert [g.frame for g in gaps] == [resumes]


@pytest.mark.parametrize("name", ["rstream_publish_confirm.pcap"])
def test_flows_json_keeps_every_key(name: str):
    p = ROOT / "captures" / "rabbitmq_stream" / name
    out = subprocess.run([sys.executable, "-m", "analyzer", "flows", str(p), "--json"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    keys = list(json.loads(out[0]))
    assert keys == ["flow", "client", "server", "community_id", "protocol", "dialect", "packets", "frames",
                    "bytes_c2s", "bytes_s2c", "findings", "first_ts", "last_ts", "undecoded"]


def test_a_conversations_id_is_made_when_first_asked_for() -> None:
    """FlowInfo makes its Community ID on first read (a findings-only run never needs most of
    them): the value of its endpoints, the same after they trade places, kept by a checkpoint."""
    from analyzer.flows import FlowInfo

    info = FlowInfo(1, ("10.0.0.1", 40000), ("10.0.0.2", 5672))
    assert info._cid is None
    want = community_id(("10.0.0.1", 40000), ("10.0.0.2", 5672))
    info.client, info.server = info.server, info.client  # as the engine does when it learns the roles
    assert info.community_id == want and info._cid == want
    plain = info.to_plain()
    assert want in plain and FlowInfo.from_plain(json.loads(json.dumps(plain))).community_id == want
    unasked = FlowInfo.from_plain(FlowInfo(2, ("10.0.0.3", 1), ("10.0.0.4", 2)).to_plain())
    assert unasked.community_id == community_id(("10.0.0.3", 1), ("10.0.0.4", 2))
