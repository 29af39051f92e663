"""A bytes value in JSON and in text views: its text when it is printable UTF-8, else its hex; in
JSON bounded by the value-size limit (``--max-value-size``), each cut recorded for the frame's
``truncated`` list. Compiled where it can be: a Deliver or Publish of sub-batches turns a million
bodies into JSON, and the call from the compiled message loops (dissectors/rabbitmq_stream/
amqp_json.py) into this one is a C call."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Any, Final

#: Bytes of one field value written by default; 0: no limit (``--max-value-size``).
MAX_VALUE: Final = 1 << 20

#: The value-size limit in force (a one-element list: analyzer.jsonout.set_max_value changes it in place).
LIMIT: Final[list[int]] = [MAX_VALUE]
#: The values cut while the current frame was converted: [{"field", "size", "kept"}].
CUT: Final[list[dict[str, Any]]] = []

#: The characters :func:`printable` allows besides ``str.isprintable``'s, deleted before its second test.
_LAYOUT: Final = str.maketrans("", "", "\r\n\t")


def printable(text: str) -> bool:
    """Whether ``text`` can be shown as text (a body, a bytes value) rather than as hex: every
    character printable, line breaks and tabs allowed. Both tests run in C: a test character by
    character in Python cost 25 µs on a 256-character body without a content type (a tenth of a
    summary of RPC traffic)."""
    return text.isprintable() or text.translate(_LAYOUT).isprintable()


def cut(raw: bytes, name: str) -> bytes:
    """``raw`` within the limit; a cut is recorded under ``name``."""
    limit = LIMIT[0]
    if limit and len(raw) > limit:
        CUT.append({"field": name, "size": len(raw), "kept": limit})
        return raw[:limit]
    return raw


def bytes_json(raw: bytes, name: str) -> str:
    """What :func:`analyzer.jsonout.plain` makes of bytes: printable UTF-8 as its text, anything
    else as hex, after the limit's cut."""
    limit = LIMIT[0]
    if limit and len(raw) > limit:
        raw = cut(raw, name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.hex()
    return text if printable(text) else raw.hex()
