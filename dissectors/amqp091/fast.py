"""Allocation-light checks for the hot methods of a busy connection.

Each validator reads just what the state machine needs and checks that the arguments fill the
frame exactly (the same overrun/underrun rules as the schema decoder). It returns None when the
layout does not fit; the caller then falls back to the schema decoder, which says what is wrong.
The field trees of these frames are built later, from the same schema, by lazy.LazyFrame.
Compiled where it can be: they run for every publish, delivery and acknowledgement.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dissectors.amqp091 import methods as M

_U64 = struct.Struct(">Q").unpack_from

Validator = Callable[[bytes, int], "dict[str, Any] | None"]


def _code(name: str) -> int:
    # Through the typed method table: mypyc cannot type methods' BASIC_* names (made from it).
    return M.BY_NAME[name].code


def _publish(data: bytes, end: int) -> dict[str, Any] | None:
    # ticket:short, exchange:shortstr, routing-key:shortstr, bits:octet
    p = 13
    if p >= end:
        return None
    p += 1 + data[p]
    if p >= end:
        return None
    p += 1 + data[p]
    if p + 1 != end:
        return None
    return {}


def _deliver(data: bytes, end: int) -> dict[str, Any] | None:
    # consumer-tag:shortstr, delivery-tag:longlong, bits:octet, exchange:shortstr, routing-key:shortstr
    n = data[11] if end > 11 else 0
    p = 12 + n
    if p + 9 >= end:
        return None
    tag = _U64(data, p)[0]
    p += 9
    p += 1 + data[p]
    if p >= end:
        return None
    p += 1 + data[p]
    if p != end:
        return None
    try:
        ctag: Any = data[12:12 + n].decode("utf-8")
    except UnicodeDecodeError:
        ctag = data[12:12 + n]
    return {"consumer_tag": ctag, "delivery_tag": tag}


def _tag_bits(data: bytes, end: int) -> dict[str, Any] | None:
    # delivery-tag:longlong, bits:octet (ack/reject: bit0; nack: multiple bit0, requeue bit1)
    if end != 20:
        return None
    bits = data[19]
    return {"delivery_tag": _U64(data, 11)[0], "multiple": bool(bits & 1), "requeue": bool(bits & 2)}


def _reject(data: bytes, end: int) -> dict[str, Any] | None:
    if end != 20:
        return None
    return {"delivery_tag": _U64(data, 11)[0], "requeue": bool(data[19] & 1)}


FAST: dict[int, Validator] = {
    _code("Basic.Publish"): _publish,
    _code("Basic.Deliver"): _deliver,
    _code("Basic.Ack"): _tag_bits,
    _code("Basic.Nack"): _tag_bits,
    _code("Basic.Reject"): _reject,
}


# The arguments of the hot methods' Info lines, read from a frame whose layout its validator
# above accepted (decode.quick_method; tests/test_amqp091_quick_info.py proves the lines equal to
# the tree's): the values in the order of the method's Info template (its argument names, which
# decode checks against the template), as a tuple for its printf-style format. Short strings as the
# schema gives them: text, or bytes when not UTF-8. ``data`` is the frame's own bytes.
def _shortstr(data: bytes, p: int) -> tuple[Any, int]:
    stop = p + 1 + data[p]
    raw = data[p + 1:stop]  # frames are cut as bytes (kit.framing)
    try:
        return raw.decode("utf-8"), stop
    except UnicodeDecodeError:
        return bytes(raw), stop


def _publish_args(data: bytes) -> tuple[Any, ...]:
    exchange, p = _shortstr(data, 13)
    return exchange, _shortstr(data, p)[0]


def _deliver_args(data: bytes) -> tuple[Any, ...]:
    p = 12 + data[11]
    tag = _U64(data, p)[0]
    exchange, p = _shortstr(data, p + 9)
    return exchange, _shortstr(data, p)[0], tag


def _tag_args(data: bytes) -> tuple[Any, ...]:
    return _U64(data, 11)


#: Method code -> (the Info arguments' names, in the template's order; their reader).
INFO_ARGS: dict[int, tuple[tuple[str, ...], Callable[[bytes], tuple[Any, ...]]]] = {
    _code("Basic.Publish"): (("exchange", "routing_key"), _publish_args),
    _code("Basic.Deliver"): (("exchange", "routing_key", "delivery_tag"), _deliver_args),
    _code("Basic.Ack"): (("delivery_tag",), _tag_args),
    _code("Basic.Nack"): (("delivery_tag",), _tag_args),
    _code("Basic.Reject"): (("delivery_tag",), _tag_args),
}
