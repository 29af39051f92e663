"""Snapshot → JSON → resume continues an AMQP 0-9-1 connection exactly (issue 8 §4, §7).

Every bundled capture is recorded through the real engine (tests.replay.record: the exact calls
the engine makes to the dissector), then replayed on a fresh connection straight and cut at
several points by a snapshot that goes through JSON. The cuts fall between calls and, with the
feed data split at arbitrary byte positions, inside frames (a frame half in the queue, a message
whose body is half received, a request outstanding).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analyzer.api import Direction
from dissectors.amqp091 import Amqp091Connection, Amqp091Dissector
from dissectors.amqp091 import encode as E
from tests import replay as R
from tests.replay import Recorded, cut_points, replay

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp091"
ALL = sorted(p.name for p in CAPS.glob("*.pcap*"))
D = Amqp091Dissector()


def recordings(name: str) -> tuple[Recorded, ...]:
    recs = R.recordings(str(CAPS / name), "amqp091")
    assert recs, name
    return recs


@pytest.mark.parametrize("name", ALL)
def test_resume_from_json_continues_identically(name: str) -> None:
    rng = random.Random(name)
    for rec in recordings(name):
        whole = replay(D, rec)
        assert whole, "the recording decodes to something"
        for k in cut_points(len(rec.calls), rng):
            assert replay(D, rec, cut_at=k) == whole, (name, k)
        # Cuts inside frames: the feeds split at arbitrary bytes give the same output, straight and
        # cut between the two halves of a split feed (odd positions) or elsewhere.
        inside, _ = R.split_feeds(rec, rng)  # every feed split in two at a random byte
        assert replay(D, inside) == whole
        n = len(inside.calls)
        points = set(cut_points(n, rng)) | {k for k in (rng.randrange(n) | 1 for _ in range(6)) if k < n}
        for k in sorted(points):
            assert replay(D, inside, cut_at=k) == whole, (name, "inside", k)


@pytest.mark.parametrize("name", ALL)
def test_snapshot_is_json_after_every_call(name: str) -> None:
    """After every call the state is plain data: it survives json.dumps, and resuming it gives a
    connection whose own snapshot is the same."""
    for rec in recordings(name):
        conn = D.connection(rec.midstream)
        for call, args in R.split_feeds(rec, random.Random(name))[0].calls:
            list(getattr(conn, call)(*args) or ())
            text = json.dumps(conn.snapshot())
            again = D.resume(json.loads(text))
            assert isinstance(again, Amqp091Connection)
            assert json.dumps(again.snapshot()) == text


def test_a_snapshot_holds_references_not_frames() -> None:
    """An outstanding request, a message half received and an unconfirmed publish are kept as plain
    records (a frame reference is [direction, offset, packet]), and a snapshot is small."""
    s = E.Script().handshake().open_channel(1)
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    s.c(E.message(1, b"x" * 100)).c(E.method("Queue.Declare", 1, queue="q"))
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 10)).c(E.body(1, b"12345"))
    conn = D.connection(False)
    for d, data, ts in s.steps:
        list(conn.feed(d, data, ts))
    state = json.loads(json.dumps(conn.snapshot()))
    text = json.dumps(state)
    assert len(text) < 4000
    conn2 = D.resume(state)
    pending = conn2.corr.peek("s2c", 1)
    assert pending is not None and (pending[0], pending[1][0]) == ("Queue.Declare", "c2s")
    assert conn2.tracks[1].unconfirmed.r == [1, 3]  # publishes 1 and 2, as one range
    assert conn2.content["c2s"].seq.open[1][:3] == ["Basic.Publish", 10, 5]
    # It goes on where it stopped: the rest of the body completes the message, declare-ok answers.
    evs = list(conn2.feed(Direction.C2S, E.body(1, b"67890"), s.ts + 1))
    assert "[Basic.Publish message 10 bytes" in evs[0].info
    evs = list(conn2.feed(Direction.S2C, E.method("Queue.DeclareOk", 1, queue="q") +
                          E.method("Basic.Ack", 1, delivery_tag=2, multiple=True), s.ts + 2))
    assert [e.get("confirms") for e in evs] == [None, [1, 2]] and all(not e.findings for e in evs)
    declared_at = s.steps[-4][2]
    assert evs[0].get("response_time") == pytest.approx(s.ts + 2 - declared_at, abs=1e-9)


@pytest.mark.parametrize("name", ALL)
def test_resume_on_broken_input_continues_identically(name: str) -> None:
    """Mutated bytes (junk, resync, broken frames), capture holes and a mid-stream start: the
    framer's queue, junk runs and half-received messages survive the snapshot too."""
    from tests.test_amqp091_hotpath import midstream, mutate

    rng = random.Random(f"broken-{name}")
    for rec in recordings(name):
        for i in range(6):
            broken = mutate(midstream(rec, rng) if i % 3 == 2 else rec, rng, 1 + i)
            calls = list(broken.calls)
            at = rng.randrange(1, len(calls))
            d = calls[at - 1][1][0] if calls[at - 1][0] == "feed" else "c2s"
            calls.insert(at, ("gap", (Direction(d), rng.randint(1, 300), 0.0)))
            broken = Recorded(broken.protocol, broken.midstream, calls)
            whole = replay(D, broken)
            for k in cut_points(len(calls), rng, 4):
                assert replay(D, broken, cut_at=k) == whole, (name, i, k)
