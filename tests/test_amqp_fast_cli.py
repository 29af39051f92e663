"""``streamproto inspect`` on the bundled AMQP/Fast captures, as a user runs it: tree, summary and
JSON Lines; ``-o amqp_fast.NAME=VALUE``; ``protocols``, ``rules`` and ``fields``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp_fast import encode as E
from dissectors.amqp_fast.rules import ALL_RULES
from dissectors.amqp_fast.wire import Encoding

ROOT = Path(__file__).resolve().parent.parent
SESSION = "captures/amqp_fast/amqp_fast_session.pcap"


def streamproto(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "analyzer", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_tree_view() -> None:
    r = streamproto("inspect", SESSION)
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout
    assert "amqp_fast len=2\n  INITIATION 128 1\n    [0+1] protocol_id: 128 (AMQP/Fast)\n" in out
    assert "  CONNECTION TUNE frame-max=131072 channel-max=16 handle-max=64 heartbeat=30\n" in out
    assert "  HANDLE SEND handle=1 fragment=90 partial=1\n" in out
    assert "    [0+6] size: 65541 (long size)\n" in out
    assert "    [7+2] reply_code: 310 (message not found; 3xx warning" in out
    assert "      [6+4] expiration: 2026-01-01 00:00:00+00:00 (2026-01-01T00:00:00Z)\n" in out
    assert "MESSAGE FRAGMENT channel 1 handle=1 size=39 [message 339 octets in 4 fragments: 00 01 02" in out
    assert out.rstrip().splitlines()[-1] == \
        "-- 108 packets, 1 TCP conversations, 70 frames shown; findings: 0 errors, 0 warnings, 0 notes"


def test_summary_view() -> None:
    r = streamproto("inspect", SESSION, "--format", "summary")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    notify = [x for x in lines if "HANDLE NOTIFY handle=1 message=41" in x]
    assert len(notify) == 4 and all("10.30.18.2:41000 ← 10.30.18.1:3018 amqp_fast" in x for x in notify)
    assert any(x.endswith("CONNECTION REPLY tag=1 200 'OK'  [request in #11 (0.500 ms earlier)]") for x in lines)


def test_jsonl() -> None:
    r = streamproto("inspect", SESSION, "--format", "jsonl")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    frames = [x for x in rows if x["type"] == "frame"]
    assert len(frames) == 70 and all(f["protocol"] == "amqp_fast" and f["dialect"] is None for f in frames)
    tune = next(f for f in frames if f["command"] == "CONNECTION TUNE")
    assert tune["code"] == 12 and tune["direction"] == "s2c"
    assert tune["fields"] == {"size": 14, "type": 12, "frame_max": 131072, "channel_max": 16, "handle_max": 64,
                              "heartbeat": 30, "options": "", "command_end": 206}
    last = [f for f in frames if f["command"] == "MESSAGE FRAGMENT"][6]
    assert last["fields"]["message"]["size"] == 339 and last["fields"]["message"]["message_nbr"] == 41
    assert last["fields"]["message"]["body"].startswith("000102030405")
    first = [f for f in frames if f["command"] == "MESSAGE FRAGMENT"][0]
    assert first["fields"]["head"]["identifier"] == "order-1" and first["fields"]["head"]["priority"] == 5
    reply = next(f for f in frames if f["command"] == "CHANNEL REPLY")
    assert reply["fields"]["response_time"] > 0


def test_only_findings_on_a_rule_capture() -> None:
    r = streamproto("inspect", "captures/amqp_fast/rules/fragment_short.pcap", "--only-findings", "--format", "jsonl")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["command"], [f["id"] for f in x["findings"]]) for x in rows] == \
        [("MESSAGE FRAGMENT", ["amqp_fast.fragment.short"])]


def test_option_switches_the_encoding(tmp_path: Path) -> None:
    enc = Encoding("msb", 4, 4)
    s = E.Script(enc).negotiate().open_channel(1, transacted=True).open_handle(1, 1)
    s.c(E.message("HANDLE SEND", 1, b"msb!", enc=enc, head_bytes=E.head(4, enc=enc)))
    s.close()
    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 3018))
    conv.handshake()
    for d, data, _ in s.steps:
        conv.send(str(d), data)
    conv.close()
    path = tmp_path / "msb.pcap"
    write_capture(str(path), [conv])
    plain = streamproto("inspect", str(path), "--format", "summary")
    assert "0 errors, 0 warnings" not in plain.stdout  # read with the defaults: nonsense
    switched = streamproto("inspect", str(path), "--format", "summary", "-o", "amqp_fast.bit_order=msb",
                           "-o", "amqp_fast.long_string_length=4", "-o", "amqp_fast.field_table_length=4")
    assert switched.returncode == 0, switched.stderr
    assert "HANDLE SEND handle=1 fragment=21 partial=0" in switched.stdout
    assert "[message 21 octets in 1 fragment: 'msb!']" in switched.stdout
    assert switched.stdout.rstrip().endswith("findings: 0 errors, 0 warnings, 0 notes")
    bad = streamproto("inspect", str(path), "-o", "amqp_fast.bit_order=sideways")
    assert bad.returncode != 0 and "bit_order" in bad.stderr + bad.stdout


def test_protocols_rules_and_fields() -> None:
    protocols = streamproto("protocols").stdout
    assert "amqp_fast  AMQP/Fast 0.7 (iMatix AMQ RFC 006)  (ports: 3018)" in protocols
    assert "-o amqp_fast.bit_order=lsb [lsb|msb]" in protocols
    assert "amqp_fast handle (start: new; illegal transitions: amqp_fast.handle.not_open)" in protocols
    rules = [json.loads(x) for x in streamproto("rules", "--json").stdout.splitlines()]
    ours = {x["id"]: x for x in rules if x["id"].startswith("amqp_fast.")}
    assert ours["amqp_fast.fragment.short"]["severity"] == "error"
    assert ours["amqp_fast.framing.resync"]["category"] == "malformed"
    assert len(ours) == len(ALL_RULES) == 53
    fields = streamproto("fields", "amqp_fast").stdout
    assert "amqp_fast.connection.tune.frame_max" in fields and "amqp_fast.message.fragment.head.expiration" in fields
