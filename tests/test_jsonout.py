"""Field trees to JSON values, as the JSON Lines contract describes them."""

from __future__ import annotations

from analyzer.api import Field
from analyzer.jsonout import fields_json, plain


def test_values_nesting_lists_and_repeated_names():
    fields = [
        Field("key", 2, 0, 2, "Publish"),
        Field("text", b"hello", 2, 5),
        Field("binary", b"\x00\xff", 7, 2),
        Field("header", None, 9, 4, None, [Field("durable", True, 9, 1), Field("ttl", None, 10, 0)]),
        Field("ids", 2, 13, 16, None, [Field("[0]", 7, 13, 8), Field("[1]", 8, 21, 8)], True),
        Field("nothing", None, 29, 4, "null", [], True),
        Field("data", b"a", 33, 1),
        Field("data", b"b", 34, 1),
        Field("data", b"c", 35, 1),
    ]
    assert fields_json(fields) == {
        "key": 2, "text": "hello", "binary": "00ff", "header": {"durable": True, "ttl": None},
        "ids": [7, 8], "nothing": None, "data": ["a", "b", "c"]}


def test_plain_text_or_hex():
    assert plain(b"line\n") == "line\n"
    assert plain(b"tab\tnew\nline") == "tab\tnew\nline"
    assert plain(b"\x01\x02") == "0102"
    assert plain(b"\xc3\xa9t\xc3\xa9") == "été"
    assert plain((1, b"x")) == [1, "x"]
