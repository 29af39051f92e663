"""The hot path is the general path, only faster: a differential test (issue 8 §7).

``Amqp091Dissector(hot=False)`` takes every frame through the general path (decode, then every
check). The hot path (dissectors/amqp091/hotpath.py) must give exactly the same frames, fields,
Info lines and findings (tests.replay.normal) on every bundled capture, on mutated variants of
them (bytes of the TCP payload flipped, inserted, deleted, and segments re-cut), and on a busy
synthetic session like the benchmark's.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from tests import replay as R
from tests.replay import Recorded, midstream, mutate, replay

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp091"
ALL = sorted(p.name for p in CAPS.glob("*.pcap*"))
HOT, GENERAL = Amqp091Dissector(), Amqp091Dissector(hot=False)


def scripted(s: E.Script) -> Recorded:
    """An encoder script's steps as a recorded connection: every step fed, then the end."""
    return Recorded("amqp091", False, [("feed", (d, data, ts)) for d, data, ts in s.steps] + [("end", (s.ts + 1,))])


def recordings(name: str) -> tuple[Recorded, ...]:
    return R.recordings(str(CAPS / name), "amqp091")


def same(rec: Recorded) -> list:
    return R.agree(HOT, GENERAL, rec)


@pytest.mark.parametrize("name", ALL)
def test_hot_and_general_paths_agree_on_every_capture(name: str) -> None:
    for rec in recordings(name):
        assert same(rec)


@pytest.mark.parametrize("name", ALL)
def test_hot_and_general_paths_agree_on_mutated_captures(name: str) -> None:
    rng = random.Random(f"hot-{name}")
    for rec in recordings(name):
        for i in range(40):
            same(mutate(rec, rng, 1 + i % 6))


def variants(name: str, seed: str, mutated: int = 20, joined: int = 0) -> Iterator[Recorded]:
    """Every recorded conversation of capture ``name``, each followed by ``mutated`` mutated
    variants of it (1 to 6 edits) and ``joined`` mid-stream cuts (every other one mutated too),
    all from one random generator seeded with ``seed``: the inputs of the differential tests."""
    rng = random.Random(seed)
    for rec in recordings(name):
        yield rec
        for i in range(mutated):
            yield mutate(rec, rng, 1 + i % 6)
        for i in range(joined):
            cut = midstream(rec, rng)
            yield cut if i % 2 else mutate(cut, rng, 2)


@pytest.mark.parametrize("name", ALL)
def test_hot_and_general_paths_agree_on_captures_joined_midstream(name: str) -> None:
    rng = random.Random(f"mid-{name}")
    for rec in recordings(name):
        for i in range(12):
            cut = midstream(rec, rng)
            same(cut if i % 2 else mutate(cut, rng, 2))


def busy_session() -> Recorded:
    """What the benchmark sends: batched publishes with confirms, batched deliveries and acks, on
    two channels, with messages split over body frames and crossing segment boundaries."""
    s = E.Script().handshake(frame_max=4096).open_channel(1).open_channel(2)
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    s.c(E.method("Basic.Consume", 2, queue="q", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 2, consumer_tag="c"))
    props = {"content-type": "application/json", "delivery-mode": 2, "headers": {"k": "v", "n": [1, 2]}}
    tag = 0
    for batch in range(12):
        s.c(b"".join(E.message(1, b'{"n": %d}' % i * (1 + 300 * (i % 5 == 0)), props, exchange="x", routing_key="r")
                     for i in range(batch * 5, batch * 5 + 5)))
        s.s(E.method("Basic.Ack", 1, delivery_tag=batch * 5 + 5, multiple=batch % 2 == 0))
        s.s(b"".join(E.message(2, b"m%d" % (tag + i), props, name="Basic.Deliver", consumer_tag="c",
                               delivery_tag=tag + i + 1) for i in range(4)))
        s.c(b"".join(E.method("Basic.Ack", 2, delivery_tag=tag + i + 1) for i in range(4)))
        tag += 4
    s.close((1, 2))
    return scripted(s)


def sync_session() -> Recorded:
    """Synchronous exchanges as a topology script and a basic.get poller make them: declares,
    binds, deletes and purges answered in order (some pipelined, one with nowait), basic.get
    answered by get-ok with content and by get-empty, a mandatory publish returned (a reply code
    the hot path judges), transactions, qos and a consumer, then a reply that answers nothing and
    one that answers the wrong request."""
    s = E.Script().handshake(frame_max=4096).open_channel(1).open_channel(2)
    s.c(E.method("Basic.Qos", 1, prefetch_count=10)).s(E.method("Basic.QosOk", 1))
    for i in range(6):
        q = f"q{i}"
        s.c(E.method("Queue.Declare", 1, queue=q, durable=True, arguments={"x-max-length": 10, "x-queue-type": "classic"}))
        s.s(E.method("Queue.DeclareOk", 1, queue=q, message_count=i, consumer_count=0))
        s.c(E.method("Queue.Bind", 1, queue=q, exchange="amq.topic", routing_key=f"k.{i}", arguments={}))
        s.c(E.method("Exchange.Declare", 2, exchange=f"x{i}", type="fanout"))  # pipelined on another channel
        s.s(E.method("Queue.BindOk", 1)).s(E.method("Exchange.DeclareOk", 2))
    s.c(E.method("Queue.Declare", 1, queue="quiet", nowait=True))
    props = {"content-type": "text/plain", "delivery-mode": 2}
    for tag in range(1, 5):
        s.c(E.method("Basic.Get", 1, queue="q1"))
        s.s(E.message(1, b"got %d" % tag, props, name="Basic.GetOk", delivery_tag=tag, exchange="",
                      routing_key="q1", message_count=4 - tag))
        s.c(E.method("Basic.Ack", 1, delivery_tag=tag))
    s.c(E.method("Basic.Get", 1, queue="q1")).s(E.method("Basic.GetEmpty", 1))
    s.c(E.message(1, b"unroutable", props, exchange="", routing_key="nowhere", mandatory=True))
    s.s(E.message(1, b"unroutable", props, name="Basic.Return", reply_code=312, reply_text="NO_ROUTE", exchange="",
                  routing_key="nowhere"))
    s.c(E.method("Tx.Select", 2)).s(E.method("Tx.SelectOk", 2))
    for _ in range(3):
        s.c(E.message(2, b"in a transaction", props, exchange="", routing_key="q2"))
        s.c(E.method("Tx.Commit", 2)).s(E.method("Tx.CommitOk", 2))
    s.c(E.method("Basic.Consume", 1, queue="q3", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 1, consumer_tag="c"))
    s.c(E.method("Basic.Cancel", 1, consumer_tag="c")).s(E.method("Basic.CancelOk", 1, consumer_tag="c"))
    s.c(E.method("Queue.Purge", 1, queue="q1")).s(E.method("Queue.PurgeOk", 1, message_count=0))
    s.c(E.method("Queue.Delete", 1, queue="q1")).s(E.method("Queue.DeleteOk", 1, message_count=0))
    s.s(E.method("Queue.DeleteOk", 1, message_count=0))  # answers nothing
    s.c(E.method("Queue.Unbind", 2, queue="q2", exchange="amq.topic", routing_key="k", arguments={}))
    s.s(E.method("Exchange.DeleteOk", 2))  # answers the wrong request
    s.s(E.method("Queue.UnbindOk", 2))
    s.close((1, 2))
    return scripted(s)


def test_hot_and_general_paths_agree_on_synchronous_exchanges() -> None:
    rec = sync_session()
    out = same(rec)
    links = [e for e in out if e[0] == "frame" and '"response_time"' in e[8]]
    assert len(links) >= 40
    found = [f for e in out if e[0] == "frame" for f in e[9]] + [e for e in out if e[0] == "finding"]
    # The returned message, the reply that answers nothing and the one that answers the wrong request.
    assert sorted(f[1] for f in found) == ["amqp091.correlation.mismatch", "amqp091.correlation.unknown_response",
                                          "amqp091.reply.returned"], found
    for variant in mutants(rec, "sync", 200, 4):
        same(variant)


def channel_session() -> Recorded:
    """Every turn of the channel machine and of the correlation of its methods: opens and closes
    in order, a channel opened twice, closed when never opened, a CloseOk that answers nothing, the
    server failing a channel with a request outstanding on it, closes crossing, an OpenOk for no
    Open, a Close while a message's content is due, a channel opened again after its close, a
    close that lets go of a request left unanswered, and a Close with reply code 0 (pika's), then
    channel methods after the connection's close."""
    s = E.Script().handshake().open_channel(1).open_channel(2).open_channel(3).open_channel(4)
    s.c(E.method("Channel.Open", 1))  # already open
    s.c(E.method("Channel.Close", 5, reply_code=200, reply_text="never opened")).s(E.method("Channel.CloseOk", 5))
    s.s(E.method("Channel.CloseOk", 2))  # the client sent no close
    s.c(E.method("Queue.Declare", 3, queue="q3"))
    s.s(E.method("Channel.Close", 3, reply_code=404, reply_text="NOT_FOUND", class_id=50, method_id=10))
    s.c(E.method("Channel.CloseOk", 3))
    s.c(E.method("Channel.Close", 4, reply_code=200, reply_text="bye"))
    s.s(E.method("Channel.Close", 4, reply_code=200, reply_text="bye"))  # crossing
    s.s(E.method("Channel.CloseOk", 4)).c(E.method("Channel.CloseOk", 4))
    s.s(E.method("Channel.OpenOk", 6))  # no open
    s.c(E.method("Basic.Publish", 2, exchange="", routing_key="q"))
    s.c(E.method("Channel.Close", 2, reply_code=200, reply_text="bye")).s(E.method("Channel.CloseOk", 2))
    s.open_channel(3).open_channel(4)  # again, after their close
    s.open_channel(7).c(E.method("Queue.Declare", 7, queue="q7"))  # left unanswered: the close lets go of it
    s.s(E.method("Channel.Close", 7, reply_code=200, reply_text="bye")).c(E.method("Channel.CloseOk", 7))
    s.c(E.method("Channel.Close", 4, reply_code=0, reply_text="")).s(E.method("Channel.CloseOk", 4))
    s.c(E.method("Connection.Close", reply_code=200, reply_text="bye"))
    s.c(E.method("Channel.Close", 3, reply_code=200, reply_text="late"))
    s.s(E.method("Channel.CloseOk", 3)).s(E.method("Connection.CloseOk"))
    return scripted(s)


def test_hot_and_general_paths_agree_on_the_channel_lifecycle() -> None:
    rec = channel_session()
    out = same(rec)
    found = sorted(f[1] for e in out if e[0] == "frame" for f in e[9])
    assert found == ["amqp091.channel.after_close", "amqp091.channel.already_open",
                     "amqp091.channel.close_ok_without_close", "amqp091.channel.not_open", "amqp091.channel.not_open",
                     "amqp091.content.header_expected", "amqp091.correlation.unknown_response",
                     "amqp091.reply.channel_error", "amqp091.reply.zero_code"], found
    for variant in mutants(rec, "channels", 200, 4):
        same(variant)
    for variant in mutants(midstream(rec, random.Random("channels-mid")), "channels-mid", 60, 3):
        same(variant)


def mutants(rec: Recorded, seed: str, n: int, most: int) -> Iterator[Recorded]:
    """``n`` mutated variants of ``rec`` (1 to ``most`` edits), from a generator seeded with ``seed``."""
    rng = random.Random(seed)
    for i in range(n):
        yield mutate(rec, rng, 1 + i % most)


def busy_variants(seed: str, n: int) -> Iterator[Recorded]:
    """``n`` mutated variants (1 to 4 edits) of the busy session."""
    return mutants(busy_session(), seed, n, 4)


def test_hot_and_general_paths_agree_on_a_busy_session() -> None:
    rec = busy_session()
    out = same(rec)
    assert sum(1 for e in out if e[0] == "frame") > 300
    assert not [e for e in out if e[0] == "finding"] and not [f for e in out if e[0] == "frame" for f in e[9]]
    for variant in busy_variants("busy", 200):
        same(variant)


def test_the_hot_path_takes_the_busy_frames() -> None:
    """The differential test is only worth something if the hot path really runs: count the frames
    it builds (LazyFrames made outside the general path's decode)."""
    from dissectors.amqp091 import hotpath

    taken = 0
    real = hotpath._HOT

    def counting(fn):  # type: ignore[no-untyped-def]
        def wrapper(*args):  # type: ignore[no-untyped-def]
            nonlocal taken
            after = fn(*args)
            taken += bool(after)
            return after
        return wrapper

    hotpath._HOT = tuple(counting(f) for f in real)
    try:
        replay(HOT, busy_session())
    finally:
        hotpath._HOT = real
    assert taken > 100


def replay_counting_general(rec: Recorded, monkeypatch: pytest.MonkeyPatch) -> tuple[list, Counter[str]]:
    """``rec`` replayed through the hot path, and the commands of the frames the general path
    (Amqp091Connection.frame) made meanwhile."""
    from dissectors.amqp091.connection import Amqp091Connection

    general: Counter[str] = Counter()
    real = Amqp091Connection.frame

    def counted(self, d, side, data, offset):  # type: ignore[no-untyped-def]
        frame = real(self, d, side, data, offset)
        general[frame.command] += 1
        return frame

    monkeypatch.setattr(Amqp091Connection, "frame", counted)
    return replay(HOT, rec), general


def test_the_hot_path_takes_the_synchronous_exchanges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of the synchronous session, the general path makes only the protocol header, the
    connection's Close and CloseOk and the two replies that need its words (the handshake's
    methods and the channels' Open, OpenOk, Close and CloseOk are hot)."""
    out, general = replay_counting_general(sync_session(), monkeypatch)
    assert sum(1 for e in out if e[0] == "frame") == 113
    assert general == {"ProtocolHeader": 1, "Connection.Close": 1, "Connection.CloseOk": 1, "Queue.DeleteOk": 1,
                       "Exchange.DeleteOk": 1}


def handshake_sessions() -> list[Recorded]:
    """The connection methods every way the handshake machine, the correlator and the
    connection's own checks can take them: a handshake with heartbeats and a RabbitMQ 4.1 broker
    (frame-min-size 8192) pipelined into one segment, then Blocked, Unblocked and UpdateSecret; a
    Secure round and a mechanism that was not offered; a tune-ok asking for more than the server
    allows; steps out of order, twice and unanswered; a handshake method on channel 1; and
    handshake methods after the sender's Connection.Close."""
    start = E.method("Connection.Start", version_major=0, version_minor=9, mechanisms="PLAIN AMQPLAIN", locales="en_US",
                     server_properties={"product": "RabbitMQ", "version": "4.1.0"})
    start_ok = E.method("Connection.StartOk", client_properties={}, mechanism="PLAIN", response="\0a\0b",
                        locale="en_US")

    def tune(**kw: int) -> bytes:
        return E.method("Connection.Tune", **{"channel_max": 2047, "frame_max": 131072, "heartbeat": 60, **kw})

    def tune_ok(**kw: int) -> bytes:
        return E.method("Connection.TuneOk", **{"channel_max": 2047, "frame_max": 131072, "heartbeat": 60, **kw})

    open_, open_ok = E.method("Connection.Open", virtual_host="/"), E.method("Connection.OpenOk")
    sessions = []
    s = E.Script().c(E.PROTOCOL_HEADER).s(start).c(start_ok).s(tune()).c(tune_ok() + open_).s(open_ok)
    s.s(E.method("Connection.Blocked", reason="low on memory")).s(E.method("Connection.Unblocked"))
    s.c(E.method("Connection.UpdateSecret", new_secret="t", reason="refresh")).s(E.method("Connection.UpdateSecretOk"))
    sessions.append(s.open_channel(1).close())
    s = E.Script().c(E.PROTOCOL_HEADER).s(start)
    s.c(E.method("Connection.StartOk", client_properties={}, mechanism="EXTERNAL", response="", locale="en_US"))
    s.s(E.method("Connection.Secure", challenge="c")).c(E.method("Connection.SecureOk", response="r"))
    s.s(tune(channel_max=100, heartbeat=0)).c(tune_ok(channel_max=200, frame_max=4096, heartbeat=0))
    sessions.append(s.c(open_).s(open_ok).close())
    s = E.Script().c(E.PROTOCOL_HEADER).s(start).c(start_ok).s(tune(frame_max=8192)).c(tune_ok(frame_max=0))
    sessions.append(s.c(open_).s(open_ok).s(open_ok).close())
    s = E.Script().c(E.PROTOCOL_HEADER).s(start).s(start).c(tune_ok()).c(start_ok).c(open_).s(tune()).s(open_ok)
    sessions.append(s.c(open_).c(E.method("Connection.Open", 1, virtual_host="/")).s(E.method("Connection.OpenOk", 1)))
    s = E.Script().c(E.PROTOCOL_HEADER).s(start).c(start_ok)
    s.c(E.method("Connection.Close", reply_code=200, reply_text="bye")).c(tune_ok()).c(open_).s(tune())
    sessions.append(s.s(E.method("Connection.CloseOk")).s(open_ok))
    return [scripted(s) for s in sessions]


def test_hot_and_general_paths_agree_on_the_handshake() -> None:
    found: set[str] = set()
    for i, rec in enumerate(handshake_sessions()):
        out = same(rec)
        found |= {f[1] for e in out if e[0] == "frame" for f in e[9]} | {e[1] for e in out if e[0] == "finding"}
        for variant in mutants(rec, f"handshake-{i}", 60, 4):
            same(variant)
        for variant in mutants(midstream(rec, random.Random(f"handshake-mid-{i}")), f"handshake-mid-{i}", 20, 3):
            same(variant)
    assert {"amqp091.handshake.order", "amqp091.handshake.mechanism", "amqp091.handshake.tune",
            "amqp091.correlation.unknown_response", "amqp091.channel.after_close",
            "amqp091.method.wrong_channel"} <= found, found
    # With room for one outstanding request per side, the second UpdateSecret goes past the limit.
    s = E.Script().handshake()
    s.c(E.method("Connection.UpdateSecret", new_secret="t", reason="r")).c(E.method("Connection.UpdateSecret",
                                                                                   new_secret="u", reason="r"))
    rec = scripted(s)
    hot, general = Amqp091Dissector(limits={"requests": 1}), Amqp091Dissector(hot=False, limits={"requests": 1})
    out = R.agree(hot, general, rec)
    assert "amqp091.limit.exceeded" in {f[1] for e in out if e[0] == "frame" for f in e[9]}


def test_the_hot_path_takes_the_handshake(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of a connection's life, the general path makes only the protocol header and the
    connection's Close and CloseOk: the handshake's methods are hot."""
    out, general = replay_counting_general(handshake_sessions()[0], monkeypatch)
    assert sum(1 for e in out if e[0] == "frame") == 17
    assert general == {"ProtocolHeader": 1, "Connection.Close": 1, "Connection.CloseOk": 1}
