"""Bounded state (issue 8 §6): an established RabbitMQ Stream connection holds nothing for what is
not happening (no empty table, no heartbeat timer without heartbeats), and what a publisher or a
subscription adds goes away again when it is deleted, unsubscribed or dropped by the server. The
compact form is what a snapshot stores and what a resume gives back.

Memory is measured with tracemalloc (deterministic allocation sizes, not timings).
"""

from __future__ import annotations

import gc
import json
import tracemalloc

from analyzer.api import Direction, Frame
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream.connection import StreamConnection
from dissectors.rabbitmq_stream.encode import (
    build_chunk,
    deliver,
    encode_message,
    handshake,
    request,
    response,
    simple_entry,
)
from tests.replay import normal
from tests.state_walk import containers

C2S, S2C = Direction.C2S, Direction.S2C
D = RabbitMQStreamDissector()
TABLES = ("publishers", "unconfirmed", "credit", "sub_stream", "gone")


def empty(conn: StreamConnection) -> list[str]:
    return [path for path, c in containers(conn) if not c]


def feed(conn: StreamConnection, steps: list[tuple[Direction, bytes]], t0: float = 1_700_000_000.0) -> list[Frame]:
    out: list[Frame] = []
    for i, (d, raw) in enumerate(steps):
        out += [e for e in conn.feed(d, raw, t0 + i * 0.001) if isinstance(e, Frame)]
    return out


def opened(heartbeat: int = 60) -> StreamConnection:
    conn = StreamConnection(False)
    frames = feed(conn, handshake(heartbeat=heartbeat))
    assert conn.hs == "open" and not [f for fr in frames for f in fr.findings]
    return conn


def roundtrip(conn: StreamConnection) -> StreamConnection:
    again = D.resume(json.loads(json.dumps(conn.snapshot())))
    assert isinstance(again, StreamConnection)
    return again


def chunk(first: int, n: int = 1) -> bytes:
    return build_chunk([simple_entry(encode_message(f"m{first + i}".encode())) for i in range(n)], n, first)


def test_a_handshaken_connection_keeps_no_emptycontainers() -> None:
    """After the handshake nothing is allocated for what is not happening: no publisher or
    subscription table, no outstanding-request table, no buffered bytes, one framer object per
    direction (which measures frames itself: no closures), and a heartbeat timer only when
    heartbeats were negotiated."""
    for hb in (60, 0):
        conn = opened(hb)
        assert empty(conn) == [], hb
        assert not hasattr(conn, "__dict__")  # every attribute is a slot
        assert all(getattr(conn, t) is None for t in TABLES) and conn.tracked == 0
        assert conn.corr.c2s is None and conn.corr.s2c is None
        assert conn.framer_c2s.queue._buf is None and conn.framer_s2c.queue._buf is None
        assert conn.server_tune_ref is None and conn.server_frame_max == conn.frame_max == 1048576
        assert (conn.silence is not None) == (hb > 0)
        assert empty(roundtrip(conn)) == []


def test_the_heartbeat_timer_starts_from_the_servers_tune_and_ends_with_close() -> None:
    """The timer is created by the client's Tune, yet the server's silence is still counted from
    the server's Tune (as if the timer had watched every frame), and a closed connection lets it go."""
    conn = StreamConnection(False)
    steps = handshake(heartbeat=5)
    frames = feed(conn, steps[:7])
    assert frames[-1].command == "Tune" and conn.silence is None and conn.server_tune_ref == frames[-1].anchor()
    frames += feed(conn, [(S2C, request("Heartbeat"))], 1_700_000_000.007)  # the server's last frame now
    assert conn.server_tune_ref == frames[-1].anchor() != frames[-2].anchor()
    feed(conn, steps[7:8], 1_700_000_000.008)  # the client's Tune
    assert conn.silence is not None and conn.silence.ref_s2c == frames[-1].anchor() and conn.server_tune_ref is None
    feed(conn, [(C2S, request("Close", correlation_id=9, closing_code=1, closing_reason="bye")),
                (S2C, response("Close", correlation_id=9, response_code=1))], 1_700_000_001.0)
    assert conn.closed and conn.silence is None and conn.deadline() is None


def test_a_publishers_state_goes_away_when_confirmed_and_deleted() -> None:
    conn = opened()
    feed(conn, [(C2S, request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="",
                              stream="s")),
                (S2C, response("DeclarePublisher", correlation_id=10, response_code=1)),
                (C2S, request("Publish", publisher_id=1, messages=[{"publishing_id": i, "message": b"m"}
                                                                   for i in range(3)]))])
    assert conn.publishers == {1} and conn.unconfirmed == {1: {0, 1, 2}} and conn.tracked == 3
    assert empty(roundtrip(conn)) == [] and roundtrip(conn).unconfirmed == {1: {0, 1, 2}}
    feed(conn, [(S2C, request("PublishConfirm", publisher_id=1, publishing_ids=[0, 1, 2]))])
    assert conn.unconfirmed is None and conn.tracked == 0 and conn.publishers == {1}
    feed(conn, [(C2S, request("DeletePublisher", correlation_id=11, publisher_id=1)),
                (S2C, response("DeletePublisher", correlation_id=11, response_code=1))])
    assert conn.publishers is None and empty(conn) == []
    # A publisher the server refused never stays either.
    feed(conn, [(C2S, request("DeclarePublisher", correlation_id=12, publisher_id=2, publisher_reference="",
                              stream="nope")),
                (S2C, response("DeclarePublisher", correlation_id=12, response_code=2))])
    assert conn.publishers is None and empty(conn) == []


def test_a_subscriptions_state_goes_away_when_unsubscribed_or_dropped() -> None:
    conn = opened()
    feed(conn, [(C2S, request("Subscribe", correlation_id=20, subscription_id=0, stream="s",
                              offset_spec={"type": 1}, credit=2)),
                (S2C, response("Subscribe", correlation_id=20, response_code=1)),
                (S2C, deliver(0, chunk(0)))])
    assert conn.credit == {0: 1} and conn.sub_stream == {0: "s"} and conn.gone is None
    again = roundtrip(conn)
    assert (again.credit, again.sub_stream, empty(again)) == ({0: 1}, {0: "s"}, [])
    feed(conn, [(C2S, request("Unsubscribe", correlation_id=21, subscription_id=0)),
                (S2C, response("Unsubscribe", correlation_id=21, response_code=1))])
    # What stays is the tombstone that makes a late SUBSCRIPTION_ID_DOES_NOT_EXIST a benign race.
    assert conn.credit is None and conn.sub_stream is None and conn.gone == {0} and empty(conn) == []
    feed(conn, [(C2S, request("Subscribe", correlation_id=22, subscription_id=0, stream="t",
                              offset_spec={"type": 1}, credit=1)),
                (S2C, response("Subscribe", correlation_id=22, response_code=1))])
    assert conn.gone is None and conn.credit == {0: 1} and conn.sub_stream == {0: "t"}
    feed(conn, [(S2C, request("MetadataUpdate", response_code=6, stream="t"))])  # the server drops it
    assert conn.credit is None and conn.sub_stream is None and conn.gone == {0} and empty(conn) == []


def test_the_compact_form_survives_snapshot_and_resume() -> None:
    """Cut after every step of a conversation that declares, publishes, subscribes, unsubscribes
    and deletes: the resumed connection holds no empty container, keeps the same tables and gives
    the same output as the uncut one for the rest of the conversation."""
    steps = handshake(heartbeat=5) + [
        (C2S, request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="", stream="s")),
        (S2C, response("DeclarePublisher", correlation_id=10, response_code=1)),
        (C2S, request("Publish", publisher_id=1, messages=[{"publishing_id": 7, "message": b"m"}])),
        (C2S, request("Subscribe", correlation_id=20, subscription_id=3, stream="s", offset_spec={"type": 1},
                      credit=1)),
        (S2C, response("Subscribe", correlation_id=20, response_code=1)),
        (S2C, request("PublishConfirm", publisher_id=1, publishing_ids=[7])),
        (S2C, deliver(3, chunk(0))),
        (C2S, request("Unsubscribe", correlation_id=21, subscription_id=3)),
        (S2C, response("Unsubscribe", correlation_id=21, response_code=1)),
        (C2S, request("DeletePublisher", correlation_id=11, publisher_id=1)),
        (S2C, response("DeletePublisher", correlation_id=11, response_code=1)),
    ]
    t = [1_700_000_000.0 + i for i in range(len(steps))]  # 1 s apart: the heartbeat timer has work
    straight = StreamConnection(False)
    want = [normal(straight.feed(d, raw, ts)) for (d, raw), ts in zip(steps, t, strict=True)]
    want.append(normal(straight.end(t[-1] + 60)))
    for cut in range(len(steps)):
        conn = StreamConnection(False)
        got = [normal(conn.feed(d, raw, ts)) for (d, raw), ts in zip(steps[:cut], t[:cut], strict=True)]
        conn = roundtrip(conn)
        assert empty(conn) == [] and not hasattr(conn, "__dict__"), cut
        got += [normal(conn.feed(d, raw, ts)) for (d, raw), ts in zip(steps[cut:], t[cut:], strict=True)]
        got.append(normal(conn.end(t[-1] + 60)))
        assert got == want, cut
    assert all(getattr(straight, n) is None for n in ("publishers", "unconfirmed", "credit", "sub_stream"))


def test_an_established_connection_costs_about_a_kilobyte() -> None:
    n = 2_000
    steps = handshake()
    conns: list[StreamConnection] = []

    def run() -> None:
        for _ in range(n):
            conn = StreamConnection(False)
            feed(conn, steps)
            conns.append(conn)

    gc.collect()
    tracemalloc.start()
    try:
        run()
        gc.collect()
        per_connection = tracemalloc.get_traced_memory()[0] / n
    finally:
        tracemalloc.stop()
    # ~1.2 KB, about a quarter of it the two frame references the heartbeat timer points its
    # findings at; it was ~3 KB with closures, empty tables and a dict of framers.
    assert per_connection < 1500, per_connection
