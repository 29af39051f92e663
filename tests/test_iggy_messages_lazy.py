"""A Z1/Z2/C/V list of messages is checked without making its MessageFields (MessagesField.lazy):
they are made when a view reads the list. On SEND_MESSAGES payloads and POLL_MESSAGES responses
of every such dialect, whole and cut short at every length: the list counts the messages its
children name (a cut-off one too, the rest of the bytes not), gives their offsets and ends as its
children have them, makes the JSON its children make, and reading it records no problem twice."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import analyzer.jsonout as jsonout
from analyzer.api import Field
from analyzer.jsonout import field_json, fields_json, set_max_value
from dissectors.iggy import messages
from dissectors.iggy.messages import (
    MessageField,
    MessagesField,
    decode_polled,
    decode_send_messages,
    encode_polled,
    encode_send_messages,
)
from tests.jsoncheck import nodes, with_cuts

MESSAGES = [
    {"id": 1, "payload": b'{"order": 1}', "headers": [], "offset": 0},
    {"id": (1 << 100) + 7, "payload": b"\x00\xffbinary", "headers": [], "offset": 1},
    {"id": 3, "payload": b"with headers", "offset": 2,
     "headers": [{"key": "k", "kind": 11, "value": 4}, {"key": "n", "kind": 11, "value": 9}]},
    {"id": 4, "payload": b"last", "headers": [], "offset": 3},
]
DIALECTS = ["Z1", "Z2", "C", "V"]


def _payloads(dialect: str) -> list[tuple[str, bytes]]:
    return [("send", encode_send_messages(dialect, 1, 2, MESSAGES)), ("poll", encode_polled(dialect, MESSAGES))]


def _decode(kind: str, dialect: str, buf: bytes) -> Any:
    return (decode_send_messages if kind == "send" else decode_polled)(dialect, buf, 0, len(buf))


def _lists(fields: list[Field]) -> list[MessagesField]:
    return nodes(fields, MessagesField)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cut_list_counts_spans_and_converts_as_its_children(dialect: str) -> None:
    seen_cut = seen_rest = 0
    for kind, whole in _payloads(dialect):
        for n in range(len(whole), 0, -1):
            d = _decode(kind, dialect, whole[:n])
            problems = list(d.problems)
            for ms in _lists(d.fields):
                fast = with_cuts(lambda m=ms: fields_json([m]))  # before anything reads the children
                kids = ms.children
                assert kids is not None
                named = [k for k in kids if k.name.startswith("[")]
                assert ms.value == len(named), (kind, n)
                assert ms.message_spans() == [(k.offset, k.offset + k.size) for k in named], (kind, n)
                assert fast == with_cuts(lambda m=ms: {"messages": [field_json(c, "messages") for c in m.children]})
                assert all(type(k) is MessageField for k in named[:-1]), (kind, n)
                seen_cut += any(k.display == "cut off" for k in named)
                seen_rest += any(k.name == "rest" for k in kids)
            assert d.problems == problems, (kind, n)  # the children made no second problem
    assert seen_cut and seen_rest


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("limit", [0, 4])
def test_whole_lists_give_every_message_and_its_json(dialect: str, limit: int) -> None:
    set_max_value(limit)
    try:
        for kind, whole in _payloads(dialect):
            d = _decode(kind, dialect, whole)
            assert not d.problems, d.problems
            (ms,) = _lists(d.fields)
            fast = with_cuts(lambda m=ms: fields_json([m]))
            assert ms.value == len(MESSAGES)
            assert [m.value for m in ms.children] == [m["id"] for m in MESSAGES]
            assert [m.name for m in ms.children] == [f"[{i}]" for i in range(len(MESSAGES))]
            assert fast == with_cuts(lambda m=ms: {"messages": [fields_json(c.children) for c in m.children]})
            want = ['{"order": 1}', "00ff62696e617279", "with headers", "last"] if not limit else \
                ['{"or', "00ff6269", "with", "last"]
            assert [m["payload"] for m in json.loads(fast[0])["messages"]] == want
    finally:
        set_max_value(jsonout.MAX_VALUE)


# ----------------------------------------------------------------- _frames' usual-message shortcut


def _frames_one_by_one(w: Any, off: int, end: int, count: int | None, first: int,
                       base: tuple[int, int] | None) -> tuple[list[int], Field | None, int]:
    """_frames as it was before its shortcut: every message through _frame."""
    starts: list[int] = []
    tail = None
    i = first
    while off < end and (count is None or i - first < count):
        f, new = messages._frame(w, i, off, end, base, False)
        if f is None:
            tail, off = w.rest("rest", off, end), end
            break
        if f is not messages._WHOLE:
            tail, off = f, new
            break
        starts.append(off)
        off = new
        i += 1
    return starts, tail, off


def _shape(tail: Field | None) -> Any:
    return None if tail is None else json.dumps(field_json(tail, "t"), sort_keys=True, default=repr)


def _variants(dialect: str, polled: bool, rnd: random.Random) -> list[bytes]:
    """Lists of messages as real software sends them, and with what the shortcut must not take:
    a checksum that does not verify (or, sent, one set by the client), reserved bytes, user
    headers, a payload over the limit, bytes flipped at random, cut at random."""
    base = (100, 5_000) if dialect == "V" else None
    ms = [{"id": k + 1, "payload": bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))),
           "offset": 100 + k} for k in range(6)]
    frames = [messages.encode_frame(dialect, m, polled=polled, base=base, index=k) for k, m in enumerate(ms)]
    out = [b"".join(frames)]
    hsize = messages.HEADER_SIZE[dialect]
    for k in range(len(frames)):
        for change in ("checksum", "reserved", "headers", "limit", "zero"):
            fs = list(frames)
            f = bytearray(fs[k])
            st, _, ih, ip, ir = messages._HEAD_PLAN[dialect]
            if change == "checksum":
                f[0] ^= 1
            elif change == "zero":
                f[0:8] = bytes(8)
            elif change == "reserved":
                if not ir:
                    continue
                f[hsize - 8] ^= 0x40  # the reserved u64 ends every header that has one
                assert st.unpack_from(f, 0)[ir], dialect
            elif change == "headers":
                f += b"\x01\x00\x00\x00k\x0b\x04\x00\x00\x00\x01\x00\x00\x00"
                v = list(st.unpack_from(f, 0))
                v[ih] = 14
                f[:hsize] = st.pack(*v)
            else:
                v = list(st.unpack_from(f, 0))
                v[ip] = messages.MAX_PAYLOAD + 1
                f[:hsize] = st.pack(*v)
            fs[k] = bytes(f)
            out.append(b"".join(fs))
    for _ in range(40):
        b = bytearray(out[0])
        for _ in range(rnd.randrange(1, 4)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        out.append(bytes(b[:rnd.randrange(len(b) + 1)]) if rnd.random() < 0.5 else bytes(b))
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("polled", [False, True])
def test_the_usual_message_shortcut_gives_what_frame_gives(dialect: str, polled: bool) -> None:
    """_frames takes a whole, clean message without calling _frame; any other goes through
    _frame. Both ways give the same starts, the same tail and the same problems in the same order."""
    rnd = random.Random(f"{dialect}{polled}")
    base = (100, 5_000) if dialect == "V" else None
    taken = 0
    for buf in _variants(dialect, polled, rnd):
        for count in (None, 0, 3, 6, 9):
            for first in (0, 2):
                a = messages._Walk(dialect, buf, polled)
                got, off_a = messages._frames(a, 0, len(buf), count, first, base)
                b = messages._Walk(dialect, buf, polled)
                starts, tail, off_b = _frames_one_by_one(b, 0, len(buf), count, first, base)
                assert off_a == off_b and got._starts == starts and _shape(got._tail) == _shape(tail)
                assert a.problems == b.problems, (buf.hex(), count)
                taken += len(starts)
    assert taken


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_whole_message_over_the_payload_limit_is_not_taken_as_usual(dialect: str) -> None:
    m = {"id": 9, "payload": bytes(messages.MAX_PAYLOAD + 1), "offset": 100}
    buf = messages.encode_frame(dialect, m, polled=True, base=(100, 0) if dialect == "V" else None)
    base = (100, 0) if dialect == "V" else None
    a, b = messages._Walk(dialect, buf, True), messages._Walk(dialect, buf, True)
    got, _ = messages._frames(a, 0, len(buf), None, 0, base)
    assert got._starts == _frames_one_by_one(b, 0, len(buf), None, 0, base)[0] == [0]
    assert a.problems == b.problems and "over the 10000000-byte limit" in a.problems[0][1]
