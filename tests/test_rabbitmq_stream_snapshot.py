"""RabbitMQ Stream connections are resumable and time-driven.

- Snapshot round-trip: every bundled capture's rabbitmq_stream conversations, replayed call by call
  (tests/replay.py), give the same output straight and when cut by snapshot -> JSON -> resume, at
  call boundaries and inside frames (feed calls split at random byte positions).
- ``snapshot()`` is JSON-serialisable after every call.
- Heartbeat silence fires from ``tick`` when its deadline passes, without any bytes arriving.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analyzer.api import Direction, Finding, Frame
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.connection import StreamConnection
from dissectors.rabbitmq_stream.encode import handshake, request, response
from tests.replay import Recorded, cut_points, recordings, replay, split_feeds

HERE = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
CAPTURES = sorted([*HERE.glob("*.pcap"), *HERE.glob("*.pcapng")])
D = RabbitMQStreamDissector()


def conversations(path: Path) -> tuple[Recorded, ...]:
    return recordings(str(path), "rabbitmq_stream")


def test_every_capture_has_rabbitmq_stream_conversations() -> None:
    assert len(CAPTURES) >= 7
    assert all(conversations(p) for p in CAPTURES)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_snapshot_round_trip_at_call_boundaries(path: Path) -> None:
    rng = random.Random(path.name)
    for rec in conversations(path):
        straight = replay(D, rec)
        assert straight, "the conversation decodes to something"
        for k in cut_points(len(rec.calls), rng):
            assert replay(D, rec, cut_at=k) == straight, f"cut at call {k} of {len(rec.calls)}"


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_snapshot_round_trip_inside_frames(path: Path) -> None:
    rng = random.Random("inside " + path.name)
    for rec in conversations(path):
        split, cuts = split_feeds(rec, rng, 8)
        straight = replay(D, split)
        for k in cuts:
            assert replay(D, split, cut_at=k) == straight, f"cut inside a feed at call {k}"


def test_a_cut_inside_a_frame_resumes_the_buffered_bytes() -> None:
    """The cut really falls inside a frame: the snapshot holds the frame's first bytes."""
    hs = handshake()
    conn = StreamConnection(False)
    for d, raw in hs[:3]:
        conn.feed(d, raw, 1.0)
    half = hs[3][1]
    assert conn.feed(hs[3][0], half[:7], 1.0) == []
    state = json.loads(json.dumps(conn.snapshot()))
    resumed = D.resume(state)
    got = [e for e in resumed.feed(hs[3][0], half[7:], 1.0) if isinstance(e, Frame)]
    assert [f.command for f in got] == ["SaslHandshakeResponse"] and got[0].offset == len(hs[1][1])


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_snapshot_is_json_after_every_call(path: Path) -> None:
    for rec in conversations(path):
        conn = D.connection(rec.midstream)
        for name, args in rec.calls:
            getattr(conn, name)(*args)
            json.dumps(conn.snapshot())


def _opened(heartbeat: int, t0: float) -> tuple[StreamConnection, list]:
    conn = StreamConnection(False)
    events: list = []
    for i, (d, raw) in enumerate(handshake(heartbeat=heartbeat)):
        events += conn.feed(d, raw, t0 + i * 0.001)
    return conn, events


def test_heartbeat_silence_fires_from_tick() -> None:
    t0 = 1_700_000_000.0
    conn, events = _opened(5, t0)
    assert not [f for e in events if isinstance(e, Frame) for f in e.findings]
    last_c2s = conn.feed(Direction.C2S, request("Heartbeat"), t0 + 3.0)[0]
    last_s2c = conn.feed(Direction.S2C, request("Heartbeat"), t0 + 4.0)[0]
    due = conn.deadline()
    assert due == pytest.approx(t0 + 3.0 + 10)  # twice the heartbeat after the client's last frame
    assert list(conn.tick(due - 0.5)) == []
    got = list(conn.tick(due + 0.5))
    assert [f.id for f in got] == [R.HEARTBEAT_SILENCE.id]
    assert "client" in got[0].message and got[0].related == last_c2s.anchor()
    assert conn.deadline() == pytest.approx(t0 + 4.0 + 10)
    assert list(conn.tick(due + 0.6)) == []  # reported once per silent spell
    got = list(conn.tick(t0 + 30.0))
    assert [(f.id, "server" in f.message) for f in got] == [(R.HEARTBEAT_SILENCE.id, True)]
    assert got[0].related == last_s2c.anchor()
    assert conn.deadline() is None and list(conn.tick(t0 + 100.0)) == []


def test_heartbeat_tick_survives_a_snapshot() -> None:
    t0 = 1_700_000_000.0
    conn, _ = _opened(5, t0)
    conn.feed(Direction.C2S, request("Heartbeat"), t0 + 3.0)
    resumed = D.resume(json.loads(json.dumps(conn.snapshot())))
    assert resumed.deadline() == conn.deadline()
    assert [f.id for f in resumed.tick(t0 + 20.0)] == [R.HEARTBEAT_SILENCE.id] * 2


def test_no_heartbeat_deadline_without_heartbeats_or_after_close() -> None:
    t0 = 1_700_000_000.0
    conn, _ = _opened(0, t0)
    assert conn.deadline() is None and list(conn.tick(t0 + 1e6)) == []
    conn, _ = _opened(5, t0)
    conn.feed(Direction.C2S, request("Close", correlation_id=9, closing_code=1, closing_reason="bye"), t0 + 1)
    conn.feed(Direction.S2C, response("Close", correlation_id=9, response_code=1), t0 + 1)
    assert conn.deadline() is None and list(conn.tick(t0 + 1e6)) == []


def test_unanswered_request_survives_a_snapshot() -> None:
    """A request outstanding at the cut is still answered (or reported) after the resume, pointing
    at the request by reference."""
    conn, _ = _opened(60, 0.0)
    req = conn.feed(Direction.C2S, request("StreamStats", correlation_id=61, stream="s"), 1.0)[0]
    resumed = D.resume(json.loads(json.dumps(conn.snapshot())))
    end = [e for e in resumed.end(2.0) if isinstance(e, Finding)]
    assert [f.id for f in end] == [R.UNANSWERED.id] and list(end[0].related) == list(req.anchor())
    resumed = D.resume(json.loads(json.dumps(conn.snapshot())))
    resp = resumed.feed(Direction.S2C, response("StreamStats", correlation_id=61, response_code=1, stats={}), 1.25)
    assert resp[0].findings == [] and resp[0].fields[-1].name == "response_time"
    assert resp[0].fields[-1].value == pytest.approx(0.25)
    assert list(resumed.end(2.0)) == []
