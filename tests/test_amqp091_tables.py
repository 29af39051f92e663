"""Methods with field tables (Connection.Start and StartOk, the declares, binds, Basic.Consume)
are checked from their values when every table is clean, and their trees are built only when a
view asks (decode._clean_values); any other goes through the tree reader, which says what is
wrong. Differential against reading every table's tree at once (``decode._TABLED`` emptied): the
same events, trees, Info lines and findings (tests.replay.normal) on every bundled capture with
mutated and mid-stream variants, and on a session of tables of every type and their mutants.
The broker's product and version (frame-min-size) read from a lazy Connection.Start's bytes are
its tree's."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from analyzer.api import Direction, Frame
from dissectors.amqp091 import Amqp091Dissector, decode
from dissectors.amqp091 import encode as E
from dissectors.amqp091.wire import Tagged, encode_entries
from dissectors.kit.lazy import LazyFrame
from tests.replay import Recorded, events, replay
from tests.test_amqp091_hotpath import ALL, mutants, variants

DISSECTOR = Amqp091Dissector()


def both(rec: Recorded, monkeypatch: pytest.MonkeyPatch) -> list:
    lazy = replay(DISSECTOR, rec)
    with monkeypatch.context() as m:
        m.setattr(decode, "_TABLED", {})
        eager = replay(DISSECTOR, rec)
    assert lazy == eager
    return lazy


@pytest.mark.parametrize("name", ALL)
def test_clean_tables_read_lazily_on_every_capture_and_variants(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for rec in variants(name, f"tables-{name}", mutated=20, joined=6):
        both(rec, monkeypatch)


def _start(props: dict | bytes) -> bytes:
    """A Connection.Start whose server-properties are ``props`` (or those entries' raw bytes)."""
    entries = props if isinstance(props, bytes) else encode_entries(props)
    args = (b"\x00\x09" + struct.pack(">I", len(entries)) + entries + struct.pack(">I", 5) + b"PLAIN"
            + struct.pack(">I", 5) + b"en_US")
    return E.raw_method(10, 10, 0, args)


#: Tables of every kind: every tag RabbitMQ encodes, nested tables and arrays (the session below
#: adds the spec-only tag L and an unknown tag, which are noted: those frames take the tree reader).
EVERY_TAG = {
    "t": True, "b": Tagged("b", -3), "B": Tagged("B", 200), "u": Tagged("u", 60000), "s": Tagged("s", -2),
    "I": 7, "i": Tagged("i", 4_000_000_000), "l": 2**40, "f": Tagged("f", 1.5), "d": 2.25,
    "D": Decimal("1.25"), "S": "text", "x": b"\x00\xff", "T": datetime(2024, 5, 1, tzinfo=UTC), "V": None,
    "F": {"inner": {"deeper": [1, "two", {"three": 3}]}}, "A": [1, [2, []], {}],
}
SERVER_PROPERTIES = [
    {"product": "RabbitMQ", "version": "4.1.0", "capabilities": {"publisher_confirms": True}},
    {"product": "RabbitMQ", "version": "4.0.9"},
    {"version": "4.2.1", "product": "RabbitMQ", "platform": "Erlang/OTP 27"},
    {"product": "RabbitMQ", "version": "10.0"},
    {"product": "RabbitMQ", "version": "4"},
    {"product": "RabbitMQ"},
    {"version": "4.1.0"},
    {},
    {"product": "RabbitMQ", "version": 41},  # not a string: the tree says
    {"product": "RabbitMQ", "version": None},
    {"product": b"RabbitMQ", "version": "4.1.0"},  # a byte array
    {"product": "RabbitMQ", "version": "4.1.0", **EVERY_TAG},
    {"product": "Other", "version": "4.1.0"},
]
RAW_SERVER_PROPERTIES = [
    # Duplicate names: the first counts, in the tree and in the bytes.
    encode_entries({"product": "RabbitMQ"}) + encode_entries({"product": "Other", "version": "4.1"})
    + encode_entries({"version": "3.13"}),
    b"\x07product" + b"S" + struct.pack(">I", 9) + b"Rabbit\xffMQ" + encode_entries({"version": "4.1"}),  # not UTF-8
    encode_entries({"version": "4.1", "product": "RabbitMQ"}) + b"\x01kU\x00\x01",  # a spec-only tag
    encode_entries({"version": "4.1", "product": "RabbitMQ"}) + b"\x01kZ",  # an unknown tag
    encode_entries({"version": "4.1"}) + b"\x07product",  # the last name overruns the table
]


def table_session(props: dict | bytes, tune_frame_max: int = 131072) -> Recorded:
    """A handshake with this Start, then declarations, a bind and a consume with arguments of every
    type; the client's tune-ok asks for ``tune_frame_max`` (below 8192 it is under RabbitMQ 4.1's
    frame-min-size)."""
    s = E.Script()
    s.c(E.PROTOCOL_HEADER)
    s.s(_start(props))
    s.c(E.method("Connection.StartOk", client_properties={"product": "test", **EVERY_TAG}, mechanism="PLAIN",
                 response="\0guest\0guest", locale="en_US"))
    s.s(E.method("Connection.Tune", channel_max=2047, frame_max=131072, heartbeat=0))
    s.c(E.method("Connection.TuneOk", channel_max=2047, frame_max=tune_frame_max, heartbeat=0))
    s.c(E.method("Connection.Open", virtual_host="/")).s(E.method("Connection.OpenOk"))
    s.open_channel(1)
    s.c(E.method("Exchange.Declare", 1, exchange="x", type="topic", arguments={"alternate-exchange": "ae"}))
    s.s(E.method("Exchange.DeclareOk", 1))
    s.c(E.method("Queue.Declare", 1, queue="q", durable=True, arguments={"x-queue-type": "quorum", **EVERY_TAG}))
    s.s(E.method("Queue.DeclareOk", 1, queue="q"))
    s.c(E.method("Queue.Bind", 1, queue="q", exchange="x", routing_key="k.#", arguments={"x-match": "all"}))
    s.s(E.method("Queue.BindOk", 1))
    s.c(E.method("Exchange.Bind", 1, destination="x", source="amq.topic", routing_key="#"))
    s.s(E.method("Exchange.BindOk", 1))
    s.c(E.method("Basic.Consume", 1, queue="q", consumer_tag="c", arguments={"x-priority": Tagged("L", 5)}))
    s.s(E.method("Basic.ConsumeOk", 1, consumer_tag="c"))
    s.c(E.method("Queue.Unbind", 1, queue="q", exchange="x", routing_key="k.#"))
    s.s(E.method("Queue.UnbindOk", 1))
    s.c(E.method("Exchange.Unbind", 1, destination="x", source="amq.topic", routing_key="#",
                 arguments={"bad": Tagged("Z", b"")}))
    s.s(E.method("Exchange.UnbindOk", 1))
    s.close((1,))
    calls = [("feed", (d, data, ts)) for d, data, ts in s.steps] + [("end", (s.ts + 1,))]
    return Recorded("amqp091", False, calls)


def sessions() -> Iterator[Recorded]:
    for props in SERVER_PROPERTIES + RAW_SERVER_PROPERTIES:
        yield table_session(props)
        yield table_session(props, tune_frame_max=5000)


def test_clean_tables_read_lazily_on_tables_of_every_type(monkeypatch: pytest.MonkeyPatch) -> None:
    lazy_made = 0
    for i, rec in enumerate(sessions()):
        out = both(rec, monkeypatch)
        assert sum(1 for e in out if e[0] == "frame") == 27
        lazy_made += sum(isinstance(f, LazyFrame) and f.code in decode._TABLED for f in _frames(rec))
        for variant in mutants(rec, f"tables-{i}", 15, 3):
            both(variant, monkeypatch)
    # The lazy reader really runs: Exchange.Declare, Queue.Bind, Exchange.Bind, Queue.Unbind, and
    # most Connection.Starts.
    assert lazy_made > 4 * 2 * (len(SERVER_PROPERTIES) + len(RAW_SERVER_PROPERTIES))


def test_a_frame_with_a_noted_or_broken_table_takes_the_tree_reader() -> None:
    frames = {f.command: f for f in _frames(table_session(SERVER_PROPERTIES[0]))}
    for name in ("Connection.Start", "Connection.StartOk", "Exchange.Declare", "Queue.Declare", "Queue.Bind",
                 "Exchange.Bind"):  # Exchange.Bind: an empty table
        assert isinstance(frames[name], LazyFrame) and not frames[name].findings, name
    # The spec-only tag L and an unknown tag are noted: only the tree reader says so.
    for name in ("Basic.Consume", "Exchange.Unbind"):
        assert not isinstance(frames[name], LazyFrame), name
        assert frames[name].findings, name


def _frames(rec: Recorded) -> list[Frame]:
    return [e for e in events(DISSECTOR, rec) if isinstance(e, Frame)]


def _tree_product(frame: Frame) -> tuple:
    props = next(f for f in frame.fields if f.name == "server_properties")
    product, version = props.child("product"), props.child("version")
    return (None if product is None else product.value), (None if version is None else version.value)


@pytest.mark.parametrize("props", SERVER_PROPERTIES + RAW_SERVER_PROPERTIES)
def test_the_brokers_product_and_version_from_the_bytes_are_the_trees(props: dict | bytes) -> None:
    data = _start(props)
    frame, meth, values = decode.method(Direction.S2C, data, 0, len(data) - 8, 0, [])
    assert meth is not None and values is not None
    assert decode.server_product(frame) == _tree_product(frame)
    # Answered again from the memory of Start frames (decode._PRODUCTS_SEEN), which every case of
    # this test fills in turn: a key that confused two brokers' frames would fail a later case.
    assert decode.server_product(frame) == _tree_product(frame)
    if data in decode._PRODUCTS_SEEN:  # product and version as strings: read from the bytes
        assert decode._PRODUCTS_SEEN[data] == _tree_product(frame)


def test_a_brokers_start_frame_is_read_once() -> None:
    data = _start(SERVER_PROPERTIES[0])
    frame, _meth, _values = decode.method(Direction.S2C, data, 0, len(data) - 8, 0, [])
    decode._PRODUCTS_SEEN.clear()
    assert decode.server_product(frame) == _tree_product(frame)
    assert decode._PRODUCTS_SEEN == {data: _tree_product(frame)}


def test_frame_min_follows_the_brokers_version() -> None:
    """RabbitMQ 4.1 and later: a tune-ok frame-max under 8192 is below frame-min-size."""
    def below(props: dict | bytes) -> bool:
        rec = table_session(props, tune_frame_max=5000)
        return any("below frame-min-size" in f.message for f in _findings(rec))
    assert below(SERVER_PROPERTIES[0]) and below(SERVER_PROPERTIES[2]) and below(SERVER_PROPERTIES[3])
    assert not below(SERVER_PROPERTIES[1]) and not below(SERVER_PROPERTIES[4]) and not below(SERVER_PROPERTIES[8])
    assert not below(SERVER_PROPERTIES[10])  # the product as a byte array
    assert below(RAW_SERVER_PROPERTIES[0])  # the first entry of each name: RabbitMQ, 4.1
    assert below(RAW_SERVER_PROPERTIES[2])  # a noted tag elsewhere in the table: read by the tree


def _findings(rec: Recorded) -> list:
    return [f for e in events(DISSECTOR, rec) for f in (e.findings if isinstance(e, Frame) else [e])]
