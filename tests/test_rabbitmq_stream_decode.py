"""Decoding details of the RabbitMQ Stream dissector: every key round-trips through the encoder, the
2020 draft, AMQP 1.0 messages, sniffing and the command docs."""

from __future__ import annotations

import pytest

from analyzer.api import Frame
from dissectors.rabbitmq_stream import RabbitMQStreamDissector, amqp
from dissectors.rabbitmq_stream.encode import (
    BY_NAME,
    Script,
    all_findings,
    build_chunk,
    deliver,
    draft_deliver,
    draft_request,
    draft_response,
    encode_message,
    handshake,
    request,
    response,
    run,
    simple_entry,
)
from dissectors.rabbitmq_stream.layouts import COMMANDS
from dissectors.schema import field_values

#: A non-OK code in a sample is on purpose: its finding is expected.
RESPONSE_CODE_RULES = ("rabbitmq_stream.response.error", "rabbitmq_stream.response.refused")
SAMPLES: dict[str, dict] = {
    "DeclarePublisher": {"correlation_id": 5, "publisher_id": 3, "publisher_reference": "ref", "stream": "s"},
    "QueryPublisherSequence": {"correlation_id": 5, "publisher_reference": "ref", "stream": "s"},
    "DeletePublisher": {"correlation_id": 5, "publisher_id": 3},
    "Subscribe": {"correlation_id": 5, "subscription_id": 1, "stream": "s",
                  "offset_spec": {"type": 5, "timestamp": 1_700_000_000_000}, "credit": 10,
                  "properties": {"single-active-consumer": "true", "name": "g"}},
    "Credit": {"subscription_id": 1, "credit": 5},
    "StoreOffset": {"reference": "r", "stream": "s", "offset": 42},
    "QueryOffset": {"correlation_id": 5, "reference": "r", "stream": "s"},
    "Unsubscribe": {"correlation_id": 5, "subscription_id": 1},
    "Create": {"correlation_id": 5, "stream": "s", "arguments": {"max-age": "7D"}},
    "Delete": {"correlation_id": 5, "stream": "s"},
    "Metadata": {"correlation_id": 5, "streams": ["a", "b"]},
    "MetadataUpdate": {"response_code": 6, "stream": "s"},
    "PeerProperties": {"correlation_id": 5, "properties": {"product": "x"}},
    "SaslHandshake": {"correlation_id": 5},
    "SaslAuthenticate": {"correlation_id": 5, "mechanism": "PLAIN", "sasl_data": b"\0u\0p"},
    "Tune": {"frame_max": 1024, "heartbeat": 30},
    "Open": {"correlation_id": 5, "virtual_host": "/"},
    "Close": {"correlation_id": 5, "closing_code": 1, "closing_reason": "bye"},
    "Heartbeat": {},
    "Route": {"correlation_id": 5, "routing_key": "k", "super_stream": "ss"},
    "Partitions": {"correlation_id": 5, "super_stream": "ss"},
    "ConsumerUpdate": {"correlation_id": 5, "subscription_id": 1, "active": 1},
    "ExchangeCommandVersions": {"correlation_id": 5, "commands": [{"key": 8, "min_version": 1, "max_version": 2}]},
    "StreamStats": {"correlation_id": 5, "stream": "s"},
    "CreateSuperStream": {"correlation_id": 5, "name": "ss", "partitions": ["ss-0"], "binding_keys": ["0"],
                          "arguments": {}},
    "DeleteSuperStream": {"correlation_id": 5, "name": "ss"},
    "ResolveOffsetSpec": {"correlation_id": 5, "stream": "s", "offset_spec": {"type": 4, "offset": 9}},
    "PublishConfirm": {"publisher_id": 1, "publishing_ids": [1, 2]},
    "PublishError": {"publisher_id": 1, "errors": [{"publishing_id": 1, "response_code": 0x12}]},
}
RESPONSES: dict[str, dict] = {
    "QueryPublisherSequence": {"correlation_id": 5, "response_code": 1, "sequence": 7},
    "Credit": {"response_code": 4, "subscription_id": 1},
    "QueryOffset": {"correlation_id": 5, "response_code": 1, "offset": 3},
    "Metadata": {"correlation_id": 5, "brokers": [{"reference": 0, "host": "h", "port": 5552}],
                 "stream_metadata": [{"stream": "a", "response_code": 1, "leader_reference": 0, "replicas": [0]}]},
    "PeerProperties": {"correlation_id": 5, "response_code": 1, "properties": {"version": "4.3.5"}},
    "SaslHandshake": {"correlation_id": 5, "response_code": 1, "mechanisms": ["PLAIN", "EXTERNAL"]},
    "SaslAuthenticate": {"correlation_id": 5, "response_code": 0x0A, "sasl_challenge": b"challenge"},
    "Tune": {"frame_max": 1024, "heartbeat": 30},
    "Open": {"correlation_id": 5, "response_code": 1, "properties": {"advertised_host": "h"}},
    "Route": {"correlation_id": 5, "response_code": 1, "streams": ["ss-0"]},
    "Partitions": {"correlation_id": 5, "response_code": 1, "streams": ["ss-0", "ss-1"]},
    "ConsumerUpdate": {"correlation_id": 5, "response_code": 1, "offset_spec": {"type": 4, "offset": 12}},
    "ExchangeCommandVersions": {"correlation_id": 5, "response_code": 1,
                                "commands": [{"key": 2, "min_version": 1, "max_version": 2}]},
    "StreamStats": {"correlation_id": 5, "response_code": 1, "stats": {"first_chunk_id": 0,
                                                                        "committed_chunk_id": -1}},
    "ResolveOffsetSpec": {"correlation_id": 5, "response_code": 1, "offset_type": 4, "offset": 9},
}


def decode_one(raw: bytes, server: bool = False) -> Frame:
    s = Script()
    (s.s if server else s.c)(raw)
    conn_events = run(s, midstream=True)
    fr = [e for e in conn_events if isinstance(e, Frame)]
    assert len(fr) == 1
    return fr[0]


def body_values(fr: Frame) -> dict:
    return field_values([f for f in fr.fields if f.name not in ("size", "key", "version")])


def test_every_key_has_a_sample() -> None:
    names = {c.name for c in COMMANDS.values()} - {"Publish", "Deliver"}
    assert names == set(SAMPLES)
    assert sorted(COMMANDS) == list(range(1, 0x20))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_request_round_trip(name: str) -> None:
    raw = request(name, **SAMPLES[name])
    server = BY_NAME[name].sender == "s2c"
    fr = decode_one(raw, server=server)
    assert fr.command == name and fr.size == len(raw)
    assert [f.id for f in fr.findings if f.id not in RESPONSE_CODE_RULES] == []
    assert body_values(fr) == SAMPLES[name]
    assert request(name, **body_values(fr)) == raw


@pytest.mark.parametrize("name", sorted(c.name for c in COMMANDS.values() if c.response is not None))
def test_response_round_trip(name: str) -> None:
    values = RESPONSES.get(name, {"correlation_id": 5, "response_code": 1})
    raw = response(name, **values)
    server = BY_NAME[name].sender != "s2c"
    fr = decode_one(raw, server=server)
    assert fr.command == name + "Response"
    assert [f.id for f in fr.findings if f.id not in RESPONSE_CODE_RULES] == []
    assert body_values(fr) == values
    assert fr.info.startswith(f"{name} response")


def test_sasl_challenge_both_length_forms() -> None:
    short = response("SaslAuthenticate", correlation_id=1, response_code=0x0A, sasl_challenge=b"abc")
    long = short[:14] + b"\0\0\0\3abc"
    long = len(long[4:]).to_bytes(4, "big") + long[4:]
    a, b = decode_one(short, server=True), decode_one(long, server=True)
    assert a.get("sasl_challenge") == b.get("sasl_challenge") == b"abc"
    assert a.findings == b.findings == []


def test_publish_and_deliver_versions() -> None:
    msg = encode_message(b"body", properties={"message_id": "id-1", "content_type": "text/plain"},
                         application_properties={"k": "v"}, message_annotations={"x-opt": 1})
    p1 = decode_one(request("Publish", publisher_id=2, messages=[{"publishing_id": 9, "message": msg}]))
    assert p1.info == "Publish publisher=2 messages=1"
    m = p1.fields[-1].children[0]  # type: ignore[index]
    kids = {c.name: c for c in m.children or ()}
    assert kids["publishing_id"].value == 9
    sections = {c.name: c for c in kids["amqp"].children or ()}
    assert sections["properties"].child("message_id").value == "id-1"  # type: ignore[union-attr]
    assert sections["properties"].child("content_type").value == "text/plain"  # type: ignore[union-attr]
    assert sections["application_properties"].child("k").value == "v"  # type: ignore[union-attr]
    assert sections["message_annotations"].child("x-opt").value == 1  # type: ignore[union-attr]
    assert sections["data"].is_list and [d.value for d in sections["data"].children or ()] == [b"body"]
    raw_chunk = build_chunk([simple_entry(b"plain payload")], 1, 77)
    d2 = decode_one(deliver(3, raw_chunk, version=2, committed_chunk_id=70), server=True)
    assert d2.info == "Deliver sub=3 first_offset=77 records=1"
    assert d2.get("committed_chunk_id") == 70
    rec = d2.fields[-1].child("entries").children[0]  # type: ignore[union-attr]
    assert rec.value == 77 and rec.children[-1].name == "message"  # type: ignore[index]
    assert rec.children[-1].value == b"plain payload"  # type: ignore[index]


def test_amqp_types_round_trip() -> None:
    value = {amqp.Symbol("sym"): [1, -5, 2**40, 1.5, True, None, "text", b"\x00\x01", amqp.Timestamp(1000)]}
    raw = amqp.encode_value(value)
    got, end = amqp.decode_value(raw, 0, len(raw))
    assert end == len(raw) and got == value


def test_amqp_fixed_encodings() -> None:
    # array8 of smalluint, list8, map8, uuid, char, described ulong descriptor
    raw = bytes([0xE0, 5, 3, 0x52, 1, 2, 3])
    assert amqp.decode_value(raw, 0, len(raw))[0] == [1, 2, 3]
    raw = bytes([0xC0, 3, 2, 0x41, 0x40])
    assert amqp.decode_value(raw, 0, len(raw))[0] == [True, None]
    raw = bytes([0x98]) + bytes(range(16))
    assert amqp.decode_value(raw, 0, len(raw))[0] == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    raw = bytes([0x73, 0, 0, 0, 0x41])
    assert amqp.decode_value(raw, 0, len(raw))[0] == "A"
    msg = b"\x00\x80" + (0x77).to_bytes(8, "big") + b"\xa1\x02hi"
    fields = amqp.message_fields(msg, 0, len(msg), 0)
    assert fields is not None and fields[0].name == "amqp_value" and fields[0].value == "hi"
    assert amqp.message_fields(b"\x00\x53\x99\x40", 0, 4, 0) is None  # unknown section: raw fallback


def test_draft_2020_conversation() -> None:
    s = Script()
    s.c(draft_request("PeerProperties", correlation_id=1, properties={"product": "old"}))
    s.s(draft_response("PeerProperties", correlation_id=1, response_code=0, properties={"version": "0.1"}))
    s.c(draft_request("SaslHandshake", correlation_id=2))
    s.s(draft_response("SaslHandshake", correlation_id=2, response_code=0, mechanisms=["PLAIN"]))
    s.c(draft_request("SaslAuthenticate", correlation_id=3, mechanism="PLAIN", sasl_data=b"\0g\0g"))
    s.s(draft_response("SaslAuthenticate", correlation_id=3, response_code=0))
    s.s(draft_request("Tune", frame_max=131072, heartbeat=60))
    s.c(draft_response("Tune", frame_max=131072, heartbeat=60))
    s.c(draft_request("Open", correlation_id=4, virtual_host="/"))
    s.s(draft_response("Open", correlation_id=4, response_code=0))
    s.c(draft_request("Create", correlation_id=5, stream="old", arguments={}))
    s.s(draft_response("Create", correlation_id=5, response_code=4))  # stream exists (0-based codes)
    s.c(draft_request("Publish", stream="old", messages=[{"publishing_id": 1, "message": b"a"},
                                                          {"publishing_id": 2, "message": b"b"}]))
    s.s(draft_request("PublishConfirm", publishing_ids=[1, 2]))
    s.c(draft_request("Subscribe", correlation_id=6, subscription_id=70000, stream="old", start={"offset": 0}))
    s.s(draft_response("Subscribe", correlation_id=6, response_code=0))
    s.s(draft_deliver(70000, [b"a", b"b"], 0))
    s.c(draft_request("Credit", subscription_id=70000, credit=1))
    s.c(draft_request("Close", correlation_id=7, closing_code=0, closing_reason="bye"))
    s.s(draft_response("Close", correlation_id=7, response_code=0))
    events = run(s)
    frames = [e for e in events if isinstance(e, Frame)]
    assert all(f.dialect == "2020-draft" for f in frames)
    assert [f.command for f in frames][:2] == ["PeerProperties", "PeerPropertiesResponse"]
    found = all_findings(events)
    assert [(f.id, "STREAM_ALREADY_EXISTS" in f.message) for f in found] == [("rabbitmq_stream.response.refused", True)]
    d = next(f for f in frames if f.command == "Deliver")
    assert d.info == "Deliver sub=70000 first_offset=0 records=2"
    assert d.fields[-1].child("crc").display == "verified"  # type: ignore[union-attr]
    pub = next(f for f in frames if f.command == "Publish")
    assert pub.info == "Publish stream=old messages=2"
    assert next(f for f in frames if f.command == "CloseResponse").info.startswith("Close response code=OK")


def test_draft_subscribe_both_layouts() -> None:
    """The first draft's bare offset, and the OffsetSpecification (0-based types) + Credit of June 2020."""
    def subscribe_info(start: dict) -> tuple[str, list[str]]:
        s = Script()
        s.c(draft_request("Subscribe", correlation_id=6, subscription_id=1, stream="old", start=start))
        s.s(draft_response("Subscribe", correlation_id=6, response_code=0))
        events = run(s, midstream=True)
        sub = next(e for e in events if isinstance(e, Frame) and e.command == "Subscribe")
        start_field = next(f for f in sub.fields if f.name == "start")
        credit = start_field.child("credit")
        assert credit is None or credit.value == start.get("credit")
        return sub.info, [f.id for f in all_findings(events)]

    assert subscribe_info({"offset": 7}) == ("Subscribe sub=1 stream=old from='offset 7' corr=6", [])
    assert subscribe_info({"offset_spec": {"type": 0}, "credit": 10}) == (
        "Subscribe sub=1 stream=old from=first corr=6", [])
    assert subscribe_info({"offset_spec": {"type": 3, "offset": 42}, "credit": 5}) == (
        "Subscribe sub=1 stream=old from='offset 42' corr=6", [])


def test_sniff() -> None:
    d = RabbitMQStreamDissector()
    hs = handshake()
    first_c, first_s = hs[0][1], hs[1][1]
    v = d.sniff(first_c)
    assert v.confidence >= 0.9 and v.from_client is True
    v = d.sniff(first_s)
    assert v.confidence >= 0.9 and v.from_client is False
    assert d.sniff(b"AMQP\x00\x00\x09\x01").confidence == 0.0
    assert d.sniff(b"GET / HTTP/1.1\r\n").confidence == 0.0
    assert d.sniff(request("Metadata", correlation_id=1, streams=["s"])).confidence >= 0.5
    assert d.sniff(draft_request("SaslHandshake", correlation_id=1)).confidence >= 0.5
    assert d.name == "rabbitmq_stream" and d.title == "RabbitMQ Stream" and d.default_ports == (5552,)


def test_commands_docs_cover_every_key() -> None:
    docs = RabbitMQStreamDissector().commands()
    codes = {c.code for c in docs}
    for key in range(1, 0x20):
        assert f"{key:#06x}" in codes
    assert any(c.name == "Publish" and c.versions == "2" for c in docs)
    assert any(c.name == "Deliver" and c.versions == "2" for c in docs)
    assert any(c.code == "draft 998" for c in docs)


@pytest.mark.parametrize(("records", "count", "whole", "error"), [
    (b"\x00\x00\x00\x01a\x00\x00\x00\x02bc", 2, 2, None),
    (b"", 0, 0, None),
    (b"\x00\x00\x00\x01a\x00\x00", 2, 1, "entry 3: sub-batch holds 1 of its 2 records"),
    (b"\x00\x00\x00\x01a\x00\x00\x00\x09bc", 2, 1, "entry 3: sub-batch record 1 length 9 overruns the sub-batch"),
    (b"\x80\x00\x00\x01a", 1, 0, f"entry 3: sub-batch record 0 length {0x80000001} overruns the sub-batch"),
    (b"\x00\x00\x00\x01ab", 1, 1, "entry 3: 1 bytes after the sub-batch's 1 records"),
])
def test_sub_batch_records_counted_and_their_problems_worded(records: bytes, count: int, whole: int,
                                                              error: str | None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from dissectors.rabbitmq_stream import sub_batch
    from dissectors.rabbitmq_stream.chunk import RecordsField
    from dissectors.rabbitmq_stream.sub_batch import ChunkProblem, sub_batch_records

    for shortcut in (True, False):
        if not shortcut:  # record by record
            monkeypatch.setattr(sub_batch, "SHORTCUT", False)
        problems = ChunkProblem()
        data = b"\xff" * 5 + records  # the records start after a few other bytes of the frame
        fields, got = sub_batch_records(data, 5, len(records), 0, count, None, 0, problems, 3)
        assert fields == [] and got == whole and problems.errors == ([error] if error else [])
        # The records node made of them: the whole records, numbered from the first offset.
        node = RecordsField(got, 5, len(records), data, 5, 0, 100)
        assert [f.value for f in node.children or ()] == [100 + i for i in range(whole)]
        assert [f.offset for f in node.children or ()][:1] == ([5] if whole else [])


def test_sub_batch_records_checked_alike_with_and_without_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of one length are checked by a shortcut (_uniform_end: one struct call for up to
    _PREFIXES_COUNT_MAX records, strided slices for more); others record by record: all must count
    the same records and word the same problems."""
    import random
    import struct

    from dissectors.rabbitmq_stream import sub_batch
    from dissectors.rabbitmq_stream.sub_batch import ChunkProblem, sub_batch_records

    rng = random.Random(15)
    uniform = 0
    for _ in range(3000):
        count = rng.choice((1, 2, 3, 20, 50, 300))
        size = rng.choice((0, 1, 7, 100))
        lengths = [size] * count if rng.random() < 0.6 else [rng.choice((0, 1, 7, 100)) for _ in range(count)]
        records = b"".join(struct.pack(">I", n) + bytes([n % 251]) * n for n in lengths)
        cut = rng.random()
        if cut < 0.15:
            records = records[:rng.randrange(len(records) + 1)]  # cut short
        elif cut < 0.3:
            records += bytes(rng.randrange(1, 9))  # trailing bytes
        elif cut < 0.35:
            records = b"\x80" + records[1:] if records else records  # a length with its top bit set
        elif cut < 0.4 and len(records) > 8:
            at = rng.randrange(len(records))
            records = records[:at] + bytes([rng.randrange(256)]) + records[at + 1:]
        uniform += len(set(lengths)) == 1
        data = b"\x01\x02" + records
        results = []
        for way in ("struct", "strided", "loop"):
            with monkeypatch.context() as m:
                if way == "strided":
                    m.setattr(sub_batch, "_PREFIXES_COUNT_MAX", 0)
                elif way == "loop":
                    m.setattr(sub_batch, "SHORTCUT", False)
                problems = ChunkProblem()
                _, got = sub_batch_records(data, 2, len(records), 0, count, None, 0, problems, 4)
                results.append((got, problems.errors))
        assert results[0] == results[1] == results[2], (lengths, records.hex())
    assert uniform > 1000
    assert 0 < len(sub_batch._PREFIXES) <= sub_batch._PREFIXES_MAX
