"""Each conformance rule of the RabbitMQ Stream dissector fires exactly where a synthetic conversation,
built by the package's encoder from the same layouts, breaks it, and nowhere in clean traffic."""

from __future__ import annotations

import pytest

from analyzer.api import Finding, Frame, Severity
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.encode import (
    Script,
    all_findings,
    build_chunk,
    deliver,
    encode_message,
    frame,
    handshake,
    request,
    response,
    run,
    simple_entry,
    sub_batch_entry,
    truncate,
    with_trailing,
)

MSGS = [encode_message(f"m{i}".encode()) for i in range(3)]


def chunk(first: int = 0, n: int = 3, **kw: object) -> bytes:
    msgs = [encode_message(f"m{first + i}".encode()) for i in range(n)]
    return build_chunk([simple_entry(m) for m in msgs], n, first, **kw)  # type: ignore[arg-type]


def opened(**kw: object) -> Script:
    return Script().extend(handshake(**kw))  # type: ignore[arg-type]


def declare(s: Script, corr: int = 10, pid: int = 1) -> Script:
    s.c(request("DeclarePublisher", correlation_id=corr, publisher_id=pid, publisher_reference="", stream="s"))
    return s.s(response("DeclarePublisher", correlation_id=corr, response_code=1))


def subscribe(s: Script, corr: int = 20, sid: int = 0, credit: int = 2) -> Script:
    s.c(request("Subscribe", correlation_id=corr, subscription_id=sid, stream="s", offset_spec={"type": 1},
                credit=credit))
    return s.s(response("Subscribe", correlation_id=corr, response_code=1))


def close(s: Script, corr: int = 99) -> Script:
    s.c(request("Close", correlation_id=corr, closing_code=1, closing_reason="bye"))
    return s.s(response("Close", correlation_id=corr, response_code=1))


def clean() -> Script:
    s = declare(opened())
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": i, "message": m} for i, m in enumerate(MSGS)]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[0, 1, 2]))
    subscribe(s, credit=1)
    s.s(deliver(0, chunk(0)))
    s.c(request("Credit", subscription_id=0, credit=1))
    s.s(deliver(0, chunk(3), version=2, committed_chunk_id=3))
    s.c(request("StoreOffset", reference="r", stream="s", offset=5))
    s.c(request("QueryOffset", correlation_id=30, reference="r", stream="s"))
    s.s(response("QueryOffset", correlation_id=30, response_code=1, offset=5))
    s.c(request("Heartbeat"))
    return close(s)


def hits(events: list, rule_id: str) -> list[tuple[str | None, Finding]]:
    """(command of the frame it is attached to, or None for a free-standing finding) per finding."""
    out = []
    for e in events:
        if isinstance(e, Frame):
            out += [(e.command, f) for f in e.findings if f.id == rule_id]
        elif e.id == rule_id:
            out.append((None, e))
    return out


def only(events: list, rule_id: str) -> list[tuple[str | None, Finding]]:
    """Findings of ``rule_id``, asserting that no other rule fired."""
    others = {f.id for f in all_findings(events)} - {rule_id}
    assert not others, f"unexpected findings {others}"
    return hits(events, rule_id)


def test_clean_conversation_has_no_findings() -> None:
    events = run(clean())
    assert all_findings(events) == []
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.command for f in frames[:10]] == [
        "PeerProperties", "PeerPropertiesResponse", "SaslHandshake", "SaslHandshakeResponse", "SaslAuthenticate",
        "SaslAuthenticateResponse", "Tune", "TuneResponse", "Open", "OpenResponse"]
    assert frames[1].info == "PeerProperties response code=OK corr=1 broker=3.13.7"
    assert all(f.dialect == "current" for f in frames)


def test_clean_conversation_byte_by_byte() -> None:
    whole = run(clean())
    split = run(clean(), split=1)
    assert [(f.command, f.info, f.offset, f.size) for f in whole if isinstance(f, Frame)] == \
        [(f.command, f.info, f.offset, f.size) for f in split if isinstance(f, Frame)]


def test_info_lines() -> None:
    s = declare(opened())
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": i, "message": b"x"} for i in range(120)]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=list(range(120))))
    subscribe(s)
    s.s(deliver(0, chunk(30, 32)))
    s.c(request("QueryOffset", correlation_id=40, reference="r", stream="s"))
    s.s(response("QueryOffset", correlation_id=40, response_code=0x13, offset=0))
    infos = [e.info for e in run(s) if isinstance(e, Frame)]
    assert "Publish publisher=1 messages=120" in infos
    assert "Deliver sub=0 first_offset=30 records=32" in infos
    assert any(i.startswith("QueryOffset response code=NO_OFFSET") for i in infos)


# ------------------------------------------------------------------------------------ sizes
def test_truncated_frame() -> None:
    s = opened()
    s.c(truncate(request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="",
                         stream="stream"), 3))
    got = hits(run(s), R.FRAME_TRUNCATED.id)
    assert [c for c, _ in got] == ["DeclarePublisher"]


def test_trailing_bytes() -> None:
    s = opened()
    s.c(with_trailing(request("Heartbeat"), b"\0\0"))
    assert [c for c, _ in only(run(s), R.FRAME_TRAILING.id)] == ["Heartbeat"]


def test_size_below_four_resyncs() -> None:
    s = opened()
    s.c(b"\0\0\0\x02\xff\xff")
    s.c(request("Heartbeat"))
    events = run(s)
    got = only(events, R.JUNK.id)
    assert len(got) == 1 and got[0][0] is None and "below 4" in got[0][1].message
    assert [e.command for e in events if isinstance(e, Frame)][-1] == "Heartbeat"


def test_frame_max() -> None:
    s = opened(frame_max=1000)
    declare(s)
    big = request("Publish", publisher_id=1, messages=[{"publishing_id": 0, "message": b"x" * 2000}])
    s.c(big)
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[0]))
    subscribe(s)
    s.s(deliver(0, build_chunk([simple_entry(b"y" * 3000)], 1, 0)))  # Deliver is exempt
    assert [c for c, _ in only(run(s), R.FRAME_MAX.id)] == ["Publish"]


def test_frame_max_negotiated_as_minimum() -> None:
    s = opened(frame_max=100_000, client_frame_max=500)
    s.c(request("Metadata", correlation_id=9, streams=["x" * 600]))
    s.s(response("Metadata", correlation_id=9, brokers=[], stream_metadata=[]))
    assert [c for c, _ in only(run(s), R.FRAME_MAX.id)] == ["Metadata"]


def test_garbage_between_frames_resyncs() -> None:
    s = opened()
    s.c(b"\xff\xff\xff\xf0garbage!")
    s.c(request("Heartbeat"))
    s.c(request("Heartbeat"))
    events = run(s)
    got = only(events, R.JUNK.id)
    assert len(got) == 1 and "implausible" in got[0][1].message
    assert [e.command for e in events if isinstance(e, Frame)][-2:] == ["Heartbeat", "Heartbeat"]


def test_incomplete_frame_at_end() -> None:
    s = opened()
    s.c(request("Heartbeat")[:6])
    got = only(run(s), R.FRAME_INCOMPLETE.id)
    assert len(got) == 1 and got[0][0] is None


# ------------------------------------------------------------------------------------ keys
def test_unknown_key() -> None:
    s = opened()
    s.c(frame(0x0042, 1, b"\1\2\3"))
    assert [c for c, _ in only(run(s), R.UNKNOWN_KEY.id)] == ["Unknown"]


def test_response_to_one_way_command_is_unknown_key() -> None:
    s = opened()
    s.s(frame(0x8002, 1, b""))
    assert len(only(run(s), R.UNKNOWN_KEY.id)) == 1


def test_unknown_version() -> None:
    s = opened()
    s.c(frame(0x000F, 7, b"\0\0\0\1\0\0\0\0"))
    assert [c for c, _ in hits(run(s), R.UNKNOWN_VERSION.id)] == ["Metadata"]


def test_wrong_direction() -> None:
    s = opened()
    s.s(request("QueryOffset", correlation_id=5, reference="r", stream="s"))  # server sends a client request
    s.c(response("QueryOffset", correlation_id=5, response_code=1, offset=0))
    s.c(request("PublishConfirm", publisher_id=0, publishing_ids=[]))
    got = hits(run(s), R.WRONG_DIRECTION.id)
    assert [c for c, _ in got] == ["QueryOffset", "QueryOffsetResponse", "PublishConfirm"]


# ------------------------------------------------------------------------------------ handshake
def test_handshake_out_of_order() -> None:
    hs = handshake()
    s = Script()
    s.c(request("Metadata", correlation_id=9, streams=["s"]))  # before anything
    s.s(response("Metadata", correlation_id=9, brokers=[], stream_metadata=[]))
    s.extend(hs)
    got = only(run(s), R.HANDSHAKE_ORDER.id)
    assert [c for c, _ in got] == ["Metadata"]


def test_handshake_skipping_sasl_handshake() -> None:
    hs = handshake()
    s = Script().extend(hs[:2] + hs[4:])  # no SaslHandshake
    got = only(run(s), R.HANDSHAKE_ORDER.id)
    assert [c for c, _ in got] == ["SaslAuthenticate"]


def test_handshake_server_tune_before_auth() -> None:
    hs = handshake()
    s = Script().extend(hs[:4] + [hs[6]] + hs[4:6] + hs[7:])
    got = only(run(s), R.HANDSHAKE_ORDER.id)
    assert [c for c, _ in got] == ["Tune"]


def test_handshake_command_after_open() -> None:
    s = opened()
    s.c(request("PeerProperties", correlation_id=50, properties={}))
    s.s(response("PeerProperties", correlation_id=50, response_code=1, properties={}))
    assert [c for c, _ in only(run(s), R.HANDSHAKE_ORDER.id)] == ["PeerProperties"]


def test_midstream_does_not_judge_handshake() -> None:
    s = Script()
    s.c(request("Metadata", correlation_id=9, streams=["s"]))
    s.s(response("Metadata", correlation_id=9, brokers=[], stream_metadata=[]))
    s.s(deliver(3, chunk()))
    s.s(response("QueryOffset", correlation_id=77, response_code=1, offset=1))
    assert all_findings(run(s, midstream=True)) == []


def test_midstream_resyncs_into_a_frame_boundary() -> None:
    s = Script()
    tail = request("Metadata", correlation_id=9, streams=["some-stream"])
    s.c(tail[5:] + request("Heartbeat") + request("Heartbeat"))
    events = run(s, midstream=True)
    assert [e.command for e in events if isinstance(e, Frame)] == ["Heartbeat", "Heartbeat"]
    assert all_findings(events) == []


# ------------------------------------------------------------------------------------ correlation
def test_unknown_response() -> None:
    s = opened()
    s.s(response("Delete", correlation_id=1234, response_code=1))
    assert [c for c, _ in only(run(s), R.UNKNOWN_RESPONSE.id)] == ["DeleteResponse"]


def test_key_mismatch() -> None:
    s = opened()
    s.c(request("Delete", correlation_id=60, stream="s"))
    s.s(response("Create", correlation_id=60, response_code=1))
    assert [c for c, _ in only(run(s), R.KEY_MISMATCH.id)] == ["CreateResponse"]


def test_unanswered_request_reported_at_end() -> None:
    s = opened()
    s.c(request("StreamStats", correlation_id=61, stream="s"))
    events = run(s)
    got = only(events, R.UNANSWERED.id)
    assert len(got) == 1 and got[0][0] is None
    related = got[0][1].related  # a reference [direction, stream offset, packet], never the frame itself
    assert related is not None and not isinstance(related, Frame)
    assert [e.command for e in events if isinstance(e, Frame) and [str(e.direction), e.offset] == related[:2]] == \
        ["StreamStats"]
    assert events[-1] is got[0][1]


def test_reused_correlation_id() -> None:
    s = opened()
    s.c(request("Delete", correlation_id=60, stream="a"))
    s.c(request("Delete", correlation_id=60, stream="b"))
    s.s(response("Delete", correlation_id=60, response_code=1))
    s.s(response("Delete", correlation_id=61, response_code=1))
    ids = [f.id for f in all_findings(run(s))]
    assert ids == [R.DUPLICATE_CORR.id, R.UNKNOWN_RESPONSE.id]


def test_close_without_response() -> None:
    s = opened()
    s.s(request("Close", correlation_id=1, closing_code=0x0D, closing_reason="unknown frame"))
    events = run(s)
    ids = [f.id for f in all_findings(events)]
    assert ids == [R.ERROR_RESPONSE.id, R.CLOSE_UNANSWERED.id]
    assert hits(events, R.ERROR_RESPONSE.id)[0][1].severity is Severity.WARNING


def test_server_close_answered_is_clean() -> None:
    s = opened()
    s.s(request("Close", correlation_id=1, closing_code=1, closing_reason="shutdown"))
    s.c(response("Close", correlation_id=1, response_code=1))
    assert all_findings(run(s)) == []


# ------------------------------------------------------------------------------------ responses
@pytest.mark.parametrize(("code", "name", "severity", "rule"), [
    (0x02, "STREAM_DOES_NOT_EXIST", Severity.NOTE, R.REFUSED.id),
    (0x05, "STREAM_ALREADY_EXISTS", Severity.NOTE, R.REFUSED.id),
    (0x10, "ACCESS_REFUSED", Severity.NOTE, R.REFUSED.id),
    (0x11, "PRECONDITION_FAILED", Severity.WARNING, R.ERROR_RESPONSE.id),
    (0x12, "PUBLISHER_DOES_NOT_EXIST", Severity.WARNING, R.ERROR_RESPONSE.id),
    (0x13, "NO_OFFSET", Severity.NOTE, R.REFUSED.id),
])
def test_error_response(code: int, name: str, severity: Severity, rule: str) -> None:
    s = opened()
    s.c(request("Create", correlation_id=70, stream="s", arguments={}))
    s.s(response("Create", correlation_id=70, response_code=code))
    got = only(run(s), rule)
    assert len(got) == 1 and name in got[0][1].message and got[0][1].severity is severity


def test_every_response_code_has_a_name() -> None:
    from dissectors.rabbitmq_stream.wire import CODES

    assert sorted(CODES) == list(range(1, 0x16))


def test_unknown_response_code() -> None:
    s = opened()
    s.c(request("Delete", correlation_id=70, stream="s"))
    s.s(response("Delete", correlation_id=70, response_code=0x99))
    assert len(only(run(s), R.UNKNOWN_CODE.id)) == 1


def test_credit_response_without_correlation() -> None:
    s = opened()
    s.c(request("Credit", subscription_id=9, credit=1))
    s.s(response("Credit", response_code=0x04, subscription_id=9))
    got = only(run(s), R.ERROR_RESPONSE.id)
    assert got[0][0] == "CreditResponse" and got[0][1].severity is Severity.WARNING


def test_publish_error_codes() -> None:
    s = opened()
    s.c(request("Publish", publisher_id=7, messages=[{"publishing_id": 1, "message": b"x"}]))
    s.s(request("PublishError", publisher_id=7, errors=[{"publishing_id": 1, "response_code": 0x12}]))
    events = run(s)
    assert [f.id for f in all_findings(events)] == [R.UNKNOWN_PUBLISHER.id, R.ERROR_RESPONSE.id]
    assert "PUBLISHER_DOES_NOT_EXIST" in hits(events, R.ERROR_RESPONSE.id)[0][1].message


def test_metadata_response_per_stream_codes() -> None:
    s = opened()
    s.c(request("Metadata", correlation_id=9, streams=["gone"]))
    s.s(response("Metadata", correlation_id=9, brokers=[], stream_metadata=[
        {"stream": "gone", "response_code": 2, "leader_reference": 0xFFFF, "replicas": []}]))
    got = only(run(s), R.REFUSED.id)
    assert "STREAM_DOES_NOT_EXIST" in got[0][1].message and "'gone'" in got[0][1].message


# ------------------------------------------------------------------------------------ semantics
def test_publish_for_undeclared_publisher() -> None:
    s = declare(opened(), pid=1)
    s.c(request("Publish", publisher_id=2, messages=[{"publishing_id": 5, "message": b"x"}]))
    s.s(request("PublishConfirm", publisher_id=2, publishing_ids=[5]))
    assert [c for c, _ in only(run(s), R.UNKNOWN_PUBLISHER.id)] == ["Publish"]


def test_publisher_deleted_then_used() -> None:
    s = declare(opened(), pid=1)
    s.c(request("DeletePublisher", correlation_id=11, publisher_id=1))
    s.s(response("DeletePublisher", correlation_id=11, response_code=1))
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 5, "message": b"x"}]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[5]))
    assert [c for c, _ in only(run(s), R.UNKNOWN_PUBLISHER.id)] == ["Publish"]


def test_confirm_for_unknown_publishing_id() -> None:
    s = declare(opened())
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 1, "message": b"x"}]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[1, 2]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[1]))  # twice
    got = only(run(s), R.UNKNOWN_PUBLISHING_ID.id)
    assert [c for c, _ in got] == ["PublishConfirm", "PublishConfirm"]


def test_publish_v2_and_sub_batch_ids_are_tracked() -> None:
    s = declare(opened())
    s.c(request("Publish", 2, publisher_id=1, messages=[{"publishing_id": 1, "filter_value": "eu", "message": b"a"},
                                                        {"publishing_id": 2, "filter_value": None, "message": b"b"}]))
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 3, "sub_batch": MSGS, "compression": 1}]))
    s.s(request("PublishConfirm", publisher_id=1, publishing_ids=[1, 2, 3]))
    events = run(s)
    assert all_findings(events) == []
    pubs = [e for e in events if isinstance(e, Frame) and e.command == "Publish"]
    v2 = pubs[0].fields[-1].children
    assert v2 is not None and v2[0].children is not None
    assert [c.value for c in v2[0].children[:2]] == [1, "eu"]


def test_error_publish_frees_the_publisher_id() -> None:
    s = opened()
    s.c(request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="", stream="nope"))
    s.s(response("DeclarePublisher", correlation_id=10, response_code=2))
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 1, "message": b"x"}]))
    ids = [f.id for f in all_findings(run(s))]
    assert ids == [R.REFUSED.id, R.UNKNOWN_PUBLISHER.id]


def test_deliver_for_unknown_subscription() -> None:
    s = subscribe(opened(), sid=0)
    s.s(deliver(4, chunk()))
    assert [c for c, _ in only(run(s), R.UNKNOWN_SUBSCRIPTION.id)] == ["Deliver"]


def test_deliver_beyond_credit() -> None:
    s = subscribe(opened(), credit=1)
    s.s(deliver(0, chunk(0)))
    s.s(deliver(0, chunk(3)))  # no credit left
    s.c(request("Credit", subscription_id=0, credit=1))
    s.s(deliver(0, chunk(6)))  # fine again
    got = only(run(s), R.NO_CREDIT.id)
    assert len(got) == 1


def test_deliver_after_unsubscribe_response() -> None:
    s = subscribe(opened())
    s.c(request("Unsubscribe", correlation_id=21, subscription_id=0))
    s.s(response("Unsubscribe", correlation_id=21, response_code=1))
    s.s(deliver(0, chunk()))
    assert len(only(run(s), R.UNKNOWN_SUBSCRIPTION.id)) == 1


def test_unsubscribe_race_after_metadata_update_is_a_note() -> None:
    s = subscribe(opened())
    s.s(request("MetadataUpdate", response_code=6, stream="s"))
    s.c(request("Unsubscribe", correlation_id=21, subscription_id=0))
    s.s(response("Unsubscribe", correlation_id=21, response_code=4))
    found = all_findings(run(s))
    assert [f.id for f in found] == [R.REFUSED.id, R.REFUSED.id]
    assert all(f.severity is Severity.NOTE for f in found)


def test_heartbeat_silence() -> None:
    s = opened(heartbeat=5)
    s.c(request("Heartbeat"), at=1_700_000_003.0)
    s.s(request("Heartbeat"), at=1_700_000_004.0)
    s.c(request("Heartbeat"), at=1_700_000_020.0)  # 17 s of client silence > 2 x 5 s
    s.s(request("Heartbeat"), at=1_700_000_008.0 + 12)
    events = run(s)
    got = hits(events, R.HEARTBEAT_SILENCE.id)
    assert len(got) == 2
    assert {f.id for f in all_findings(events)} == {R.HEARTBEAT_SILENCE.id}
    assert "client" in got[0][1].message


def test_heartbeat_disabled() -> None:
    s = opened(heartbeat=0)
    s.c(request("Heartbeat"), at=1_700_009_000.0)
    assert all_findings(run(s)) == []


# ------------------------------------------------------------------------------------ chunks
def test_crc_mismatch() -> None:
    s = subscribe(opened())
    s.s(deliver(0, chunk(0, crc=0x12345678)))
    got = only(run(s), R.CRC_MISMATCH.id)
    assert [c for c, _ in got] == ["Deliver"] and "0x12345678" in got[0][1].message


def test_chunk_record_count_mismatch() -> None:
    s = subscribe(opened())
    msgs = [simple_entry(m) for m in MSGS]
    s.s(deliver(0, build_chunk(msgs, 5, 0)))
    got = only(run(s), R.CHUNK_MALFORMED.id)
    assert "5 records" in got[0][1].message


def test_chunk_bad_magic_and_entries() -> None:
    s = subscribe(opened())
    s.s(deliver(0, build_chunk([simple_entry(m) for m in MSGS], 3, 0, magic=0x51, num_entries=4)))
    msgs = [f.message for _, f in only(run(s), R.CHUNK_MALFORMED.id)]
    assert any("magic" in m for m in msgs) and any("4 entries" in m for m in msgs)


def test_compressed_sub_batch_decoded() -> None:
    s = subscribe(opened())
    entries = [sub_batch_entry(MSGS, 1), simple_entry(MSGS[0]), sub_batch_entry(MSGS, 0)]
    s.s(deliver(0, build_chunk(entries, 7, 100)))
    events = run(s)
    assert all_findings(events) == []
    d = [e for e in events if isinstance(e, Frame) and e.command == "Deliver"][0]
    ch = d.fields[-1]
    entries_f = ch.child("entries")
    assert entries_f is not None and entries_f.children is not None
    gz = entries_f.children[0]
    assert gz.display == "3 records, gzip"
    recs = gz.child("records")
    assert recs is not None and [r.value for r in recs.children or ()] == [100, 101, 102]
    assert entries_f.children[1].value == 103


def test_unsupported_compression_is_a_note() -> None:
    import struct as st

    raw = b"".join(simple_entry(m) for m in MSGS)
    entry = st.pack(">BHII", 0x80 | 7 << 4, 3, len(raw), len(raw)) + raw  # user-defined codec
    s = subscribe(opened())
    s.s(deliver(0, build_chunk([entry], 3, 0)))
    got = only(run(s), R.CHUNK_COMPRESSED.id)
    assert got[0][1].severity is Severity.NOTE


def test_legacy_route_response_key() -> None:
    s = opened(broker_version="3.10.8")
    s.c(request("Route", correlation_id=80, routing_key="k", super_stream="ss"))
    s.s(response("Route", correlation_id=80, raw_key=0x0018, response_code=1, streams=["ss-0"]))
    s.c(request("Partitions", correlation_id=81, super_stream="ss"))
    s.s(response("Partitions", correlation_id=81, raw_key=0x0019, response_code=1, streams=["ss-0", "ss-1"]))
    events = run(s)
    got = only(events, R.LEGACY_RESPONSE_KEY.id)
    assert [c for c, _ in got] == ["RouteResponse", "PartitionsResponse"]
    assert all(f.severity is Severity.NOTE for _, f in got)


def test_route_response_39_single_string() -> None:
    s = opened(broker_version="3.9.0")
    s.c(request("Route", correlation_id=80, routing_key="k", super_stream="ss"))
    s.s(response("Route", correlation_id=80, response_code=1, streams="ss-0"))
    events = run(s)
    assert all_findings(events) == []
    r = [e for e in events if isinstance(e, Frame) and e.command == "RouteResponse"][0]
    streams = next(f for f in r.fields if f.name == "streams")  # a list of one, as 3.10+ sends it
    assert streams.is_list and [s.value for s in streams.children or ()] == ["ss-0"]
    assert streams.display == "single string (RabbitMQ 3.9)"


def test_rules_are_all_listed_with_stable_ids() -> None:
    listed = RabbitMQStreamDissector().rules()
    ids = [r.id for r in listed]
    assert len(ids) == len(set(ids))
    assert all(i.startswith("rabbitmq_stream.") and i.count(".") == 2 for i in ids)
    module_rules = {v.id for v in vars(R).values() if isinstance(v, type(R.JUNK))}
    assert module_rules == set(ids)


def test_gap_then_resync_without_resync_finding() -> None:
    from analyzer.api import Direction as D
    from dissectors.rabbitmq_stream.connection import StreamConnection

    conn = StreamConnection(False)
    events = []
    for d, raw in handshake():
        events += conn.feed(d, raw, 0.0)
    meta = request("Metadata", correlation_id=9, streams=["stream-name"])
    events += conn.feed(D.C2S, meta[:10], 0.0)
    events += conn.gap(D.C2S, 5, 0.0)
    events += conn.feed(D.C2S, meta[15:] + request("Heartbeat") + request("Heartbeat"), 0.0)
    events += conn.end(1.0)
    assert [e.command for e in events if isinstance(e, Frame)][-2:] == ["Heartbeat", "Heartbeat"]
    assert all_findings(events) == []  # the lost request's correlation is not judged either


def test_optional_codec_is_used_when_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    import struct as st

    from dissectors.rabbitmq_stream import codecs

    raw = b"".join(simple_entry(m) for m in MSGS)
    fake = b"ZSTD" + raw  # a stand-in codec: the dissector only calls the library's decompressor
    monkeypatch.setitem(codecs.DECOMPRESSORS, 4, lambda data, limit: data[4:4 + limit])
    entry = st.pack(">BHII", 0x80 | 4 << 4, 3, len(raw), len(fake)) + fake
    s = subscribe(opened())
    s.s(deliver(0, build_chunk([entry], 3, 10)))
    events = run(s)
    assert all_findings(events) == []
    d = [e for e in events if isinstance(e, Frame) and e.command == "Deliver"][0]
    sb = d.fields[-1].child("entries").children[0]  # type: ignore[union-attr]
    assert sb.display == "3 records, zstd"
    assert [r.value for r in sb.child("records").children] == [10, 11, 12]  # type: ignore[union-attr]


def test_chunk_with_trailer() -> None:
    s = subscribe(opened())
    s.s(deliver(0, build_chunk([simple_entry(MSGS[0])], 1, 0, trailer=b"\x01\x01r" + bytes(8))))
    events = run(s)
    assert all_findings(events) == []
    d = [e for e in events if isinstance(e, Frame) and e.command == "Deliver"][0]
    assert d.fields[-1].child("trailer").value == b"\x01\x01r" + bytes(8)  # type: ignore[union-attr]


def test_big_client_frame_before_open_is_a_note() -> None:
    steps = handshake()
    big_props = {"product": "streamproto-test", "padding": "p" * 9000}
    steps[0] = (steps[0][0], request("PeerProperties", correlation_id=1, properties=big_props))
    s = Script().extend(steps)
    s.c(request("Metadata", correlation_id=9, streams=["x" * 9000]))  # after Open: within frame_max
    s.s(response("Metadata", correlation_id=9, brokers=[], stream_metadata=[]))
    got = only(run(s), R.PRE_OPEN_FRAME.id)
    assert [c for c, _ in got] == ["PeerProperties"]
    assert got[0][1].severity is Severity.NOTE and "8192" in got[0][1].message
    assert only(run(opened()), R.PRE_OPEN_FRAME.id) == []


def test_open_without_the_client_tune_is_noted_not_out_of_order() -> None:
    hs = handshake()
    s = Script().extend(hs[:7] + hs[8:])  # the server's Tune, then Open without the client's
    got = only(run(s), R.NO_CLIENT_TUNE.id)
    assert [(c, f.message) for c, f in got] == [("Open", "Open without the client's Tune")]
