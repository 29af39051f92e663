"""Each conformance rule of the Iggy dissector fires exactly where an encoder-built conversation
breaks it (once, fed whole and one byte at a time, and from its synthetic capture through the
engine), and nowhere in clean sessions of any dialect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzer.api import Category, Direction, Finding, Frame, Severity
from analyzer.engine import analyze_file
from dissectors.iggy import IggyDissector
from dissectors.iggy import rules as R
from dissectors.iggy.connection import IggyConnection
from dissectors.iggy.encode import (
    ALSO,
    ANOMALIES,
    all_findings,
    frames,
    opened,
    request,
    response,
    run,
    session,
    v_opened,
    v_reply,
    v_request,
)
from dissectors.kit import Correlator

SYNTHETIC = Path(__file__).resolve().parent.parent / "captures" / "iggy" / "synthetic"
IDS = [r.id for r in R.RULES]


def ids(events: list) -> list[str]:
    return sorted(f.id for f in all_findings(events))


def where(events: list, rule_id: str) -> list[tuple[str | None, Finding]]:
    out: list[tuple[str | None, Finding]] = []
    for e in events:
        if isinstance(e, Frame):
            out += [(e.command, f) for f in e.findings if f.id == rule_id]
        elif e.id == rule_id:
            out.append((None, e))
    return out


def test_rule_ids_are_stable_and_complete() -> None:
    assert all(re.fullmatch(r"iggy\.[a-z_]+\.[a-z_]+", i) for i in IDS)
    assert len(IDS) == len(set(IDS))
    assert set(ANOMALIES) | {"iggy.limit.exceeded"} == set(IDS)
    assert IggyDissector().rules() == R.RULES
    assert R.ERROR_STATUS.category is Category.RESPONSE and R.REFUSED.category is Category.RESPONSE
    assert R.CHECKSUM.category is Category.CHECKSUM and R.CHECKSUM.severity is Severity.ERROR


@pytest.mark.parametrize("rule_id", sorted(ANOMALIES))
def test_each_rule_fires_exactly_once_where_intended(rule_id: str) -> None:
    want = sorted({rule_id} | ALSO.get(rule_id, frozenset()))
    for split in (None, 1, 7):
        got = ids(run(ANOMALIES[rule_id](), split=split))
        assert sorted(set(got)) == want, (split, got)
        assert got.count(rule_id) == 1, (split, got)


@pytest.mark.parametrize("rule_id", sorted(ANOMALIES))
def test_each_rules_synthetic_capture_shows_it_through_the_engine(rule_id: str) -> None:
    path = SYNTHETIC / f"rule_{rule_id.removeprefix('iggy.').replace('.', '_')}.pcap"
    events = list(analyze_file(str(path)))
    got = sorted(f.id for f in all_findings(events))
    assert sorted(set(got)) == sorted({rule_id} | ALSO.get(rule_id, frozenset()))
    assert all(e.protocol == "iggy" for e in events if isinstance(e, Frame))


@pytest.mark.parametrize("dialect", ["L0", "L1", "Z1", "Z2", "C", "V"])
def test_clean_sessions_have_nothing_but_the_refused_request(dialect: str) -> None:
    for split in (None, 1):
        got = [(f.id, f.message) for f in all_findings(run(session(dialect), split=split))]
        assert got == [("iggy.response.refused", "CREATE_STREAM_RESPONSE: status 1012 STREAM_NAME_ALREADY_EXISTS")]


def test_commands_before_login_are_reported_once_and_their_unauthenticated_answer_is_not() -> None:
    s = opened("C")
    pre = type(s)()
    pre.c(request("PING")).s(response())
    pre.c(request("GET_STATS")).s(response(40))
    pre.c(request("LOGIN_USER", "C", username="iggy", password="bad", version="0.10.0", context="")).s(response(42))
    pre.c(request("GET_STREAMS")).s(response(40))
    pre.items += s.items  # then a good login and a command that is fine
    pre.c(request("GET_STREAMS")).s(response())
    events = run(pre)
    hits = where(events, "iggy.handshake.order")
    assert [(c, f.message) for c, f in hits] == [
        ("GET_STATS", "GET_STATS before a successful login (not logged in)"),
        ("GET_STREAMS", "GET_STREAMS before a successful login (not logged in)")]
    assert ids(events) == ["iggy.handshake.order", "iggy.handshake.order", "iggy.response.refused"]  # bad password


def test_logout_ends_the_session() -> None:
    s = opened("C").c(request("LOGOUT_USER")).s(response()).c(request("GET_STREAMS")).s(response(40))
    assert ids(run(s)) == ["iggy.handshake.order"]


def test_mid_stream_conversations_judge_neither_login_nor_pairing() -> None:
    s = opened("C")
    s.items = s.items[4:]  # after the login
    s.s(response()).c(request("GET_STREAMS"))
    assert ids(run(s, midstream=True)) == []


def test_error_statuses_name_the_status_with_the_command() -> None:
    (cmd, f), = where(run(ANOMALIES["iggy.response.error"]()), "iggy.response.error")
    assert cmd == "GET_STREAM_RESPONSE" and f.message == "GET_STREAM_RESPONSE: status 1014 INVALID_STREAM_ID"
    (cmd, f), = where(run(ANOMALIES["iggy.response.unknown_status"]()), "iggy.response.unknown_status")
    assert f.message == "GET_STREAMS_RESPONSE: status 77777 UNKNOWN"


def test_the_unsolicited_disconnected_status_is_a_note_not_an_unknown_response() -> None:
    events = run(opened("C").s(response(8)))
    assert [(f.id, f.message) for f in all_findings(events)] == [
        ("iggy.response.refused", "RESPONSE: status 8 DISCONNECTED")]


def test_unanswered_requests_point_at_the_request() -> None:
    events = run(ANOMALIES["iggy.correlation.unanswered"]())
    (cmd, f), = where(events, "iggy.correlation.unanswered")
    req = [e for e in frames(events) if e.command == "GET_STATS"][0]
    assert cmd is None and f.related == req.anchor() and f.message == "GET_STATS was never answered"


def test_v_reply_number_matching_nothing_and_duplicates() -> None:
    (_, f), = where(run(ANOMALIES["iggy.correlation.unknown_request_number"]()),
                    "iggy.correlation.unknown_request_number")
    assert f.message == "reply to request number 42 that matches no outstanding request"
    (cmd, f), = where(run(ANOMALIES["iggy.correlation.duplicate"]()), "iggy.correlation.duplicate")
    assert cmd == "CREATE_STREAM"
    assert f.message == "CREATE_STREAM reuses request number 1 (the last replicated request had 1)"


def test_v_reads_share_the_next_replicated_number_and_pair_in_order() -> None:
    """As apache-iggy 0.9.0 numbers them: reads carry the number the next replicated request will
    use, so pipelined reads share it; their replies pair in order, and that is no reuse."""
    s = v_opened()
    s.c(v_request("PING", 1, session=1)).c(v_request("GET_STREAMS", 1, session=1))
    s.s(v_reply(1, 2)).s(v_reply(1, 2))
    s.c(v_request("CREATE_STREAM", 1, session=1, name="a")).s(v_reply(1, 128, 1012))
    s.c(v_request("GET_STREAMS", 2, session=1)).s(v_reply(2, 2))
    events = run(s)
    fs = list(frames(events))
    assert [f.command for f in fs[2:6]] == ["PING", "GET_STREAMS", "PING_RESPONSE", "GET_STREAMS_RESPONSE"]
    assert fs[4].request == fs[2].anchor() and fs[5].request == fs[3].anchor()
    assert ids(events) == ["iggy.response.refused"]


def test_checksum_and_message_problems_come_from_the_payload_decoders() -> None:
    (cmd, f), = where(run(ANOMALIES["iggy.message.checksum"]()), "iggy.message.checksum")
    assert cmd == "POLL_MESSAGES_RESPONSE" and "checksum" in f.message
    (cmd, f), = where(run(ANOMALIES["iggy.value.reserved"]()), "iggy.value.reserved")
    assert cmd == "POLL_MESSAGES_RESPONSE"


def test_v_header_reserved_bytes_must_be_zero() -> None:
    raw = bytearray(v_request("PING", 2, session=1))
    raw[100] = 1
    events = run(v_opened().c(bytes(raw)).s(v_reply(2, 2)))
    (cmd, f), = where(events, "iggy.value.reserved")
    assert cmd == "PING" and "62..128" in f.message
    assert ids(events) == ["iggy.value.reserved"]


def test_an_eviction_for_the_clients_release_is_a_version_finding() -> None:
    from dissectors.iggy.encode import v_eviction

    events = run(v_opened().s(v_eviction(2)))
    assert ids(events) == ["iggy.login.protocol_version", "iggy.vsr.eviction"]


def test_the_limit_capture_gives_one_finding_through_the_engine() -> None:
    events = list(analyze_file(str(SYNTHETIC / "rule_limit_exceeded.pcap.gz")))
    assert ids(events) == ["iggy.limit.exceeded"]
    assert sum(1 for e in events if isinstance(e, Frame)) == 100_001 + 4


def test_too_many_outstanding_requests_are_one_finding() -> None:
    conn = IggyConnection(False)
    for d, data, ts in opened("C").items:
        conn.feed(d, data, ts)
    assert conn.pairs is not None
    conn.pairs = Correlator.in_order(limit=5)  # the mechanism of the default 100,000, at a testable size
    out: list = []
    for i in range(8):
        out += conn.feed(Direction.C2S, request("PING"), 1.0 + i)
    out += conn.end(9.0)
    assert [f.id for f in all_findings(out)] == ["iggy.limit.exceeded"]


def test_a_cut_or_padded_register_reply_is_reported_once() -> None:
    from dissectors.iggy.encode import register_reply

    cut = v_opened()
    cut.items = cut.items[:1]
    cut.s(v_reply(1, 1, 0, register_reply()[:10]))
    events = run(cut)
    assert ids(events) == ["iggy.framing.truncated"]
    padded = v_opened()
    padded.items = padded.items[:1]
    padded.s(v_reply(1, 1, 0, register_reply() + b"\0\0"))
    assert ids(run(padded)) == ["iggy.framing.trailing"]
    assert [f.command for f in frames(run(padded))] == ["LOGIN_REGISTER", "LOGIN_REGISTER_RESPONSE"]
