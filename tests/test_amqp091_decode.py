"""Decoding every method, the content header and field tables: our encoder, pamqp's encoder, round trips."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as pc
from pamqp import frame as pframe

from analyzer.api import Direction, Frame
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from dissectors.amqp091.methods import BY_NAME, METHODS
from dissectors.amqp091.wire import LONGSTR, OCTET, SHORTSTR, TABLE, Tagged
from dissectors.schema import Bit, field_values

HEAD = {"frame_type", "channel", "size", "class", "method", "publish_seq", "confirms", "message", "response_time"}


def decode_one(raw: bytes, direction: Direction = Direction.C2S) -> Frame:
    conn = Amqp091Dissector().connection(True)  # midstream: no handshake expectations
    frames = [e for e in conn.feed(direction, raw, 0.0) if isinstance(e, Frame)]
    assert len(frames) == 1
    return frames[0]


def sample(spec_type: object, i: int) -> object:
    if isinstance(spec_type, Bit):
        return bool(i % 2)
    if spec_type is SHORTSTR or spec_type is LONGSTR:
        return f"s{i}"
    if spec_type is TABLE:
        return {"k": i, "s": "v"}
    if spec_type is OCTET:
        return i % 256
    return i + 1


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_method_round_trips(name: str) -> None:
    meth = BY_NAME[name]
    args = {f.name: sample(f.type, i) for i, f in enumerate(meth.layout.fields)}
    raw = E.method(name, 0 if meth.class_id == 10 else 3, args)
    fr = decode_one(raw)
    assert fr.command == name and fr.code == meth.class_id << 16 | meth.method_id
    got = field_values([f for f in fr.fields if f.name not in HEAD])
    assert got == args
    assert not [f for f in fr.findings if f.id.startswith(("amqp091.method.over", "amqp091.method.under"))]


PAMQP = [c for c in pc.__dict__.values() if isinstance(c, type)]


def pamqp_methods() -> list[type]:
    out = []
    for cls in PAMQP:
        for obj in vars(cls).values():
            if isinstance(obj, type) and isinstance(getattr(obj, "index", None), int) and obj.name != "Basic.Properties":
                out.append(obj)
    return out


@pytest.mark.parametrize("cls", pamqp_methods(), ids=lambda c: c.name)
def test_every_pamqp_method_is_known_by_the_same_name_and_layout(cls: type) -> None:
    meth = METHODS[cls.index]
    assert meth.name == cls.name
    args = {f.name: sample(f.type, i) for i, f in enumerate(meth.layout.fields)}
    raw = E.method(meth.name, 0 if meth.class_id == 10 else 1, args)
    consumed, _ch, obj = pframe.unmarshal(raw)
    assert consumed == len(raw) and obj.name == meth.name
    theirs = {("type" if k == "exchange_type" else k.rstrip("_")): v for k, v in obj}
    for k, v in args.items():
        t = theirs[k]
        assert (dict(t) if isinstance(t, dict) else t) == v, k


def test_field_table_tags_as_rabbitmq_encodes_them() -> None:
    table = {
        "t": True, "b": Tagged("b", -3), "B": Tagged("B", 250), "s": Tagged("s", -300), "u": Tagged("u", 60000),
        "I": -70000, "i": Tagged("i", 3_000_000_000), "l": -(2**40), "f": Tagged("f", 1.5), "d": 2.25,
        "D": Decimal("3.14"), "S": "text", "x": b"\x00\x01", "T": datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
        "V": None, "A": [1, "two", [3]], "F": {"inner": {"deep": 1}},
    }
    fr = decode_one(E.method("Queue.Declare", 1, queue="q", arguments=table))
    args = next(f for f in fr.fields if f.name == "arguments")
    got = field_values(args.children)
    expected = {k: (v.value if isinstance(v, Tagged) else v) for k, v in table.items()}
    assert got == expected
    ts = next(c for c in args.children if c.name == "T")
    assert ts.display == "2024-05-06T07:08:09Z"
    assert fr.findings == []
    # pamqp decodes the same bytes to the same values.
    _n, _ch, obj = pframe.unmarshal(fr.data)
    theirs = dict(obj.arguments)
    assert theirs["s"] == -300 and theirs["l"] == -(2**40) and theirs["D"] == Decimal("3.14")
    assert bytes(theirs["x"]) == b"\x00\x01" and theirs["T"] == expected["T"] and theirs["A"] == [1, "two", [3]]


def test_content_header_all_properties_against_pamqp() -> None:
    props = pc.Basic.Properties(
        content_type="text/plain", content_encoding="gzip", headers={"h": 1}, delivery_mode=2, priority=5,
        correlation_id="c", reply_to="amq.rabbitmq.reply-to", expiration="60000", message_id="m",
        timestamp=datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC), message_type="t", user_id="guest", app_id="a",
        cluster_id="")
    from pamqp.header import ContentHeader

    raw = pframe.marshal(ContentHeader(0, 123, props), 1)
    fr = decode_one(raw)
    assert fr.get("body_size") == 123 and fr.get("delivery_mode") == 2 and fr.get("priority") == 5
    assert fr.get("timestamp") == datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert fr.get("type") == "t" and fr.get("frame_type") == 2 and fr.get("reply_to") == "amq.rabbitmq.reply-to"
    assert fr.get("cluster_id") is None  # pamqp leaves an empty cluster-id out
    flags = next(f for f in fr.fields if f.name == "property_flags")
    assert flags.value == 0xFFF8 and "content_type" in flags.display


def test_protocol_header_names() -> None:
    for dialect, raw in E.HEADERS.items():
        conn = Amqp091Dissector().connection(False)
        fr = next(iter(conn.feed(Direction.C2S, raw, 0.0)))
        assert fr.command == "ProtocolHeader" and fr.get("version") == dialect


def test_sniff() -> None:
    d = Amqp091Dissector()
    assert d.sniff(E.PROTOCOL_HEADER) .confidence == 1.0 and d.sniff(E.PROTOCOL_HEADER).from_client
    start = E.method("Connection.Start", mechanisms="PLAIN")
    assert d.sniff(start).confidence >= 0.9 and d.sniff(start).from_client is False
    pub = E.message(1, b"x", exchange="e")
    assert d.sniff(pub).confidence >= 0.9 and d.sniff(pub).from_client is True
    assert d.sniff(b"GET / HTTP/1.1\r\n").confidence == 0.0
    assert d.sniff(E.frame(1, 1, b"\x00\x3c\x00\x28", end=0)).confidence == 0.0


def test_commands_doc_lists_every_method() -> None:
    docs = Amqp091Dissector().commands()
    names = {c.name for c in docs}
    assert set(BY_NAME) <= names and {"ContentHeader", "ContentBody", "Heartbeat", "ProtocolHeader"} <= names
    publish = next(c for c in docs if c.name == "Basic.Publish")
    assert publish.code == "60,40" and "routing_key:shortstr" in publish.fields and "+content" in publish.fields


# --------------------------------------------------------------------------- robustness (hypothesis)
def _feed_all(chunks: list[tuple[bool, bytes]], midstream: bool) -> int:
    conn = Amqp091Dissector().connection(midstream)
    n = 0
    ts = 0.0
    for c2s, data in chunks:
        ts += 0.5
        n += len(list(conn.feed(Direction.C2S if c2s else Direction.S2C, data, ts)))
    n += len(list(conn.end(ts + 1)))
    return n


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=300)), max_size=12), st.booleans())
def test_random_bytes_never_raise(chunks: list[tuple[bool, bytes]], midstream: bool) -> None:
    _feed_all(chunks, midstream)


SESSION = E.Script().handshake().open_channel(1)
SESSION.c(E.method("Queue.Declare", 1, queue="q", arguments={"a": [1, {"b": "c"}], "t": datetime.now(UTC)}))
SESSION.c(E.message(1, b"payload" * 50, {"content-type": "text/plain", "headers": {"x": Decimal("1.5")}},
                    frame_max=100))
SESSION.s(E.message(1, b"out", name="Basic.Deliver", delivery_tag=1)).c(E.method("Basic.Ack", 1, delivery_tag=1))
SESSION.close()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_real_frames_never_raise(data: st.DataObject) -> None:
    steps = [(d is Direction.C2S, bytearray(b)) for d, b, _ in SESSION.steps]
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(steps) - 1))
        buf = steps[i][1]
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "dup"]))
        pos = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[pos] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[pos:pos + data.draw(st.integers(1, 20))]
        elif kind == "insert":
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=20))
        else:
            steps.insert(i, (steps[i][0], bytearray(buf)))
    _feed_all([(c, bytes(b)) for c, b in steps], data.draw(st.booleans()))


def test_huge_claimed_sizes_do_not_hang_or_allocate() -> None:
    # A frame header claiming 4 GiB, then a valid frame: resync finds the valid one.
    raw = b"\x01\x00\x01\xff\xff\xff\xff" + E.method("Basic.Qos", 1, prefetch_count=2)
    conn = Amqp091Dissector().connection(True)
    evs = list(conn.feed(Direction.C2S, raw, 0.0)) + list(conn.end(1.0))
    assert [e.command for e in evs if isinstance(e, Frame)] == ["Basic.Qos"]
    # A table claiming more entries than bytes.
    bad_table = b"\x00\x32\x00\x0a\x00\x00\x01q\x00\x00\x00\x00\x10" + b"\x01k" + b"A\x7f\xff\xff\xff"
    fr = decode_one(E.frame(1, 1, bad_table))
    assert fr.findings


def test_clean_content_type_remembers_answers_by_bytes_and_stays_bounded() -> None:
    """The hot path's property check remembers its answer per property bytes: the remembered
    answer must be the computed one for every input, clean or not, and the memory bounded."""
    import random

    from dissectors.amqp091 import clean_properties as C
    from dissectors.amqp091 import properties as P

    rng = random.Random(91)
    pieces = [b"\x80\x00\x10application/json", b"\x90\x00\x04text\x02", b"\x10\x00\x02", b"\x80\x00\x05bad",
              b"\x00\x00", b"\x80\x01\x00", b"\x20\x00\x00\x00\x00\x05\x01aS\x00\x00\x00\x00"]
    for _ in range(2000):
        props = rng.choice(pieces)
        if rng.random() < 0.5:
            props = bytes(rng.randrange(256) if rng.random() < 0.1 else b for b in props)
        data = b"\x02" * 19 + props + b"\xce"
        want = C.content_type_if_clean(data, 19, 19 + len(props))
        assert C.clean_content_type(data, 19, 19 + len(props)) == want
        assert C.clean_content_type(data, 19, 19 + len(props)) == want  # the remembered answer
        assert len(C.CLEAN_SEEN) <= C.CLEAN_SEEN_MAX
        if want is not None:  # clean: the general path's scan passes it without a word
            assert P.scan_properties(data, 19, 19 + len(props)) == (want, [], 19 + len(props))
    long_props = b"\x80\x00" + bytes([255]) + b"t" * 255 + b"\x00" * 10
    data = b"\x02" * 19 + long_props + b"\xce"
    C.clean_content_type(data, 19, 19 + len(long_props))
    assert bytes(long_props) not in C.CLEAN_SEEN  # long lists are not kept


def test_clean_properties_are_those_the_general_scan_passes_without_a_word() -> None:
    """clean_content_type (the hot path's test, compiled where it can be) says clean only of
    property lists that scan_properties passes with no problem and that fill their span, and
    gives the content type the scan reads: every flag word's property mix, whole, cut and with
    octets changed at random."""
    import random

    from dissectors.amqp091 import clean_properties as C
    from dissectors.amqp091 import properties as P

    rng = random.Random(9191)
    values = {"content_type": "application/json", "content_encoding": "gzip", "headers": {"k": "v", "n": 7},
              "delivery_mode": 2, "priority": 5, "correlation_id": "c-1", "reply_to": "amq.rabbitmq.reply-to",
              "expiration": "60000", "message_id": "m-42", "timestamp": 1700000000, "type": "order",
              "user_id": "guest", "app_id": "bench"}
    names = list(values)
    changed = 0
    for _ in range(3000):
        chosen = {n: values[n] for n in names if rng.random() < 0.5}
        sent = props = P.encode_properties(chosen)
        if rng.random() < 0.4:
            props = bytes(rng.randrange(256) if rng.random() < 0.05 else b for b in props)
        if rng.random() < 0.2:
            props = props[:rng.randrange(len(props) + 1)]
        data = b"\x02" * 19 + props + b"\xce"
        end = 19 + len(props)
        got = C.content_type_if_clean(data, 19, end)
        if props == sent:  # as a client sends them: clean
            assert got == chosen.get("content_type", ""), chosen
            continue
        changed += 1
        if got is not None:
            assert P.scan_properties(data, 19, end) == (got, [], end), props
    assert changed > 500
    # Header tables the scan objects to (an unknown type tag, a nested one, an overrun) are not clean.
    for table in (b"\x01kZ", b"\x01kF\x00\x00\x00\x03\x01jZ", b"\x01kS\x00\x00\x00\x09ab"):
        props = b"\x20\x00" + len(table).to_bytes(4, "big") + table
        data = b"\x02" * 19 + props + b"\xce"
        assert C.content_type_if_clean(data, 19, 19 + len(props)) is None, table


def test_entries_are_clean_agrees_with_check_table() -> None:
    """The hot path's table shortcut says clean exactly when check_table would neither raise nor
    note anything: on nested tables of every tag (arrays in tables in arrays, depths near the
    limit) whole, cut short and with bytes changed at random."""
    import random

    from dissectors.amqp091.clean_tables import entries_are_clean
    from dissectors.amqp091.wire import TableNotes, check_table, encode_entries
    from dissectors.schema import DecodeError

    rng = random.Random(15)
    leaves = [1, -7, 300, 70000, 2**40, True, "text", b"\x00\xff", 1.5, Decimal("1.25"),
              datetime(2026, 11, 26, tzinfo=UTC), None]

    def value(depth: int) -> object:
        if depth < 3 and rng.random() < 0.3:
            return table(depth + 1)
        if depth < 3 and rng.random() < 0.2:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return rng.choice(leaves)

    def table(depth: int) -> dict[str, object]:
        return {f"k{i}" * rng.randrange(1, 3): value(depth) for i in range(rng.randrange(5))}

    def deep(n: int, arrays: bool) -> dict[str, object]:
        t: dict[str, object] = {"leaf": 1}
        for _ in range(n):
            t = {"a": [t]} if arrays else {"t": t}
        return t

    def agree(buf: bytes) -> bool:
        TableNotes.reset()
        try:
            check_table(buf, 0, len(buf))
            quiet = not TableNotes.spec_only and not TableNotes.unknown
        except DecodeError:
            quiet = False
        TableNotes.reset()
        stop = 4 + int.from_bytes(buf[:4], "big")
        clean = stop <= len(buf) and entries_are_clean(buf, 4, stop, 0, True)
        return clean == quiet

    tables = [table(0) for _ in range(300)] + [deep(n, a) for n in range(14, 38) for a in (False, True)]
    kinds = {True: 0, False: 0}
    for t in tables:
        body = encode_entries(t)
        whole = len(body).to_bytes(4, "big") + body
        variants = [whole, whole[:-1], whole[:rng.randrange(4, len(whole) + 1)]]
        for _ in range(8):
            b = bytearray(whole)
            for _ in range(rng.randrange(1, 3)):
                b[rng.randrange(4, len(b)) if len(b) > 4 else 0] = rng.choice(
                    [rng.randrange(256), ord("U"), ord("L"), ord("F"), ord("A"), ord("S"), 0, 255])
            variants.append(bytes(b))
        for v in variants:
            assert agree(v), v
            TableNotes.reset()
            try:
                check_table(v, 0, len(v))
                kinds[not TableNotes.spec_only and not TableNotes.unknown] += 1
            except DecodeError:
                kinds[False] += 1
            TableNotes.reset()
    # Both answers occur often: the agreement is not one-sided.
    assert kinds[True] > 500 and kinds[False] > 500, kinds


def test_timestamps_remembered_by_seconds_are_the_computed_ones_and_bounded() -> None:
    """ts_value remembers its answer per seconds value (publishers stamp messages with the same
    second): asked again, in any order, it gives what a fresh computation gives, and the memory
    stays bounded."""
    import random

    from dissectors.amqp091 import wire as W

    rng = random.Random(26)
    values = [0, 1, 1_795_680_000, W._MAX_TS, W._MAX_TS + 1, 2**64 - 1] + [rng.randrange(2**34) for _ in range(600)]
    W._TS_SEEN.clear()
    for seconds in values + values[::-1] + rng.sample(values, len(values)):
        got = W.ts_value(seconds)
        if seconds <= W._MAX_TS:
            want = datetime.fromtimestamp(seconds, UTC)
            assert got == (want, want.strftime("%Y-%m-%dT%H:%M:%SZ")), seconds
        else:
            assert got == (seconds, f"{seconds} (beyond year 9999)")
        assert len(W._TS_SEEN) <= W._TS_SEEN_MAX


def test_header_trees_with_remembered_properties_are_the_decoded_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """build_header shares the property fields of headers with the same property bytes: every
    content header of the bundled AMQP 0-9-1 captures (real clients: every table tag they send)
    and of encoder-built ones (nested tables and arrays, a spec-only tag, the reserved flag bit, a
    flag without its value) gives the same tree and Info whether its properties are decoded
    afresh, remembered, or never remembered."""
    from pathlib import Path

    from analyzer.engine import analyze_file
    from analyzer.jsonout import fields_json
    from dissectors.amqp091 import decode as D

    headers: list[bytes] = []
    for path in sorted(Path(__file__).resolve().parents[1].glob("captures/amqp091/*.pcap*")):
        headers += [bytes(ev.data) for ev in analyze_file(str(path))
                    if isinstance(ev, Frame) and ev.command == "ContentHeader" and ev.data]
    tables = [{"a": 1}, {"u": Tagged("U", 7)}, {"deep": {"x": [1, "two", {"y": None}]}, "ts": datetime(2026, 1, 1, tzinfo=UTC)}]
    for i, table in enumerate(tables):
        for props in ({"headers": table}, {"content_type": "text/plain", "headers": table, "message_id": f"m{i}"}):
            payload = E.encode_header_payload(5 + i, props)
            headers.append(E.frame(2, 1, payload))
            # The property flags are payload[12:14]: bit 1 is reserved (a problem), 0x0200 reply-to
            # (set without its value: undecodable).
            headers.append(E.frame(2, 1, payload[:13] + bytes([payload[13] | 2]) + payload[14:]))
            headers.append(E.frame(2, 1, payload[:12] + bytes([payload[12] | 2]) + payload[13:]))
    assert len(headers) > 100

    def trees() -> list[tuple[object, str]]:
        out = []
        for raw in headers:
            fr = D.LazyFrame(Direction.C2S, 0, len(raw), "ContentHeader", 2, [], raw, D.build_header, None)
            fields, info = D.build_header(fr, None)
            out.append((fields_json(fields), info))
        return out

    D._PROPS_SEEN.clear()
    fresh = trees()
    assert D._PROPS_SEEN  # some were remembered
    assert trees() == fresh  # every one remembered now, where it may be
    shared = 0
    for raw in headers:  # and they are served from memory: the same Field objects
        kept = D._PROPS_SEEN.get(raw[19:-1])
        if kept is not None:
            fr = D.LazyFrame(Direction.C2S, 0, len(raw), "ContentHeader", 2, [], raw, D.build_header, None)
            assert any(f is kept[0][0] for f in D.build_header(fr, None)[0])
            shared += 1
    assert shared > 50, shared
    monkeypatch.setattr(D, "_PROPS_KEY_MAX", -1)
    D._PROPS_SEEN.clear()
    assert trees() == fresh
    assert not D._PROPS_SEEN
