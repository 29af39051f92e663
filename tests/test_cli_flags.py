"""The tshark-familiar command line: -r, - (stdin, gzip too), -Y, -c, -V, -x, -T, -t, -d, -q,
--version; repeatable options; input validation and one error style; colours; undecoded
conversations in flows, findings and the footer; stats and follow."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.toy import toy_only  # noqa: F401 - the fixture, used by pytestmark

ROOT = Path(__file__).parent.parent
CAPTURES = ROOT / "captures"
runner = CliRunner()
pytestmark = pytest.mark.usefixtures("toy_only")


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """Flow 1 and 2: toy on port 7777; flow 3: port 9999, which nothing claims."""
    a = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    a.handshake()
    a.send("c2s", b"PING one\n")
    a.send("s2c", b"PONG one\n")
    a.send("c2s", b"BAD apple\n")
    a.close()
    b = TcpConversation(("10.1.1.3", 50001), ("10.1.1.2", 7777), ts=a.ts + 1)
    b.handshake()
    b.send("c2s", b"HELLO again\n")
    b.close()
    c = TcpConversation(("10.1.1.4", 50002), ("10.1.1.9", 9999), ts=b.ts + 1)
    c.handshake()
    c.send("c2s", b"\x00\x01binary\x1b[2Jstuff\n")
    c.send("s2c", b"reply\r\n")
    c.close()
    p = tmp_path / "toy.pcap"
    write_capture(str(p), [a, b, c])
    return p


def invoke(*args: str, **kw):
    return runner.invoke(cli.app, list(args), catch_exceptions=False, **kw)


def jsonl(r) -> list[dict]:
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in r.stdout.splitlines()]


def frames(r) -> list[dict]:
    return [x for x in jsonl(r) if x["type"] == "frame"]


def test_read_option_and_arguments_are_the_same(capture: Path):
    assert invoke("inspect", "-r", str(capture), "-T", "jsonl").stdout == \
        invoke("inspect", str(capture), "--format", "jsonl").stdout
    r = invoke("inspect")
    assert r.exit_code == 2 and r.stderr.startswith("streamproto: no capture given")


def run_main(*args: str, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analyzer", *args], input=stdin, capture_output=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=120)


@pytest.mark.parametrize("how", ["-", "/dev/stdin"])
def test_stdin_plain_and_gzip(how: str):
    path = CAPTURES / "amqp091/pika_get.pcap"
    expected = run_main("inspect", str(path), "-T", "jsonl").stdout
    assert expected
    for data in (path.read_bytes(), gzip.compress(path.read_bytes())):
        r = run_main("inspect", how, "-T", "jsonl", stdin=data)
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected
    r = run_main("inspect", "-", str(path), stdin=b"")
    assert r.returncode == 2 and r.stderr.decode().startswith("streamproto: standard input and pipes")
    r = run_main("inspect", "-", stdin=b"not a capture")
    assert r.returncode == 2 and r.stderr.decode().strip() == \
        "streamproto: <stdin>: not a pcap or pcapng capture (magic 6e6f7420)"


def test_short_flags(capture: Path):
    assert len(frames(invoke("inspect", str(capture), "-T", "jsonl", "-c", "2"))) == 2
    assert [f["command"] for f in frames(invoke("inspect", str(capture), "-T", "jsonl", "-Y", "command == BAD"))] \
        == ["BAD"]
    tree = invoke("inspect", str(capture), "-V", "-x", "-c", "1").stdout
    assert "50 49 4e 47" in tree and tree.startswith("#4 ")
    assert invoke("inspect", str(capture), "-q").stdout.startswith("-- ")
    assert len(invoke("inspect", str(capture), "-q").stdout.splitlines()) == 1
    epoch = invoke("inspect", str(capture), "-T", "summary", "-t", "e", "-c", "1").stdout
    assert " 1700000000." in epoch or "17" in epoch.split()[1]
    utc = invoke("inspect", str(capture), "-T", "summary", "-t", "ud", "-c", "1").stdout.split()
    assert utc[1].count("-") == 2 and utc[2].count(":") == 2
    r = invoke("inspect", str(capture), "-t", "x")
    assert r.exit_code == 2 and "unknown time format" in r.stderr
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.startswith("streamproto ")


def test_no_f_for_format(capture: Path):
    r = invoke("inspect", str(capture), "-f", "json")
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamproto: No such option '-f'") and "-T FORMAT" in err[0]


def test_decode_as_short_and_tshark_forms(capture: Path):
    assert {f["flow"] for f in frames(invoke("inspect", str(capture), "-T", "jsonl"))} == {1, 2}
    for form in ("9999=toy", "tcp.port==9999,toy"):
        got = frames(invoke("inspect", str(capture), "-T", "jsonl", "-d", form))
        assert {f["flow"] for f in got} == {1, 2, 3}


def test_repeated_options_accumulate(capture: Path):
    got = frames(invoke("inspect", str(capture), "-T", "jsonl", "--flow", "1", "--flow", "2"))
    assert {f["flow"] for f in got} == {1, 2}
    assert {f["flow"] for f in frames(invoke("inspect", str(capture), "-T", "jsonl", "--flow", "2"))} == {2}


@pytest.mark.parametrize("args,message", [
    (["--flow", "99"], "streamproto: no conversation 99 in this capture (it has 3; see `streamproto flows`)"),
    (["--flow", "-1"], "streamproto: --flow must be a conversation number from 1"),
    (["--flow", "0"], "streamproto: --flow must be a conversation number from 1"),
    (["-c", "-1"], "streamproto: --max-frames must be 0 or more, not -1"),
    (["--protocol", "nope"], "streamproto: unknown protocol 'nope'"),
    (["-Y", "flow =="], "streamproto: bad display filter: expected a value"),
    (["--bogus"], "streamproto: No such option '--bogus'"),
    (["-T", "xml"], "streamproto: Invalid value for '--format' / '-T'"),
    (["-c", "many"], "streamproto: Invalid value for '--max-frames' / '-c'"),
])
def test_bad_input_is_one_line_exit_2(capture: Path, args: list[str], message: str):
    r = invoke("inspect", str(capture), *args)
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
    assert "╭" not in r.output and "Traceback" not in r.output  # no typer panels, no tracebacks


def test_usage_errors_of_other_commands_too(capture: Path):
    for args in (["flows"], ["follow"], ["follow", "x", str(capture)], ["stats", str(capture), "--only", "nope"],
                 ["nosuchcommand"]):
        r = invoke(*args)
        assert r.exit_code == 2, args
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("streamproto: "), (args, err)


def test_colour_follows_no_color_and_force_color():
    path = str(CAPTURES / "rabbitmq_stream/rstream_bad_password.pcap")
    plain = run_main("inspect", path, "-T", "summary", env={"NO_COLOR": "", "FORCE_COLOR": ""})
    forced = run_main("inspect", path, "-T", "summary", env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    both = run_main("inspect", path, "-T", "summary", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert b"\x1b[" not in plain.stdout and b"\x1b[" in forced.stdout and b"\x1b[" not in both.stdout
    # Colour never lets wire text through raw: the only escapes are rich's SGR sequences.
    import re

    assert not re.search(rb"\x1b(?!\[[0-9;]*m)", forced.stdout)


def test_undecoded_conversation_is_visible(capture: Path):
    lines = jsonl(invoke("inspect", str(capture), "-T", "jsonl"))
    notes = [x for x in lines if x["type"] == "finding" and x["id"] == "engine.undecoded"]
    assert len(notes) == 1 and notes[0]["flow"] == 3 and notes[0]["severity"] == "note"
    assert "18 bytes c2s, 7 bytes s2c" in notes[0]["message"] and "9999" in notes[0]["message"]
    rows = [json.loads(x) for x in invoke("flows", str(capture), "--json").stdout.splitlines()]
    assert [(r["protocol"], r["undecoded"]) for r in rows] == [("toy", False), ("toy", False), (None, True)]
    table = invoke("flows", str(capture)).stdout.splitlines()
    assert " undecoded " in table[3] and " toy " in table[1]
    footer = invoke("inspect", str(capture)).stdout.rstrip().splitlines()[-1]
    assert "3 TCP conversations (1 undecoded" in footer and "1 notes" in footer
    # Decoded with -d: no note.
    lines = jsonl(invoke("inspect", str(capture), "-T", "jsonl", "-d", "9999=toy"))
    assert not [x for x in lines if x.get("id") == "engine.undecoded"]


def test_follow_any_conversation(capture: Path):
    r = invoke("follow", "3", str(capture))
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    assert out[0] == "=== flow 3: 10.1.1.4:50002 → 10.1.1.9:9999, ascii ==="
    assert "..binary.[2Jstuff" in out  # the ESC byte shown as '.', never written raw
    assert "    reply." in out  # the server's side indented
    assert out[-1] == "=== 18 bytes c2s, 7 bytes s2c ==="
    hexed = invoke("follow", "3", str(capture), "--format", "hex").stdout
    assert "000000  00 01 62 69 6e 61 72 79" in hexed
    raw = invoke("follow", "1", str(capture), "-T", "raw").stdout.splitlines()
    assert b"PING one\n".hex() in raw and "    " + b"PONG one\n".hex() in raw
    r = invoke("follow", "4", str(capture))
    assert r.exit_code == 2 and "no conversation 4" in r.stderr


def test_stats_tables_and_json(capture: Path):
    doc = json.loads(invoke("stats", str(capture), "--format", "json").stdout)
    assert {"commands", "srt", "expert", "conversations", "io"} <= set(doc)
    assert {"protocol": "toy", "command": "PING", "direction": "c2s", "frames": 1, "bytes": 9} in doc["commands"]
    expert = {(e["id"], e["severity"]): e["count"] for e in doc["expert"]}
    assert expert == {("toy.line.bad", "warning"): 1, ("engine.undecoded", "note"): 1}
    assert [c["protocol"] for c in doc["conversations"]] == ["toy", "toy", None]
    assert sum(r["frames"] for r in doc["io"]) == 4
    only = json.loads(invoke("stats", str(capture), "--format", "json", "--only", "expert", "-Y", "flow == 1").stdout)
    assert set(only) == {"capture", "packets", "expert"} and only["expert"] == [
        {"id": "toy.line.bad", "severity": "warning", "count": 1}]
    text = invoke("stats", str(capture)).stdout
    assert "== Service response times (ms)" in text and "toy.line.bad" in text


def test_stats_service_response_times_on_a_real_capture(monkeypatch):
    from analyzer.registry import load_dissectors

    monkeypatch.setattr(cli, "load_dissectors", load_dissectors)
    path = str(CAPTURES / "amqp091/pika_confirms.pcap")
    doc = json.loads(invoke("stats", path, "--format", "json", "--only", "srt").stdout)
    declare = [r for r in doc["srt"] if r["request"] == "Queue.Declare"]
    assert len(declare) == 1 and declare[0]["response"] == "Queue.DeclareOk" and declare[0]["count"] == 1
    assert declare[0]["min"] == declare[0]["max"] == declare[0]["p95"] == pytest.approx(0.002897, abs=1e-6)
    # The same latency the tree shows on the request.
    tree = invoke("inspect", path, "-Y", "command == Queue.Declare").stdout
    assert "[response in #19 (2.897 ms)]" in tree


def test_progress_only_when_stderr_is_a_terminal_and_stdout_is_not(monkeypatch, capsys):
    from analyzer.engine import Analyzer

    analyzer = Analyzer({})
    events = list(range(40_000))
    # A pipe (the test's stderr): the events pass through, nothing is written.
    assert list(cli._with_progress(iter(events), analyzer, [])) == events
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cli, "_isatty", lambda stream: stream is sys.stderr)
    assert list(cli._with_progress(iter(events), analyzer, [])) == events
    assert "packets" in capsys.readouterr().err
    # Both on a terminal: the output itself shows the progress; no second line over it.
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    assert list(cli._with_progress(iter(events), analyzer, [])) == events
    assert capsys.readouterr().err == ""


def test_json_document_is_streamed_with_flat_memory(tmp_path: Path):
    import tracemalloc

    conv = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777))
    conv.handshake()
    for i in range(40):
        conv.send("c2s", b"".join(b"LINE %d %s\n" % (i * 500 + j, b"x" * 40) for j in range(500)), mss=60000)
    conv.close()
    p = tmp_path / "many.pcap"
    write_capture(str(p), [conv])

    def peak(fmt: str) -> tuple[int, str]:
        tracemalloc.start()
        r = invoke("inspect", str(p), "-T", fmt)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert r.exit_code == 0
        return top, r.stdout

    lines_peak, lines = peak("jsonl")
    doc_peak, doc = peak("json")
    frames = json.loads(doc)["frames"]
    assert len(frames) == 20_000 == len(lines.splitlines())
    # The runner keeps the whole output in memory in both cases (about 5 MB); what the document
    # adds on top must not grow with the frames (building it whole took about 20 MB more here).
    assert doc_peak < lines_peak + 2_000_000, (doc_peak, lines_peak)
