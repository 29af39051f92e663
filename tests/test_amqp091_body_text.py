"""Which message bodies the AMQP 0-9-1 views show as text: by content type (case-insensitive,
text/*, JSON, XML, JavaScript, form data and the +json/+xml suffixes), or without a type when the
body is printable UTF-8. The decision per type is remembered (decode._TEXTUAL), so it is asked
here again after the memory was emptied."""

from __future__ import annotations

import pytest

from dissectors.amqp091 import decode

TEXTUAL = ["text/plain", "TEXT/CSV", "application/json", "Application/JSON; charset=utf-8", "application/xml",
           "application/javascript", "application/x-www-form-urlencoded", "application/vnd.api+json",
           "application/atom+XML"]
BINARY = ["image/png", "application/octet-stream", "application/jsonl-not", "application/x-protobuf"]


@pytest.mark.parametrize("round_", range(2))
def test_text_by_content_type(round_: int) -> None:
    for ct in TEXTUAL:
        assert decode._is_text(ct, b"caf\xc3\xa9") == "café", ct
        # A textual type keeps its text even when cut inside a character.
        assert decode._is_text(ct, b"caf\xc3") == "caf\ufffd", ct
    for ct in BINARY:
        if ct == "application/jsonl-not":
            assert decode._is_text(ct, b"{}") == "{}"  # starts with application/json: textual
            continue
        assert decode._is_text(ct, b"plain words") is None, ct


def test_text_without_a_type_is_printable_utf8() -> None:
    assert decode._is_text("", b"hello\r\n\tworld") == "hello\r\n\tworld"
    assert decode._is_text("", b"\x00\x01binary") is None
    assert decode._is_text("", b"\xff\xfe") is None


def test_the_remembered_answers_stay_bounded_and_right() -> None:
    for i in range(600):
        assert decode._is_text(f"x-app/t{i}", b"abc") is None
        assert decode._is_text(f"text/t{i}", b"abc") == "abc"
    assert len(decode._TEXTUAL) <= 256


def test_the_info_words_of_a_whole_message() -> None:
    """A body frame's Info names the whole message: text shown up to 40 characters (then an
    ellipsis) as Python's repr, binary bodies and empty ones without a preview."""
    text = "0123456789" * 5
    assert decode.message_info(("Basic.Publish", 50, 1, text.encode(), "text/plain")) == \
        f" [Basic.Publish message 50 bytes: '{text[:40]}…']"
    assert decode.message_info(("Basic.Deliver", 40, 1, text[:40].encode(), "")) == \
        f" [Basic.Deliver message 40 bytes: '{text[:40]}']"
    assert decode.message_info(("Basic.GetOk", 3, 2, b"it's", "text/plain")) == \
        " [Basic.GetOk message 3 bytes: \"it's\"]"
    assert decode.message_info(("Basic.Return", 0, 0, b"", "text/plain")) == " [Basic.Return message 0 bytes]"
    assert decode.message_info(("Basic.Publish", 4, 1, b"\x00\x01\x02\x03", "")) == \
        " [Basic.Publish message 4 bytes (binary)]"
