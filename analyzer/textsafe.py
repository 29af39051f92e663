"""Text from the wire made safe to show: the one place every renderer sends text through.

A capture is untrusted input. Names, reply texts and table keys can hold ESC sequences (``ESC[2J``
clears the screen, OSC 52 writes the clipboard, OSC 0 the window title), C1 controls (0x9b is a
one-byte CSI), bidirectional overrides that reorder what is shown, and lone surrogates (text
decoded with ``surrogateescape`` keeps undecodable bytes as U+DC80..U+DCFF, which no UTF-8 stream
can encode). :func:`safe` escapes all of them, visibly and reversibly (``\\x1b``, ``\\u202e``,
undecodable bytes as the ``\\xNN`` they were), and leaves everything else, including non-ASCII
letters, alone. :func:`json_text` does the same for a JSON document's lone surrogates (JSON
escapes control characters itself).
"""

from __future__ import annotations

import re
from functools import cache

# The patterns are compiled when first needed: most runs never meet text that needs escaping, and
# compiling these classes was a percent of every start.


@cache
def unsafe_pattern() -> re.Pattern[str]:
    """C0 controls and DEL, C1 controls, surrogates, line/paragraph separators, and the
    bidirectional marks, embeddings, overrides and isolates (they reorder a terminal line:
    "Trojan source")."""
    return re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufeff]")


@cache
def _surrogates() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if 0xDC80 <= c <= 0xDCFF:  # an undecodable byte kept by surrogateescape: show that byte
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe(text: str) -> str:
    """``text`` with every control character, terminal escape, bidi control and lone surrogate
    escaped; the same object when there is nothing to escape (the common case costs one scan).

    Every character unsafe_pattern() matches is one ``str.isprintable`` rejects (controls, format
    characters, separators, surrogates; tests/test_safe_output.py checks every code point), so
    printable text, most of it, is answered by that scan in C without the regular expression."""
    if text.isprintable():
        return text
    unsafe = unsafe_pattern()
    if unsafe.search(text) is None:
        return text
    return unsafe.sub(_escape, text)


def clip(text: str, limit: int = 512) -> str:
    """One value's text bounded for a text view: longer text is cut and says how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


def _json_escape(m: re.Match[str]) -> str:
    # Inside a JSON string literal: a backslash must itself be escaped to stay text.
    return "\\" + _escape(m)


def json_text(doc: str) -> str:
    """A JSON document (made with ``ensure_ascii=False``) whose strings hold lone surrogates, made
    encodable as UTF-8: each becomes the text ``\\xNN`` (an undecodable wire byte) or ``\\uXXXX``.
    Surrogates only occur inside string literals, so replacing them there keeps the JSON valid."""
    return _surrogates().sub(_json_escape, doc)


def encodable(text: str, encoding: str | None) -> bool:
    """Can a stream of this encoding write ``text``? (Arrows on an ASCII terminal cannot.)"""
    try:
        text.encode(encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
