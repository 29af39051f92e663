"""An Iggy message's JSON made without its field tree (MessageField.json_value) is the JSON of
the tree (fields_json of its children): the same text, and the same values cut by
--max-value-size, in the same order; so is a list of messages' (MessagesField.json_value, in one
loop), and a SEND_MESSAGES index table's, made from the numbers it was checked with. On every message of every Iggy capture, and on random messages of every dialect
sent and polled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import analyzer.jsonout as jsonout
from analyzer.api import Field, Frame
from analyzer.engine import Analyzer
from analyzer.jsonout import field_json, fields_json, set_max_value
from analyzer.registry import load_dissectors
from dissectors.iggy import encode
from dissectors.iggy.messages import MessageField, MessagesField
from dissectors.kit.lazy import LazyField
from tests.jsoncheck import nodes, with_cuts

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures" / "iggy").rglob("*.pcap*"))


def _fresh(m: MessageField) -> MessageField:
    return MessageField(m.name, m.value, m.offset, m.size, m._moff, m._raw, m._dialect, m._base, m._ck, m._plen,
                        m._headers)


def _indexes(fields: list[Field]) -> list[LazyField]:
    return [f for f in fields if isinstance(f, LazyField) and f.name == "index"]


#: SEND_MESSAGES index tables compared both ways by _compare (made without their entries' fields).
INDEXES = [0]
#: Lists of messages compared both ways by _compare (the list's JSON made in one loop).
LISTS = [0]


def _compare(events: list[Any]) -> tuple[int, set[str]]:
    """Every message and index table of ``events`` both ways; returns (messages made without a
    tree, their dialects)."""
    direct = 0
    dialects: set[str] = set()
    for ev in events:
        if not isinstance(ev, Frame):
            continue
        for index in _indexes(ev.fields):
            if index.json_value() is not None:
                INDEXES[0] += 1
            # As the frame's fields are converted (fields_json), and as a list element would be.
            fast = with_cuts(lambda i=index: fields_json([i]))
            assert with_cuts(lambda i=index: field_json(i, "index")) == (fast[0][len('{"index":'):-1], fast[1])
            assert fast == with_cuts(lambda i=index: {"index": [field_json(c, "index") for c in i.children]}), \
                ev.command
        for ms in nodes(ev.fields, MessagesField):
            LISTS[0] += 1
            fast = with_cuts(lambda f=ms: fields_json([f]))
            assert fast == with_cuts(lambda f=ms: {"messages": [
                fields_json(_fresh(c).children) if type(c) is MessageField else field_json(c, "messages")
                for c in f.children]}), ev.command
        for m in nodes(ev.fields, MessageField):
            fast = _fresh(m)
            if fast.json_value() is not None:
                direct += 1
                dialects.add(m._dialect)
            tree = _fresh(m)
            assert with_cuts(lambda f=fast: field_json(f, "messages")) == \
                with_cuts(lambda t=tree: fields_json(t.children)), (ev.command, m._dialect)
    return direct, dialects


def test_every_message_of_every_capture():
    direct = 0
    dialects: set[str] = set()
    for capture in CAPTURES:
        analyzer = Analyzer(dissectors=load_dissectors())
        got, seen = _compare(list(analyzer.run_files([str(capture)])))
        direct += got
        dialects |= seen
    assert direct > 100, direct
    assert {"Z1", "Z2", "C"} <= dialects, dialects
    assert INDEXES[0] > 10, INDEXES
    assert LISTS[0] > 50, LISTS


_message = st.fixed_dictionaries({
    "id": st.integers(0, (1 << 128) - 1),
    "payload": st.binary(max_size=40) | st.text(max_size=20).map(str.encode),
    "headers": st.just([]) | st.lists(st.fixed_dictionaries({"key": st.sampled_from(["n", "k"]), "kind": st.just(11),
                                                             "value": st.integers(0, 9)}), max_size=2),
})


@settings(max_examples=60, deadline=None)
@given(dialect=st.sampled_from(["Z1", "Z2", "C", "V"]), messages=st.lists(_message, min_size=1, max_size=4),
       limit=st.sampled_from([0, 3, 1 << 20]))
def test_random_messages_of_every_dialect(dialect: str, messages: list[dict[str, Any]], limit: int) -> None:
    set_max_value(limit)
    try:
        direct, seen = _compare(encode.run(encode.session(dialect, messages)))
    finally:
        set_max_value(jsonout.MAX_VALUE)
    if all(not m["headers"] for m in messages):  # sent and polled: each made without its tree
        assert direct >= 2 * len(messages) and seen == {dialect}, (direct, seen)


def test_identifiers_json_is_their_childrens() -> None:
    """A well-formed identifier (types.IdentifierField) gives its JSON without making its children:
    the JSON its children make, on every identifier of every Iggy capture; and its children are
    the kind (named), the length and the value, where the identifier's bytes have them."""
    from dissectors.iggy.types import IdentifierField

    seen = set()
    for capture in CAPTURES:
        analyzer = Analyzer(dissectors=load_dissectors())
        for ev in analyzer.run_files([str(capture)]):
            if not isinstance(ev, Frame):
                continue
            for f in nodes(ev.fields, IdentifierField):
                fresh = IdentifierField(f.name, f.value, f.offset, f.size - 2, f._kind)
                fast = with_cuts(lambda x=fresh: field_json(x, x.name))
                kids = fresh.children
                assert kids is not None and fresh.json_value() is None  # made: the tree's way now
                assert fast == with_cuts(lambda k=kids: fields_json(k))
                assert [(k.name, k.offset, k.size) for k in kids] == [
                    ("kind", f.offset, 1), ("length", f.offset + 1, 1), ("value", f.offset + 2, f.size - 2)]
                assert ev.data is not None
                assert ev.data[f.offset:f.offset + 2] == bytes([kids[0].value, kids[1].value])
                assert kids[0].display == {1: "numeric", 2: "string"}[kids[0].value]
                seen.add(kids[0].display)
    assert seen == {"numeric", "string"}, seen
