"""The Iggy dissector on encoder-built traffic: framing, every dialect told apart from the bytes,
in-order and request-number pairing with latency, Info lines, V headers, options, heuristics and
the command table."""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest

from analyzer.api import Direction, Frame, Severity
from analyzer.engine import analyze_file
from dissectors.iggy import IggyDissector
from dissectors.iggy.commands import BY_NAME, COMMANDS, SEND_PAYLOAD
from dissectors.iggy.connection import IggyConnection
from dissectors.iggy.dialects import DIALECTS, accepts, from_sdk_version, pack_version, unpack_version
from dissectors.iggy.encode import (
    MESSAGES,
    PROTOCOL_0_11,
    Script,
    _stored,
    all_findings,
    frames,
    opened,
    payload,
    polled,
    register_reply,
    request,
    response,
    run,
    session,
    v_eviction,
    v_opened,
    v_reply,
    v_request,
)
from dissectors.iggy.status import CLIENT_MISTAKES, STATUS, status_text

D = IggyDissector()
SYNTHETIC = Path(__file__).resolve().parent.parent / "captures" / "iggy" / "synthetic"
ORDER = {"L0": ["PING", "LOGIN_USER", "CREATE_STREAM", "CREATE_TOPIC", "SEND_MESSAGES", "POLL_MESSAGES",
                "CREATE_CONSUMER_GROUP", "JOIN_CONSUMER_GROUP", "STORE_CONSUMER_OFFSET", "GET_CONSUMER_OFFSET",
                "CREATE_STREAM", "PING"]}


def requests(events: list) -> list[Frame]:
    return [f for f in frames(events) if f.direction is Direction.C2S]


def warnings(events: list) -> list:
    return [f for f in all_findings(events) if f.severity.rank >= Severity.WARNING.rank]


@pytest.mark.parametrize("dialect", ["L0", "L1", "Z1", "Z2", "C"])
def test_classic_session_detects_its_dialect_and_pairs_every_response(dialect: str) -> None:
    events = run(session(dialect))
    fs = list(frames(events))
    assert [f.command for f in fs if f.direction is Direction.C2S] == ORDER["L0"]
    # Once the bytes decide, every frame carries the dialect; the connection ends on it.
    last = fs[-1]
    assert last.dialect == dialect
    assert fs[-2].dialect == dialect and fs[-3].dialect == dialect
    # In order: every response names the request just before it, with its latency.
    for req, resp in zip(fs[::2], fs[1::2], strict=True):
        assert resp.request == req.anchor()
        assert resp.latency == pytest.approx(0.001, abs=1e-6)
        assert resp.command == req.command + "_RESPONSE"
    assert warnings(events) == []
    # The one refused request (the duplicate stream name) is a note naming its status.
    notes = [f for f in all_findings(events)]
    assert [(n.id, n.message) for n in notes] == [
        ("iggy.response.refused", "CREATE_STREAM_RESPONSE: status 1012 STREAM_NAME_ALREADY_EXISTS")]


@pytest.mark.parametrize("dialect", ["L0", "L1", "Z1", "Z2", "C", "V"])
def test_a_session_fed_one_byte_at_a_time_decodes_the_same(dialect: str) -> None:
    whole = [(f.offset, f.command, f.info, f.dialect) for f in frames(run(session(dialect)))]
    single = [(f.offset, f.command, f.info, f.dialect) for f in frames(run(session(dialect), split=1))]
    assert single == whole


def test_dialect_l0_needs_the_2023_layouts_and_l1_the_later_ones() -> None:
    # LOGIN_USER without version fields leaves L0 and L1; so does CREATE_TOPIC (servers up to 0.1.8,
    # inside L1, read the 2023 layout); the consumer (u32 or Identifier) tells them apart.
    conn = IggyConnection(False)
    s = opened("L0")
    for d, data, ts in s.items:
        conn.feed(d, data, ts)
    assert conn.cands == ["L1", "L0"]
    conn.feed(Direction.C2S, request("CREATE_TOPIC", "L0", stream_id=1, topic_id=1, partitions_count=1,
                                     message_expiry=0, name="t"), 1.0)
    assert conn.cands == ["L1", "L0"]
    conn.feed(Direction.C2S, request("GET_CONSUMER_OFFSET", "L0", consumer={"kind": 1, "id": 7}, stream_id=1,
                                     topic_id=1, partition_id=1), 1.0)
    assert conn.cands == ["L0"] and conn.dialect == "L0"


def test_zero_copy_dialects_are_told_apart_by_header_size_and_create_layouts() -> None:
    # Z1 vs Z2: CREATE_STREAM still carries an id in Z1.
    conn = IggyConnection(False, None)
    conn.feed(Direction.C2S, request("CREATE_STREAM", "Z1", stream_id=1, name="orders"), 0.0)
    assert conn.cands == ["Z1", "L1", "L0"]  # the legacy ones have it too
    conn.feed(Direction.C2S, request("SEND_MESSAGES", "Z1", stream_id=1, topic_id=1, messages=MESSAGES), 0.0)
    assert conn.cands == ["Z1"]
    # Z2 vs C: the message header is 56 or 64 bytes.
    for dialect in ("Z2", "C"):
        conn = IggyConnection(False, None)
        conn.feed(Direction.C2S, request("SEND_MESSAGES", dialect, stream_id=0, topic_id=0, messages=MESSAGES), 0.0)
        assert dialect in conn.cands and conn.cands[0] == dialect
        assert ("C" in conn.cands) == (dialect == "C")


def test_sdk_version_in_login_is_preferred_until_the_bytes_decide() -> None:
    assert [from_sdk_version(v) for v in ("0.6.202", "0.7.0", "0.8.0", "0.9.0", "0.10.0", "0.11.0", "x")] == [
        "L1", "Z1", "Z2", "C", "C", "V", None]
    conn = IggyConnection(False)
    conn.feed(Direction.C2S, request("LOGIN_USER", "Z1", username="u", password="p", version="0.7.0", context=""), 0.0)
    assert conn.dialect == "Z1"
    assert conn.cands[0] == "Z1" and "Z2" in conn.cands  # a preference, not a proof


def test_the_dialect_option_fixes_the_dialect() -> None:
    fixed = D.configured({"dialect": "L0"})
    conn = fixed.connection(False)
    assert conn.dialect == "L0"
    ev = conn.feed(Direction.C2S, request("LOGIN_USER", "C", username="u", password="p", version="0.10.0",
                                          context=""), 0.0)
    # Read as L0, C's login has bytes after the password.
    assert [f.id for f in all_findings(ev)] == ["iggy.framing.trailing"]
    assert D.connection(False).dialect is None
    with pytest.raises(ValueError):
        D.configured({"dialect": "L9"})
    assert {o.name: o.choices for o in D.options} == {"dialect": ("auto", "L0", "L1", "Z1", "Z2", "C", "V")}


def test_mid_stream_with_a_fixed_dialect_decodes_from_the_first_frame_start() -> None:
    conn = D.configured({"dialect": "C"}).connection(True)
    tail = request("GET_STREAM", "C", stream_id=3)[5:]  # the end of a frame the capture missed
    ev = conn.feed(Direction.C2S, tail + request("GET_STREAMS", "C"), 0.0)
    assert [f.command for f in frames(ev)] == ["GET_STREAMS"]
    assert all_findings(ev) == []


def test_info_lines() -> None:
    s = opened("C")
    ten = [{"id": 0, "payload": bytes([i])} for i in range(10)]
    s.c(request("SEND_MESSAGES", "C", stream_id=1, topic_id="orders", messages=ten)).s(response())
    s.step = 0.0012
    s.c(request("POLL_MESSAGES", "C", consumer={"kind": 1, "id": 1}, stream_id=1, topic_id="orders",
                partition_id=None, strategy={"kind": 5, "value": 0}, count=6, auto_commit=1))
    s.s(polled("C", _stored("C", ten[:6])))
    s.step = 0.001
    s.c(request("GET_STREAM", "C", stream_id=7)).s(response(1009))
    s.s(response(1009))
    events = run(s)
    info = [f.info for f in frames(events)]
    assert info[2] == "LOGIN_USER user=iggy"
    assert info[4] == "SEND_MESSAGES stream=1 topic=orders messages=10"
    assert info[6] == "POLL_MESSAGES stream=1 topic=orders partition=none strategy=next count=6"
    assert info[7] == "response to POLL_MESSAGES status=OK messages=6 (1.2 ms)"
    assert info[9] == "response to GET_STREAM status=1009 STREAM_ID_NOT_FOUND (1.0 ms)"
    assert info[10] == "response status=1009 STREAM_ID_NOT_FOUND"


def test_status_names() -> None:
    assert STATUS[1009] == "STREAM_ID_NOT_FOUND" and STATUS[40] == "UNAUTHENTICATED"
    assert status_text(0) == "OK" and status_text(2010) == "2010 TOPIC_ID_NOT_FOUND"
    assert 3 in CLIENT_MISTAKES and 40 in CLIENT_MISTAKES and 4101 in CLIENT_MISTAKES
    assert 1012 not in CLIENT_MISTAKES and 42 not in CLIENT_MISTAKES and 5 not in CLIENT_MISTAKES


def test_v_session_pairs_by_request_number_and_decodes_the_login() -> None:
    events = run(session("V"))
    fs = list(frames(events))
    assert {f.dialect for f in fs} == {"V"}
    login, reply = fs[0], fs[1]
    assert login.command == "LOGIN_REGISTER" and login.info == "LOGIN_REGISTER user=iggy req=1 protocol=0.11.0"
    cv = next(f for f in login.fields if f.name == "client_version")
    assert [(k.name, k.value) for k in cv.children or ()] == [
        ("protocol_version", PROTOCOL_0_11), ("sdk_name", "iggy-rust"), ("sdk_version", "0.11.0")]
    assert cv.children[0].display == "0.11.0"
    assert reply.request == login.anchor() and reply.info.startswith("response to LOGIN_REGISTER status=OK user_id=0")
    header = reply.fields[0]
    assert {k.name: k.value for k in header.children or ()}["request"] == 1
    assert [f.command for f in fs if f.direction is Direction.C2S] == [
        "LOGIN_REGISTER", "PING", "CREATE_STREAM", "CREATE_TOPIC", "SEND_MESSAGES", "POLL_MESSAGES", "CREATE_STREAM"]
    assert fs[11].info == "response to POLL_MESSAGES status=OK messages=3 req=6 (1.0 ms)"


def test_v_replies_match_by_number_not_by_order() -> None:
    s = v_opened()
    s.c(v_request("PING", 2, session=1)).c(v_request("GET_STREAMS", 3, session=1))
    s.s(v_reply(3, 2)).s(v_reply(2, 2))
    fs = list(frames(run(s)))
    assert [(f.command, f.info.split(" (")[0]) for f in fs[4:]] == [
        ("GET_STREAMS_RESPONSE", "response to GET_STREAMS status=OK req=3"),
        ("PING_RESPONSE", "response to PING status=OK req=2")]
    assert fs[4].request == fs[3].anchor() and fs[5].request == fs[2].anchor()


def test_v_eviction_names_its_reason_and_ends_the_session() -> None:
    s = v_opened().c(v_request("PING", 2, session=1)).s(v_eviction(13))
    events = run(s)
    ev = list(frames(events))[-1]
    assert ev.info == "EVICTION reason=13 STALE_CLIENT"
    assert [f.id for f in all_findings(events)] == ["iggy.vsr.eviction"]  # the PING is not "unanswered"


def test_protocol_version_packing_and_acceptance() -> None:
    v = pack_version(0, 11, 0)
    assert v == 11 << 10 and unpack_version(v) == (0, 11, 0)
    assert unpack_version(pack_version(1, 2, 3)) == (1, 2, 3)
    assert accepts(v, pack_version(0, 11, 5)) and accepts(v, pack_version(0, 10, 0))
    assert not accepts(v, pack_version(0, 12, 0))
    assert not accepts(v, pack_version(0, 10, 0), minimum=pack_version(0, 11, 0))
    s = Script()
    s.c(v_request("LOGIN_REGISTER", 1, client_version={"protocol_version": pack_version(0, 10, 0), "sdk_name": "x",
                                                       "sdk_version": "1"}, username="u", password="p", context=""))
    s.s(v_reply(1, 1, 0, register_reply()))
    assert all_findings(run(s)) == []  # 0.10 is not above the server's 0.11: accepted


def test_every_command_of_every_dialect_round_trips_through_its_layout() -> None:
    """Each layout decodes what the encoder writes from the same layout, exactly."""
    from dissectors.iggy import payloads
    n = 0
    for cmd in COMMANDS.values():
        for dialects, layout in cmd.layouts:
            if layout is SEND_PAYLOAD:
                continue
            values = {f.name: _sample(f) for f in layout.fields if not f.optional}
            for dialect in dialects:
                raw = layout.write(values)
                if layout is cmd.layout(dialect):
                    assert raw == payload(cmd.name, dialect, **values)  # what the encoder writes
                decoded = payloads.request(cmd, dialect, b"\0" * 8 + raw, 8)
                assert decoded.fits(), (cmd.name, dialect, decoded.problems, decoded.cut, decoded.trailing)
                n += 1
    assert n > 200


def _sample(f: object) -> object:
    from dissectors.iggy import commands as c
    from dissectors.iggy import types as t

    spec = f  # schema.F
    typ = spec.type  # type: ignore[attr-defined]
    if isinstance(typ, t.Identifier):
        return 3
    if isinstance(typ, t.Consumer):
        return {"kind": 1, "id": 4}
    if isinstance(typ, t.PollingStrategy):
        return {"kind": 1, "value": 0}
    if isinstance(typ, t.Partitioning):
        return None
    if isinstance(typ, t.OptionalPartition):
        return 1
    if isinstance(typ, t.Permissions):
        return {"global": {"read_streams": True}, "streams": [{"stream_id": 1, "topics": [{"topic_id": 2}]}]}
    if isinstance(typ, t.Text):
        return "name"
    if isinstance(typ, c.Maybe):
        return None
    if isinstance(typ, c.Struct):
        return {g.name: _sample(g) for g in typ.fields}
    if typ is c.OPTIONS:
        return []
    if hasattr(typ, "element"):
        return [1]
    if getattr(typ, "enum", None):
        return min(typ.enum)  # type: ignore[attr-defined]
    return 1


def test_commands_cover_the_spec_table() -> None:
    codes = {1, 10, 11, 12, 13, 20, 21, 22, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 100, 101, 102,
             120, 121, 122, 200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 304, 305, 402, 403, 503, 600, 601, 602,
             603, 604, 605, 606}
    assert set(COMMANDS) == codes
    assert set(DIALECTS["L0"].commands) < set(DIALECTS["L1"].commands) < set(DIALECTS["C"].commands)
    assert 12 in DIALECTS["Z2"].commands and 12 not in DIALECTS["Z1"].commands
    assert {13, 40, 45, 606} <= set(DIALECTS["V"].commands) and 40 not in DIALECTS["C"].commands
    assert not BY_NAME["PING"].auth and not BY_NAME["LOGIN_USER"].auth and BY_NAME["GET_STATS"].auth
    docs = D.commands()
    assert any(d.name == "POLL_MESSAGES" and "L0" in d.versions and "u32" in d.fields for d in docs)


def test_sniff_claims_iggy_and_nothing_else() -> None:
    assert D.sniff(request("PING")).confidence >= 0.5
    assert D.sniff(request("LOGIN_USER", "C", username="iggy", password="iggy", version="0.10.0",
                           context="")).from_client is True
    assert D.sniff(request("PING") + request("LOGIN_USER", "L0", username="a", password="b")).confidence >= 0.5
    assert D.sniff(v_request("PING", 1)).confidence >= 0.5
    http = b"GET /api/streams HTTP/1.1\r\nHost: localhost:8090\r\nUser-Agent: curl/8.0\r\n\r\n"
    post = b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd"
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    tls = bytes.fromhex("160301020001000200030376") + bytes(500)
    for data in (http, post, reply, tls, b"\x00" * 64, b"SSH-2.0-OpenSSH_9.6\r\n"):
        assert D.sniff(data).confidence < 0.5, data[:16]
    rng = random.Random(9)
    for _ in range(5000):
        data = rng.randbytes(rng.randrange(1, 300))
        assert D.sniff(data).confidence < 0.5, data.hex()
    # A PING frame followed by something that is no frame is not Iggy either.
    assert D.sniff(request("PING") + b"GET / HTTP/1.1\r\n").confidence == 0.0


def test_v_framing_is_recognised_from_the_first_bytes_even_split() -> None:
    s = session("V")
    conn = IggyConnection(False)
    first = s.items[0][1]
    assert conn.feed(Direction.C2S, first[:40], 0.0) == []  # cannot tell yet
    ev = conn.feed(Direction.C2S, first[40:], 0.0)
    assert conn.framing == "vsr" and [f.command for f in frames(ev)] == ["LOGIN_REGISTER"]


def test_end_to_end_through_the_engine_on_the_synthetic_l0_capture() -> None:
    fs = [e for e in analyze_file(str(SYNTHETIC / "l0_session.pcap")) if isinstance(e, Frame)]
    assert {f.protocol for f in fs} == {"iggy"}
    assert [f.command for f in fs if f.direction is Direction.C2S] == ORDER["L0"]
    assert fs[-1].dialect == "L0"
    poll = next(f for f in fs if f.command == "POLL_MESSAGES_RESPONSE")
    assert poll.info == "response to POLL_MESSAGES status=OK messages=3 (1.0 ms)"
    assert poll.request is not None and poll.latency == pytest.approx(0.001, abs=1e-4)


def test_cli_inspect_shows_dialect_and_info(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from analyzer.cli import app

    out = CliRunner().invoke(app, ["inspect", str(SYNTHETIC / "c_session.pcap"), "--format", "summary"]).output
    assert "LOGIN_USER user=iggy" in out and "response to POLL_MESSAGES status=OK messages=3" in out
    tree = CliRunner().invoke(app, ["inspect", str(SYNTHETIC / "l0_session.pcap"), "--dialect", "iggy=L0",
                                    "--max-frames", "3"]).output
    assert "iggy/L0" in tree
    flows = CliRunner().invoke(app, ["flows", str(SYNTHETIC / "z2_session.pcap")]).output
    assert "iggy/Z2" in flows


def test_a_request_too_short_for_its_code_is_a_frame_and_the_stream_goes_on() -> None:
    s = opened().c(struct.pack("<I", 0)).c(request("PING")).s(response(3)).s(response())
    events = run(s)
    fs = list(frames(events))
    assert [f.command for f in fs[4:]] == ["INVALID", "PING", "INVALID_RESPONSE", "PING_RESPONSE"]
    assert [f.id for f in all_findings(events)] == ["iggy.size.too_short"]


def test_every_field_of_every_iggy_capture_is_in_the_catalogue() -> None:
    from dissectors.iggy.catalog import field_name

    names = {d.name: d for d in D.fields()}
    assert all(n.startswith("iggy.") for n in names)
    captures = sorted([*SYNTHETIC.parent.glob("*.pcap"), *SYNTHETIC.glob("*.pcap")])
    missing: dict[str, str] = {}

    def walk(cmd: str, fields: list, prefix: tuple[str, ...] = (), elements: bool = False, rep: bool = False) -> None:
        for f in fields:
            path = prefix if elements else (*prefix, f.name)
            r = rep or f.is_list
            if not elements:
                name = field_name(cmd, path)
                d = names.get(name)
                if d is None or d.repeated != r:
                    missing.setdefault(name, cmd)
            if f.children:
                walk(cmd, f.children, path, f.is_list, r)

    for p in captures:
        for e in analyze_file(str(p)):
            if isinstance(e, Frame) and e.protocol == "iggy":
                walk(e.command, e.fields)
    # Every name must be dotted snake_case (the catalogue refuses others): a repeated structure is one
    # list field with ``[i]`` elements, as the JSON contract says, never fields named ``x[0]``, ``x[1]``.
    assert missing == {}, f"not catalogued (or named per element): {sorted(missing)[:12]}"


def test_a_v_conversation_joined_mid_stream_is_recognised_without_the_option() -> None:
    items = session("V").items
    conn = IggyConnection(True)
    out: list = []
    first = items[8]  # the SEND_MESSAGES request: start 100 bytes into it
    out += conn.feed(first[0], first[1][100:], first[2])
    for d, data, ts in items[9:]:
        out += conn.feed(d, data, ts)
    out += conn.end(9.0)
    assert conn.framing == "vsr"
    # The reply to the request the capture cut answers nothing known; the rest pairs as usual.
    assert [f.command for f in frames(out)] == ["RESPONSE", "POLL_MESSAGES", "POLL_MESSAGES_RESPONSE",
                                                "CREATE_STREAM", "CREATE_STREAM_RESPONSE"]
    assert {f.id for f in all_findings(out)} == {"iggy.response.refused"}


def test_decode_as_and_heuristics_on_another_port(tmp_path: Path) -> None:
    path = tmp_path / "other_port.pcap"
    session("C").pcap(str(path), port=9999)
    by_heuristic = [e for e in analyze_file(str(path)) if isinstance(e, Frame)]
    assert by_heuristic and {f.protocol for f in by_heuristic} == {"iggy"}
    forced = [e for e in analyze_file(str(path), decode_as={9999: "iggy"}) if isinstance(e, Frame)]
    assert [f.info for f in forced] == [f.info for f in by_heuristic]
    assert forced[-1].dialect == "C"
    v = tmp_path / "v_other_port.pcap"
    session("V").pcap(str(v), port=9998)
    assert {e.dialect for e in analyze_file(str(v)) if isinstance(e, Frame)} == {"V"}


def test_identifier_numbering_tells_zero_based_dialects() -> None:
    conn = IggyConnection(False)
    conn.feed(Direction.C2S, request("GET_STREAM", "C", stream_id=0), 0.0)
    assert conn.cands == ["C", "Z2"] and conn.dialect == "C"  # stream 0 exists from server-0.6 on
    conn = IggyConnection(False)
    conn.feed(Direction.C2S, request("GET_TOPIC", "C", stream_id=1, topic_id="orders"), 0.0)
    assert conn.cands == ["C", "Z2", "Z1", "L1", "L0"] and conn.dialect is None  # no evidence yet
    # A login that prefers Z1, then stream 0: Z1 cannot name it.
    conn.feed(Direction.C2S, request("LOGIN_USER", "Z1", username="u", password="p", version="0.7.0", context=""),
              0.0)
    assert conn.dialect == "Z1"
    conn.feed(Direction.C2S, request("DELETE_STREAM", "Z1", stream_id=0), 0.0)
    assert conn.cands == ["C", "Z2"]


@pytest.mark.parametrize("layout", range(1, 4))
def test_older_l1_topic_layouts_are_decoded_too(layout: int) -> None:
    from dissectors.iggy import payloads

    cmd = BY_NAME["CREATE_TOPIC"]
    older = cmd.candidates("L1")[layout]
    values = {"stream_id": 1, "topic_id": 2, "partitions_count": 3, "compression": 1, "message_expiry": 60,
              "max_topic_size": 0, "replication_factor": 1, "name": "t"}
    raw = b"\0" * 8 + older.write({f.name: values[f.name] for f in older.fields})
    got = payloads.request(cmd, "L1", raw, 8)
    assert got.fits() and {f.name: f.value for f in got.fields}["message_expiry"] == 60
    conn = IggyConnection(False, "L1")
    for d, data, ts in opened("L1").items:
        conn.feed(d, data, ts)
    ev = conn.feed(Direction.C2S, struct.pack("<II", len(raw) - 4, 302) + raw[8:], 1.0)
    assert [f.info for f in frames(ev)] == ["CREATE_TOPIC stream=1 name=t partitions=3"]
    assert all_findings(ev) == []


_MESSAGE_TEXT = re.compile(r"(?:offset (\d+), )?(\d+) bytes(?:, (\d+) headers)?")


def _messages(fields: list | None):  # noqa: ANN202 - a generator of Fields
    for f in fields or ():
        if f.name.startswith("[") and f.child("payload") is not None:
            yield f
        else:
            yield from _messages(f.children)


def test_every_message_is_worded_from_its_fields() -> None:
    """A message's display, however it was made (lazy, or eager when cut off): its offset when
    polled, its payload's size and its header count, as its fields give them."""
    forms = set()
    for path in sorted((Path(__file__).resolve().parent.parent / "captures" / "iggy").rglob("*.pcap*")):
        for ev in analyze_file(str(path)):
            for m in _messages(getattr(ev, "fields", None)):
                match = _MESSAGE_TEXT.fullmatch(m.display)
                assert match, (path.name, m.display)
                offset, size, headers = match.groups()
                assert int(size) == m.child("payload").size
                n = m.child("headers")
                assert int(headers or 0) == (n.value if n is not None else 0)
                if offset is not None:
                    assert int(offset) == m.child("offset").value
                forms.add((offset is not None, headers is not None))
    assert forms == {(False, False), (False, True), (True, False), (True, True)}
