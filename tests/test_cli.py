"""The command line: formats, filters, the JSON Lines contract, and exit codes on bad input."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.pcapwrite import CaptureWriter, TcpConversation, write_capture
from tests.toy import toy_only  # noqa: F401 - the fixture, used by pytestmark

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("toy_only")


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    c.handshake()
    c.send("c2s", b"HELLO world\nBAD apple\n")
    c.send("s2c", b"OK \xff\xfe\n")
    c.close()
    d = TcpConversation(("10.1.1.3", 50001), ("10.1.1.2", 7777), ts=c.ts + 1)
    d.handshake()
    segs = d.send("c2s", b"HELLO again\nLINE 1\nLINE 2\n", mss=8, ack=True)
    d.segments.remove(segs[1])
    d.close()
    p = tmp_path / "toy.pcap"
    write_capture(str(p), [c, d])
    return p


def invoke(*args: str):
    return runner.invoke(cli.app, list(args), catch_exceptions=False)


def test_jsonl_contract(capture: Path):
    r = invoke("inspect", str(capture), "--format", "jsonl")
    assert r.exit_code == 0
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    frames = [x for x in lines if x["type"] == "frame"]
    findings = [x for x in lines if x["type"] == "finding"]
    keys = {"type", "frame", "packets", "ts", "flow", "community_id", "src", "dst", "direction", "protocol",
            "dialect", "command", "code", "size", "fields", "findings"}
    assert all(keys <= set(f) for f in frames)
    first = frames[0]
    assert first["frame"] == first["packets"][1] == 4 and first["direction"] == "c2s"
    assert first["src"] == "10.1.1.1:50000" and first["protocol"] == "toy" and first["size"] == 12
    assert first["fields"] == {"line": "HELLO world"}
    fingerprint = frames[1]["findings"][0].pop("fingerprint")
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint)
    assert frames[1]["findings"] == [{"id": "toy.line.bad", "severity": "warning", "category": "value",
                                      "message": "bad line"}]
    assert frames[2]["fields"]["line"] == "4f4b20fffe"  # not UTF-8: hex
    gap = [f for f in findings if f["id"] == "tcp.gap"]
    assert len(gap) == 1 and gap[0]["flow"] == 2 and gap[0]["severity"] == "warning"
    assert set(gap[0]) == {"type", "flow", "community_id", "frame", "id", "severity", "category", "message",
                           "fingerprint"}
    assert gap[0]["community_id"] == frames[-1]["community_id"] != frames[0]["community_id"]


def test_tree_is_plain_text_when_not_a_terminal(capture: Path):
    r = invoke("inspect", str(capture))
    assert r.exit_code == 0
    assert "\x1b[" not in r.stdout
    assert "HELLO" in r.stdout and "toy.line.bad" in r.stdout and "tcp.gap" in r.stdout
    assert "10.1.1.1:50000 → 10.1.1.2:7777" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("-- ")


def test_filters_and_limits(capture: Path):
    def frames(*extra: str) -> list[dict]:
        r = invoke("inspect", str(capture), "--format", "jsonl", *extra)
        return [x for x in map(json.loads, r.stdout.splitlines()) if x["type"] == "frame"]

    assert {f["flow"] for f in frames("--flow", "2")} == {2}
    assert len(frames("--max-frames", "2")) == 2
    assert [f["command"] for f in frames("--only-findings")] == ["BAD"]
    assert len(frames("--protocol", "toy")) == len(frames())
    r = invoke("inspect", str(capture), "--protocol", "nope")
    assert r.exit_code == 2


def test_summary_json_and_hex(capture: Path):
    r = invoke("inspect", str(capture), "--format", "summary")
    assert r.exit_code == 0 and "HELLO world" in r.stdout
    r = invoke("inspect", str(capture), "--format", "json")
    doc = json.loads(r.stdout)
    assert len(doc["flows"]) == 2 and doc["frames"][0]["command"] == "HELLO"
    r = invoke("inspect", str(capture), "--hex", "--max-frames", "1")
    assert "48 45 4c 4c 4f" in r.stdout


def test_flows_rules_protocols(capture: Path):
    r = invoke("flows", str(capture), "--json")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["flow"], x["protocol"], x["frames"]) for x in rows] == [(1, "toy", 3), (2, "toy", 1)]
    assert rows[1]["findings"]["warning"] == 1
    r = invoke("flows", str(capture))
    assert r.exit_code == 0 and "10.1.1.3:50001" in r.stdout
    r = invoke("rules")
    assert "tcp.gap" in r.stdout and "toy.line.bad" in r.stdout
    r = invoke("protocols")
    assert "toy" in r.stdout and "7777" in r.stdout


def test_decode_as(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 15552))
    c.handshake()
    c.send("c2s", b"PING\n")
    p = tmp_path / "p.pcap"
    write_capture(str(p), [c])
    assert "PING" not in invoke("inspect", str(p)).stdout
    assert "PING" in invoke("inspect", str(p), "--decode-as", "15552=toy").stdout
    for bad in ("15552", "x=toy", "99999=toy", "15552=nope"):
        r = invoke("inspect", str(p), "--decode-as", bad)
        assert r.exit_code == 2 and "Traceback" not in r.output


def bad_inputs(tmp_path: Path, capture: Path) -> dict[str, Path]:
    data = capture.read_bytes()
    (tmp_path / "cut.pcap").write_bytes(data[:-25])
    (tmp_path / "text.pcap").write_text("not a capture at all")
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147)
    (tmp_path / "lt.pcap").write_bytes(hdr + struct.pack("<IIII", 0, 0, 4, 4) + b"abcd")
    return {"missing": tmp_path / "missing.pcap", "cut": tmp_path / "cut.pcap", "text": tmp_path / "text.pcap",
            "linktype": tmp_path / "lt.pcap", "directory": tmp_path}


@pytest.mark.parametrize("kind", ["missing", "cut", "text", "linktype", "directory"])
@pytest.mark.parametrize("command", ["inspect", "flows"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capture: Path, kind: str, command: str):
    path = bad_inputs(tmp_path, capture)[kind]
    r = invoke(command, str(path))
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamproto: ") and "Traceback" not in r.output
    if kind == "cut" and command == "inspect":
        assert "HELLO world" in r.stdout  # what was readable is still shown


def test_footer_counts_capture_level_findings_too(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    c.handshake()
    c.send("c2s", b"HELLO " + b"x" * 300 + b"\n")
    c.send("c2s", b"NEXT\n")
    p = tmp_path / "snap.pcap"
    write_capture(str(p), [c], snaplen=100)
    r = invoke("inspect", str(p), "--format", "jsonl")
    counts = {"error": 0, "warning": 0, "note": 0}
    for line in map(json.loads, r.stdout.splitlines()):
        for f in line["findings"] if line["type"] == "frame" else [line]:
            counts[f["severity"]] += 1
    assert counts["warning"] == 2  # the cut packet, and the bytes it lost
    r = invoke("inspect", str(p))
    assert r.stdout.rstrip().splitlines()[-1].endswith(
        f"{counts['error']} errors, {counts['warning']} warnings, {counts['note']} notes")


def test_footer_counts_follow_the_flow_filter(capture: Path):
    last = invoke("inspect", str(capture), "--flow", "1").stdout.rstrip().splitlines()[-1]
    assert last.endswith("0 errors, 1 warnings, 0 notes")  # flow 1's BAD line; flow 2's gap is not counted
    last = invoke("inspect", str(capture), "--flow", "2").stdout.rstrip().splitlines()[-1]
    assert "0 errors, 1 warnings" in last  # the gap


def test_empty_capture_says_so(tmp_path: Path):
    p = tmp_path / "empty.pcap"
    with open(p, "wb") as f:
        CaptureWriter(f)
    r = invoke("inspect", str(p))
    assert r.exit_code == 0
    assert r.stdout.strip() == "-- 0 packets, 0 TCP conversations, 0 frames shown; findings: 0 errors, 0 warnings, 0 notes"
