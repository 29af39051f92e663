"""The RabbitMQ Stream hot path is the general path, only faster: a differential test.

With ``StreamConnection.hot`` False every frame takes the general path (decode the layout into its
field tree, then every check). The hot path (StreamConnection._hot_publish, and _hot_request for
PublishConfirm, Credit and Deliver) must give exactly the
same frames, fields, Info lines and findings (tests.replay.normal, which builds the lazy trees) on
every bundled capture, on mutated variants of them, and on a session of publishes of every shape
(v1 simple messages, v1 sub-batches plain and gzip, v2 with filter values) with broken variants.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Field, Frame
from dissectors.kit.lazy import QUICK_INFO, LazyFrame
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream import connection as C
from dissectors.rabbitmq_stream import encode as E
from dissectors.rabbitmq_stream.connection import StreamConnection
from tests import replay as R
from tests.replay import Recorded
from tests.test_amqp091_hotpath import mutants

CAPS = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
ALL = sorted(p.name for p in CAPS.glob("*.pcap*"))
DISSECTOR = RabbitMQStreamDissector()


def tree(fields: list[Field] | None) -> list | None:
    """Every field with its value's repr (tests.replay.normal has values only as their JSON)."""
    if fields is None:
        return None
    return [(f.name, repr(f.value), f.offset, f.size, f.display, tree(f.children)) for f in fields]


def run(rec: Recorded) -> tuple[list, list]:
    made = R.events(DISSECTOR, rec)
    return R.normal(made), [tree(ev.fields) for ev in made if isinstance(ev, Frame)]


def both(rec: Recorded, monkeypatch: pytest.MonkeyPatch) -> list:
    hot = run(rec)
    with monkeypatch.context() as m:
        m.setattr(StreamConnection, "hot", False)
        general = run(rec)
    assert hot == general
    return hot[0]


def publishes() -> Recorded:
    """A clean session of publishes of every shape the hot path takes, with their confirms."""
    items = E.handshake()
    items.append((E.C2S, E.request("DeclarePublisher", correlation_id=5, publisher_id=1, publisher_reference="",
                                   stream="s")))
    items.append((E.S2C, E.response("DeclarePublisher", correlation_id=5, response_code=1)))
    pid = 0
    for i in range(6):
        msgs = [b"m%d-%d" % (i, j) * (1 + j % 3) for j in range(4)]
        v1 = [{"publishing_id": pid + j, "message": m} for j, m in enumerate(msgs)]
        items.append((E.C2S, E.request("Publish", 1, publisher_id=1, messages=v1)))
        pid += 4
        batch = [{"publishing_id": pid, "sub_batch": [b"like"] * 5, "compression": 0},
                 {"publishing_id": pid + 1, "sub_batch": msgs, "compression": 1}]
        items.append((E.C2S, E.request("Publish", 1, publisher_id=1, messages=batch)))
        pid += 2
        v2 = [{"publishing_id": pid + j, "filter_value": None if j % 2 else f"f{j}", "message": m}
              for j, m in enumerate(msgs)]
        items.append((E.C2S, E.request("Publish", 2, publisher_id=1, messages=v2)))
        pid += 4
        items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=list(range(pid - 10, pid)))))
    calls = [("feed", (d, data, 1.0 + k * 0.001)) for k, (d, data) in enumerate(items)]
    return Recorded("rabbitmq_stream", False, [*calls, ("end", (9.0,))])


def consumer() -> Recorded:
    """A consumer granting credit chunk by chunk while a publisher's confirms come one, several and
    none at a time (the hot path's PublishConfirm and Credit), then the confirms it must leave to
    the general path (an id confirmed twice in one frame, an id never published, an unknown
    publisher), Credits for a subscription never made and of the largest credit, and each command
    sent the wrong way."""
    items = E.handshake()
    items.append((E.C2S, E.request("Subscribe", correlation_id=4, subscription_id=0, stream="s",
                                   offset_spec={"type": 1}, credit=1)))
    items.append((E.S2C, E.response("Subscribe", correlation_id=4, response_code=1)))
    items.append((E.C2S, E.request("DeclarePublisher", correlation_id=5, publisher_id=1, publisher_reference="",
                                   stream="s")))
    items.append((E.S2C, E.response("DeclarePublisher", correlation_id=5, response_code=1)))
    pid = 0
    for i in range(8):
        n = i % 3 + 1
        items.append((E.C2S, E.request("Publish", 1, publisher_id=1, messages=[
            {"publishing_id": pid + j, "message": b"m%d" % (pid + j)} for j in range(n)])))
        items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=list(range(pid, pid + n)))))
        pid += n
        items.append((E.S2C, E.deliver(0, E.build_chunk([E.simple_entry(b"d%d" % i)], 1, first_offset=i))))
        items.append((E.C2S, E.request("Credit", subscription_id=0, credit=1 + i % 2)))
    items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=[])))
    items.append((E.C2S, E.request("Publish", 1, publisher_id=1, messages=[{"publishing_id": pid, "message": b"x"}])))
    items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=[pid, pid])))
    items.append((E.S2C, E.request("PublishConfirm", publisher_id=1, publishing_ids=[pid + 100])))
    items.append((E.S2C, E.request("PublishConfirm", publisher_id=7, publishing_ids=[1])))
    items.append((E.C2S, E.request("Credit", subscription_id=9, credit=5)))
    items.append((E.C2S, E.request("Credit", subscription_id=0, credit=0xFFFF)))
    items.append((E.C2S, E.request("PublishConfirm", publisher_id=1, publishing_ids=[])))  # the wrong way
    items.append((E.S2C, E.request("Credit", subscription_id=0, credit=1)))
    calls = [("feed", (d, data, 1.0 + k * 0.001)) for k, (d, data) in enumerate(items)]
    return Recorded("rabbitmq_stream", False, [*calls, ("end", (9.0,))])


def deliveries() -> Recorded:
    """Chunks of every shape a consumer is delivered, with credit granted chunk by chunk (the hot
    path's Deliver): v1 and v2, simple entries and sub-batches (plain and gzip), tracking chunks,
    a trailer, an empty chunk; then the ones it must leave to the general path: a bad CRC, a bad
    magic, an unknown chunk type, entries and records the header miscounts, a data length past
    the frame, a trailer of the wrong length, a chunk without credit left, after a Credit that made
    it negative, and for a subscription never made."""
    items = E.handshake()
    items.append((E.C2S, E.request("Subscribe", correlation_id=4, subscription_id=0, stream="s",
                                   offset_spec={"type": 1}, credit=1)))
    items.append((E.S2C, E.response("Subscribe", correlation_id=4, response_code=1)))
    simple = [E.simple_entry(b"m%d" % i * (1 + i)) for i in range(5)]
    batches = [E.sub_batch_entry([b"a", b"bb", b"ccc"]), E.sub_batch_entry([b"x" * 40] * 4, compression=1)]
    clean = [E.build_chunk(simple, 5, 0), E.build_chunk(batches, 7, 5), E.build_chunk(simple[:2], 2, 12, chunk_type=1),
             E.build_chunk(simple[:1], 1, 14, chunk_type=2, trailer=b"tr"), E.build_chunk([], 0, 15),
             E.build_chunk(simple + batches, 12, 15, bloom_size=3)]
    for i, chunk in enumerate(clean):
        items.append((E.S2C, E.deliver(0, chunk, version=1 + i % 2, committed_chunk_id=i)))
        items.append((E.C2S, E.request("Credit", subscription_id=0, credit=1)))
    whole = E.build_chunk(simple, 5, 30)
    broken = [E.build_chunk(simple, 5, 30, crc=1), E.build_chunk(simple, 5, 30, magic=0x51),
              E.build_chunk(simple, 5, 30, chunk_type=7), E.build_chunk(simple, 5, 30, num_entries=4),
              E.build_chunk(simple, 6, 30), whole[:-3], E.build_chunk(simple, 5, 30, trailer=b"abc")[:-1]]
    for chunk in broken:
        items.append((E.S2C, E.deliver(0, chunk)))
        items.append((E.C2S, E.request("Credit", subscription_id=0, credit=1)))
    items.append((E.S2C, E.deliver(0, whole)))
    items.append((E.S2C, E.deliver(0, whole)))  # no credit left (the last Credit gave one)
    items.append((E.C2S, E.request("Credit", subscription_id=0, credit=0xFFF0)))  # -16
    items.append((E.S2C, E.deliver(0, whole)))
    items.append((E.S2C, E.deliver(3, whole)))  # never subscribed
    calls = [("feed", (d, data, 1.0 + k * 0.001)) for k, (d, data) in enumerate(items)]
    return Recorded("rabbitmq_stream", False, [*calls, ("end", (9.0,))])


def test_hot_and_general_paths_agree_on_deliveries(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = deliveries()
    out = both(rec, monkeypatch)
    ids = sorted(f[1] for e in out if e[0] == "frame" for f in e[9])
    assert ids == sorted(["rabbitmq_stream.chunk.crc_mismatch"] + ["rabbitmq_stream.chunk.malformed"] * 7
                         + ["rabbitmq_stream.deliver.credit_exhausted"] * 2
                         + ["rabbitmq_stream.deliver.unknown_subscription"]), ids
    for variant in mutants(rec, "stream-hot-deliveries", 300, 6):
        both(variant, monkeypatch)


def test_the_hot_path_takes_the_clean_deliveries() -> None:
    made = [ev for ev in R.events(DISSECTOR, deliveries()) if getattr(ev, "command", None) == "Deliver"]
    lazy = [type(ev) is LazyFrame and ev._build is not None for ev in made]
    assert lazy == [True] * 6 + [False] * 7 + [True, False, False, False]


def test_deliver_info_lines_without_the_tree() -> None:
    made = [ev for ev in R.events(DISSECTOR, deliveries()) if type(ev) is LazyFrame and ev.command == "Deliver"]
    quick = [QUICK_INFO[C.build_deliver](ev, ev._ctx) for ev in made]
    assert quick == [C.build_deliver(ev, ev._ctx)[1] for ev in made]
    assert "Deliver sub=0 first_offset=12 records=2 type=1" in quick


@pytest.mark.parametrize("name", ALL)
def test_hot_and_general_paths_agree_on_every_capture(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for rec in R.recordings(str(CAPS / name), "rabbitmq_stream"):
        both(rec, monkeypatch)
        for variant in mutants(rec, f"stream-hot-{name}", 20, 6):
            both(variant, monkeypatch)


def test_hot_and_general_paths_agree_on_publishes(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = publishes()
    out = both(rec, monkeypatch)
    assert sum(1 for e in out if e[0] == "frame" and e[4] == "Publish") == 18
    assert not [e for e in out if e[0] == "finding"] and not [f for e in out if e[0] == "frame" for f in e[9]]
    for variant in mutants(rec, "stream-hot-publishes", 300, 6):
        both(variant, monkeypatch)


def test_hot_and_general_paths_agree_on_confirms_and_credits(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = consumer()
    out = both(rec, monkeypatch)
    ids = [f[1] for e in out if e[0] == "frame" for f in e[9]] + [e[1] for e in out if e[0] == "finding"]
    assert sorted(ids) == ["rabbitmq_stream.key.wrong_direction"] * 2 + ["rabbitmq_stream.publish.unknown_publishing_id"] * 3
    for variant in mutants(rec, "stream-hot-consumer", 300, 6):
        both(variant, monkeypatch)


def test_the_hot_path_takes_the_clean_confirms_and_credits() -> None:
    """The differential test above is only worth something if the hot path runs: the clean
    PublishConfirms and Credits come back lazy, the others as the general path makes them."""
    made = [ev for ev in R.events(DISSECTOR, consumer()) if getattr(ev, "command", None) in ("PublishConfirm", "Credit")]
    lazy = [type(ev) is LazyFrame and ev._build is not None for ev in made]
    assert lazy == [True] * 16 + [True, False, False, False, True, True, False, False]


def test_frames_over_the_negotiated_frame_max_take_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    items = E.handshake(frame_max=64)
    items.append((E.C2S, E.request("DeclarePublisher", correlation_id=5, publisher_id=1, publisher_reference="",
                                   stream="s")))
    items.append((E.S2C, E.response("DeclarePublisher", correlation_id=5, response_code=1)))
    for size in (10, 60, 100):
        items.append((E.C2S, E.request("Publish", 1, publisher_id=1,
                                       messages=[{"publishing_id": size, "message": b"x" * size}])))
    rec = Recorded("rabbitmq_stream", False, [("feed", (d, data, 1.0)) for d, data in items])
    out = both(rec, monkeypatch)
    over = [(e[4], f[1]) for e in out if e[0] == "frame" for f in e[9]]
    assert over == [("OpenResponse", "rabbitmq_stream.size.frame_max")] + [("Publish", "rabbitmq_stream.size.frame_max")] * 2


def test_the_hot_path_takes_the_publishes() -> None:
    """The differential test is only worth something if the hot path runs: every Publish of the
    clean session comes back lazy."""
    made = R.events(DISSECTOR, publishes())
    publish = [ev for ev in made if getattr(ev, "command", None) == "Publish"]
    assert len(publish) == 18 and all(type(ev) is LazyFrame and ev._build is not None for ev in publish)


def test_publish_info_lines_remembered_by_their_octets(monkeypatch: pytest.MonkeyPatch) -> None:
    """quick_publish remembers a Publish's Info line by its version and the octets of its publisher
    id and message count: read first, each line is the one its tree gives, with the memory empty,
    warm, or full of other lines, and the memory stays within its bound."""
    items = E.handshake()
    for pub in (1, 2):
        items.append((E.C2S, E.request("DeclarePublisher", correlation_id=pub, publisher_id=pub,
                                       publisher_reference="", stream="s")))
        items.append((E.S2C, E.response("DeclarePublisher", correlation_id=pub, response_code=1)))
    pid = 0
    for pub in (1, 2):
        for n in (1, 2, 3):
            for version in (1, 2):
                msgs = [{"publishing_id": pid + j, "message": b"m%d" % j} for j in range(n)]
                if version == 2:
                    msgs = [{**m, "filter_value": None} for m in msgs]
                items.append((E.C2S, E.request("Publish", version, publisher_id=pub, messages=msgs)))
                pid += n
    rec = Recorded("rabbitmq_stream", False, [("feed", (d, data, 1.0)) for d, data in items])

    def lines() -> list[str]:
        return [ev.info for ev in R.events(DISSECTOR, rec) if getattr(ev, "command", None) == "Publish"]

    trees = remembered_lines(monkeypatch, lines, C.build_publish, "_PUBLISH_INFO", 12,
                             lambda k: (3, k.to_bytes(5, "big")))
    assert len(set(trees)) == 6 and len(trees) == 12


def remembered_lines(monkeypatch: pytest.MonkeyPatch, lines: Callable[[], list[str]], builder: Callable,
                     memory_name: str, warm: int, other_key: Callable[[int], Any]) -> list[str]:
    """The Info lines ``lines()`` reads made from the trees (``builder``'s quick way left out),
    then read with the quick way's memory ``C.<memory_name>`` empty, warm (``warm`` lines in it)
    and full of other lines (keys from ``other_key``): the same lines each time, and the memory
    within its bound. Gives back the lines."""
    with monkeypatch.context() as m:
        m.delitem(QUICK_INFO, builder)  # every line from its tree
        trees = lines()
    memory: dict = {}
    monkeypatch.setattr(C, memory_name, memory)
    assert lines() == trees  # empty at first, then warm
    assert len(memory) == warm
    assert lines() == trees
    memory.clear()
    limit = getattr(C, memory_name + "_MAX")
    memory.update({other_key(k): "other" for k in range(limit)})  # full
    assert lines() == trees and len(memory) <= limit
    return trees


def test_confirm_and_credit_info_lines_remembered_by_their_octets(monkeypatch: pytest.MonkeyPatch) -> None:
    """quick_request remembers a PublishConfirm's or Credit's Info line by its key, version and the
    octets the line names (publisher id and count of ids; subscription id and credit): read
    first, each line is the one its tree gives, with the memory empty, warm, or full of others."""
    rec = consumer()

    def lines() -> list[str]:
        return [ev.info for ev in R.events(DISSECTOR, rec)
                if type(ev) is LazyFrame and ev.command in ("PublishConfirm", "Credit")]

    trees = remembered_lines(monkeypatch, lines, C.build_request, "_REQUEST_INFO", 8, lambda k: k.to_bytes(9, "big"))
    assert len(trees) == 19 and len(set(trees)) == 8, trees
