"""A Z1/Z2/C/V list of messages is checked without making its MessageFields (MessagesField.lazy):
they are made when a view reads the list. On SEND_MESSAGES payloads and POLL_MESSAGES responses
of every such dialect, whole and cut short at every length: the list counts the messages its
children name (a cut-off one too, the rest of the bytes not), gives their offsets and ends as its
children have them, makes the JSON its children make, and reading it records no problem twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

import analyzer.jsonout as jsonout
from analyzer.api import Field
from analyzer.jsonout import field_json, fields_json, set_max_value
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
