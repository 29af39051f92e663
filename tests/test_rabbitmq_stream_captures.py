"""Exact facts of the recorded RabbitMQ Stream captures (real broker RabbitMQ 3.10.8, real clients
rstream and rbfly; see captures/rabbitmq_stream/MANIFEST.md and record.sh)."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from analyzer.api import Event, Field, Finding, Frame, Severity
from analyzer.engine import analyze_file

HERE = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
CLEAN = ["rstream_publish_confirm", "rstream_consume", "rbfly_publish_consume", "rbfly_offset_reference",
         "rstream_errors"]


@cache
def events(name: str) -> tuple[Event, ...]:
    return tuple(analyze_file(str(HERE / f"{name}.pcap")))


def frames(name: str, command: str | None = None) -> list[Frame]:
    return [e for e in events(name) if isinstance(e, Frame) and (command is None or e.command == command)]


def findings(name: str) -> list[Finding]:
    out: list[Finding] = []
    for e in events(name):
        out.extend(e.findings if isinstance(e, Frame) else [e])
    return out


def facts() -> dict[str, dict]:
    out = {}
    for line in (HERE / "facts.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out[d["scenario"]] = d
    return out


def chunk_of(f: Frame) -> Field:
    ch = next(x for x in f.fields if x.name == "chunk")
    return ch


def record_offsets(f: Frame) -> list[int]:
    entries = chunk_of(f).child("entries")
    assert entries is not None
    out: list[int] = []
    for e in entries.children or ():
        if e.name == "record":
            out.append(e.value)
        else:
            recs = e.child("records")
            out.extend(r.value for r in (recs.children or ()) if recs is not None)
    return out


def published_messages(name: str) -> list[Field]:
    out: list[Field] = []
    for f in frames(name, "Publish"):
        msgs = next(x for x in f.fields if x.name == "messages")
        out.extend(msgs.children or ())
    return out


def records_in(entry: Field) -> int:
    if entry.name == "sub_batch":
        return entry.child("record_count").value  # type: ignore[union-attr]
    return 1


@pytest.mark.parametrize("name", CLEAN)
def test_no_warning_on_clean_sessions(name: str) -> None:
    bad = [(f.id, f.message) for f in findings(name) if f.severity is not Severity.NOTE]
    assert bad == []
    assert frames(name), "the capture decodes to frames"
    assert all(f.protocol == "rabbitmq_stream" and f.dialect == "current" for f in frames(name))


@pytest.mark.parametrize("name", CLEAN + ["rstream_bad_password"])
def test_every_connection_announces_the_broker_version(name: str) -> None:
    responses = frames(name, "PeerPropertiesResponse")
    assert responses and all(r.info.endswith("broker=3.10.8") for r in responses)


def test_publish_confirm_ids_and_records() -> None:
    name = "rstream_publish_confirm"
    msgs = published_messages(name)
    ids = [m.value for m in msgs]
    assert len(ids) == len(set(ids)) == facts()[name]["publishing_ids"] == 102
    assert sum(records_in(m) for m in msgs) == facts()[name]["records"] == 111
    confirmed: list[int] = []
    for f in frames(name, "PublishConfirm"):
        arr = next(x for x in f.fields if x.name == "publishing_ids")
        confirmed.extend(c.value for c in arr.children or ())
    assert sorted(confirmed) == sorted(ids)
    # the gzip sub-batch of 10 records, decompressed
    sb = [m for m in msgs if m.name == "sub_batch"]
    assert len(sb) == 1 and sb[0].display == "10 records, gzip"
    recs = sb[0].child("records")
    assert recs is not None
    # the data section is a list node (a message may carry several): its one element is the body
    bodies = [[d.value for d in r.children[-1].children[-1].children] for r in recs.children or ()]  # type: ignore[index,union-attr]
    assert bodies == [[f"sub-entry {i}".encode()] for i in range(10)]
    infos = [f.info for f in frames(name, "Publish")]
    assert "Publish publisher=0 messages=100" in infos


def test_consume_delivers_every_published_record_once_with_good_crc() -> None:
    name = "rstream_consume"
    published = sum(records_in(m) for m in published_messages(name))
    assert published == facts()[name]["published"] == 300
    delivers = frames(name, "Deliver")
    offsets = [o for d in delivers for o in record_offsets(d)]
    assert offsets == list(range(300)) and facts()[name]["received"] == 300
    for d in delivers:
        crc = chunk_of(d).child("crc")
        assert crc is not None and crc.display == "verified"
        first, n = d.info.split("first_offset=")[1].split(" records=")
        assert record_offsets(d)[0] == int(first) and len(record_offsets(d)) == int(n)
    # every delivered message is the AMQP message that was published (data section and application property)
    last = delivers[-1]
    rec = chunk_of(last).child("entries").children[-1]  # type: ignore[union-attr]
    amqp = rec.children[-1]  # type: ignore[index]
    assert amqp.name == "amqp"
    sections = {s.name: s for s in amqp.children or ()}
    assert sections["data"].is_list and [d.value for d in sections["data"].children or ()] == [b"m299"]
    assert sections["application_properties"].child("i").value == 299  # type: ignore[union-attr]
    # store and query the offset
    store = frames(name, "StoreOffset")
    assert [f.get("offset") for f in store] == [299]
    q = frames(name, "QueryOffsetResponse")
    assert [(f.get("response_code"), f.get("offset")) for f in q] == [(1, 299)]
    assert facts()[name]["stored_offset"] == 299
    assert frames(name, "MetadataResponse")


def test_consume_credit_never_negative() -> None:
    name = "rstream_consume"
    sub = frames(name, "Subscribe")
    assert [f.get("credit") for f in sub] == [2]
    assert not [f for f in findings(name) if f.id == "rabbitmq_stream.deliver.credit_exhausted"]


def test_rbfly_publish_consume() -> None:
    name = "rbfly_publish_consume"
    published = sum(records_in(m) for m in published_messages(name))
    assert published == facts()[name]["published"] == 200
    offsets = [o for d in frames(name, "Deliver") for o in record_offsets(d)]
    assert offsets == list(range(200)) == list(range(facts()[name]["received"]))
    assert all(chunk_of(d).child("crc").display == "verified" for d in frames(name, "Deliver"))  # type: ignore[union-attr]
    assert [f.get("offset") for f in frames(name, "StoreOffset")] == [facts()[name]["last_offset"]] == [199]


def test_rbfly_reference_never_stored() -> None:
    name = "rbfly_offset_reference"
    q = frames(name, "QueryOffsetResponse")
    assert [f.info.split(" corr=")[0] for f in q] == ["QueryOffset response code=NO_OFFSET offset=0"]
    offsets = [o for d in frames(name, "Deliver") for o in record_offsets(d)]
    assert offsets == list(range(20))


def test_error_responses_carry_the_expected_codes() -> None:
    name = "rstream_errors"
    got = Counter((f.command, f.get("response_code")) for f in frames(name) if f.command.endswith("Response")
                  and f.get("response_code") not in (None, 1))
    assert got == Counter({("CreateResponse", 0x05): 1, ("QueryOffsetResponse", 0x13): 1,
                           ("SubscribeResponse", 0x02): 1, ("DeclarePublisherResponse", 0x02): 1})
    meta = [f for f in frames(name, "MetadataResponse")]
    codes = [e.child("response_code").value for f in meta for e in  # type: ignore[union-attr]
             next(x for x in f.fields if x.name == "stream_metadata").children or ()]
    assert codes.count(0x02) == 3  # stream_exists("sp-missing") and the producer's two lookups
    ids = Counter(f.id for f in findings(name))
    assert ids["rabbitmq_stream.response.refused"] >= 7
    f = facts()[name]
    assert f["query_offset"] == "OffsetNotFound" and f["create_existing"] == "StreamAlreadyExists"


def test_wrong_password() -> None:
    name = "rstream_bad_password"
    r = frames(name, "SaslAuthenticateResponse")
    assert [x.get("response_code") for x in r] == [0x08]
    bad = [f for f in findings(name) if f.severity is not Severity.NOTE]
    assert [(f.id, f.severity) for f in bad] == [("rabbitmq_stream.response.error", Severity.WARNING)]
    assert "AUTHENTICATION_FAILURE" in bad[0].message
    assert not frames(name, "Open")


# ------------------------------------------------------------------------------ engine integration
def _rewrite(src: str, dst: Path, keep) -> None:  # type: ignore[no-untyped-def]
    from analyzer.capture import read_packets
    from analyzer.pcapwrite import CaptureWriter

    pkts = list(read_packets(str(HERE / f"{src}.pcap")))
    assert {p.linktype for p in pkts} == {1}
    with open(dst, "wb") as f:
        w = CaptureWriter(f, link="ethernet")
        for i, p in enumerate(pkts):
            if keep(i, p):
                w.write_raw(p.ts, p.data)


def test_midstream_capture_has_no_warning(tmp_path: Path) -> None:
    """The consumer connection joined after its handshake and first Deliver: frames still decode,
    and nothing the capture cannot know (handshake, subscription) is judged."""
    dst = tmp_path / "mid.pcap"
    _rewrite("rstream_consume", dst, lambda i, p: i >= 108)
    evs = list(analyze_file(str(dst)))
    fr = [e for e in evs if isinstance(e, Frame)]
    assert any(f.command == "Deliver" for f in fr) and any(f.command == "QueryOffsetResponse" for f in fr)
    bad = [(f.id, f.message) for e in evs for f in (e.findings if isinstance(e, Frame) else [e])
           if f.severity is not Severity.NOTE and not f.id.startswith("tcp.")]
    assert bad == []


def test_lost_segment_resyncs(tmp_path: Path) -> None:
    """A Deliver-carrying packet lost in the middle: the engine reports the gap, the dissector drops
    the broken frame, resynchronises and decodes the Deliver frames after it."""
    name = "rstream_consume"
    first_deliver = frames(name, "Deliver")[2].packets[1]
    dst = tmp_path / "gap.pcap"
    _rewrite(name, dst, lambda i, p: i + 1 != first_deliver)
    evs = list(analyze_file(str(dst)))
    delivers = [e for e in evs if isinstance(e, Frame) and e.command == "Deliver"]
    assert len(delivers) == len(frames(name, "Deliver")) - 1
    ids = {f.id for e in evs for f in (e.findings if isinstance(e, Frame) else [e])}
    assert "tcp.gap" in ids or any(i.startswith("tcp.") for i in ids)
    assert not any(i.startswith("engine.") for i in ids)


def test_heuristic_on_another_port(tmp_path: Path) -> None:
    from analyzer.pcapwrite import TcpConversation, write_capture
    from dissectors.rabbitmq_stream.encode import handshake

    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 15552))
    conv.handshake()
    for d, raw in handshake():
        conv.send(str(d), raw)
    conv.close()
    dst = tmp_path / "other_port.pcap"
    write_capture(str(dst), [conv])
    fr = [e for e in analyze_file(str(dst)) if isinstance(e, Frame)]
    assert [f.protocol for f in fr] == ["rabbitmq_stream"] * 10
    assert fr[0].command == "PeerProperties" and fr[0].direction.value == "c2s"
