"""Compressed sub-batches with the real codec libraries (the `compression` extra, installed for tests)."""

from __future__ import annotations

import importlib

import pytest

from analyzer.api import Frame
from dissectors.rabbitmq_stream import codecs
from dissectors.rabbitmq_stream.encode import (
    Script,
    all_findings,
    build_chunk,
    deliver,
    encode_message,
    handshake,
    request,
    response,
    run,
    sub_batch_entry,
)

MSGS = [encode_message(f"message number {i} ".encode() * 4) for i in range(20)]


def subscribed() -> Script:
    s = Script().extend(handshake())
    s.c(request("Subscribe", correlation_id=20, subscription_id=0, stream="s", offset_spec={"type": 1}, credit=2))
    return s.s(response("Subscribe", correlation_id=20, response_code=1))


@pytest.mark.parametrize("codec,name,module", [(2, "snappy", "snappy"), (3, "lz4", "lz4.frame"),
                                               (4, "zstd", "zstandard")])
def test_compressed_sub_batch_decodes_with_the_real_library(codec: int, name: str, module: str) -> None:
    importlib.import_module(module)  # the dev extra installs every codec: a missing one is a failure
    entry = sub_batch_entry(MSGS, codec)
    s = subscribed()
    s.s(deliver(0, build_chunk([entry], len(MSGS), 100)))
    events = run(s)
    assert all_findings(events) == []
    d = next(e for e in events if isinstance(e, Frame) and e.command == "Deliver")
    sb = d.fields[-1].child("entries").children[0]  # type: ignore[union-attr]
    assert sb.display == f"{len(MSGS)} records, {name}"
    records = sb.child("records").children  # type: ignore[union-attr]
    assert [r.value for r in records] == list(range(100, 120))
    assert [r.message for r in records] == MSGS  # type: ignore[attr-defined]


def test_zstd_bomb_is_not_expanded_past_the_limit() -> None:
    import zstandard
    bomb = zstandard.ZstdCompressor().compress(bytes(50_000_000))
    dec = codecs.DECOMPRESSORS[4]
    assert dec is not None and len(dec(bomb, 1000)) == 1000
