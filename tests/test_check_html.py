"""`streamproto check --html`: a self-contained page with the verdict, every finding, command and
latency tables, charts, and ladder diagrams (collapsed when long); rendered in headless Chromium,
whose screenshot must not be blank and whose DOM text must hold every finding."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pcapwrite import TcpConversation, write_capture
from analyzer.reports.collect import HEAD, TAIL
from dissectors.amqp091 import encode as E

ROOT = Path(__file__).resolve().parent.parent
ERRS = ROOT / "captures" / "amqp091" / "pika_bad_login.pcap"
SNAP = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm_snaplen96.pcap"
CONSUME = ROOT / "captures" / "amqp091" / "pika_consume.pcap"
runner = CliRunner()


def long_amqp(path: Path, publishes: int = 300, bad_at: int = 150) -> Path:
    """A handshake, then many publishes (3 frames each) with one acknowledgement of a delivery
    tag that was never delivered in the middle (amqp091.ack.unknown_tag), then a clean close."""
    c = TcpConversation(("10.5.0.1", 40000), ("10.5.0.2", 5672), step=0.0005)
    c.handshake()
    for d, data, _ in E.Script().handshake().open_channel(1).steps:
        c.send(str(d), data)
    for i in range(publishes):
        if i == bad_at:
            c.send("c2s", E.method("Basic.Ack", 1, delivery_tag=999))
        c.send("c2s", E.message(1, b"hello %d" % i, {"content-type": "text/plain"}, exchange="x", routing_key="k"))
    c.send("c2s", E.method("Connection.Close", reply_code=200, reply_text="bye"))
    c.send("s2c", E.method("Connection.CloseOk"))
    c.close()
    write_capture(str(path), [c])
    return path


def report(tmp_path: Path, *captures: Path) -> tuple[str, dict]:
    html, js = tmp_path / "report.html", tmp_path / "report.json"
    r = runner.invoke(app, ["check", *map(str, captures), "--html", str(html), "--json", str(js)])
    assert r.exit_code in (0, 1), r.output
    return html.read_text(encoding="utf-8"), json.loads(js.read_text())


class _Page(HTMLParser):
    """Text, tags and URL-bearing attributes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.svgs: list[list[tuple[str, dict]]] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href", "xlink:href", "action", "poster") and v]
        if tag in ("style", "title"):
            self._skip += 1
        if tag == "svg":
            self.svgs.append([])
        if self.svgs:
            self.svgs[-1].append((tag, a))

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
        elif self.svgs:
            self.svgs[-1].append(("#title", {"text": data}))

    def plain(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.text))


def parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    return p


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s)


def test_self_contained_and_every_finding_in_the_text(tmp_path):
    html, doc = report(tmp_path, ERRS, SNAP, CONSUME)
    page = parse(html)
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert all(u.startswith("#") for u in page.urls), page.urls  # in-page links only: nothing to fetch
    assert not re.search(r"url\((?!#)", html) and "@import" not in html
    text = page.plain()
    findings = [f for c in doc["captures"] for f in c["findings"]]
    assert len(findings) == 49
    for f in findings:
        assert norm(f["message"]) in text and f["id"] in text
    assert "FAIL: 9 findings at or above error (exit 1)" in text


def ladders(page: _Page) -> list[list[tuple[str, dict]]]:
    return [s for s in page.svgs if s[0][1].get("class") == "ladder"]


def test_ladder_per_conversation_with_handshake_and_marked_findings(tmp_path):
    html, _ = report(tmp_path, ERRS)
    page = parse(html)
    (ladder,) = ladders(page)
    labels = [a["text"] for t, a in ladder if t == "#title"]
    # One arrow per frame, in order, each titled with its packet, direction and command.
    assert [re.match(r"#(\d+) (c2s|s2c) (\S+):", t).groups() for t in labels] == [
        ("4", "c2s", "ProtocolHeader"), ("6", "s2c", "Connection.Start"), ("8", "c2s", "Connection.StartOk"),
        ("9", "s2c", "Connection.Close")]
    lines = [a for t, a in ladder if t == "line" and "marker-end" in a]
    assert len(lines) == 4
    # Client lane on the left: client-to-server arrows point right.
    assert float(lines[0]["x1"]) < float(lines[0]["x2"]) and float(lines[1]["x1"]) > float(lines[1]["x2"])
    # The refused login is marked on its arrow, in the error colour.
    assert [a.get("stroke") for a in lines] == ["#555", "#555", "#555", "#c62828"]
    assert "amqp091.reply.connection_error: Connection.Close: 403" in page.plain()


def test_long_conversation_collapsed_around_its_finding(tmp_path):
    cap = long_amqp(tmp_path / "long.pcap")
    html, doc = report(tmp_path, cap)
    page = parse(html)
    (ladder,) = ladders(page)
    frames = doc["captures"][0]["frames"]
    arrows = [a for t, a in ladder if t == "line" and "marker-end" in a]
    marked = [a for a in arrows if a["stroke"] == "#c62828"]
    assert len(arrows) == HEAD + 1 + TAIL and len(marked) == 1
    gaps = [int(m.replace(",", "")) for m in re.findall(r"⋯ ([\d,]+) frames not drawn ⋯", page.plain())]
    assert len(gaps) == 2 and sum(gaps) + len(arrows) == frames == 912
    titles = [a["text"] for t, a in ladder if t == "#title"]
    assert titles[0].startswith("#4 c2s ProtocolHeader")  # the handshake first, at a glance
    assert any("Basic.Ack" in t for t in titles) and titles[-1].startswith("#315 s2c Connection.CloseOk")


def test_capture_loss_findings_are_rows_at_their_packet(tmp_path):
    html, _ = report(tmp_path, SNAP)
    (first, _second) = ladders(parse(html))
    rows = [a["text"].split(":")[0] for t, a in first if t == "#title"]
    # tcp.gap findings (no frame of their own) sit between the arrows, in packet order.
    assert rows[:4] == ["packet 8", "#8 c2s SaslHandshake", "packet 9", "packet 11"]


def test_commands_and_latency_tables(tmp_path):
    html, _ = report(tmp_path, CONSUME)
    text = parse(html).plain()
    assert re.search(r"amqp091 server→client Basic.Deliver \d+", text)
    # Requests paired with their responses (AMQP answers in order per channel).
    m = re.search(r"amqp091 Connection.Start Connection.StartOk 1 (\S+ \S+) ", text)
    assert m, text[:3000]
    assert re.search(r"amqp091 Queue.Declare Queue.DeclareOk \d+ ", text)
    assert "request-to-response latency (log scale;" in text


# ------------------------------------------------------------------------------- Chromium
def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """The rows of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and not interlace
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, timeout=120, check=True)


@pytest.mark.chromium
def test_renders_in_headless_chromium(tmp_path):
    cap = long_amqp(tmp_path / "long.pcap")
    html, doc = report(tmp_path, ERRS, SNAP, cap)
    page = tmp_path / "report.html"
    shot = tmp_path / "shot.png"
    chromium(tmp_path, "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri())
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1600)
    pixels = [r[i:i + 3] for r in rows[::2] for i in range(0, len(r), 6)]
    counts: dict[bytes, int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    background = max(counts.values())
    assert background < 0.9 * len(pixels), "the screenshot is (nearly) one colour: blank"
    assert len(counts) > 50  # text, tables and charts, anti-aliased
    # The verdict banner and the error badges are drawn in the error red.
    red = sum(n for p, n in counts.items() if p[0] > 170 and p[1] < 70 and p[2] < 70)
    assert red > 200
    # The DOM as Chromium parsed it holds every finding's text.
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout.decode("utf-8")
    text = parse(dom).plain()
    for f in (f for c in doc["captures"] for f in c["findings"]):
        assert norm(f["message"]) in text


def test_conversation_table_is_bounded_and_keeps_those_with_findings(tmp_path, monkeypatch):
    import analyzer.reports.html as report_html

    monkeypatch.setattr(report_html, "CONVERSATION_ROWS", 2)
    html, doc = report(tmp_path, ROOT / "captures" / "rabbitmq_stream" / "rstream_consume.pcap")
    with_findings = sorted({f["flow"] for f in doc["captures"][0]["findings"]})
    assert with_findings == [3, 4]
    table = html.split("<h3>Conversations</h3>", 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<tr><td class="n">(\d+)</td>', table) == ["3", "4"]
    assert "2 more conversations without findings are in the JSON report" in parse(html).plain()
