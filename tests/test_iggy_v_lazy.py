"""Iggy dialect V: a frame's 256-byte consensus header and each of its message batches are checked
from their numbers, their fields made when a view reads them and their JSON made without them
(connection._v_header, messages._batch). On every frame of every bundled V capture, and on batches
the encoder makes, cut short at every length: the JSON made without the fields is the JSON the
fields make, with the same values cut under a value limit, and the fields are what the schema
reads (the header's u128s as U128 reads them, the batch header as BATCH_HEADER does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.api import Field, Frame
from analyzer.jsonout import fields_json, set_max_value
from dissectors.iggy import IggyDissector
from dissectors.iggy.commands import V_EVICTION, V_REPLY, V_REQUEST
from dissectors.iggy.connection import _v_header
from dissectors.iggy.messages import (
    BATCH_HEADER,
    decode_polled,
    decode_send_messages,
    encode_polled,
    encode_send_messages,
)
from dissectors.iggy.types import U128
from dissectors.kit.lazy import LazyField
from tests import replay as R
from tests.jsoncheck import nodes, with_cuts

CAPS = Path(__file__).resolve().parent.parent / "captures" / "iggy"
DISSECTOR = IggyDissector()


def _v_frames() -> list[Frame]:
    out = []
    for p in sorted(CAPS.rglob("*.pcap*")):
        for rec in R.recordings(str(p), "iggy"):
            out += [e for e in R.events(DISSECTOR, rec) if isinstance(e, Frame) and e.dialect == "V"]
    return out


V_FRAMES = _v_frames()


def _lazy(fields: list[Field]) -> list[LazyField]:
    return [f for f in nodes(fields, LazyField) if f.name.startswith("[") or f.name == "batch"]


def _fresh(frame: Frame) -> list[LazyField]:
    """The frame's header and batches made anew from its bytes (the replay has read its tree)."""
    data = frame.data
    assert data is not None
    out: list[LazyField] = [_v_header(data)]  # type: ignore[list-item]
    if frame.command == "SEND_MESSAGES":
        out += _lazy(decode_send_messages("V", data, 256, len(data)).fields)
    elif frame.command == "POLL_MESSAGES_RESPONSE":
        out += _lazy(decode_polled("V", data, 256, len(data)).fields)
    return out


def _same_json(f: LazyField) -> None:
    fast = with_cuts(lambda: {f.name: f.json_value()})  # before anything reads the children
    assert f.json_value() is not None
    tree = with_cuts(lambda: {f.name: fields_json(f.children)})
    assert fast == tree, f.name


def test_the_corpus_has_v_frames_of_every_kind() -> None:
    commands = {f.fields[0].value for f in V_FRAMES}
    assert len(V_FRAMES) > 50 and {V_REQUEST, V_REPLY, V_EVICTION} <= commands


@pytest.mark.parametrize("limit", [0, 8])
def test_every_v_header_and_batch_gives_its_fields_json(limit: int) -> None:
    set_max_value(limit)
    try:
        seen = {"header": 0, "batch": 0}
        for frame in V_FRAMES:
            for f in _fresh(frame):
                _same_json(f)
                seen["header" if f.name == "header" else "batch"] += 1
        assert seen["header"] == len(V_FRAMES) and seen["batch"] > 5, seen
    finally:
        set_max_value(0)


def test_the_header_fields_are_what_the_schema_reads() -> None:
    for frame in V_FRAMES:
        header = frame.fields[0]
        data = frame.data
        assert header.name == "header" and data is not None
        for f in header.children or ():
            if f.size == 16:  # the u128s
                want, _ = U128.read(f.name, memoryview(data), f.offset, f.offset + 16)
                assert (f.value, f.display, type(f.value)) == (want.value, want.display, type(want.value))


@pytest.mark.parametrize("kind", ["send", "poll"])
def test_batches_cut_short_give_their_fields_json_and_read_as_the_schema(kind: str) -> None:
    msgs = [{"id": i + 1, "payload": b"m%d" % i, "headers": [], "offset": i} for i in range(3)]
    whole = encode_send_messages("V", 1, 2, msgs) if kind == "send" else encode_polled("V", msgs)
    decode = decode_send_messages if kind == "send" else decode_polled
    checked = 0
    for n in range(len(whole) + 1):
        data = whole[:n]
        for f in _lazy(decode("V", data, 0, n).fields):
            _same_json(f)
            header, _ = BATCH_HEADER.read_fields(memoryview(data), f.offset, f.offset + 256)
            kids = f.children or []
            assert [(k.name, k.value, k.offset, k.size) for k in kids[:8]] == \
                [(k.name, k.value, k.offset, k.size) for k in header]
            checked += 1
    assert checked > 100


#: The V header as the spec states it (iggy.md 9.1-9.4), typed here apart from the decoder's table
#: (dissectors/iggy/vheader.py): command -> (name, offset, size) in wire order.
_SPEC_COMMON = [("checksum", 0, 16), ("checksum_body", 16, 16), ("cluster", 32, 16), ("size", 48, 4),
                ("view", 52, 4), ("release", 56, 4), ("command", 60, 1), ("replica", 61, 1)]
_SPEC_PARTS = {
    V_REQUEST: [("client", 128, 16), ("request_checksum", 144, 16), ("timestamp", 160, 8), ("request", 168, 8),
                ("operation", 176, 1), ("session", 184, 8), ("user_id", 192, 4), ("code", 196, 4)],
    V_REPLY: [("request_checksum", 128, 16), ("context", 144, 16), ("client", 160, 16), ("op", 176, 8),
              ("commit", 184, 8), ("timestamp", 192, 8), ("request", 200, 8), ("operation", 208, 1),
              ("status", 216, 4)],
    V_EVICTION: [("client", 128, 16), ("server_protocol_version", 144, 4), ("server_protocol_version_min", 148, 4),
                 ("reason", 255, 1)],
    1: [],  # Ping: the prefix only
}


@pytest.mark.parametrize(("command", "operation", "code", "has_code"), [
    (V_REQUEST, 2, 3, True), (V_REQUEST, 1, 40, True), (V_REQUEST, 1, 41, False), (V_REQUEST, 160, 3, False),
    (V_REPLY, 2, 0, False), (V_EVICTION, 0, 0, False), (1, 0, 0, False)])
def test_the_header_is_read_where_the_spec_puts_it(command: int, operation: int, code: int, has_code: bool) -> None:
    """Every field of the header at its offset and size in the spec, with a value of its own
    (a u128 beyond 64 bits), by both the JSON and the fields; a request's command code only for
    operation 2 and the logins of operation 1."""
    from dissectors.iggy.vheader import header_json, header_leaves

    data = bytearray(256)
    want = {}
    for name, offset, size in _SPEC_COMMON + _SPEC_PARTS[command]:
        value = {"command": command, "operation": operation, "code": code}.get(name)
        if value is None:
            value = int.from_bytes(bytes((offset + i) % 251 + 1 for i in range(size)), "little")  # no byte 0
        data[offset:offset + size] = value.to_bytes(size, "little")
        if name != "code" or has_code:
            want[name] = (value, offset, size)
    got = {name: (value, offset, size) for name, value, offset, size, _ in header_leaves(bytes(data))}
    assert list(got.items()) == list(want.items())
    assert list(header_json(bytes(data)).items()) == [(name, v[0]) for name, v in want.items()]
