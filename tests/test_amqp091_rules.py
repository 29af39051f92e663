"""Every AMQP 0-9-1 rule, triggered by frames from our encoder exactly where intended (and nowhere else)."""

from __future__ import annotations

import struct

import pytest

from analyzer.api import Direction, Finding, Frame
from analyzer.engine import analyze_file
from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from dissectors.amqp091.properties import encode_header_payload
from dissectors.amqp091.rules import ALL_RULES
from dissectors.amqp091.wire import Tagged
from dissectors.kit import play

C2S, S2C = Direction.C2S, Direction.S2C


def run(script: E.Script, midstream: bool = False, split: int | None = None,
        end_ts: float | None = None) -> tuple[list[Frame], list[Finding]]:
    frames: list[Frame] = []
    loose: list[Finding] = []
    for ev in play(Amqp091Dissector().connection(midstream), script.steps, split=split,
                   end_ts=script.ts + 0.001 if end_ts is None else end_ts):
        (frames if isinstance(ev, Frame) else loose).append(ev)
    return frames, loose


def all_ids(frames: list[Frame], loose: list[Finding]) -> list[str]:
    return [f.id for fr in frames for f in fr.findings] + [f.id for f in loose]


def where(frames: list[Frame], rule_id: str) -> list[str]:
    """Commands of the frames that carry ``rule_id``."""
    return [fr.command for fr in frames for f in fr.findings if f.id == rule_id]


def base() -> E.Script:
    return E.Script().handshake().open_channel(1)


def clean_session() -> E.Script:
    s = base()
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    s.c(E.method("Queue.Declare", 1, queue="jobs", durable=True, arguments={"x-max-length": 10}))
    s.s(E.method("Queue.DeclareOk", 1, queue="jobs", message_count=0, consumer_count=0))
    s.c(E.message(1, b'{"id": 1}', {"content-type": "application/json"}, exchange="orders", routing_key="eu.new"))
    s.s(E.method("Basic.Ack", 1, delivery_tag=1))
    s.c(E.method("Basic.Consume", 1, queue="jobs", consumer_tag="c1"))
    s.s(E.method("Basic.ConsumeOk", 1, consumer_tag="c1"))
    s.s(E.message(1, b"hello", {"content-type": "text/plain"}, name="Basic.Deliver", consumer_tag="c1",
                  delivery_tag=1, exchange="orders", routing_key="eu.new"))
    s.c(E.method("Basic.Ack", 1, delivery_tag=1))
    return s.close()


def test_clean_session_has_no_findings_and_good_info_lines() -> None:
    frames, loose = run(clean_session())
    assert all_ids(frames, loose) == []
    info = [f.info for f in frames]
    assert "Basic.Publish x=orders rk=eu.new seq=1" in info
    assert "Queue.Declare q=jobs" in info
    assert "Basic.Ack tag=1 confirms #1" in info
    assert any(i.startswith("ContentBody len=5 [Basic.Deliver message 5 bytes: 'hello']") for i in info)
    assert frames[0].command == "ProtocolHeader" and frames[0].dialect == "0-9-1"


def test_any_segmentation_gives_the_same_frames() -> None:
    whole, _ = run(clean_session())
    bytewise, loose = run(clean_session(), split=1)
    assert [(f.command, f.offset, f.size, f.info) for f in whole] == \
        [(f.command, f.offset, f.size, f.info) for f in bytewise]
    assert all_ids(bytewise, loose) == []


def test_every_rule_is_listed_and_unique() -> None:
    ids = [r.id for r in Amqp091Dissector().rules()]
    assert len(ids) == len(set(ids)) == len(ALL_RULES)
    assert all(i.startswith("amqp091.") and i.count(".") == 2 for i in ids)


# --------------------------------------------------------------------------- protocol header / handshake
@pytest.mark.parametrize("raw,rule,dialect", [
    (b"AMQP\x01\x01\x00\x09", "amqp091.header.other_version", "0-9"),
    (b"AMQP\x01\x01\x08\x00", "amqp091.header.other_version", "0-8"),
    (b"AMQP\x07\x07\x07\x07", "amqp091.header.unknown", None),
])
def test_header_versions(raw: bytes, rule: str, dialect: str | None) -> None:
    s = E.Script().c(raw)
    frames, loose = run(s)
    assert where(frames, rule) == ["ProtocolHeader"] and frames[0].dialect == dialect


def test_amqp_1_0_header_is_named_and_decoding_stops() -> None:
    s = E.Script().c(E.HEADERS["1.0-sasl"] + b"\x00\x00\x00\x10garbage-1.0-frame").s(b"AMQP\x03\x01\x00\x00")
    frames, loose = run(s)
    assert [f.command for f in frames] == ["ProtocolHeader"]
    assert frames[0].get("version") == "1.0-sasl" and where(frames, "amqp091.header.other_version")
    assert [f.id for f in loose] == []


def test_header_missing_and_refused() -> None:
    frames, _ = run(E.Script().c(E.method("Connection.StartOk", mechanism="PLAIN")))
    assert "Connection.StartOk" in where(frames, "amqp091.header.missing")
    frames, loose = run(E.Script().c(b"AMQP\x00\x00\x0a\x00").s(E.HEADERS["0-9-1"]))
    assert where(frames, "amqp091.header.refused") == ["ProtocolHeader"]
    assert where(frames, "amqp091.header.unknown") == ["ProtocolHeader"]


def test_handshake_order() -> None:
    s = E.Script().c(E.PROTOCOL_HEADER)
    s.s(E.method("Connection.Start", mechanisms="PLAIN", locales="en_US"))
    s.c(E.method("Connection.StartOk", mechanism="PLAIN", response="\0a\0b"))
    s.c(E.method("Connection.TuneOk", channel_max=10, frame_max=4096))  # before tune
    frames, _ = run(s)
    assert where(frames, "amqp091.handshake.order") == ["Connection.TuneOk"]
    s = E.Script().c(E.PROTOCOL_HEADER).s(E.method("Connection.Start", mechanisms="PLAIN"))
    s.c(E.method("Connection.StartOk", mechanism="PLAIN")).s(E.method("Connection.Tune", frame_max=4096))
    s.c(E.method("Connection.TuneOk", frame_max=4096)).c(E.method("Connection.Open"))
    s.c(E.method("Channel.Open", 1))  # before open-ok
    frames, _ = run(s)
    assert where(frames, "amqp091.handshake.order") == ["Channel.Open"]


def test_secure_rounds_are_in_order() -> None:
    s = E.Script().c(E.PROTOCOL_HEADER).s(E.method("Connection.Start", mechanisms="X"))
    s.c(E.method("Connection.StartOk", mechanism="X"))
    for _ in range(2):
        s.s(E.method("Connection.Secure", challenge="c")).c(E.method("Connection.SecureOk", response="r"))
    s.s(E.method("Connection.Tune")).c(E.method("Connection.TuneOk")).c(E.method("Connection.Open"))
    s.s(E.method("Connection.OpenOk"))
    frames, loose = run(s)
    assert all_ids(frames, loose) == []


def test_mechanism_tune_and_incomplete() -> None:
    s = E.Script().c(E.PROTOCOL_HEADER).s(E.method("Connection.Start", mechanisms="PLAIN AMQPLAIN"))
    s.c(E.method("Connection.StartOk", mechanism="EXTERNAL"))
    s.s(E.method("Connection.Tune", channel_max=100, frame_max=131072))
    s.c(E.method("Connection.TuneOk", channel_max=200, frame_max=2048))
    frames, loose = run(s)
    assert where(frames, "amqp091.handshake.mechanism") == ["Connection.StartOk"]
    assert where(frames, "amqp091.handshake.tune") == ["Connection.TuneOk"]
    tune = next(f for fr in frames for f in fr.findings if f.id == "amqp091.handshake.tune")
    assert "channel-max 200" in tune.message and "below frame-min-size" in tune.message
    assert [f.id for f in loose] == ["amqp091.handshake.incomplete"]


def test_a_connection_dropped_during_the_handshake_is_one_finding() -> None:
    # The client hangs up after connection.start: the unanswered start is what handshake.incomplete
    # says, not a second finding. A request outstanding on a channel is still its own finding.
    s = E.Script().c(E.PROTOCOL_HEADER).s(E.method("Connection.Start", mechanisms="PLAIN"))
    frames, loose = run(s)
    assert all_ids(frames, loose) == ["amqp091.handshake.incomplete"]
    assert "start_ok" in loose[0].message or "StartOk" in loose[0].message
    s = E.Script().handshake().open_channel(1).c(E.method("Queue.Declare", 1, queue="q"))
    frames, loose = run(s)
    assert [f.id for f in loose] == ["amqp091.correlation.unanswered"]


# ------------------------------------------------------------------------------------------ framing
def test_bad_frame_end() -> None:
    s = base().c(E.frame(1, 1, E.method_payload("Basic.Qos", {"prefetch-count": 1}), end=0x00))
    frames, _ = run(s)
    assert where(frames, "amqp091.frame.bad_frame_end") == ["Basic.Qos"]


def test_unknown_frame_type() -> None:
    s = base().c(E.frame(9, 1, b"abc")).c(E.heartbeat())
    frames, loose = run(s)
    assert where(frames, "amqp091.frame.unknown_type") == ["Unknown(9)"]
    assert frames[-1].command == "Heartbeat" and all_ids(frames, loose) == ["amqp091.frame.unknown_type"]


def test_frame_too_large_after_and_before_tune() -> None:
    s = E.Script().handshake(frame_max=4096).open_channel(1)
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 5000)).c(E.body(1, b"x" * 5000))
    frames, _ = run(s)
    assert where(frames, "amqp091.frame.too_large") == ["ContentBody"]
    s = E.Script().c(E.PROTOCOL_HEADER)
    s.s(E.method("Connection.Start", mechanisms="PLAIN", server_properties={"big": "x" * 5000}))
    frames, _ = run(s)
    assert where(frames, "amqp091.frame.too_large") == ["Connection.Start"]


def test_exactly_frame_max_is_fine() -> None:
    s = E.Script().handshake(frame_max=4096).open_channel(1)
    s.c(E.message(1, b"y" * 10000, frame_max=4096))
    frames, loose = run(s)
    assert all_ids(frames, loose) == [] and max(f.size for f in frames) == 4096


def test_junk_is_skipped_and_reported_once() -> None:
    s = base().c(b"\x00\xff" * 20 + E.method("Basic.Qos", 1, prefetch_count=3)).s(E.method("Basic.QosOk", 1))
    frames, loose = run(s)
    assert [f.id for f in loose] == ["amqp091.framing.resync"] and "40 bytes" in loose[0].message
    assert [f.command for f in frames[-2:]] == ["Basic.Qos", "Basic.QosOk"]


def test_truncated_stream_end() -> None:
    s = base().c(E.method("Basic.Qos", 1)[:10])
    frames, loose = run(s)
    assert [f.id for f in loose] == ["amqp091.framing.incomplete"]


def test_channel_max() -> None:
    s = E.Script().handshake(channel_max=10).open_channel(11)
    frames, _ = run(s)
    assert where(frames, "amqp091.frame.channel_max") == ["Channel.Open", "Channel.OpenOk"]


# ------------------------------------------------------------------------------------------ methods
def test_unknown_class_and_method() -> None:
    s = base().c(E.raw_method(70, 10, 1, b"\x00")).c(E.raw_method(60, 99, 1)).c(E.raw_method(999, 1, 1))
    frames, _ = run(s)
    assert where(frames, "amqp091.method.unknown_class") == ["File.Unknown(10)", "Class999.Unknown(1)"]
    assert where(frames, "amqp091.method.unknown_method") == ["Basic.Unknown(99)"]
    assert frames[-2].code == 60 << 16 | 99


def test_overrun_and_underrun() -> None:
    over = struct.pack(">HHHB", 50, 10, 0, 200) + b"short"  # queue name claims 200 bytes
    under = E.method_payload("Basic.Qos", {"prefetch-count": 1}) + b"\x00\x00"
    frames, _ = run(base().c(E.frame(1, 1, over)).c(E.frame(1, 1, under)))
    assert where(frames, "amqp091.framing.truncated") == ["Queue.Declare"]
    assert where(frames, "amqp091.framing.trailing") == ["Basic.Qos"]


def test_wrong_channel_and_direction_and_obsolete() -> None:
    s = base().c(E.method("Basic.Qos", 0)).s(E.method("Connection.Blocked", 1, reason="low memory"))
    s.c(E.method("Basic.Deliver", 1, delivery_tag=1)).c(E.content_header(1, 0))
    s.c(E.method("Access.Request", 1, realm="/data")).s(E.method("Access.RequestOk", 1, ticket=1))
    frames, _ = run(s)
    assert where(frames, "amqp091.method.wrong_channel") == ["Basic.Qos", "Connection.Blocked"]
    assert where(frames, "amqp091.method.wrong_direction") == ["Basic.Deliver"]
    assert where(frames, "amqp091.method.obsolete") == ["Access.Request", "Access.RequestOk"]


def test_field_tables_unknown_and_spec_only_tags() -> None:
    args = {"ok": 1, "u16": Tagged("U", -5), "l64": Tagged("L", -7)}
    bad = {"before": "x", "broken": Tagged("Z", b"\x01\x02")}
    s = base().c(E.method("Queue.Declare", 1, queue="q1", arguments=args))
    s.s(E.method("Queue.DeclareOk", 1, queue="q1"))
    s.c(E.method("Queue.Declare", 1, queue="q2", arguments=bad, nowait=True))
    s.c(E.method("Basic.Qos", 1, prefetch_count=7)).s(E.method("Basic.QosOk", 1))
    frames, loose = run(s)
    assert where(frames, "amqp091.table.spec_only_tag") == ["Queue.Declare"]
    assert where(frames, "amqp091.table.unknown_tag") == ["Queue.Declare"]
    good = [f for f in frames if f.command == "Queue.Declare"][0]
    table = {c.name: c.value for c in next(f for f in good.fields if f.name == "arguments").children}
    assert table == {"ok": 1, "u16": -5, "l64": -7}
    broken = [f for f in frames if f.command == "Queue.Declare"][1]
    # The table is length-prefixed: the arguments after it still decode.
    assert broken.get("nowait") is True and broken.get("queue") == "q2"
    assert frames[-2].get("prefetch_count") == 7 and "amqp091.framing.truncated" not in all_ids(frames, loose)


# ------------------------------------------------------------------------------------------ channels
def test_channel_not_open_and_before_open_ok() -> None:
    s = E.Script().handshake().c(E.method("Basic.Qos", 3))
    s.c(E.method("Channel.Open", 1)).c(E.method("Basic.Qos", 1)).s(E.method("Channel.OpenOk", 1))
    frames, _ = run(s)
    assert where(frames, "amqp091.channel.not_open") == ["Basic.Qos", "Basic.Qos"]


def test_use_after_close_and_already_open_and_close_ok_without_close() -> None:
    s = base().c(E.method("Channel.Close", 1, reply_code=200)).c(E.method("Basic.Qos", 1))
    s.s(E.method("Channel.CloseOk", 1)).c(E.method("Basic.Qos", 1))
    frames, _ = run(s)
    assert where(frames, "amqp091.channel.after_close") == ["Basic.Qos"]
    assert where(frames, "amqp091.channel.not_open") == ["Basic.Qos"]
    frames, _ = run(base().c(E.method("Channel.Open", 1)))
    assert where(frames, "amqp091.channel.already_open") == ["Channel.Open"]
    frames, _ = run(base().s(E.method("Channel.CloseOk", 1)))
    assert where(frames, "amqp091.channel.close_ok_without_close") == ["Channel.CloseOk"]


def test_server_close_crossing_and_peer_frames_in_flight_are_fine() -> None:
    s = base().c(E.method("Queue.Declare", 1, queue="missing", passive=True))
    s.s(E.method("Channel.Close", 1, reply_code=404, reply_text="NOT_FOUND - no queue", class_id=50, method_id=10))
    s.c(E.method("Basic.Qos", 1))  # in flight before the client saw the close: discarded, not an error
    s.c(E.method("Channel.CloseOk", 1))
    s.c(E.method("Channel.Open", 1)).s(E.method("Channel.OpenOk", 1))
    frames, loose = run(s.close())
    # The Basic.Qos the server discards is never answered; the close-ok settles it, no finding.
    assert all_ids(frames, loose) == ["amqp091.reply.channel_error"]
    close = [f for f in frames if f.command == "Channel.Close"][0]
    assert close.info == "Channel.Close 404 NOT_FOUND - no queue"


# ------------------------------------------------------------------------------------------ content
def test_content_sequencing() -> None:
    s = base().c(E.body(1, b"stray"))  # body without method
    s.c(E.method("Basic.Publish", 1)).c(E.method("Basic.Qos", 1))  # header expected
    s.s(E.method("Basic.QosOk", 1))
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 10)).c(E.body(1, b"12345"))
    s.c(E.method("Basic.Qos", 1))  # while 5 body bytes are due
    s.s(E.method("Basic.QosOk", 1))
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 3)).c(E.body(1, b"12345"))  # overrun
    s.c(E.content_header(1, 3))  # header with no method
    frames, _ = run(s)
    assert where(frames, "amqp091.content.unexpected") == ["ContentBody", "ContentHeader"]
    assert where(frames, "amqp091.content.header_expected") == ["Basic.Qos"]
    assert where(frames, "amqp091.content.interleaved") == ["Basic.Qos"]
    assert where(frames, "amqp091.content.body_size") == ["ContentBody"]


def test_other_channels_and_heartbeats_may_interleave() -> None:
    s = base().open_channel(2)
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 6)).c(E.body(1, b"abc"))
    s.c(E.message(2, b"other")).c(E.heartbeat()).c(E.body(1, b"def"))
    frames, loose = run(s)
    assert all_ids(frames, loose) == []
    done = [f for f in frames if any(x.name == "message" for x in f.fields)]
    assert [f.get("channel") for f in done] == [2, 1]


def test_content_incomplete_channel_zero_and_bad_header() -> None:
    s = base().c(E.body(0, b"x")).c(E.content_header(0, 1))
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 5, class_id=50, weight=1))
    s.c(E.frame(2, 1, encode_header_payload(1) + b"\x00"))  # trailing byte in a header (interleaved too)
    s.c(E.method("Basic.Publish", 1)).c(E.content_header(1, 9)).c(E.body(1, b"1234"))
    frames, loose = run(s)
    assert where(frames, "amqp091.content.channel_zero") == ["ContentBody", "ContentHeader"]
    assert where(frames, "amqp091.content.bad_header") == ["ContentHeader"]
    assert where(frames, "amqp091.framing.trailing") == ["ContentHeader"]
    assert [f.id for f in loose] == ["amqp091.content.incomplete"]
    assert "4 of 9 bytes" in loose[0].message


def test_zero_length_body() -> None:
    frames, loose = run(base().c(E.message(1, b"")).c(E.method("Basic.Qos", 1)).s(E.method("Basic.QosOk", 1)))
    assert all_ids(frames, loose) == []
    hdr = next(f for f in frames if f.command == "ContentHeader")
    assert "[Basic.Publish message 0 bytes]" in hdr.info


# ------------------------------------------------------------------------------------------ heartbeats
def test_heartbeat_channel_payload_and_missed() -> None:
    frames, _ = run(base().c(E.heartbeat(1)).c(E.frame(8, 0, b"xx")))
    assert where(frames, "amqp091.heartbeat.channel") == ["Heartbeat"]
    assert where(frames, "amqp091.heartbeat.payload") == ["Heartbeat"]
    s = E.Script().handshake(heartbeat=2).open_channel(1)
    s.c(E.heartbeat(), dt=1.0).s(E.heartbeat(), dt=0.1)
    s.c(E.heartbeat(), dt=3.5)  # client silent 3.6 s < 4 s: fine
    s.s(E.heartbeat(), dt=1.0)  # server silent 4.5 s > 2 x 2 s
    frames, loose = run(s, end_ts=s.ts + 0.5)
    # No tick came in between: the silence is reported when the server's bytes arrive (ticks: test_tick_*).
    assert [f.id for f in loose] == ["amqp091.heartbeat.silence"] and not any(fr.findings for fr in frames)
    assert "the server sent nothing for 4.5 s" in loose[0].message
    frames, loose = run(s, end_ts=s.ts + 10)
    assert [f.id for f in loose] == ["amqp091.heartbeat.silence"] * 3
    assert ["client" in f.message for f in loose[1:]] == [True, False]


def test_tick_reports_heartbeat_silence_when_time_passes() -> None:
    """Time alone (Connection.tick at Connection.deadline) reports a silent side, once, without
    waiting for more bytes; bytes after it do not repeat it."""
    s = E.Script().handshake(heartbeat=2).open_channel(1)
    conn = Amqp091Dissector().connection(False)
    for d, data, ts in s.steps:
        list(conn.feed(d, data, ts))
    t0 = s.ts  # the server's channel.open-ok; the client's channel.open came 1 ms before
    assert conn.deadline() == pytest.approx(t0 - 0.001 + 4)  # the side silent longest + 2 x heartbeat
    assert list(conn.tick(t0 + 3.9)) == []
    list(conn.feed(C2S, E.heartbeat(), t0 + 3.0))  # the client speaks: only the server stays silent
    assert conn.deadline() == pytest.approx(t0 + 4)
    got = list(conn.tick(t0 + 4.5))
    assert [f.id for f in got] == ["amqp091.heartbeat.silence"] and "the server sent nothing" in got[0].message
    assert conn.deadline() == pytest.approx(t0 + 7)  # the client's turn next
    assert list(conn.tick(t0 + 5)) == []
    evs = list(conn.feed(S2C, E.heartbeat(), t0 + 6.0))  # the server is back: already reported
    assert [e.command for e in evs] == ["Heartbeat"] and not evs[0].findings
    # A closing connection is expected to fall silent.
    list(conn.feed(C2S, E.method("Connection.Close", reply_code=200, reply_text="bye"), t0 + 6.5))
    assert conn.deadline() is None and list(conn.tick(t0 + 100)) == []
    assert [f.id for f in conn.end(t0 + 100)] == ["amqp091.correlation.unanswered"]  # the close, not the silence


# ------------------------------------------------------------------------------------------ correlation
def test_sync_unanswered_and_unexpected_and_nowait() -> None:
    s = base().c(E.method("Queue.Declare", 1, queue="a")).c(E.method("Queue.Bind", 1, queue="a", nowait=True))
    s.s(E.method("Exchange.DeclareOk", 1))
    frames, loose = run(s)
    # Exchange.DeclareOk does not answer the outstanding Queue.Declare (synchronous replies come in order).
    assert where(frames, "amqp091.correlation.mismatch") == ["Exchange.DeclareOk"]
    assert [f.id for f in loose] == ["amqp091.correlation.unanswered"] and "Queue.Declare" in loose[0].message
    decl = next(f for f in frames if f.command == "Queue.Declare")
    assert loose[0].related == ["c2s", decl.offset, None] and loose[0].command == "Queue.Declare"
    # A reply when nothing is outstanding at all; a reply in order carries its latency.
    s = base().s(E.method("Basic.QosOk", 1)).c(E.method("Basic.Qos", 1)).s(E.method("Basic.QosOk", 1), dt=0.25)
    frames, loose = run(s)
    assert where(frames, "amqp091.correlation.unknown_response") == ["Basic.QosOk"] and loose == []
    ok = [f for f in frames if f.command == "Basic.QosOk"][1]
    assert ok.get("response_time") == pytest.approx(0.25)
    rt = next(f for f in ok.fields if f.name == "response_time")
    assert rt.offset == -1 and isinstance(rt.value, float)


def test_a_connection_error_is_one_finding() -> None:
    """The broker fails the connection and drops the socket (no close-ok): the requests it will
    never answer and the publishes it will never confirm are that one event, not more findings."""
    s = base().c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    s.c(E.message(1, b"m")).c(E.method("Queue.Declare", 1, queue="q")).c(E.method("Basic.Qos", 1))
    s.s(E.method("Connection.Close", reply_code=541, reply_text="INTERNAL_ERROR"))
    frames, loose = run(s)
    assert all_ids(frames, loose) == ["amqp091.reply.connection_error"]
    # Without the close, the same requests and publish are reported when the conversation ends.
    frames, loose = run(base().c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
                        .c(E.message(1, b"m")).c(E.method("Queue.Declare", 1, queue="q")))
    assert sorted(f.id for f in loose) == ["amqp091.confirm.unconfirmed", "amqp091.correlation.unanswered"]


def test_get_answered_by_get_empty_and_cancel_from_server() -> None:
    s = base().c(E.method("Basic.Get", 1, queue="q")).s(E.method("Basic.GetEmpty", 1))
    s.s(E.method("Basic.Cancel", 1, consumer_tag="c", nowait=True))
    frames, loose = run(s.close())
    assert all_ids(frames, loose) == []


def test_ack_unknown_tags() -> None:
    s = base().c(E.method("Basic.Consume", 1, queue="q", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 1,
                                                                                        consumer_tag="c"))
    for tag in (1, 2, 3):
        s.s(E.message(1, b"m", name="Basic.Deliver", consumer_tag="c", delivery_tag=tag))
    s.c(E.method("Basic.Ack", 1, delivery_tag=2, multiple=True))  # settles 1 and 2
    s.c(E.method("Basic.Nack", 1, delivery_tag=2))  # already settled
    s.c(E.method("Basic.Reject", 1, delivery_tag=9))  # never delivered
    s.c(E.method("Basic.Ack", 1, delivery_tag=3))
    frames, loose = run(s)
    assert where(frames, "amqp091.ack.unknown_tag") == ["Basic.Nack", "Basic.Reject"]


def test_no_ack_consumer_deliveries_are_not_acked() -> None:
    s = base().c(E.method("Basic.Consume", 1, queue="q", no_ack=True)).s(E.method("Basic.ConsumeOk", 1,
                                                                                   consumer_tag="gen-1"))
    s.s(E.message(1, b"m", name="Basic.Deliver", consumer_tag="gen-1", delivery_tag=1))
    s.c(E.method("Basic.Ack", 1, delivery_tag=1))
    frames, _ = run(s)
    assert where(frames, "amqp091.ack.unknown_tag") == ["Basic.Ack"]


def test_publisher_confirms() -> None:
    s = base().s(E.method("Basic.Ack", 1, delivery_tag=1))  # not in confirm mode
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    for i in range(5):
        s.c(E.message(1, b"p%d" % i))
    s.s(E.method("Basic.Ack", 1, delivery_tag=3, multiple=True))
    s.s(E.method("Basic.Nack", 1, delivery_tag=4))
    s.s(E.method("Basic.Ack", 1, delivery_tag=4))  # already confirmed
    frames, loose = run(s)
    assert where(frames, "amqp091.confirm.not_selected") == ["Basic.Ack"]
    assert where(frames, "amqp091.confirm.unknown_tag") == ["Basic.Ack"]
    confirms = [f.get("confirms") for f in frames if f.direction is S2C and f.command in ("Basic.Ack", "Basic.Nack")]
    assert confirms == [None, [1, 2, 3], [4], None]
    assert [f.id for f in loose] == ["amqp091.confirm.unconfirmed"] and "#5" in loose[0].message


# ------------------------------------------------------------------------------------------ reply codes
def test_reply_codes_by_name() -> None:
    s = base().c(E.message(1, b"r", mandatory=True, routing_key="nowhere"))
    s.s(E.message(1, b"r", name="Basic.Return", reply_code=312, reply_text="NO_ROUTE", routing_key="nowhere"))
    s.c(E.method("Channel.Close", 1, reply_code=0, reply_text="Normal shutdown")).s(E.method("Channel.CloseOk", 1))
    s.s(E.method("Connection.Close", reply_code=320, reply_text="CONNECTION_FORCED - shutdown"))
    s.c(E.method("Connection.CloseOk"))
    frames, loose = run(s)
    assert where(frames, "amqp091.reply.returned") == ["Basic.Return"]
    assert where(frames, "amqp091.reply.connection_error") == ["Connection.Close"]
    assert where(frames, "amqp091.reply.zero_code") == ["Channel.Close"]
    assert "amqp091.reply.unknown_code" not in all_ids(frames, loose)
    assert [f.info for f in frames if f.command == "Connection.Close"] == [
        "Connection.Close 320 CONNECTION_FORCED - shutdown"]
    s = base().s(E.method("Channel.Close", 1, reply_code=999, reply_text="odd")).c(E.method("Channel.CloseOk", 1))
    frames, _ = run(s)
    assert where(frames, "amqp091.reply.unknown_code") == ["Channel.Close"]
    assert where(frames, "amqp091.reply.channel_error") == ["Channel.Close"]


# ------------------------------------------------------------------------------------------ midstream + pcap
def test_midstream_pickup_resyncs_without_false_alarms() -> None:
    s = clean_session()
    full = run(s)[0]
    cut = E.Script()
    c_stream, s_stream = s.stream(C2S), s.stream(S2C)
    cut.c(c_stream[150:]).s(s_stream[len(s_stream) // 2:])
    frames, loose = run(cut, midstream=True)
    # The bytes before the first whole frame are the tail of an unseen frame: nothing to say about them.
    assert [f.id for f in loose] == []
    assert all(not fr.findings for fr in frames)
    for d in (C2S, S2C):
        got = [f.command for f in frames if f.direction is d]
        assert len(got) >= 4 and got == [f.command for f in full if f.direction is d][-len(got):]


def test_synthetic_capture_points_findings_at_packets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 5672))
    conv.handshake()
    s = base()
    for d, data, _ts in s.steps:
        conv.send(str(d), data)
    bad = conv.send("c2s", E.frame(1, 1, E.method_payload("Basic.Qos", {}), end=0x55))
    conv.close()
    path = tmp_path / "bad_end.pcap"
    write_capture(str(path), [conv])
    evs = list(analyze_file(str(path)))
    frames = [e for e in evs if isinstance(e, Frame)]
    assert frames[0].protocol == "amqp091"
    qos = [f for f in frames if f.command == "Basic.Qos"][0]
    assert [x.id for x in qos.findings] == ["amqp091.frame.bad_frame_end"]
    pkt = conv.segments.index(bad[0]) + 1
    assert qos.packets == (pkt, pkt) and qos.findings[0].frame == pkt


def test_each_rule_has_a_test_here() -> None:
    source = open(__file__, encoding="utf-8").read()
    missing = [r.id for r in ALL_RULES if f'"{r.id}"' not in source]
    assert missing == []


def test_tx_and_confirm_exclude_each_other() -> None:
    s = base().c(E.method("Tx.Select", 1)).s(E.method("Tx.SelectOk", 1))
    s.c(E.method("Confirm.Select", 1))
    s.open_channel(2)
    s.c(E.method("Confirm.Select", 2)).s(E.method("Confirm.SelectOk", 2))
    s.c(E.method("Tx.Select", 2))
    frames, _ = run(s)
    hits = [(fr.command, fr.get("channel")) for fr in frames for f in fr.findings
            if f.id == "amqp091.channel.tx_and_confirm"]
    assert [c for c, _ in hits] == ["Confirm.Select", "Tx.Select"]
    clean_tx = base().c(E.method("Tx.Select", 1)).s(E.method("Tx.SelectOk", 1))
    frames, _ = run(clean_tx)
    assert "amqp091.channel.tx_and_confirm" not in all_ids(frames, [])


def test_frame_min_size_follows_the_broker_version() -> None:
    """RabbitMQ 4.1 raised frame-min-size to 8192: a 6 KB start-ok is fine there, not with 3.13."""
    def start_ok_flags(version: str) -> list[str]:
        s = E.Script().c(E.PROTOCOL_HEADER)
        s.s(E.method("Connection.Start", version_major=0, version_minor=9, mechanisms="PLAIN", locales="en_US",
                     server_properties={"product": "RabbitMQ", "version": version}))
        s.c(E.method("Connection.StartOk", client_properties={"pad": "x" * 6000}, mechanism="PLAIN",
                     response="\0guest\0guest", locale="en_US"))
        frames, _ = run(s)
        return where(frames, "amqp091.frame.too_large")

    assert start_ok_flags("3.13.7") == ["Connection.StartOk"]
    assert start_ok_flags("4.1.0") == []
    assert start_ok_flags("4.2.1") == []


def test_tables_are_bounded_and_the_excess_is_one_finding() -> None:
    limits = {"requests": 3, "ranges": 2, "pending": 2, "consumers": 1}
    s = base().open_channel(2)
    s.c(E.method("Basic.Consume", 2, queue="q", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 2, consumer_tag="c"))
    for i in range(5):  # five queue.declare never answered: only three are remembered
        s.c(E.method("Queue.Declare", 1, queue=f"q{i}"))
    for tag in (1, 3, 5, 7):  # every other tag: one range each, over the limit of 2
        s.s(E.message(2, b"m", name="Basic.Deliver", consumer_tag="c", delivery_tag=tag))
    s.c(E.method("Basic.Ack", 2, delivery_tag=6))  # no longer checked: no ack.unknown_tag
    conn = Amqp091Dissector(limits=limits).connection(False)
    frames, loose = [], []
    for d, data, ts in s.steps:
        for ev in conn.feed(d, data, ts):
            (frames if isinstance(ev, Frame) else loose).append(ev)
    loose += list(conn.end(s.ts + 1))
    assert where(frames, "amqp091.limit.exceeded") == ["Queue.Declare", "Basic.Deliver"]
    assert "amqp091.ack.unknown_tag" not in all_ids(frames, loose)
    # The direction whose oldest requests were forgotten can no longer tell what was never answered.
    assert [f.id for f in loose] == []
    assert conn.corr.outstanding("c2s") == 3 and conn.tracks[2].unacked.spans() == 0
    # Without limits, the same traffic is followed in full.
    frames, loose = run(s)
    assert "amqp091.limit.exceeded" not in all_ids(frames, loose)
    assert where(frames, "amqp091.ack.unknown_tag") == ["Basic.Ack"]
    assert [f.id for f in loose] == ["amqp091.correlation.unanswered"] * 5


def test_an_out_of_order_handshake_step_is_reported_once_and_followed() -> None:
    s = E.Script().c(E.PROTOCOL_HEADER).s(E.method("Connection.Start", mechanisms="PLAIN"))
    s.c(E.method("Connection.StartOk", mechanism="PLAIN"))
    s.c(E.method("Connection.TuneOk", frame_max=4096))  # before tune: the connection goes on from there
    s.c(E.method("Connection.Open")).s(E.method("Connection.OpenOk")).open_channel(1)
    frames, loose = run(s)
    assert where(frames, "amqp091.handshake.order") == ["Connection.TuneOk"]
    # The tune-ok answers nothing (a finding of correlation); the rest of the connection is in order.
    assert sorted(all_ids(frames, loose)) == ["amqp091.correlation.unknown_response", "amqp091.handshake.order"]
