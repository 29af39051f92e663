"""The kit framer's shortcut for a frame that spans many segments (issue 15): with a dissector's
``stable_measure`` promise, the bytes of a frame not yet whole only join the queue, and the cut
runs again once the frame can be whole. A differential test: with the promise withdrawn
(``stable_measure = False``: the cut runs on every segment) the events, the framers' state after
every call and the state at the end must be the same, on every AMQP 0-9-1 and RabbitMQ Stream
capture (the dissectors that make the promise), re-cut into small segments so that frames wait,
mutated, joined mid-stream and resumed from a snapshot taken while a frame waits; and a setting
that measure reads, lowered under a waiting frame, must be seen (``remeasure``).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from analyzer.api import Direction
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from dissectors.amqp091.framing import Side
from dissectors.kit import Framer
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream.connection import StreamConnection, StreamFramer
from tests import replay as R
from tests.replay import Recorded
from tests.test_amqp091_hotpath import midstream, mutate
from tests.test_kit_direct_cut import CAPS, replay_framed

AMQP = sorted(str(p.relative_to(CAPS)) for p in (CAPS / "amqp091").glob("*.pcap*"))
STREAM = sorted(str(p.relative_to(CAPS)) for p in (CAPS / "rabbitmq_stream").glob("*.pcap*"))
DISSECTORS = (Amqp091Dissector(), Amqp091Dissector(hot=False))


def split(rec: Recorded, size: int) -> Recorded:
    """``rec`` with every fed segment cut into pieces of at most ``size`` bytes."""
    calls: list[tuple[str, tuple]] = []
    for name, args in rec.calls:
        if name != "feed" or len(args[1]) <= size:
            calls.append((name, args))
            continue
        d, data, ts = args
        calls.extend(("feed", (d, data[i:i + size], ts)) for i in range(0, len(data), size))
    return Recorded(rec.protocol, rec.midstream, calls)


def run(dissector: Any, rec: Recorded, stable: bool, resume_at: int | None = None,
        framer: type[Framer] = Side) -> tuple[list, list, Any]:
    """Events, the framers after each call and the state at the end, with the promise of
    ``framer`` (the dissector's framer class) made or not; ``resume_at``: the call before which the
    connection is snapshotted and resumed."""
    saved = framer.stable_measure
    framer.stable_measure = stable
    try:
        events, states, conn = replay_framed(dissector, rec, False, resume_at)
        return events, states, conn.snapshot()
    finally:
        framer.stable_measure = saved


def variants(path: str, seed: str, protocol: str = "amqp091") -> Iterator[Recorded]:
    rng = random.Random(seed)
    for rec in R.recordings(str(CAPS / path), protocol):
        for size in (1448, 301):
            yield split(rec, size)
        yield split(midstream(rec, rng), 301)
        for i in range(4):
            yield split(mutate(rec, rng, 1 + i % 4), 301)


@pytest.mark.parametrize("path", AMQP)
def test_the_shortcut_is_the_cut_on_every_segment(path: str) -> None:
    rng = random.Random(f"stable-{path}")
    n = 0
    for rec in variants(path, f"stable-{path}"):
        for dissector in DISSECTORS:
            assert run(dissector, rec, True) == run(dissector, rec, False)
            at = rng.randrange(len(rec.calls))
            assert run(dissector, rec, True, at)[0] == run(dissector, rec, False)[0]
            n += 1
    assert n


@pytest.mark.parametrize("path", STREAM)
def test_the_shortcut_is_the_cut_on_every_segment_for_rabbitmq_stream(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(f"stable-{path}")
    dissector = RabbitMQStreamDissector()
    n = 0
    for rec in variants(path, f"stable-{path}", "rabbitmq_stream"):
        for hot in (True, False):
            monkeypatch.setattr(StreamConnection, "hot", hot)
            assert run(dissector, rec, True, framer=StreamFramer) == run(dissector, rec, False, framer=StreamFramer)
            at = rng.randrange(len(rec.calls))
            assert run(dissector, rec, True, at, StreamFramer)[0] == run(dissector, rec, False, framer=StreamFramer)[0]
            n += 1
    assert n


def test_the_shortcut_waits_without_cutting() -> None:
    """It really runs: a big frame fed in small pieces is measured once, not once a piece."""
    s = E.Script().handshake().open_channel(1)
    s.c(E.message(1, b"x" * 50_000, {}, exchange="x", routing_key="r"))
    s.close((1,))
    rec = split(Recorded("amqp091", False, [("feed", step) for step in s.steps] + [("end", (s.ts + 1,))]), 500)
    asked = 0
    real = Side.measure

    def counting(self: Side, buf: Any, pos: int) -> int:
        nonlocal asked
        asked += 1
        return real(self, buf, pos)

    Side.measure = counting  # type: ignore[method-assign]
    try:
        events = run(Amqp091Dissector(hot=False), rec, True)[0]
    finally:
        Side.measure = real  # type: ignore[method-assign]
    assert any(e[0] == "frame" and e[4] == "ContentBody" and e[3] == 50_008 for e in events)
    assert asked < 30, asked  # 17 here; 116 with the cut run on every piece


def test_a_lowered_cap_measures_the_waiting_frame_again() -> None:
    """Joined mid-stream (a cap of 16 MiB), a frame claiming 3 MB waits; then a Connection.TuneOk
    lowers the cap to 1 MiB: with the next bytes the waiting frame is no frame (junk), as the cut
    on every segment finds."""
    c2s, s2c = Direction.C2S, Direction.S2C
    heartbeat = struct.pack(">BHI", 8, 0, 0) + b"\xce"
    calls = [("feed", (s2c, heartbeat * 2, 0.9)),
             ("feed", (s2c, struct.pack(">BHI", 3, 1, 3_000_000) + b"x" * 1000, 1.0)),
             ("feed", (c2s, E.method("Connection.TuneOk", 0, channel_max=2047, frame_max=131072, heartbeat=0), 1.1)),
             ("feed", (s2c, b"y" * 1000, 1.2)),
             ("feed", (s2c, E.method("Channel.Close", 1, reply_code=200, reply_text="x", class_id=0, method_id=0), 1.3)),
             ("end", (2.0,))]
    rec = Recorded("amqp091", True, calls)
    for dissector in DISSECTORS:
        got = run(dissector, rec, True)
        assert got == run(dissector, rec, False)
        assert any(e[0] == "finding" and e[1] == "amqp091.framing.resync" for e in got[0])
