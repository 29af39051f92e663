"""A stream message's JSON made without its field tree (amqp_json.message_json, RecordField.json_value)
is the JSON of the tree (fields_json of message_fields / of the record's children): the same text,
and the same values cut by --max-value-size, in the same order. On every message of every
RabbitMQ Stream capture, and on random messages of every section and value kind."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import analyzer.jsonout as jsonout
from analyzer.api import Field, Frame
from analyzer.engine import Analyzer
from analyzer.jsonout import field_json, fields_json, set_max_value
from analyzer.registry import load_dissectors
from dissectors.rabbitmq_stream import amqp, amqp_json
from dissectors.rabbitmq_stream.amqp import Described, Symbol, Timestamp, encode_value
from dissectors.rabbitmq_stream.chunk import RecordField
from tests.jsoncheck import nodes, with_cuts

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures" / "rabbitmq_stream").rglob("*.pcap*"))


def _fresh(r: RecordField) -> RecordField:
    return RecordField(r.name, r.value, r.offset, r.size, r._buf, r._at, r._len, r._base, r._extra)


def test_every_record_of_every_capture():
    records = direct = 0
    for capture in CAPTURES:
        analyzer = Analyzer(dissectors=load_dissectors())
        for ev in analyzer.run_files([str(capture)]):
            if not isinstance(ev, Frame) or ev.protocol != "rabbitmq_stream":
                continue
            for rec in nodes(ev.fields, RecordField):
                fast = _fresh(rec)
                if fast.json_value() is not None:
                    direct += 1
                tree = _fresh(rec)
                assert with_cuts(lambda f=fast: field_json(f, "records")) == \
                    with_cuts(lambda r=tree: fields_json(r.children)), capture
                records += 1
    assert records > 1000 and direct > 1000, (records, direct)


# Random messages: every section, values of every kind the decoder makes.
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.binary(max_size=20), st.builds(Symbol, st.text(alphabet="abcxyz:.-", max_size=8)),
    st.builds(Timestamp, st.integers(-(2**40), 2**40)))
_keys = st.one_of(st.text(max_size=4), st.builds(Symbol, st.sampled_from(["a", "b", "1"])), st.integers(0, 3),
                  st.sampled_from(["a", "1", "x-key"]))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3),
                            st.builds(Described, st.one_of(st.builds(Symbol, st.just("d:x")), st.integers(0, 9)), inner)),
    max_leaves=8)
_section = st.one_of(
    st.tuples(st.just(0x70), st.lists(_values, max_size=7)),  # header: a list, names by position
    st.tuples(st.just(0x73), st.lists(_values, max_size=15)),  # properties
    st.tuples(st.sampled_from([0x71, 0x72, 0x74, 0x78]), st.dictionaries(_keys, _values, max_size=4)),
    st.tuples(st.just(0x75), st.binary(max_size=40)),  # data (repeatable)
    st.tuples(st.just(0x76), st.lists(_values, max_size=3)),  # amqp_sequence (repeatable)
    st.tuples(st.sampled_from([0x70, 0x73, 0x75, 0x77]), _values),  # any value where another is due
)


def _message(sections: list[tuple[int, Any]]) -> bytes:
    return b"".join(b"\x00\x53" + bytes([code]) + encode_value(v) for code, v in sections)


def _json_is_the_trees(buf: bytes) -> list[Field] | None:
    """Asserts that message_json of the message in ``buf`` is the JSON of its tree (text and cuts,
    under the limit set), or None where the tree is none; gives back the tree."""
    tree = amqp.message_fields(buf, 0, len(buf), 0)
    direct = amqp_json.message_json(buf, 0, len(buf))
    assert (tree is None) == (direct is None)
    if tree is not None:
        assert with_cuts(lambda: amqp_json.message_json(buf, 0, len(buf))) == with_cuts(lambda: fields_json(tree))
    # In a buffer that is no bytes (the compiled loops take bytes alone), between other bytes.
    framed = memoryview(b"\xff" * 3 + buf + b"\xee")
    assert amqp_json.message_json(framed, 3, 3 + len(buf)) == direct
    return tree


@settings(max_examples=400, deadline=None)
@given(st.lists(_section, min_size=1, max_size=5), st.sampled_from([0, 4, 1 << 20]))
def test_random_messages(sections: list[tuple[int, Any]], limit: int):
    buf = _message(sections)
    set_max_value(limit)
    try:
        tree = _json_is_the_trees(buf)
        if tree is not None:
            # And as a record of a chunk, with and without its offset.
            frame = struct.pack(">I", len(buf)) + buf
            for name, value in (("record", 7), ("message", None)):
                rec = RecordField(name, value, 0, len(frame), frame, 4, len(buf), 0)
                tree = _fresh(rec)
                assert with_cuts(lambda r=rec: field_json(r, "records")) == \
                    with_cuts(lambda r=tree: fields_json(r.children))
    finally:
        set_max_value(jsonout.MAX_VALUE)


def test_keys_alike_as_text_and_repeated_sections_take_the_trees_way():
    # 1 and "1" are one name in JSON: the tree lists both values under it, so must the direct way.
    buf = _message([(0x74, {1: "int", "1": "text"}), (0x70, [True]), (0x70, [False]), (0x75, b"a"), (0x75, b"b")])
    tree = amqp.message_fields(buf, 0, len(buf), 0)
    assert tree is not None
    want = fields_json(tree)
    assert want["application_properties"] == {"1": ["int", "text"]}
    assert want["header"] == [{"durable": True}, {"durable": False}] and want["data"] == ["a", "b"]
    assert amqp_json.message_json(buf, 0, len(buf)) == want
    assert math.isnan(amqp.decode_value(encode_value(math.nan), 0, 9)[0])  # the encoder writes NaN as it is


def _tree(f: Field) -> tuple:
    kids = f.children
    return (f.name, f.value if not isinstance(f.value, memoryview) else bytes(f.value), f.offset, f.size,
            f.display, f.is_list, None if kids is None else [_tree(c) for c in kids])


def test_publish_sub_batches_are_built_when_read_and_alike(monkeypatch):
    """A Publish's sub-batch records are checked at once and listed when first read: the same
    tree as listing them at once, compressed or not."""
    from dissectors.rabbitmq_stream import chunk
    from dissectors.rabbitmq_stream.layouts import PublishEntries

    body = [amqp.encode_message(f"m{i}".encode() * (i + 1), application_properties={"i": i}) for i in range(5)]
    value = [{"publishing_id": 1, "sub_batch": body, "compression": 0}, {"publishing_id": 2, "message": b"x"},
             {"publishing_id": 3, "sub_batch": body[:3], "compression": 1}]
    layout = PublishEntries(1)
    raw = layout.write(value)
    lazy, end = layout.read("messages", memoryview(raw), 0, len(raw))
    assert end == len(raw)
    later = [sb.children[-1] for sb in lazy.children if sb.children and sb.children[-1].name == "records"]
    assert len(later) == 2 and all(isinstance(r, chunk.LazyField) for r in later)
    eager_entries = chunk.decode_entries
    monkeypatch.setattr(chunk, "decode_entries", lambda *a, **k: eager_entries(*a, **{**k, "lazy": False}))
    eager, _ = layout.read("messages", memoryview(raw), 0, len(raw))
    assert _tree(lazy) == _tree(eager)
    assert [len(r.children) for r in later] == [5, 3]


def _sub_batch_session():
    """Deliver chunks and v1 Publishes of sub-batches, plain and gzip: AMQP 1.0 messages of
    several shapes, records that are not AMQP 1.0, simple entries beside them, and a sub-batch
    whose last record overruns it (its whole records only)."""
    from dissectors.rabbitmq_stream import encode as E

    msgs = [amqp.encode_message(b'{"n": %d}' % i, application_properties={"batch": i % 3})
            for i in range(12)]
    msgs += [amqp.encode_message(b"x" * 300, properties={"message_id": "m", "content_type": "text/plain"}),
             b"not an AMQP 1.0 message", amqp.encode_message(None, value=[1, "two"]), b"\x00\x53\x75\xa0"]
    s = E.Script().extend(E.handshake())
    s.c(E.request("Subscribe", correlation_id=20, subscription_id=0, stream="s", offset_spec={"type": 1}, credit=9))
    s.s(E.response("Subscribe", correlation_id=20, response_code=1))
    s.c(E.request("DeclarePublisher", correlation_id=21, publisher_id=1, publisher_reference="", stream="s"))
    s.s(E.response("DeclarePublisher", correlation_id=21, response_code=1))
    first = 0
    for compression in (0, 1):
        entries = [E.sub_batch_entry(msgs, compression), E.simple_entry(msgs[0]), E.sub_batch_entry(msgs[:5], compression)]
        s.s(E.deliver(0, E.build_chunk(entries, len(msgs) + 6, first)))
        first += len(msgs) + 6
        s.c(E.request("Publish", 1, publisher_id=1, messages=[
            {"publishing_id": 1 + compression * 10, "sub_batch": msgs, "compression": compression},
            {"publishing_id": 2 + compression * 10, "message": msgs[1]}]))
    # A sub-batch whose last record's length runs past its data: the records before it only.
    cut = bytearray(E.sub_batch_entry(msgs[:4]))
    cut[-len(msgs[3]) - 4:-len(msgs[3])] = (len(msgs[3]) + 50).to_bytes(4, "big")
    s.s(E.deliver(0, E.build_chunk([bytes(cut)], 4, first)))
    return s


def test_sub_batch_records_json_in_one_loop_is_the_trees():
    """A sub-batch's records give their JSON in one loop (chunk.RecordsField.json_value, and the
    records of a Publish's sub-batch listed later): the same text and cuts as the JSON of their
    RecordFields, on Deliver chunks and Publishes, plain and compressed."""
    from dissectors.rabbitmq_stream import chunk
    from dissectors.rabbitmq_stream.encode import run

    def frames():
        return [e for e in run(_sub_batch_session()) if isinstance(e, Frame) and e.command in ("Deliver", "Publish")]

    for limit in (0, 4, 1 << 20):
        set_max_value(limit)
        try:
            direct, tree = frames(), frames()
            built = 0
            for f in tree:  # every records node made the tree's way: its RecordFields built
                for node in nodes(f.fields, RecordField):
                    built += node.children is not None
            assert built > 50
            fresh = frames()
            assert sum(len(nodes(f.fields, chunk.RecordsField)) for f in fresh) == 5  # the Deliver sub-batches
            later = [n for f in frames() for n in nodes(f.fields, chunk.LazyField) if n.name == "records"]
            assert len(later) == 2  # the Publish ones
            for a, b in zip(direct, tree, strict=True):
                assert with_cuts(lambda a=a: fields_json(a.fields)) == with_cuts(lambda b=b: fields_json(b.fields))
        finally:
            set_max_value(jsonout.MAX_VALUE)


def test_the_usual_message_in_one_pass():
    """A message whose sections are all remembered but its short data is made in one pass
    (amqp_json.usual_message_json) once its other sections were seen: the same dict, in the same
    order, as the general way and the tree, repeated sections included."""
    shapes = [[(0x74, {"batch": 1}), (0x75, b'{"n": 1}')],
              [(0x73, ["id", None, b"to"]), (0x74, {"k": "v"}), (0x75, b"a"), (0x75, b"\xff\xfe")],
              [(0x72, {Symbol("x-opt"): 1}), (0x75, b"body"), (0x78, {"f": 2})],
              [(0x76, [1]), (0x76, [2]), (0x74, {"z": None})],
              [(0x74, {"a": 1}), (0x74, {"a": 1}), (0x75, b"twice")],  # a section repeated that may not be
              [(0x75, b"only a body")], [(0x75, b"one"), (0x75, b"\x00two")]]  # data alone: cut in the pass
    for limit in (0, 3):
        set_max_value(limit)
        try:
            for sections in shapes:
                buf = _message(sections)
                tree = amqp.message_fields(buf, 0, len(buf), 0)
                assert tree is not None
                first = with_cuts(lambda b=buf: amqp_json.message_json(b, 0, len(b)))  # remembers its sections
                usual = amqp_json.usual_message_json(buf, 0, len(buf))
                # Not with a limit that could cut a remembered section (every one here is over 3 bytes).
                others = any(code != 0x75 for code, _ in sections)
                repeated = sections[:2] == [(0x74, {"a": 1})] * 2
                assert (usual is None) == (limit > 0 and others or repeated), sections
                again = with_cuts(lambda b=buf: amqp_json.message_json(b, 0, len(b)))
                assert first == again == with_cuts(lambda t=tree: fields_json(t)), sections
        finally:
            set_max_value(jsonout.MAX_VALUE)


_PREFIXES = [b"", amqp.encode_message(None, application_properties={"batch": 0}),
             amqp.encode_message(None, application_properties={"batch": 1}),
             amqp.encode_message(None, properties={"message_id": "m"}, application_properties={"k": "v"})]
_BODIES = st.one_of(st.binary(max_size=12), st.just(b"\x00\x53\x75\xa0\x01x"), st.just(b"{\"n\": 1}"))


def _record_bytes(prefix: int, body: bytes, shape: str) -> bytes:
    data = b"\x00\x53\x75" + encode_value(body)  # a short data section (0xA0) for short bodies
    if shape == "footer":  # a section after the data: not like the others
        return _PREFIXES[prefix] + data + b"\x00\x53\x78" + encode_value({"f": 1})
    if shape == "two data":
        return _PREFIXES[prefix] + data + data
    if shape == "long data":
        return _PREFIXES[prefix] + b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body
    if shape == "value":  # an amqp-value section of the same size where the data section stands
        return _PREFIXES[prefix] + b"\x00\x53\x77" + encode_value(body)
    return _PREFIXES[prefix] + data


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_PREFIXES) - 1), _BODIES,
                          st.sampled_from(["usual", "usual", "usual", "footer", "two data", "long data", "value"])),
                min_size=1, max_size=12),
       st.sampled_from([0, 4, 1 << 20]))
def test_records_like_the_one_before_give_the_same_json(records: list[tuple[int, bytes, str]], limit: int):
    """A sub-batch's records that repeat the bytes before their body (a producer's batch) get their
    JSON from the record before (amqp_json.like_json): the same text and cuts as the records' JSON one
    by one, whatever follows (another prefix, a section after the data, two data sections, a long
    data section, an amqp-value section in its place, a body holding a data section's header)."""
    from dissectors.rabbitmq_stream import chunk

    raw = [_record_bytes(p, b, shape) for p, b, shape in records]
    data = b"\x09" + b"".join(struct.pack(">I", len(r)) + r for r in raw)
    set_max_value(limit)
    try:
        for first in (None, 100):
            node = chunk.RecordsField(len(raw), 0, len(data), data, 1, 0, first)
            fast = with_cuts(lambda n=node: field_json(n, "records"))
            slow = chunk.RecordsField(len(raw), 0, len(data), data, 1, 0, first)
            assert fast == with_cuts(lambda n=slow: [field_json(_fresh(r), "records") for r in n.children])
    finally:
        set_max_value(jsonout.MAX_VALUE)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_PREFIXES) - 1), _BODIES,
                          st.sampled_from(["usual", "usual", "usual", "footer", "two data", "long data", "value",
                                           "no amqp"])),
                min_size=1, max_size=12),
       st.sampled_from([0, 4, 1 << 20]), st.sampled_from(["simple", "sub-batch first", "sub-batch later", "draft"]))
def test_publish_of_simple_messages_is_lazy_and_alike(records: list[tuple[int, bytes, str]], limit: int, kind: str):
    """A v1 Publish of simple messages alone (a producer sending one by one) is a lazy list: its
    entries when read are the tree read at once (PublishEntries.read's ``whole``), and its JSON
    from the bytes (amqp_json.records_json) is the text and cuts of theirs one by one. A sub-batch
    among the entries or the draft's layout reads them at once; cut short anywhere, the lazy way
    says what the whole one says."""
    from dissectors.kit.lazy import LazyField
    from dissectors.rabbitmq_stream.layouts import PublishEntries
    from dissectors.schema import DecodeError

    raw_msgs = [b"not AMQP 1.0" + b if shape == "no amqp" else _record_bytes(p, b, shape) for p, b, shape in records]
    entries = [{"publishing_id": 7 + i, "message": m} for i, m in enumerate(raw_msgs)]
    if kind == "sub-batch first":
        entries.insert(0, {"publishing_id": 1, "sub_batch": raw_msgs[:2], "compression": 0})
    elif kind == "sub-batch later":
        entries.append({"publishing_id": 99, "sub_batch": raw_msgs[:2], "compression": 0})
    layout = PublishEntries(1, draft=kind == "draft")
    data = b"\x09" + layout.write(entries)
    lazy, end = layout.read("messages", memoryview(data), 1, len(data))
    whole, whole_end = layout.read("messages", memoryview(data), 1, len(data), None, True)
    assert isinstance(lazy, LazyField) == (kind == "simple") and not isinstance(whole, LazyField)
    assert end == whole_end == len(data) and _tree(lazy) == _tree(whole)
    set_max_value(limit)
    try:
        fresh, _ = layout.read("messages", memoryview(data), 1, len(data))
        assert with_cuts(lambda: field_json(fresh, "messages")) == \
            with_cuts(lambda: [fields_json(_fresh(r).children) if isinstance(r, RecordField) else field_json(r)
                               for r in whole.children])
    finally:
        set_max_value(jsonout.MAX_VALUE)
    for stop in range(1, len(data)):
        got: list[Any] = []
        for whole_now in (False, True):
            try:  # the error, when there is one, when read (a lazy list read later must not have one)
                got.append(layout.read("messages", memoryview(data[:stop]), 1, stop, None, whole_now))
            except DecodeError as exc:
                got.append(str(exc))
        assert [g if isinstance(g, str) else (_tree(g[0]), g[1]) for g in got] == \
            [got[1] if isinstance(got[1], str) else (_tree(got[1][0]), got[1][1])] * 2, stop


def test_like_json_takes_only_messages_like_the_one_before():
    """like_of keeps what like_json needs of a message that ends with its one short data section,
    and like_json refuses any message whose bytes before its body differ or whose data section is
    not the last, the only one or short."""
    usual = _record_bytes(1, b"abc", "usual")
    amqp_json.message_json(usual, 0, len(usual))  # the general way remembers its sections, as in a run
    data_at: list[int] = []
    sections = amqp_json.usual_message_json(usual, 0, len(usual), data_at)
    like = amqp_json.like_of(usual, 0, len(usual), sections, data_at)
    assert like == (_PREFIXES[1] + b"\x00\x53\x75\xa0", {"application_properties": {"batch": 0}})
    other = _record_bytes(1, b"de", "usual")
    assert amqp_json.like_json(other, 0, len(other), like) == amqp_json.message_json(other, 0, len(other))
    for prefix, shape in ((2, "usual"), (1, "footer"), (1, "two data"), (1, "long data"), (0, "usual"),
                          (1, "value")):
        m = _record_bytes(prefix, b"de", shape)
        assert amqp_json.like_json(m, 0, len(m), like) is None, shape
    for shape in ("footer", "two data"):
        m = _record_bytes(1, b"de", shape)
        amqp_json.message_json(m, 0, len(m))
        at: list[int] = []
        got = amqp_json.usual_message_json(m, 0, len(m), at)
        assert got is not None and amqp_json.like_of(m, 0, len(m), got, at) is None, shape


# Application properties as a map8 (0xC1), the way rstream and rbfly send them, built byte by byte:
# the encoder above writes maps as map32. Text keys with every value constructor
# amqp_json.flat_map_json reads; a twist puts in what it leaves to the general decode (a key that is no
# UTF-8 str8 or comes twice, a value of another kind) and a damage breaks the map's framing.
_FLAT_VALUES = st.one_of(
    st.sampled_from([b"\x40", b"\x41", b"\x42", b"\x43", b"\x44", b"\x56\x00", b"\x56\x01", b"\x56\x07"]),
    st.tuples(st.sampled_from([0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x60, 0x61, 0x70, 0x71, 0x80, 0x81]),
              st.binary(min_size=8, max_size=8)).map(
        lambda cb: bytes([cb[0]]) + cb[1][:amqp._FIXED[cb[0]][0].size]),
    st.text(max_size=6).map(lambda s: b"\xa1" + bytes([len(s.encode())]) + s.encode()))
_FLAT_KEYS = st.sampled_from([b"\xa1" + bytes([len(raw)]) + raw
                              for raw in (b"i", b"a", b"x-key", "é".encode(), b"n", b"order", b"")])
_TWISTS = {"key not utf-8": (b"\xa1\x02\xff\xfe", None), "key a symbol": (b"\xa3\x01i", None),
           "value not utf-8": (None, b"\xa1\x01\xff"), "value a symbol": (None, b"\xa3\x01s"),
           "value binary": (None, b"\xa0\x02\x00\x01"), "value a float": (None, b"\x72\x3f\x80\x00\x00"),
           "value a timestamp": (None, b"\x83" + bytes(8)), "value a list": (None, b"\x45"),
           "value a map": (None, b"\xc1\x01\x00")}


@settings(max_examples=500, deadline=None)
@example([(b"\xa1\x01i", b"\x44"), (b"\xa1\x01a", b"\x43"), (b"\xa1\x01n", b"\x56\x02")], "none", "as is", b"", 0)
@given(st.lists(st.tuples(_FLAT_KEYS, _FLAT_VALUES), max_size=5, unique_by=lambda kv: kv[0]),
       st.sampled_from(["none"] * 4 + ["key repeated", *_TWISTS]),
       st.sampled_from(["as is"] * 4 + ["odd count", "size short", "size long", "cut"]),
       st.binary(max_size=6), st.sampled_from([0, 4, 1 << 20]))
def test_map8_application_properties(pairs: list[tuple[bytes, bytes]], twist: str, damage: str, body: bytes,
                                     limit: int):
    """A message with map8 application properties: its JSON made in one loop (amqp_json.flat_map_json)
    is the tree's; the usual ones (text keys once, text, integer, boolean and null values) take
    that loop, and no other does."""
    if pairs and twist != "none":
        key, value = pairs[-1]
        if twist == "key repeated":
            pairs = [*pairs, (pairs[0][0], value)]
        else:
            new_key, new_value = _TWISTS[twist]
            pairs = [*pairs[:-1], (new_key or key, new_value or value)]
    else:
        twist = "none"
    entries = b"".join(k + v for k, v in pairs)
    if damage == "cut" and not entries:
        damage = "as is"  # nothing to cut
    count = 2 * len(pairs) + (damage == "odd count")
    size = len(entries) + 1 + {"size short": -1, "size long": 1}.get(damage, 0)
    section = b"\x00\x53\x74\xc1" + bytes([max(size, 0) & 0xFF, count & 0xFF]) + entries
    if damage == "cut":
        section = section[:-1]
    buf = section + b"\x00\x53\x75" + encode_value(body)
    usual = damage == "as is" and twist == "none" and len(entries) + 1 < 256
    assert (amqp_json.flat_map_json(buf, 3, len(section)) is not None) == usual, (pairs, twist, damage)
    # Forgotten first: an example's section decoded by the general way (under a limit) would be
    # remembered, and a later example with the same bytes would not take the loop.
    amqp._JSON_SEEN.clear()
    set_max_value(limit)
    try:
        _json_is_the_trees(buf)
    finally:
        set_max_value(jsonout.MAX_VALUE)


def test_map8_application_properties_cut_anywhere():
    """Every cut of a message whose map8 application properties end it (or come before its data):
    message_json is the tree's JSON, or None where the tree is none, and raises nothing (a map8
    with a size octet but no count octet at the end of the bytes once raised IndexError)."""
    props = b"\x00\x53\x74\xc1\x0d\x04\xa1\x01i\x55\x07\xa1\x01s\xa1\x02ok"
    for whole in (props, props + b"\x00\x53\x75\xa0\x01x"):
        for n in range(len(whole) + 1):
            buf = whole[:n]
            amqp._JSON_SEEN.clear()
            _json_is_the_trees(buf)
    buf = b"\x00\x53\x74\xc1\x00"  # a size octet of 0, the count octet missing
    assert amqp_json.message_json(buf, 0, len(buf)) is None and amqp.message_fields(buf, 0, len(buf), 0) is None
