"""Bounded state (issue 8 §6): per-channel cost, compact tag and sequence tracking, limits.

Memory is measured with tracemalloc (deterministic allocation sizes, not timings). The hostile
cases at full size are in bench/hostile.py.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.api import Direction
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from dissectors.amqp091.tracking import Ranges
from tests.state_walk import containers

C2S, S2C = Direction.C2S, Direction.S2C


def traced(fn) -> int:  # type: ignore[no-untyped-def]
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_an_open_channel_costs_about_a_hundred_bytes() -> None:
    n = 20_000
    conn = Amqp091Dissector().connection(False)
    for d, data, ts in E.Script().handshake(channel_max=0).steps:
        list(conn.feed(d, data, ts))
    opens = b"".join(E.method("Channel.Open", ch) for ch in range(1, n + 1))
    oks = b"".join(E.method("Channel.OpenOk", ch) for ch in range(1, n + 1))

    def run() -> None:
        list(conn.feed(C2S, opens, 1.0))
        list(conn.feed(S2C, oks, 1.1))

    per_channel = traced(run) / n
    assert per_channel < 160, per_channel  # the issue measured ~6.7 KB per channel before
    assert len(conn.chans) == n and not conn.tracks and conn.corr.outstanding(C2S) == 0


def test_unacked_deliveries_and_unconfirmed_publishes_are_ranges() -> None:
    n = 20_000
    s = E.Script().handshake().open_channel(1)
    s.c(E.method("Confirm.Select", 1)).s(E.method("Confirm.SelectOk", 1))
    s.c(E.method("Basic.Consume", 1, queue="q", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 1, consumer_tag="c"))
    conn = Amqp091Dissector().connection(False)
    for d, data, ts in s.steps:
        list(conn.feed(d, data, ts))
    pubs = b"".join(E.message(1, b"p") for _ in range(n))
    dels = b"".join(E.message(1, b"d", name="Basic.Deliver", consumer_tag="c", delivery_tag=t) for t in range(1, n + 1))

    def run() -> None:
        list(conn.feed(C2S, pubs, 2.0))
        list(conn.feed(S2C, dels, 2.1))

    grown = traced(run)
    tr = conn.tracks[1]
    assert (tr.unconfirmed.r, len(tr.unconfirmed), tr.unacked.r, len(tr.unacked)) == ([1, n + 1], n, [1, n + 1], n)
    assert grown < 4096, grown  # two ranges, not n frames (the issue: 300,000 publishes took 666 MB)
    # ack multiple=1 settles a prefix in one step; acks in order each take the first range's head.
    evs = list(conn.feed(C2S, E.method("Basic.Ack", 1, delivery_tag=n // 2, multiple=True), 3.0))
    assert not evs[0].findings and tr.unacked.r == [n // 2 + 1, n + 1]
    evs = list(conn.feed(S2C, E.method("Basic.Ack", 1, delivery_tag=n, multiple=True), 3.1))
    assert evs[0].get("confirms") == list(range(1, n + 1)) and len(tr.unconfirmed) == 0


OPS = st.lists(st.tuples(st.sampled_from(["add", "discard", "pop_upto", "clear"]), st.integers(0, 60)), max_size=80)


@settings(max_examples=400, deadline=None)
@given(OPS)
def test_ranges_behave_as_a_set(ops: list[tuple[str, int]]) -> None:
    r, model = Ranges(), set()
    for op, x in ops:
        if op == "add":
            r.add(x)
            model.add(x)
        elif op == "discard":
            assert r.discard(x) == (x in model)
            model.discard(x)
        elif op == "pop_upto":
            gone = r.pop_upto(x)
            want = sorted(v for v in model if v <= x)
            assert [v for s, e in gone for v in range(s, e)] == want
            model -= set(want)
        else:
            r.clear()
            model.clear()
        # Sorted, disjoint, non-adjacent half-open ranges holding exactly the model.
        flat = r.r
        assert flat == sorted(flat) and all(flat[i] < flat[i + 1] for i in range(len(flat) - 1))
        assert [v for i in range(0, len(flat), 2) for v in range(flat[i], flat[i + 1])] == sorted(model)
        assert len(r) == len(model) and all((v in r) == (v in model) for v in range(-1, 62))


def test_an_established_connection_keeps_no_empty_tables() -> None:
    """After the handshake and one channel open (the idle connection of the 100,000-connection
    hostile case), nothing is allocated for what is not happening: no empty dict, list or buffer, no
    content sequencing, tracking, heartbeat timer or outstanding-request table, and one Side object
    per direction that is the framer itself."""
    conn = Amqp091Dissector().connection(False)
    for d, data, ts in E.Script().handshake().open_channel(1).steps:
        list(conn.feed(d, data, ts))
    empty = [path for path, c in containers(conn) if not c]
    assert empty == []
    assert conn.chans == {1: "open"} and conn.tracks is None and conn.silence is None
    assert conn.content_c2s is None and conn.content_s2c is None
    assert conn.corr.c2s is None and conn.corr.s2c is None and conn.corr.outstanding(C2S) == 0
    assert conn.side_c2s.queue._buf is None and conn.side_s2c.queue._buf is None
    # A message split over segments creates the direction's content sequencing; a channel close
    # that leaves it empty lets it go again, and the snapshot round trip keeps the compact form.
    list(conn.feed(C2S, E.method("Basic.Publish", 1), 1.0))
    assert conn.content_c2s is not None and conn.content_s2c is None
    list(conn.feed(C2S, E.content_header(1, 0), 1.1))
    list(conn.feed(C2S, E.method("Channel.Close", 1, reply_code=200, reply_text="bye"), 1.2))
    list(conn.feed(S2C, E.method("Channel.CloseOk", 1), 1.3))
    assert conn.content_c2s is None and conn.tracks is None and conn.corr.c2s is None
    again = Amqp091Dissector().resume(json.loads(json.dumps(conn.snapshot())))
    assert [path for path, c in containers(again) if not c] == []
