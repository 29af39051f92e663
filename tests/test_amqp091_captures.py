"""Exact facts of the recorded AMQP 0-9-1 captures (see captures/amqp091/MANIFEST.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame, Severity
from analyzer.engine import analyze_file

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp091"
CLEAN = ["pika_confirms", "pika_tx", "pika_consume", "pika_get", "pika_large", "pika_e2e", "pika_heartbeat",
         "aiopika_session"]


@cache
def events(name: str) -> tuple[list[Frame], list[Finding]]:
    evs = list(analyze_file(str(CAPS / f"{name}.pcap")))
    frames = [e for e in evs if isinstance(e, Frame)]
    findings = [e for e in evs if isinstance(e, Finding)] + [f for fr in frames for f in fr.findings]
    return frames, findings


def cmd(frames: list[Frame], command: str) -> list[Frame]:
    return [f for f in frames if f.command == command]


def message(frame: Frame) -> dict:
    m = next(f for f in frame.fields if f.name == "message")
    return {c.name: c.value for c in m.children or ()}


def messages(frames: list[Frame], method: str) -> list[dict]:
    out = []
    for f in frames:
        if any(x.name == "message" for x in f.fields):
            m = message(f)
            if m["method"] == method:
                out.append(m)
    return out


@pytest.mark.parametrize("name", CLEAN)
def test_clean_sessions_have_no_warning(name: str) -> None:
    frames, findings = events(name)
    bad = [f for f in findings if f.severity.rank >= Severity.WARNING.rank]
    assert bad == [], [(f.id, f.message) for f in bad]
    assert all(f.protocol == "amqp091" for f in frames)
    assert frames[0].command == "ProtocolHeader" and frames[0].dialect == "0-9-1"


def test_confirms_matched_to_publishes() -> None:
    frames, findings = events("pika_confirms")
    pubs = cmd(frames, "Basic.Publish")
    assert [p.get("publish_seq") for p in pubs] == list(range(1, 12))
    acks = [a for a in cmd(frames, "Basic.Ack") if a.direction == "s2c"]
    assert [a.get("confirms") for a in acks] == [[i] for i in range(1, 12)]
    bodies = [m["body"] for m in messages(frames, "Basic.Publish")]
    assert bodies[:10] == [json.dumps({"n": i}) for i in range(10)] and bodies[10] == "unroutable"
    headers = [f for f in cmd(frames, "ContentHeader") if f.direction == "c2s"]
    assert headers[3].get("content_type") == "application/json" and headers[3].get("delivery_mode") == 2
    assert headers[3].get("timestamp") == datetime.fromtimestamp(1700000003, UTC)
    table = next(f for f in headers[3].fields if f.name == "headers")
    assert {c.name: c.value for c in table.children} == {"seq": 3, "src": "pika"}
    ret = cmd(frames, "Basic.Return")
    assert len(ret) == 1 and ret[0].get("reply_code") == 312 and ret[0].get("routing_key") == "sp.nowhere"
    assert ret[0].info.startswith("Basic.Return 312 NO_ROUTE")
    assert messages(frames, "Basic.Return")[0]["body"] == "unroutable"
    assert [f.id for f in findings] == ["amqp091.reply.returned"]


def test_transactions() -> None:
    frames, _ = events("pika_tx")
    assert len(cmd(frames, "Tx.Select")) == len(cmd(frames, "Tx.CommitOk")) == len(cmd(frames, "Tx.RollbackOk")) == 1
    assert [m["body"] for m in messages(frames, "Basic.Publish")] == [
        "commit-0", "commit-1", "commit-2", "rollback-0", "rollback-1"]
    passive = cmd(frames, "Queue.DeclareOk")[-1]
    assert passive.get("message_count") == 3 and passive.get("queue") == "sp.tx"


def test_consume_ack_nack_reject() -> None:
    frames, _ = events("pika_consume")
    qos = cmd(frames, "Basic.Qos")[0]
    assert qos.get("prefetch_count") == 5
    delivers = cmd(frames, "Basic.Deliver")
    assert len(delivers) == 11 and {d.get("consumer_tag") for d in delivers} == {"sp-consumer"}
    assert [d.get("delivery_tag") for d in delivers] == list(range(1, 12))
    assert sum(bool(d.get("redelivered")) for d in delivers) == 1
    bodies = [m["body"] for m in messages(frames, "Basic.Deliver")]
    assert sorted(bodies[:10]) == [f"msg-{i}" for i in range(10)] and bodies[10] == "msg-5"
    acks = [a for a in cmd(frames, "Basic.Ack") if a.direction == "c2s"]
    assert len(acks) == 7 and sum(bool(a.get("multiple")) for a in acks) == 1
    assert len(cmd(frames, "Basic.Nack")) == 2 and len(cmd(frames, "Basic.Reject")) == 1
    assert cmd(frames, "Basic.Reject")[0].get("requeue") is False


def test_basic_get_and_get_empty() -> None:
    frames, _ = events("pika_get")
    assert len(cmd(frames, "Basic.Get")) == 4 and len(cmd(frames, "Basic.GetEmpty")) == 1
    assert [m["body"] for m in messages(frames, "Basic.GetOk")] == ["first", "second", "third"]
    assert [g.get("message_count") for g in cmd(frames, "Basic.GetOk")] == [2, 1, 0]


def test_large_message_reassembled_over_many_body_frames() -> None:
    frames, _ = events("pika_large")
    assert cmd(frames, "Connection.TuneOk")[0].get("frame_max") == 4096
    big = bytes((i * 7 + 3) % 251 for i in range(100_000))
    pub = [f for f in frames if f.direction == "c2s" and f.command == "ContentBody"]
    assert [f.get("size") for f in pub[:25]] == [4088] * 24 + [1888]
    assert all(f.size <= 4096 for f in frames)
    for method in ("Basic.Publish", "Basic.GetOk"):
        binary, text = messages(frames, method)
        assert binary["body_size"] == 100_000 and binary["body_frames"] == 25
        assert binary["body"] == big[:64]  # binary bodies: size plus a short preview
        assert text["body_size"] == 19_000 and text["body_frames"] == 5
        assert text["body"] == ("line of text %05d\n" * 1000) % tuple(range(1000))
    # The completing frame says so in its Info line.
    done = [f for f in pub if "message" in f.info]
    assert done[0].info.endswith("[Basic.Publish message 100000 bytes (binary)]")


def test_exchange_to_exchange_bindings() -> None:
    frames, _ = events("pika_e2e")
    bind = cmd(frames, "Exchange.Bind")[0]
    assert bind.info == "Exchange.Bind dx=sp.dst sx=sp.src bk=orders.#"
    assert cmd(frames, "Exchange.UnbindOk")[0].code == 40 << 16 | 51
    assert [m["body"] for m in messages(frames, "Basic.GetOk")] == ["routed twice"]
    assert [p.info for p in cmd(frames, "Basic.Publish")] == [
        "Basic.Publish x=sp.src rk=orders.eu.new", "Basic.Publish x=sp.src rk=invoices.eu"]


def test_channel_error_passive_declare() -> None:
    frames, findings = events("pika_channel_error")
    close = [f for f in cmd(frames, "Channel.Close") if f.direction == "s2c"]
    assert len(close) == 1
    c = close[0]
    assert (c.get("reply_code"), c.get("class_id"), c.get("method_id"), c.get("channel")) == (404, 50, 10, 1)
    assert c.info.startswith("Channel.Close 404 NOT_FOUND")
    warn = [f for f in findings if f.severity.rank >= Severity.WARNING.rank]
    assert [(f.id, f.category) for f in warn] == [("amqp091.reply.channel_error", "response")]


def test_failed_login() -> None:
    frames, findings = events("pika_bad_login")
    assert [f.command for f in frames] == ["ProtocolHeader", "Connection.Start", "Connection.StartOk",
                                           "Connection.Close"]
    close = frames[-1]
    assert close.get("reply_code") == 403 and close.info.startswith("Connection.Close 403 ACCESS_REFUSED")
    # RabbitMQ refuses the login with connection.close 403 and drops the socket without waiting for
    # close-ok: one event, one finding (not also handshake.incomplete, nor the close as unanswered).
    assert [(f.id, f.severity) for f in findings] == [("amqp091.reply.connection_error", "error")]
    assert findings[0].frame == close.packets[1]


def test_heartbeats() -> None:
    frames, findings = events("pika_heartbeat")
    assert cmd(frames, "Connection.TuneOk")[0].get("heartbeat") == 1
    hb = cmd(frames, "Heartbeat")
    assert len(hb) == 14 and {f.get("channel") for f in hb} == {0}
    assert {f.direction for f in hb} == {"c2s", "s2c"}
    assert not [f for f in findings if f.id == "amqp091.heartbeat.missed"]


def test_aio_pika_session() -> None:
    frames, _ = events("aiopika_session")
    assert [p.get("publish_seq") for p in cmd(frames, "Basic.Publish")] == list(range(1, 21))
    server_acks = [a for a in cmd(frames, "Basic.Ack") if a.direction == "s2c"]
    assert sorted(s for a in server_acks for s in a.get("confirms")) == list(range(1, 21))
    client_acks = [a for a in cmd(frames, "Basic.Ack") if a.direction == "c2s"]
    assert sorted(a.get("delivery_tag") for a in client_acks) == list(range(1, 21))
    assert [m["body"] for m in messages(frames, "Basic.Deliver")] == [f"aio-{i}" for i in range(20)]
    hdr = [f for f in cmd(frames, "ContentHeader") if f.direction == "c2s"][5]
    table = next(f for f in hdr.fields if f.name == "headers")
    got = {c.name: c for c in table.children}
    assert got["i"].value == 5
    assert [x.value for x in got["tags"].children] == ["a", "b"]
    assert {c.name: c.value for c in got["nested"].children} == {"ok": True}
