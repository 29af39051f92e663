"""Statistics: percentiles, service response times from paired frames, frames over time with
bounded buckets, and the stats of real captures against what inspect shows."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.api import Direction, Frame
from analyzer.stats import Stats, percentile

ROOT = Path(__file__).parent.parent


def test_nearest_rank_percentiles():
    values = sorted(float(x) for x in range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 95) == 95 and percentile(values, 100) == 100
    assert percentile([3.0], 95) == 3.0


def frame(command: str, ts: float, size: int = 10) -> Frame:
    f = Frame(Direction.C2S, 0, size, command)
    f.protocol, f.ts = "p", ts
    return f


def test_srt_pairs_requests_by_their_anchor():
    s = Stats()
    for i in range(10):
        req = frame("Get", i)
        req.anchor()
        s.add(req)
        resp = frame("GetOk", i + 0.001 * (i + 1))
        resp.request, resp.latency = req.ref, 0.001 * (i + 1)
        s.add(resp)
    [row] = s.srt_rows()
    assert (row["request"], row["response"], row["count"]) == ("Get", "GetOk", 10)
    assert row["min"] == 0.001 and row["max"] == 0.01 and row["p50"] == 0.005 and row["p95"] == 0.01
    assert abs(row["mean"] - 0.0055) < 1e-12


def test_io_buckets_stay_bounded_and_add_up():
    s = Stats()
    n = 50_000
    for i in range(n):  # 50,000 frames over 5,000 s: 1 ms buckets would be 5 million
        s.add(frame("X", 1000.0 + i * 0.1))
    assert len(s._io) <= 2000
    interval, rows = s.io_rows()
    assert sum(r["frames"] for r in rows) == n and sum(r["bytes"] for r in rows) == 10 * n
    assert 10 <= len(rows) <= 40 and interval in (200.0, 500.0)
    fixed = Stats(interval=60)
    for i in range(600):
        fixed.add(frame("X", i * 1.0))
    interval, rows = fixed.io_rows()
    assert interval == 60 and [r["frames"] for r in rows] == [60] * 10


def test_stats_of_a_real_capture_match_inspect():
    path = str(ROOT / "captures/rabbitmq_stream/rstream_consume.pcap")
    doc = json.loads(CliRunner().invoke(cli.app, ["stats", path, "--format", "json"]).stdout)
    lines = [json.loads(x) for x in CliRunner().invoke(cli.app, ["inspect", path, "-T", "jsonl"]).stdout.splitlines()]
    frames = [x for x in lines if x["type"] == "frame"]
    assert sum(r["frames"] for r in doc["commands"]) == len(frames) == sum(r["frames"] for r in doc["io"])
    deliver = [r for r in doc["commands"] if r["command"] == "Deliver"]
    assert deliver == [{"protocol": "rabbitmq_stream", "command": "Deliver", "direction": "s2c", "frames": 4,
                        "bytes": sum(f["size"] for f in frames if f["command"] == "Deliver")}]
    latencies = sorted(f["latency"] for f in frames if f["request_frame"] is not None)
    assert sum(r["count"] for r in doc["srt"]) == len(latencies)
    assert min(r["min"] for r in doc["srt"]) == latencies[0] and max(r["max"] for r in doc["srt"]) == latencies[-1]
    findings = sum(len(f["findings"]) for f in frames) + sum(1 for x in lines if x["type"] == "finding")
    assert sum(r["count"] for r in doc["expert"]) == findings
    assert [c["flow"] for c in doc["conversations"]] == [1, 2, 3, 4]
    assert all(c["duration"] >= 0 for c in doc["conversations"])
