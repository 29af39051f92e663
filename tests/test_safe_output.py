"""Hostile text from the wire in every output format (issue 16, safe output): every byte value and
the classic terminal attacks (ESC[2J, OSC 52 clipboard writes, OSC 0 window titles, C1 CSI,
bidi overrides, lone surrogates) in command names, Info lines, field names, field values and
finding messages; and NaN/±Infinity in values. Text views must show them escaped, JSON must be
strict and valid UTF-8."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.api import Category, Connection, Direction, Dissector, Event, Field, Frame, Rule, Severity
from analyzer.bytevalue import printable
from analyzer.jsonout import JsonWriter, dumps, strict_float
from analyzer.pcapwrite import TcpConversation, write_capture
from analyzer.textsafe import json_text, safe

ATTACKS = [
    b"\x1b[2J\x1b[H",  # clear the screen
    b"\x1b]52;c;aGVsbG8=\x07",  # OSC 52: write the clipboard
    b"\x1b]0;owned\x07",  # OSC 0: window title
    b"\x1b]0;owned\x1b\\",  # ... ended by ST
    "\u009b2J".encode(),  # C1 CSI, as UTF-8
    b"\x9b2J",  # C1 CSI as a raw byte (not UTF-8)
    "abc\u202edcba".encode(),  # right-to-left override
    b"\xed\xa0\x80",  # an encoded surrogate (invalid UTF-8)
    bytes(range(256)),  # every byte value
]
WIRE = Rule("hostile.text", Severity.WARNING, Category.VALUE, "wire text in a message")


class HostileConnection(Connection):
    """Every c2s segment is one frame whose every text comes from the wire."""

    def __init__(self) -> None:
        self.n = 0

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        if direction is Direction.S2C:
            return []
        text = data.decode("utf-8", "surrogateescape")
        self.n += 1
        fields = [
            Field("raw", data, 0, len(data)),
            Field("text", text, 0, len(data), text),
            Field(text, 1, 0, 1),  # a field *name* from the wire (a table key)
            Field("nan", math.nan), Field("inf", math.inf), Field("ninf", -math.inf),
            Field("table", None, 0, len(data), None, [Field(text, text), Field("f", math.nan)]),
        ]
        frame = Frame(direction, 0, len(data), text, self.n, text, fields, data=data)
        frame.findings.append(WIRE(f"bad key {text}"))
        return [frame]


class HostileDissector(Dissector):
    name = "hostile"
    title = "wire text everywhere"
    default_ports = (7777,)

    def connection(self, midstream: bool) -> Connection:
        return HostileConnection()

    def rules(self):
        return [WIRE]


@pytest.fixture
def capture(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(cli, "load_dissectors", lambda: {"hostile": HostileDissector()})
    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 7777))
    conv.handshake()
    for payload in ATTACKS:
        conv.send("c2s", payload)
        conv.send("s2c", b"ok")  # acknowledged: each payload is delivered as one piece
    conv.close()
    p = tmp_path / "hostile.pcap"
    write_capture(str(p), [conv])
    return p


# What must never reach a terminal raw: C0 controls (but the newline ending each line), DEL, C1
# controls, bidi controls, surrogates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.mark.parametrize("fmt", ["tree", "summary"])
def test_text_views_escape_everything(capture: Path, fmt: str):
    r = CliRunner().invoke(cli.app, ["inspect", str(capture), "-T", fmt, "--hex"], catch_exceptions=False)
    assert r.exit_code == 0
    out = r.stdout_bytes.decode("utf-8")  # valid UTF-8: no surrogate got through
    assert RAW.search(out) is None, repr(RAW.search(out))
    # Escaped visibly, not dropped: ESC, the C1 CSI (both forms), the override, undecodable bytes.
    assert "\\x1b[2J" in out and "\\x1b]52;c;aGVsbG8=\\x07" in out and "\\x9b2J" in out
    assert "abc\\u202edcba" in out and "\\xed\\xa0\\x80" in out
    assert "bad key \\x1b]0;owned\\x07" in out  # the finding message
    assert out.count("hostile.text") == len(ATTACKS)


@pytest.mark.parametrize("fmt", ["tree", "summary"])
def test_file_names_are_escaped_in_the_views(capture: Path, fmt: str):
    """Several files: each frame names its file, and a file name is as untrusted as the capture."""
    named = capture.with_name("a\x1b[2Jb\u202e.pcap")
    named.write_bytes(capture.read_bytes())
    r = CliRunner().invoke(cli.app, ["inspect", str(named), str(capture), "-T", fmt], catch_exceptions=False)
    assert r.exit_code == 0
    out = r.stdout_bytes.decode("utf-8")
    assert RAW.search(out) is None, repr(RAW.search(out))
    assert "a\\x1b[2Jb\\u202e.pcap" in out


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_is_strict_utf8(capture: Path, fmt: str):
    r = CliRunner().invoke(cli.app, ["inspect", str(capture), "-T", fmt], catch_exceptions=False)
    assert r.exit_code == 0
    text = r.stdout_bytes.decode("utf-8")  # strict UTF-8 decoding: raises on any invalid byte

    def refuse(name: str):
        raise AssertionError(f"non-JSON literal {name}")

    docs = [json.loads(x, parse_constant=refuse) for x in text.splitlines()] if fmt == "jsonl" else \
        [json.loads(text, parse_constant=refuse)]
    frames = [x for x in docs if x.get("type") == "frame"] if fmt == "jsonl" else docs[0]["frames"]
    assert len(frames) == len(ATTACKS)
    for f in frames:
        assert f["fields"]["nan"] == "NaN" and f["fields"]["inf"] == "Infinity" and f["fields"]["ninf"] == "-Infinity"
        assert f["fields"]["table"]["f"] == "NaN"
    esc = frames[0]
    assert esc["info"] == "\x1b[2J\x1b[H"  # JSON carries the text itself (escaped by JSON as \u001b)
    assert "\\u001b" in text
    # Undecodable bytes (lone surrogates after decoding) become \xNN text; raw bytes stay hex.
    assert frames[-2]["info"] == "\\xed\\xa0\\x80"
    assert frames[-1]["fields"]["raw"] == bytes(range(256)).hex()


def test_every_byte_value_alone_through_safe_and_json():
    for b in range(256):
        text = bytes([b]).decode("utf-8", "surrogateescape")
        shown = safe(text)
        assert RAW.search(shown) is None and shown.encode("utf-8")
        doc = json_text(dumps({"v": text}))
        assert json.loads(doc.encode("utf-8"))["v"] in (text, f"\\x{b:02x}")


def test_safe_escapes_every_unsafe_code_point_and_only_those():
    """safe() answers printable text without its regular expression: that is right only while
    every character the expression matches is one str.isprintable() rejects."""
    from analyzer.textsafe import unsafe_pattern

    for c in map(chr, range(0x110000)):
        unsafe = unsafe_pattern().match(c) is not None
        assert not (unsafe and c.isprintable()), hex(ord(c))
        assert (safe(c) != c) == unsafe, hex(ord(c))
        assert (safe(f"ok {c} ok") != f"ok {c} ok") == unsafe, hex(ord(c))


def test_printable_is_isprintable_but_for_line_breaks_and_tabs():
    """printable() (bodies and bytes values shown as text or hex) is the character-by-character
    rule it replaced, on every code point alone and among printable text and layout characters."""

    def rule(text: str) -> bool:
        return all(c.isprintable() or c in "\r\n\t" for c in text)

    for c in map(chr, range(0x110000)):
        for text in (c, f"ok {c}\r\n", f"\t{c}{c}ok"):
            assert printable(text) == rule(text), (hex(ord(c)), text)
    for text in ("", "\r\n\t", "a\nb\tc\r", "a\x0bb", "\x00", "line\n\x1b[2J", "é\u202e"):
        assert printable(text) == rule(text), text


def test_special_floats_are_strings_and_ordinary_ones_numbers():
    assert [strict_float(x) for x in (math.nan, math.inf, -math.inf, 1.5)] == ["NaN", "Infinity", "-Infinity", 1.5]
    # Even a float that did not pass through the field conversion is made strict, never NaN.
    assert dumps({"a": [math.nan, {"b": -math.inf}]}) == '{"a":["NaN",{"b":"-Infinity"}]}'


def test_json_writer_survives_an_ascii_locale(tmp_path: Path):
    import io

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    w = JsonWriter(stream)
    w.line({"k": "é\udc9b→"})
    w.flush()
    assert json.loads(raw.getvalue().decode("utf-8")) == {"k": "é\\x9b→"}


def test_ascii_terminal_gets_ascii_arrows():
    import subprocess
    import sys

    capture = Path(__file__).parent.parent / "captures/rabbitmq_stream/rstream_publish_confirm.pcap"
    env = {"PYTHONIOENCODING": "ascii", "PATH": "/usr/bin:/bin"}
    for args in (["flows", str(capture)], ["inspect", str(capture), "-T", "summary"]):
        r = subprocess.run([sys.executable, "-c", "import sys; from analyzer.cli import main; sys.argv[0]='streamproto';"
                            " main()", *args], capture_output=True, env=env, cwd=Path(__file__).parent.parent)
        assert r.returncode == 0, r.stderr
        assert b"Traceback" not in r.stderr
        r.stdout.decode("ascii")
        assert b"->" in r.stdout


def test_error_lines_are_escaped_too():
    r = CliRunner().invoke(cli.app, ["inspect", "/nonexistent/a\x1b]0;t\x07.pcap"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "streamproto: cannot open /nonexistent/a\\x1b]0;t\\x07.pcap: No such file or directory"
