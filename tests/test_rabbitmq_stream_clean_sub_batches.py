"""The memory of compressed sub-batches checked clean (sub_batch.check_sub_batch): a consumer is
delivered the sub-batches its publishers sent, and each is decompressed and checked once. What a
frame makes is the same with the memory as without it, including when the frame's decompression
budget has no room left for a sub-batch seen clean before (it is then checked again, and the
limit is reported)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from analyzer.api import Frame
from dissectors.kit import inflate
from dissectors.kit.memo import OctetMemo
from dissectors.rabbitmq_stream import codecs, sub_batch
from dissectors.rabbitmq_stream import encode as E
from tests import replay as R
from tests.replay import Recorded
from tests.test_rabbitmq_stream_hotpath import CAPS, DISSECTOR, tree

MSGS = [E.encode_message(f"message number {i} ".encode() * 4) for i in range(20)]
GZIP = E.sub_batch_entry(MSGS, compression=1)
ULEN = sum(4 + len(m) for m in MSGS)  # the sub-batch's uncompressed length


class Forgetful(OctetMemo):
    """A memory that keeps nothing: every sub-batch is checked in full."""

    def remember(self, key: bytes, value: Any) -> Any:
        return value


def session() -> Recorded:
    """A publisher sends the gzip sub-batch, a consumer is delivered it alone, then twice in one
    chunk (with a budget for one of them only: see the test), then once more."""
    items = E.handshake()
    items.append((E.C2S, E.request("DeclarePublisher", correlation_id=3, publisher_id=1, publisher_reference="",
                                   stream="s")))
    items.append((E.S2C, E.response("DeclarePublisher", correlation_id=3, response_code=1)))
    # Publish v1 of one sub-batch entry (publisher 1, publishing id 1), its octets GZIP's own (the
    # encoder's gzip stamps the time: compressed again, they could differ).
    items.append((E.C2S, E.frame(2, 1, struct.pack(">BIQ", 1, 1, 1) + GZIP)))
    items.append((E.C2S, E.request("Subscribe", correlation_id=4, subscription_id=0, stream="s",
                                   offset_spec={"type": 1}, credit=10)))
    items.append((E.S2C, E.response("Subscribe", correlation_id=4, response_code=1)))
    for i, entries in enumerate(([GZIP], [GZIP, GZIP], [GZIP])):
        items.append((E.S2C, E.deliver(0, E.build_chunk(entries, len(MSGS) * len(entries), 20 * i))))
    calls = [("feed", (d, data, 1.0 + k * 0.001)) for k, (d, data) in enumerate(items)]
    return Recorded("rabbitmq_stream", False, [*calls, ("end", (9.0,))])


def run(rec: Recorded, monkeypatch: pytest.MonkeyPatch, memo: OctetMemo) -> tuple[list, list, int]:
    """The events (normalised), every frame's tree, and how many gzip sub-batches were decompressed."""
    checked = 0
    full = codecs.DECOMPRESSORS[1]
    assert full is not None

    def counted(data: bytes, limit: int) -> bytes:
        nonlocal checked
        checked += 1
        return full(data, limit)

    with monkeypatch.context() as m:
        m.setattr(sub_batch, "_CLEAN_SUB_BATCHES", memo)
        m.setitem(codecs.DECOMPRESSORS, 1, counted)
        made = R.events(DISSECTOR, rec)
    return R.normal(made), [tree(ev.fields) for ev in made if isinstance(ev, Frame)], checked


def test_a_sub_batch_seen_clean_is_checked_once_and_again_when_the_budget_is_short(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(inflate.ENV, str(ULEN + ULEN // 2))  # room for one of the sub-batches per frame
    inflate.limit.cache_clear()  # read once and kept: read it again now, and after the test
    try:
        rec = session()
        remembered, remembered_trees, fewer = run(rec, monkeypatch, OctetMemo(1 << 20))
        forgotten, forgotten_trees, every = run(rec, monkeypatch, Forgetful(1 << 20))
    finally:
        monkeypatch.undo()
        inflate.limit.cache_clear()
    assert remembered == forgotten and remembered_trees == forgotten_trees
    limits = [f for e in remembered if e[0] == "frame" for f in e[9] if f[1] == "rabbitmq_stream.limit.exceeded"]
    assert len(limits) == 1, remembered  # the second sub-batch of the two-entry chunk, and only it
    # The publish checks the sub-batch and the deliveries of it alone find it remembered; the
    # chunk of two finds the first remembered and checks the second (no room: the limit), and the
    # general path then decodes that chunk whole. Without the memory every one is checked.
    assert fewer < every, (fewer, every)


@pytest.mark.parametrize("name", sorted(p.name for p in CAPS.glob("*.pcap*")))
def test_every_capture_is_the_same_with_and_without_the_memory(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for rec in R.recordings(str(CAPS / name), "rabbitmq_stream"):
        assert run(rec, monkeypatch, OctetMemo(1 << 20))[:2] == run(rec, monkeypatch, Forgetful(1 << 20))[:2]


def test_the_memory_is_bounded_by_its_octets() -> None:
    memo = OctetMemo(1000, overhead=100)
    for i in range(100):
        memo.remember(bytes([i]) * 150, True)
        assert memo.octets <= 1000 and len(memo) <= 4
    assert bytes([99]) * 150 in memo


def test_the_publish_is_a_clean_publish_of_the_delivered_octets(monkeypatch: pytest.MonkeyPatch) -> None:
    events, _trees, _n = run(session(), monkeypatch, OctetMemo(1 << 20))
    publish = [e for e in events if e[0] == "frame" and e[4] == "Publish"]
    assert len(publish) == 1 and not publish[0][9], publish
