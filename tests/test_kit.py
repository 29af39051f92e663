"""The dissector kit's mechanisms on their own: each one as every dissector will use it."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analyzer.api import Category, Direction, FrameRef, Rule, Severity
from dissectors import kit
from dissectors.kit import rules as families
from dissectors.kit import state as kit_state
from dissectors.kit.catalog import Catalog, FieldDef, int_type, snake
from dissectors.kit.state import StateError, decode, encode

C2S, S2C = Direction.C2S, Direction.S2C
R = kit.RuleSet("proto")
UNANSWERED = R.family(families.CORRELATION_UNANSWERED)
DUPLICATE = R.family(families.CORRELATION_DUPLICATE)
LIMIT = R.family(families.LIMIT_EXCEEDED)
SILENCE = R.family(families.HEARTBEAT_SILENCE)
ORDER = R.family(families.HANDSHAKE_ORDER)
INCOMPLETE = R.family(families.HANDSHAKE_INCOMPLETE)


def roundtrip(value):
    return decode(json.loads(json.dumps(encode(value))))


def test_plain_state_round_trips_what_json_lacks():
    value = {1: {"a", "b"}, "t": (1, (2, 3)), "b": b"\x00\xff", "ba": bytearray(b"xy"), "d": C2S,
             (1, "k"): [None, 1.5, float("inf")], "$x": 1}
    back = roundtrip(value)
    assert back == value
    assert type(back["ba"]) is bytearray and type(back["t"]) is tuple and back["d"] is C2S


def test_plain_state_refuses_what_cannot_resume():
    for bad in (struct.Struct(">I"), lambda: 1, object()):
        with pytest.raises(StateError):
            encode({"x": bad})


def test_registered_objects_round_trip_without_transients():
    @kit.plain_state
    class Thing:
        TRANSIENT = ("cache",)

        def __init__(self) -> None:
            self.n = 3
            self.q = kit.ByteQueue()
            self.q.append(b"abc")
            self.cache = struct.Struct(">I")

        def _rebuild(self) -> None:
            self.cache = struct.Struct(">I")

    back = roundtrip(Thing())
    assert isinstance(back, Thing) and back.n == 3 and len(back.q) == 3 and back.cache.size == 4


def test_correlator_by_id_pairs_reports_duplicates_and_unanswered():
    c = kit.Correlator.by_id()
    ref = FrameRef.of("c2s", 0, 11)
    assert c.request(C2S, 1, "Open", ref, 1.0) is None
    dup = c.request(C2S, 1, "Create", FrameRef.of("c2s", 20, 12), 2.0, duplicate=DUPLICATE)
    assert dup is not None and dup.id == "proto.correlation.duplicate"
    c.request(C2S, 2, "Delete", FrameRef.of("c2s", 40, 13), 3.0, extra={"stream": "s"})
    got = c.response(S2C, 2)
    assert got is not None and got[0] == "Delete" and got[3] == {"stream": "s"}
    assert c.response(S2C, 2) is None  # answered once
    c = roundtrip(c)
    left = c.unanswered(UNANSWERED, lambda d, k, p: f"{p[0]} {k}")
    assert [(f.message, f.related) for f in left] == [("Create 1", ["c2s", 20, 12])]


def test_correlator_in_order_pairs_oldest_first_per_key():
    c = kit.Correlator.in_order()
    c.request(C2S, 1, "a", None, 0.0)
    c.request(C2S, 1, "b", None, 0.0)
    c.request(C2S, 2, "c", None, 0.0)
    assert c.response(S2C, 1)[0] == "a"
    assert c.response(S2C, 2)[0] == "c"
    assert c.response(S2C, 2) is None
    assert c.outstanding(C2S) == 1


def test_correlator_is_bounded_and_then_stops_judging():
    c = kit.Correlator.by_id(limit=3)
    found = [c.request(C2S, i, "r", None, float(i), limit_rule=LIMIT) for i in range(10)]
    assert [f.id for f in found if f] == ["proto.limit.exceeded"]
    assert c.outstanding(C2S) == 3 and sorted(c.out["c2s"]) == [7, 8, 9]
    assert c.unanswered(UNANSWERED, lambda *a: "x") == []


def test_silence_fires_at_its_deadline_once():
    s = kit.Silence()
    assert s.deadline() is None
    s.start(10, 100.0)
    s.seen(C2S, 105.0, FrameRef.of("c2s", 0, 5))
    s.seen(S2C, 101.0)
    assert s.deadline() == 121.0
    assert s.due(120.9, SILENCE) == []
    first = s.due(121.5, SILENCE)
    assert [f.message.split()[1] for f in first] == ["server"]
    assert s.deadline() == 125.0 and s.due(124.0, SILENCE) == []
    (client,) = s.due(125.5, SILENCE)
    assert client.related == ["c2s", 0, 5]
    assert client.message == "the client sent nothing for 20.5 s (heartbeat 10 s)"
    assert s.deadline() is None and s.due(200.0, SILENCE) == []
    s.seen(C2S, 201.0)
    assert s.deadline() == 221.0


def test_silence_is_longer_than_the_limit_not_equal_to_it():
    # "Silent for longer than factor x interval": exactly at the limit nothing is due yet.
    s = kit.Silence()
    s.start(10, 100.0)
    assert s.due(120.0, SILENCE) == []
    assert [f.message.split()[1] for f in s.due(120.25, SILENCE)] == ["client", "server"]


_times = st.floats(min_value=0.0, max_value=400.0) | st.sampled_from([math.nan, math.inf, 120.0, 120.25])
_silence_steps = st.lists(st.one_of(
    st.tuples(st.just("start"), st.sampled_from([0, 5, 10, 0.1, math.nan]), _times),
    st.tuples(st.just("seen"), st.sampled_from([C2S, S2C]), _times),
    st.tuples(st.just("delivery"), st.sampled_from([C2S, S2C]), _times),  # seen() with due()'s findings
    st.tuples(st.just("due"), _times),
    st.just(("stop",)),
    st.just(("roundtrip",)),
), max_size=30)


def _same_float(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


@settings(max_examples=500, deadline=None)
@given(steps=_silence_steps)
@example(steps=[("start", 5, 0.0), ("seen", C2S, math.nan), ("due", 11.0)])  # a NaN deadline, the server due
def test_silence_keeps_its_deadline_and_due_looks_only_when_it_may_find(steps):
    # The deadline Silence keeps (read after every delivery) is the one worked out from its state,
    # after every change; due(), and seen() with a rule, which look at the sides only once that
    # deadline is reached, give what the look at both sides (_due) gives, and leave the same state.
    s, twin = kit.Silence(), kit.Silence()
    for step in steps:
        if step[0] == "start":
            s.start(step[1], step[2])
            twin.start(step[1], step[2])
        elif step[0] == "seen":
            s.seen(step[1], step[2])
            twin.seen(step[1], step[2])
        elif step[0] == "delivery":  # one call: the findings due at that time, then the side seen
            got = s.seen(step[1], step[2], None, SILENCE)
            want = twin._due(step[2], SILENCE)
            twin.seen(step[1], step[2])
            assert [f.message for f in got] == [f.message for f in want]
        elif step[0] == "due":
            assert [f.message for f in s.due(step[1], SILENCE)] == [f.message for f in twin._due(step[1], SILENCE)]
        elif step[0] == "stop":
            s.stop()
            twin.stop()
        else:
            s = roundtrip(s)
        assert _same_float(s.deadline(), s._deadline()), step
        assert _same_float(s.deadline(), twin._deadline()), step
        assert repr(encode(s)) == repr(encode(twin))


def test_silence_due_at_exactly_its_deadline():
    # 0.1 + 0.2 rounds up: at the deadline itself the silence is already longer than the limit
    # (ts - last > limit), so due() must look at the sides there, not only after it.
    s = kit.Silence()
    s.start(0.1, 0.1)
    at = s.deadline()
    assert at == 0.1 + 0.2 and at - 0.1 > 0.2
    assert [f.message.split()[1] for f in s.due(at, SILENCE)] == ["client", "server"]


HANDSHAKE = kit.Machine("handshake", start="idle", rule=ORDER, incomplete=INCOMPLETE, final=frozenset({"open"}),
                        ignore=frozenset({"Heartbeat"}), rows={
                            ("idle", "c2s", "Hello"): "hello",
                            ("hello", "s2c", "Welcome"): "open",
                            (kit.ANY, "c2s", "Close"): "closed",
                        })


def test_machine_table_drives_the_checks():
    state, bad = HANDSHAKE.step("idle", "c2s", "Hello")
    assert (state, bad) == ("hello", None)
    state, bad = HANDSHAKE.step(state, "c2s", "Hello")
    assert state == "hello" and bad is not None and bad.id == "proto.handshake.order"
    assert "Welcome (server)" in bad.message
    assert HANDSHAKE.step("hello", "s2c", "Heartbeat") == ("hello", None)
    assert HANDSHAKE.step("open", "c2s", "Close") == ("closed", None)
    assert HANDSHAKE.at_end("open") is None
    assert HANDSHAKE.at_end("hello").id == "proto.handshake.incomplete"
    assert any("Welcome" in line for line in HANDSHAKE.describe())


def test_sequencer_counts_fragments_to_the_announced_size():
    s = kit.Sequencer()
    rule = R.family(families.CONTENT_INCOMPLETE)
    s.start(1, "publish", 10, FrameRef.of("c2s", 0, 1))
    assert s.add(1, 4) == (["publish", 10, 4, ["c2s", 0, 1]], False)
    s = roundtrip(s)
    assert s.add(2, 4) == (None, False)
    s.start(3, "deliver", 5, None)
    assert s.add(1, 6)[1] is True and s.expecting(1) is None
    assert [f.message for f in s.incomplete(rule)] == ["deliver on 3 ended after 0 of 5 bytes"]


def test_framer_reports_junk_once_per_run_and_the_incomplete_tail():
    def measure(buf, pos):
        if len(buf) - pos < 1:
            return 0
        n = buf[pos]
        return n if 2 <= n <= 9 else -1

    def resync(buf, pos):
        for i in range(pos, len(buf)):
            if 2 <= buf[i] <= 9:
                return i, True
        return len(buf), False

    junk, incomplete = R.family(families.FRAMING_RESYNC), R.family(families.FRAMING_INCOMPLETE)
    f = kit.Framer("c2s")
    out = list(f.cut(b"\x02a\xff\xfe", measure, resync, junk))
    out += list(roundtrip(f).cut(b"\xfd\x03bc\x05", measure, resync, junk))
    assert [type(x).__name__ for x in out] == ["Piece", "Finding", "Piece"]
    assert out[1].message == "c2s: 3 bytes at stream offset 2 skipped to resynchronise"
    f2 = kit.Framer("c2s")
    list(f2.cut(b"\x02a\x05ab", measure, resync, junk))
    assert [x.id for x in f2.end(junk, incomplete)] == ["proto.framing.incomplete"]


def test_rules_one_id_once_and_families_keep_their_severity():
    rs = kit.RuleSet("p")
    r = rs.family(families.FRAMING_RESYNC)
    assert r == Rule("p.framing.resync", Severity.WARNING, Category.MALFORMED, families.FRAMING_RESYNC.description)
    with pytest.raises(ValueError):
        rs.family(families.FRAMING_RESYNC)


def test_catalogue_names_and_types():
    assert snake("delivery-tag") == "delivery_tag" and snake("DeclarePublisher") == "declare_publisher"
    assert int_type(">H") == "uint16" and int_type("<q") == "int64"
    cat = Catalog("p")
    cat.add("publish.publisher_id", "uint8")
    assert cat.add("publish.publisher_id", "uint8") is cat.get("p.publish.publisher_id")
    with pytest.raises(ValueError):
        cat.add("publish.publisher_id", "uint16")
    with pytest.raises(ValueError):
        FieldDef("p.Bad-Name", "uint8")


def test_correlator_in_order_queues_stay_compact_and_forget_one_key():
    c = kit.Correlator.in_order()
    for i in range(1000):
        c.request(C2S, 1, f"r{i}", None, float(i))
    got = [c.response(S2C, 1)[0] for _ in range(600)]
    assert got == [f"r{i}" for i in range(600)]
    assert len(c.out["c2s"][1]) <= 2 * 400 + 1  # consumed entries do not pile up
    c = roundtrip(c)
    assert c.peek(S2C, 1)[0] == "r600" and c.outstanding(C2S) == 400
    c.request(C2S, 2, "other", None, 0.0)
    c.forget(C2S, 1)
    assert c.outstanding(C2S) == 1 and c.peek(S2C, 1) is None and c.response(S2C, 2)[0] == "other"


def test_byte_queue_skips_bytes_it_never_held():
    q = kit.ByteQueue()
    q.skip(10)
    q.append(b"ab")
    assert q.offset == 10
    with pytest.raises(ValueError):
        q.skip(1)


# A channel-like machine with every kind of entry: an illegal step with its own rule, recovery after
# one reported under the default rule, a noted legal step, and entries for every state.
ALREADY = R.own("channel.already_open", Severity.WARNING, Category.SEQUENCE, "A channel opened twice")
HASTY = R.own("channel.hasty", Severity.NOTE, Category.SEQUENCE, "Data before the peer confirmed the open")
CHANNEL = kit.Machine(
    "channel", start="new", rule=ORDER, ignore=frozenset({"Heartbeat"}), labels={"new": "never opened"},
    rows={
        ("new", "c2s", "Open"): "opening",
        ("opening", "s2c", "OpenOk"): "open",
        ("opening", "c2s", "Data"): "opening",
        ("open", "c2s", "Data"): "open",
        (kit.ANY, "c2s", "Close"): "closed",
    },
    illegal={("open", "c2s", "Open"): (ALREADY, "opening"), (kit.ANY, "s2c", "Data"): (ALREADY, "open"),
             ("new", "s2c", "Data"): (HASTY, "new")},
    recover={("new", "c2s", "Data"): "open", (kit.ANY, "s2c", "OpenOk"): "open"},
    noted={("opening", "c2s", "Data"): HASTY},
)


def test_machine_judge_decides_the_rule_and_where_to_continue():
    assert CHANNEL.judge("new", "c2s", "Open") == ("opening", None)
    assert CHANNEL.judge("opening", "c2s", "Data") == ("opening", HASTY)  # legal, still noted
    assert CHANNEL.judge("open", "c2s", "Open") == ("opening", ALREADY)  # its own rule and state
    assert CHANNEL.judge("closed", "s2c", "Data") == ("open", ALREADY)  # an entry for every state ...
    assert CHANNEL.judge("new", "s2c", "Data") == ("new", HASTY)  # ... loses to the state's own
    assert CHANNEL.judge("new", "c2s", "Data") == ("open", ORDER)  # default rule, recovered
    assert CHANNEL.judge("closed", "s2c", "OpenOk") == ("open", ORDER)  # recovered for every state
    assert CHANNEL.judge("closed", "c2s", "Data") == ("closed", ORDER)  # default rule, stays
    assert CHANNEL.judge("open", "c2s", "Close") == ("closed", None)
    assert CHANNEL.judge("closed", "c2s", "Heartbeat") == ("closed", None)
    assert CHANNEL.allowed("opening", "c2s", "Data") and not CHANNEL.allowed("open", "c2s", "Open")


def test_machine_quiet_loops_are_what_judge_takes_without_a_word():
    # ("opening", "c2s", "Data") stays but is noted; ("closed", "c2s", "Close") comes from a row
    # for every state; ignored events never step the machine at all.
    assert CHANNEL.quiet_loops() == {("open", "c2s", "Data")}
    assert HANDSHAKE.quiet_loops() == frozenset()  # every row moves on
    from dissectors.amqp_fast.machines import CHANNEL_MACHINE, CONNECTION, HANDLE_MACHINE

    for m in (CONNECTION, CHANNEL_MACHINE, HANDLE_MACHINE):
        quiet = m.quiet_loops()
        assert len(quiet) > 5
        for state, d, event in quiet:
            assert m.judge(state, d, event) == (state, None)


def test_machine_step_words_what_judge_decided():
    state, f = CHANNEL.step("open", "c2s", "Open")
    assert state == "opening" and f is not None and f.id == "proto.channel.already_open"
    assert f.message == "Open from the client in state open (expected Data (client))" and f.command == "Open"
    state, f = CHANNEL.step("new", "c2s", "Data")
    assert state == "open" and f.id == "proto.handshake.order"
    assert f.message == "Data from the client in state never opened (expected Open (client))"
    state, f = CHANNEL.step("opening", "c2s", "Data")
    assert state == "opening" and f.id == "proto.channel.hasty"
    assert f.message == "Data from the client in state opening"  # legal: nothing else was expected
    assert CHANNEL.step("opening", "s2c", "OpenOk") == ("open", None)


def test_machine_refuses_entries_it_could_never_use():
    rows = {("a", "c2s", "Go"): "b", (kit.ANY, "s2c", "Stop"): "a"}
    with pytest.raises(ValueError, match="legal"):  # a legal transition cannot be illegal
        kit.Machine("m", "a", rows, ORDER, illegal={("a", "c2s", "Go"): (ALREADY, "a")})
    with pytest.raises(ValueError, match="legal"):  # nor one legal through a row for every state
        kit.Machine("m", "a", rows, ORDER, recover={("b", "s2c", "Stop"): "b"})
    with pytest.raises(ValueError, match="ignored"):
        kit.Machine("m", "a", rows, ORDER, ignore=frozenset({"Ping"}), recover={("a", "c2s", "Ping"): "b"})
    with pytest.raises(ValueError, match="own rule"):
        kit.Machine("m", "a", rows, ORDER, illegal={("b", "c2s", "Go"): (ALREADY, "a")},
                    recover={("b", "c2s", "Go"): "b"})
    with pytest.raises(ValueError, match="noted"):  # only a row can be noted
        kit.Machine("m", "a", rows, ORDER, noted={("b", "c2s", "Go"): HASTY})
    with pytest.raises(ValueError, match="direction"):
        kit.Machine("m", "a", rows, ORDER, illegal={("a", "up", "Go"): (ALREADY, "a")})


def test_machine_describe_prints_the_whole_machine():
    lines = list(CHANNEL.describe())
    assert lines[0] == "channel (start: new; illegal transitions: proto.handshake.order)"
    assert "  opening  c2s  Data                         -> opening  (noted: proto.channel.hasty)" in lines
    assert "  new      c2s  Open                         -> opening" in lines
    illegal = lines[lines.index("  illegal, and where the machine continues:") + 1:]
    assert illegal == [
        "  open     c2s  Open                         !> opening  (proto.channel.already_open)",
        "  *        s2c  Data                         !> open  (proto.channel.already_open)",
        "  new      s2c  Data                         !> new  (proto.channel.hasty)",
        "  new      c2s  Data                         !> open  (proto.handshake.order)",
        "  *        s2c  OpenOk                       !> open  (proto.handshake.order)",
    ]
    assert not any("illegal," in line for line in HANDSHAKE.describe())  # nothing beyond the rows


def test_kit_objects_hold_no_tables_while_idle():
    """Every connection has these objects (100,000 idle connections is a hostile case): a direction
    with nothing outstanding, no heartbeat and nothing buffered holds no dict, list or bytearray."""

    def containers(obj):  # (attribute_names: a class's slots, or a compiled class's attributes)
        return [n for n in kit_state.attribute_names(type(obj))
                if isinstance(getattr(obj, n, None), (dict, list, bytearray))]

    c = kit.Correlator.in_order()
    assert containers(c) == [] and c.outstanding(C2S) == 0 and c.out == {"c2s": {}, "s2c": {}}
    c.request(C2S, 1, "a", None, 0.0)
    c.request(C2S, 2, "b", None, 0.0)
    assert containers(c) == ["c2s"] and c.count == {"c2s": 2, "s2c": 0}
    c.response(S2C, 1)
    c.forget(C2S, 2)
    assert containers(c) == []  # answered or forgotten: the table is let go
    b = kit.Correlator.by_id(limit=1)
    b.request(S2C, 1, "a", None, 0.0)
    b.request(S2C, 2, "b", None, 0.0, limit_rule=LIMIT)
    b.response(C2S, 2)
    assert b.outstanding(S2C) == 0 and b.overflowed == {"c2s": False, "s2c": True}  # still remembered
    assert roundtrip(b).overflowed["s2c"] and b.out["s2c"] == {}

    s = kit.Silence()
    assert containers(s) == [] and s.last == {"c2s": None, "s2c": None} and not any(s.reported.values())

    q = kit.ByteQueue()
    assert containers(q) == [] and len(q) == 0
    q.append(b"abcd")
    assert [p.data for p in q.cut(lambda buf, pos: 2 if len(buf) - pos >= 2 else 0, lambda buf, pos: (pos, True))] \
        == [b"ab", b"cd"]
    assert containers(q) == [] and q.offset == 4  # fully read: the buffer is let go
    q.append(b"e")
    assert list(q.cut(lambda buf, pos: 2 if len(buf) - pos >= 2 else 0, lambda buf, pos: (pos, True))) == []
    assert containers(q) == ["_buf"] and q.lost(3) == 1 and containers(q) == [] and q.offset == 8
    f = kit.Framer("c2s")
    assert containers(f) == [] and containers(f.queue) == []
