"""The hostile-input generators of bench/hostile.py, at a tiny scale: well-formed captures that
decode as intended. Time and memory are measured by the benchmark, never asserted here.

Rule ids are being renamed (issue 8: ``sync.unanswered`` becomes ``correlation.unanswered``), so
findings are matched by suffix.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import CaptureError, read_packets
from analyzer.engine import Analyzer
from analyzer.pcapwrite import CaptureWriter, Segment, ip_packet
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
SCALE = 0.002


def _load_bench() -> ModuleType:
    # bench/ is a directory of scripts, not a package: load the module from its file.
    spec = importlib.util.spec_from_file_location("bench_hostile", ROOT / "bench" / "hostile.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up while the class is built
    spec.loader.exec_module(mod)
    return mod


H = _load_bench()


class Decoded:
    """Everything the analyzer produced for one capture, in event order."""

    def __init__(self, path: str) -> None:
        self.analyzer = Analyzer(load_dissectors())
        self.events = list(self.analyzer.run(read_packets(path)))
        self.frames = [e for e in self.events if isinstance(e, Frame)]
        self.commands = Counter(f.command for f in self.frames)

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for e in self.events:
            out.extend(e.findings if isinstance(e, Frame) else [e])
        return out

    def ids(self) -> list[str]:
        return [f.id for f in self.findings()]


def generate(name: str, tmp_path: Path) -> tuple[str, int]:
    case = H.CASES[name]
    path = str(tmp_path / case.filename)
    return path, case.generate(path, SCALE)


def assert_well_formed(path: str, packets: int) -> None:
    """Every record readable, as many as the generator wrote, in time order."""
    got = list(read_packets(path))
    assert len(got) == packets
    assert all(a.ts <= b.ts for a, b in zip(got, got[1:], strict=False))


def assert_clean_tcp(d: Decoded) -> None:
    # Proper sequence/ack numbers: reassembly sees whole in-order streams, and no dissector crashed.
    bad = [i for i in d.ids() if i.startswith("tcp.") or i == "engine.dissector_error"]
    assert bad == []


def test_fast_writer_writes_what_pcapwrite_writes() -> None:
    # The benchmark's fast path must produce the bytes of CaptureWriter.write_ip(ip_packet(...)).
    ref, fast = io.BytesIO(), io.BytesIO()
    w = CaptureWriter(ref)
    fw = H.FastTcpWriter(fast)
    payload = b"AMQP\x00\x00\x09\x01"
    seg = Segment(fw.ts, ("10.0.0.7", 40001), ("10.200.0.1", 5672), (1 << 32) + 5, 77, 0x18, payload)
    w.write_ip(seg.ts, ip_packet(seg))
    fw.packet(bytes([10, 0, 0, 7]), 40001, H.SERVER_IP, 5672, (1 << 32) + 5, 77, 0x18, payload)
    assert fast.getvalue() == ref.getvalue()


def test_established_connections(tmp_path: Path) -> None:
    path, packets = generate("amqp-100k-connections", tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(100_000, SCALE)
    assert len(d.analyzer.flows) == n
    assert {f.protocol for f in d.analyzer.flows} == {"amqp091"}
    for cmd in ("ProtocolHeader", "Connection.Start", "Connection.StartOk", "Connection.Tune",
                "Connection.TuneOk", "Connection.Open", "Connection.OpenOk"):
        assert d.commands[cmd] == n, cmd
    assert_clean_tcp(d)


def test_half_open_connections_all_close(tmp_path: Path) -> None:
    path, packets = generate("amqp-20k-half-open-close", tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(20_000, SCALE)
    assert len(d.analyzer.flows) == n  # no closing packet opened a conversation of its own
    assert d.commands["ProtocolHeader"] == n and d.commands["Connection.Start"] == n
    # Every conversation saw its SYN and its FIN or RST.
    assert all(f.complete for f in d.analyzer.flows)
    assert_clean_tcp(d)


def test_reversed_segments_reassemble_into_one_stream(tmp_path: Path) -> None:
    path, packets = generate("reverse-100k-segments", tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(100_000, SCALE)
    assert len(d.analyzer.flows) == 1 and d.analyzer.flows[0].protocol == "rabbitmq_stream"
    publishes = [f for f in d.frames if f.command == "Publish"]
    # Whole frames filling exactly n segments of 60 bytes; all of them decoded.
    total = sum(f.size for f in publishes)
    assert (n - 1) * 60 < total <= n * 60
    # Delivered in reverse: a later frame's bytes came in earlier packets.
    last_packets = [f.packets[1] for f in sorted(publishes, key=lambda f: f.offset)]
    assert last_packets == sorted(last_packets, reverse=True) and last_packets[0] == packets - 1
    assert_clean_tcp(d)


@pytest.mark.parametrize(("name", "connections"), [("amqp-65535-channels", 1), ("amqp-10x65535-channels", 10)])
def test_channels(tmp_path: Path, name: str, connections: int) -> None:
    path, packets = generate(name, tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(65535, SCALE)
    assert len(d.analyzer.flows) == connections
    assert d.commands["Channel.Open"] == n * connections
    assert d.commands["Channel.OpenOk"] == n * connections
    assert_clean_tcp(d)
    assert not [i for i in d.ids() if "channel" in i], "channel numbers within channel-max, each opened once"


def test_unanswered_declares(tmp_path: Path) -> None:
    path, packets = generate("amqp-300k-unanswered-declare", tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(300_000, SCALE)
    assert d.commands["Queue.Declare"] == n and d.commands["Queue.DeclareOk"] == 0
    last_frame = max(i for i, e in enumerate(d.events) if isinstance(e, Frame))
    unanswered = [i for i, e in enumerate(d.events) if not isinstance(e, Frame)
                  and e.id.endswith(("correlation.unanswered", "sync.unanswered"))]
    assert unanswered and min(unanswered) > last_frame  # reported when the conversation ends
    assert_clean_tcp(d)


def test_unconfirmed_publishes(tmp_path: Path) -> None:
    path, packets = generate("amqp-300k-unconfirmed", tmp_path)
    assert_well_formed(path, packets)
    d = Decoded(path)
    n = H.n_of(300_000, SCALE)
    assert d.commands["Confirm.SelectOk"] == 1
    assert d.commands["Basic.Publish"] == n
    assert d.commands["ContentHeader"] == n and d.commands["ContentBody"] == n
    assert any("unconfirmed" in i for i in d.ids())
    assert_clean_tcp(d)


@pytest.mark.parametrize("late", [False, True])
def test_corruption_is_a_deflate_error(late: bool) -> None:
    # The generator's own promise: zlib fails (not only the CRC), late after most of the data.
    raw = Path(H.GZ_SOURCE).read_bytes()
    data, produced, err = H.corrupt_gzip(raw, late)
    assert data[:2] == b"\x1f\x8b" and "check" not in err
    assert (produced >= len(raw) // 2) if late else (produced < len(raw) // 2)


# A corrupt deflate stream is a CaptureError after the packets that were readable (issue 8, section 6).
@pytest.mark.parametrize("name", ["gz-corrupt-early", "gz-corrupt-late"])
def test_corrupt_gzip_is_a_capture_error_after_what_was_readable(tmp_path: Path, name: str) -> None:
    path, packets = generate(name, tmp_path)
    assert os.path.getsize(path) > 0 and packets > 0
    a = Analyzer(load_dissectors())
    seen = 0
    with pytest.raises(CaptureError):
        for _ in a.run(read_packets(path)):
            seen = a.packets
    if name.endswith("late"):
        assert 0 < seen < packets
