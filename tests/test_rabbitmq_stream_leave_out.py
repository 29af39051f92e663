"""A findings-only run lets a RabbitMQ Stream connection leave out the frames its hot path took
(Publish, PublishConfirm, Credit, Deliver with nothing wrong: Connection.leave_out_plain_frames),
counted in frames_left_out instead, handing over the anchor of a call's last frame when the
heartbeat timer or the server's Tune keeps one. Differential against the same connection making
every frame (tests.replay.check_leave_out): call by call, the events it still gives are the full
run's in the same order and the same form, and the ones it leaves out are counted exactly, on
every bundled capture, mutated, mid-stream and cut variants of them, and the hot-path test's
sessions of publishes, a consumer and deliveries."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream import encode as E
from tests import replay as R
from tests.replay import Recorded, check_leave_out, check_leave_out_variants
from tests.test_amqp091_hotpath import mutants
from tests.test_rabbitmq_stream_hotpath import consumer, deliveries, publishes

CAPS = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
ALL = sorted(p.name for p in CAPS.glob("*.pcap*"))
DISSECTOR = RabbitMQStreamDissector()


@pytest.mark.parametrize("name", ALL)
def test_leaving_out_on_every_capture_and_variants(name: str) -> None:
    rng = random.Random(f"stream-lean-{name}")
    for rec in R.recordings(str(CAPS / name), "rabbitmq_stream"):
        check_leave_out_variants(DISSECTOR, rec, rng, 6, 4, split=True)


def test_the_recorded_publishers_and_consumers_leave_frames_out() -> None:
    left = sum(check_leave_out(DISSECTOR, rec) for name in ("rstream_publish_confirm.pcap", "rstream_consume.pcap")
               for rec in R.recordings(str(CAPS / name), "rabbitmq_stream"))
    assert left >= 20


@pytest.mark.parametrize("session", [publishes, consumer, deliveries])
def test_leaving_out_on_the_hot_path_sessions(session) -> None:  # noqa: ANN001 - a session maker
    rec = session()
    assert check_leave_out(DISSECTOR, rec) >= 6
    for variant in mutants(rec, f"stream-lean-{session.__name__}", 100, 6):
        check_leave_out(DISSECTOR, variant)


def declared() -> list:
    """A handshake negotiating heartbeats (every 5 s), then publisher 1 declared."""
    items = E.handshake(heartbeat=5)
    items.append((E.C2S, E.request("DeclarePublisher", correlation_id=5, publisher_id=1, publisher_reference="",
                                   stream="s")))
    items.append((E.S2C, E.response("DeclarePublisher", correlation_id=5, response_code=1)))
    return items


def heartbeats() -> Recorded:
    """Heartbeats negotiated, then publishes and confirms, each segment ending in a hot frame: the
    timer keeps the anchor of every call's last frame, which a left-out frame hands over."""
    items = declared()
    for i in range(4):
        items.append((E.C2S, E.request("Publish", 1, publisher_id=1, messages=[{"publishing_id": i, "message": b"m"}])))
        items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=[i])))
    calls = [("feed", (d, data, 1.0 + k)) for k, (d, data) in enumerate(items)]
    calls.append(("tick", (60.0,)))  # the silence finding names the last frames of both sides
    return Recorded("rabbitmq_stream", False, [*calls, ("end", (61.0,))])


def test_a_left_out_last_frame_hands_its_anchor_over() -> None:
    rec = heartbeats()
    assert check_leave_out(DISSECTOR, rec) == 8
    calls = R.lean_calls(DISSECTOR, rec, True)
    handed = [anchors for _, _, _, anchors in calls if anchors]
    assert len(handed) == 8 and all(len(a) == 1 for a in handed)
    silent = [e for events, _, _, _ in calls for e in events if getattr(e, "id", "").endswith("silence")]
    assert silent and {tuple(f.related[:2]) for f in silent} <= {tuple(a[0][:2]) for a in handed}


def test_a_resumed_connection_makes_every_frame_until_asked() -> None:
    conn = DISSECTOR.connection(False)
    conn.leave_out_plain_frames()
    resumed = DISSECTOR.resume(conn.snapshot())
    assert resumed.leave_out is False and resumed.frames_left_out == 0 and resumed.anchors_left_out is None


def test_a_frame_that_ended_before_the_call_is_given_back() -> None:
    # After junk the framer takes a frame only once the next frame's header is there to confirm
    # it: the second call's bytes (the rest of the next header) settle a Publish that ended in the
    # first call. The heartbeat timer anchors it (the second call's last frame), so it is given
    # back rather than left out: the engine would give a left-out frame's anchor this call's
    # packet. The next Publish, whole in the third call, is left out.
    items = declared()
    first = E.request("Publish", 1, publisher_id=1, messages=[{"publishing_id": 1, "message": b"m"}])
    second = E.request("Publish", 1, publisher_id=1, messages=[{"publishing_id": 2, "message": b"n"}])
    calls = [("feed", (d, data, 1.0 + k)) for k, (d, data) in enumerate(items)]
    calls += [("feed", (E.C2S, b"\xff" * 6 + first + second[:3], 20.0)), ("feed", (E.C2S, second[3:8], 21.0)),
              ("feed", (E.C2S, second[8:], 22.0)), ("end", (23.0,))]
    rec = Recorded("rabbitmq_stream", False, calls)
    check_leave_out(DISSECTOR, rec)
    given = [[getattr(e, "command", None) or e.id for e in events] for events, _, _, _ in R.lean_calls(DISSECTOR, rec, True)]
    assert given[-4:] == [[], ["rabbitmq_stream.framing.resync", "Publish"], [], ["rabbitmq_stream.heartbeat.silence"]]
