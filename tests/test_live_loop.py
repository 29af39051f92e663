"""`streamproto live` without capture rights: recorded captures fed through the live path in
real-time order (``--replay``), so the loop, the clock, -c, --duration, the signals, -w and the
summary are covered on every machine.

The live output must be what `inspect` prints for the same capture, frame for frame, and the pcapng
copy written while the capture runs must read back as the same frames.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.live.loop import LiveRun, Tick
from analyzer.live.sources import ReplaySource
from analyzer.live.tee import PcapngTee
from analyzer.pcapwrite import write_packets

ROOT = Path(__file__).resolve().parent.parent
SILENCE = "amqp091.heartbeat.silence"
CAPTURES = [
    "captures/amqp091/pika_e2e.pcap",
    "captures/amqp091/pika_heartbeat.pcap",
    "captures/rabbitmq_stream/rstream_publish_confirm.pcap",
    "captures/rabbitmq_stream/rstream_errors.pcap",
    "captures/iggy/apache_iggy_0.9.0.pcap",
]


def streamproto(*args: str, prefix: list[str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "analyzer", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "STREAMPROTO_NO_PROGRESS": "1", "NO_COLOR": "1"}, **kw)


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def frames(lines: list[dict]) -> list[dict]:
    return [x for x in lines if x.get("type", "frame") == "frame" and "command" in x]


def unlinked(f: dict) -> dict:
    return {k: v for k, v in f.items() if k not in ("response_frame", "latency")}


def assert_same_frames(live: list[dict], reference: list[dict]) -> None:
    """Frame for frame the same, except that live may show a request without its response: it
    holds a request back only for --link-wait seconds of the clock, which a sped-up replay on a
    busy machine can overrun. Every link it does show is the right one."""
    assert [unlinked(f) for f in live] == [unlinked(f) for f in reference]
    for mine, theirs in zip(live, reference, strict=True):
        if mine["response_frame"] is not None:
            assert (mine["response_frame"], mine["latency"]) == (theirs["response_frame"], theirs["latency"])
    assert sum(f["response_frame"] is not None for f in live) >= sum(
        f["response_frame"] is not None for f in reference) // 2


@pytest.mark.parametrize("capture", CAPTURES)
def test_replay_prints_what_inspect_prints_and_writes_the_same_packets(capture: str, tmp_path: Path) -> None:
    out = tmp_path / "live.pcapng"
    live = streamproto("live", "--replay", capture, "--speed", "200", "--duration", "120", "-T", "jsonl",
                       "-w", str(out))
    assert live.returncode == 0, live.stderr
    original = streamproto("inspect", capture, "-T", "jsonl")
    assert original.returncode == 0
    live_frames = frames(jsonl(live.stdout))
    assert live_frames, "no frames decoded"
    assert_same_frames(live_frames, frames(jsonl(original.stdout)))
    # The copy holds every packet, byte for byte, and reads back as the same frames.
    assert [(p.ts, p.data) for p in read_packets(str(out))] == [(p.ts, p.data) for p in read_packets(capture)]
    written = streamproto("inspect", str(out), "-T", "jsonl")
    assert_same_frames(live_frames, frames(jsonl(written.stdout)))
    # The summary, on stderr.
    n_packets = sum(1 for _ in read_packets(capture))
    assert f"{n_packets:,} packets captured, 0 dropped" in live.stderr
    assert "stopped (--duration reached)" in live.stderr
    assert f"-- frames: {len(live_frames):,} (" in live.stderr


def test_summary_counts_frames_per_protocol_and_findings_per_severity(tmp_path: Path) -> None:
    capture = "captures/rabbitmq_stream/rstream_errors.pcap"
    live = streamproto("live", "--replay", capture, "--speed", "500", "--duration", "60", "-T", "summary")
    assert live.returncode == 0, live.stderr
    events = jsonl(streamproto("inspect", capture, "-T", "jsonl").stdout)
    n = len(frames(events))
    severities = [f["severity"] for x in events for f in ([x] if "command" not in x else x.get("findings", []))]
    assert f"-- frames: {n:,} (rabbitmq_stream {n:,})" in live.stderr
    counts = {s: severities.count(s) for s in ("error", "warning", "note")}
    assert (f"-- findings: {counts['error']:,} errors, {counts['warning']:,} warnings, {counts['note']:,} notes"
            in live.stderr)


def test_max_frames_stops_after_that_many_frames(tmp_path: Path) -> None:
    live = streamproto("live", "--replay", "captures/amqp091/pika_e2e.pcap", "--speed", "100", "-c", "5",
                       "-T", "jsonl")
    assert live.returncode == 0, live.stderr
    assert len(frames(jsonl(live.stdout))) == 5
    assert "stopped (-c frames shown)" in live.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_cleanly_with_the_summary_and_a_readable_copy(sig: int, tmp_path: Path) -> None:
    out = tmp_path / "cut.pcapng"
    # Real time: the heartbeat capture lasts 4 s; the signal comes after the first frame.
    # Unbuffered: communicate() reads the pipe's descriptor itself, so lines a buffered readline()
    # had already taken from the pipe (several, when the machine is busy) would be lost to the test.
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "live", "--replay", "captures/amqp091/pika_heartbeat.pcap",
                             "-T", "jsonl", "-w", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                            env={**os.environ, "STREAMPROTO_NO_PROGRESS": "1"})
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()  # printed as soon as it is decoded, not at the end
    assert json.loads(first)["command"]
    proc.send_signal(sig)
    out_rest, err_bytes = proc.communicate(timeout=60)
    rest, err = out_rest.decode(), err_bytes.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "stopped (interrupted)" in err
    shown = frames(jsonl(first + rest))
    # Everything captured before the stop is in the file, and decodes to the frames shown.
    again = frames(jsonl(streamproto("inspect", str(out), "-T", "jsonl").stdout))
    assert_same_frames(shown, again)


def _heartbeat_prefix(tmp_path: Path) -> Path:
    """The heartbeat capture up to its fifth heartbeat (heartbeat=1 s negotiated): then silence."""
    packets = list(read_packets(str(ROOT / "captures/amqp091/pika_heartbeat.pcap")))[:21]
    path = tmp_path / "silent.pcap"
    write_packets(str(path), packets, "ethernet")
    return path


class FakeClock:
    """Time that passes only when the source sleeps: the test waits for nothing."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 1e-3)


def test_time_driven_findings_fire_while_no_packet_arrives(tmp_path: Path) -> None:
    path = _heartbeat_prefix(tmp_path)
    clock = FakeClock()
    source = ReplaySource(str(path), clock=clock, sleep=clock.sleep)
    last_ts = list(read_packets(str(path)))[-1].ts
    run = LiveRun(Analyzer(), source, duration=60)
    seen = []
    for ev in run.events():
        if isinstance(ev, Finding) and ev.id == SILENCE:
            # Reported during the capture, on the clock, not at its end.
            assert run.reason is None
            seen.append((ev, source.now()))
            if len(seen) == 2:
                run.stop()
    assert len(seen) == 2  # both sides fell silent
    for finding, now in seen:
        assert now > last_ts + 1.5  # after the last packet: only the clock can have brought it
        assert now < last_ts + 2.0 + 1.0  # ... twice the interval after that side's last frame
        assert "sent nothing for 2.0 s" in finding.message  # not a moment later (2.1 s)
    assert run.reason == "interrupted"
    assert source.stats().received == 21


def test_without_the_clock_the_same_finding_would_wait_for_the_end(tmp_path: Path) -> None:
    """The control: the engine alone reports that silence only when the capture ends."""
    path = _heartbeat_prefix(tmp_path)
    analyzer = Analyzer()
    events = list(analyzer.feed(read_packets(str(path))))
    assert not [e for e in events if isinstance(e, Finding) and e.id == SILENCE]
    events = list(analyzer.advance(analyzer.last_ts + 2.5))
    assert len([e for e in events if isinstance(e, Finding) and e.id == SILENCE]) == 2


def test_advancing_to_exactly_a_deadline_ends(tmp_path: Path) -> None:
    """The silence check is strict (longer than the limit): at exactly the limit nothing is due
    yet, and the wake-up must wait for a later instant instead of firing again and again."""
    path = _heartbeat_prefix(tmp_path)
    analyzer = Analyzer()
    list(analyzer.feed(read_packets(str(path))))
    # The first wake-ups may be stale (earlier deadlines since moved on): go through them to the
    # real one, advancing to exactly each in turn; every call must come back.
    deadline = analyzer.next_wakeup()
    for _ in range(5):
        assert deadline is not None
        assert not [e for e in analyzer.advance(deadline) if isinstance(e, Finding) and e.id == SILENCE]
        following = analyzer.next_wakeup()
        assert following is not None and following > deadline
        if following - deadline < 1e-6:  # due at exactly its deadline, so waiting for the next instant
            break
        deadline = following
    else:
        raise AssertionError("never reached the silence deadline")
    later = [e for e in analyzer.advance(deadline + 1e-6) if isinstance(e, Finding) and e.id == SILENCE]
    assert later


def test_the_loop_ticks_and_the_copy_is_flushed_before_decoding(tmp_path: Path) -> None:
    clock = FakeClock()
    capture = str(ROOT / "captures/rabbitmq_stream/rstream_publish_confirm.pcap")
    source = ReplaySource(capture, clock=clock, sleep=clock.sleep)
    out = tmp_path / "copy.pcapng"
    tee = PcapngTee(str(out), source.linktype)
    run = LiveRun(Analyzer(), source, tee=tee, duration=30)
    for ev in run.events():
        if isinstance(ev, Frame):
            # The packet that completed this frame is already on disk, readable.
            assert len(list(read_packets(str(out)))) >= ev.packets[1]
        assert isinstance(ev, (Frame, Finding, Tick))
    tee.close()
    assert run.reason == "duration"
    assert len(list(read_packets(str(out)))) == len(list(read_packets(capture)))


def test_link_wait_0_prints_requests_at_once_without_their_response(tmp_path: Path) -> None:
    capture = "captures/amqp091/pika_e2e.pcap"
    live = frames(jsonl(streamproto("live", "--replay", capture, "--speed", "200", "--duration", "60",
                                    "--link-wait", "0", "-T", "jsonl").stdout))
    held = frames(jsonl(streamproto("inspect", capture, "-T", "jsonl").stdout))
    assert any(f["response_frame"] for f in held)
    assert not any(f["response_frame"] for f in live)
    assert any(f["request_frame"] for f in live)  # a response still names its request
    assert [unlinked(f) for f in live] == [unlinked(f) for f in held]


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, text in [
        (["live"], "no interface given"),
        (["live", "--replay", str(tmp_path / "missing.pcap")], "cannot open"),
        (["live", "--replay", "captures/amqp091/pika_e2e.pcap", "-w", str(tmp_path / "no" / "dir.pcapng")],
         "cannot write"),
        (["live", "--replay", "captures/amqp091/pika_e2e.pcap", "--duration", "0"], "--duration"),
        (["live", "--replay", "captures/amqp091/pika_e2e.pcap", "--speed", "0"], "--speed"),
        (["live", "-i", "lo", "--buffer-size", "0"], "--buffer-size"),
        (["live", "--replay", "captures/amqp091/pika_e2e.pcap", "--link-wait", "-1"], "--link-wait"),
        (["live", "--replay", "captures/amqp091/pika_e2e.pcap", "-Y", "flow =="], "bad display filter"),
    ]:
        r = streamproto(*args, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("streamproto: ") and text in r.stderr, r.stderr
