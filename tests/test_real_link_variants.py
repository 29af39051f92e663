"""The capture layer on real tcpdump output: `-i any` with Linux cooked v2 headers in pcapng, and a
small snap length that cuts packets (captures/rabbitmq_stream/record_link_variants.sh)."""

from __future__ import annotations

from pathlib import Path

from analyzer.api import Finding, Frame, Severity
from analyzer.capture import read_packets
from analyzer.engine import analyze_file

HERE = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"


def split(path: Path) -> tuple[list[Frame], list[Finding]]:
    frames: list[Frame] = []
    findings: list[Finding] = []
    for e in analyze_file(str(path)):
        if isinstance(e, Frame):
            frames.append(e)
            findings.extend(e.findings)
        else:
            findings.append(e)
    return frames, findings


def test_any_interface_sll2_pcapng_decodes_like_the_loopback_recording():
    path = HERE / "rstream_consume_any_sll2.pcapng"
    assert {p.linktype for p in read_packets(str(path))} == {276}
    frames, findings = split(path)
    delivers = [f for f in frames if f.command == "Deliver"]
    offsets: list[int] = []
    for d in delivers:
        chunk = next(x for x in d.fields if x.name == "chunk")
        assert "verified" in (chunk.child("crc").display or "")
        entries = chunk.child("entries")
        offsets.extend(r.value for r in entries.children)  # simple entries: one record each
    assert offsets == list(range(300))
    assert len({f.flow for f in frames}) == 4
    assert not [f for f in findings if f.severity.rank >= Severity.WARNING.rank]


def test_snap_length_cuts_are_findings_and_decoding_goes_on():
    path = HERE / "rstream_publish_confirm_snaplen96.pcap"
    packets = list(read_packets(str(path)))
    cut = {p.number for p in packets if p.orig_len > len(p.data)}
    assert cut and all(len(p.data) == 96 for p in packets if p.number in cut)
    frames, findings = split(path)
    truncated = {f.frame for f in findings if f.id == "capture.truncated_packet"}
    assert truncated == cut
    gaps = [f for f in findings if f.id == "tcp.gap"]
    assert gaps and all(f.category == "capture" for f in gaps)
    assert not [f for f in findings if f.id == "engine.dissector_error"]
    # Frames that fit in 96 bytes still decode, in both directions, after each hole.
    assert {"SaslHandshake", "Heartbeat"} <= {f.command for f in frames}
