"""A stream message's JSON made without its field tree (what :func:`analyzer.jsonout.fields_json`
makes of :func:`.amqp.message_fields`): the loops a Publish or a chunk runs message after message,
thousands in a frame. Typed over ``bytes`` so that setup.py can compile them (a message in any
other buffer is copied into bytes first); what they give up on goes to
:func:`.amqp.general_message_json`. tests/test_rabbitmq_stream_json.py proves the JSON equal to the
tree's on every message of every capture and on random messages."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from analyzer.bytevalue import LIMIT, bytes_json
from dissectors.kit.memo import remember
from dissectors.rabbitmq_stream.amqp import (
    _CONST,
    _FIXED,
    _JSON_SEEN,
    _SEEN_MAX,
    _SEEN_SIZE,
    _SIZE8,
    _SIZE32,
    _U32,
    REPEATABLE,
    SECTIONS,
    AmqpError,
    _json_of,
    decode_value,
    general_message_json,
)

_U64: Final = struct.Struct(">Q")
# amqp.py's tables, bound here once more as Final: compiled, a Final name is a C static, where a
# name imported from a module that is not compiled is a dictionary lookup at every use (a message
# reads several).
_SECTIONS: Final = SECTIONS
_REPEATABLE: Final = REPEATABLE
_SHORT_SIZE: Final = _SIZE8
_LONG_SIZE: Final = _SIZE32
_LEN32: Final = _U32
_SEEN: Final = _JSON_SEEN

#: A message's bytes before its one data section's length octet (the section's header, 00 53 75
#: A0, included), which ends it, and the JSON of its sections before that data (see :func:`like_of`).
Like = tuple[bytes, dict[str, Any]]


def message_json(buf: bytes | memoryview, off: int, end: int) -> dict[str, Any] | None:
    """What :func:`analyzer.jsonout.fields_json` makes of :func:`.amqp.message_fields`, made
    without the Field tree (a stream Deliver carries thousands of messages; the tree is most of the
    cost of their JSON). None if the bytes are not an AMQP 1.0 message."""
    if type(buf) is not bytes:
        buf, off, end = bytes(buf[off:end]), 0, end - off
    quick = usual_message_json(buf, off, end)
    return quick if quick is not None else general_message_json(buf, off, end)


def records_json(data: bytes, pos: int, count: int, first: int | None,
                 tree: Callable[[int, int, int], Any], published: bool = False) -> list[Any]:
    """The JSON of ``count`` records from ``pos`` in ``data``, each a length and a message (offsets
    ``first`` + i, or none), or with ``published`` a Publish's simple messages, each a publishing
    id before them: each message's by message_json's two ways, one after the other, or by
    like_json from the usual one before it; ``tree(i, position of its length, length)``: a
    record's JSON by its tree, for a message that is no AMQP 1.0 one."""
    out: list[Any] = []
    like: Like | None = None  # the last usual message's bytes before its data, and their JSON
    pid = 0
    for i in range(count):
        if published:
            pid = _U64.unpack_from(data, pos)[0]
            pos += 8
        # The length octet by octet: compiled, four indexings cost a tenth of a struct call.
        n = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
        at = pos + 4
        pos = at + n
        sections = like_json(data, at, pos, like) if like is not None else None
        if sections is None:
            data_at: list[int] = []
            sections = usual_message_json(data, at, pos, data_at)
            if sections is not None:
                like = like_of(data, at, pos, sections, data_at)
            else:
                sections = general_message_json(data, at, pos)
        if sections is None:
            out.append(tree(i, at - 4, n))
        elif published:
            out.append({"publishing_id": pid, "length": n, "amqp": sections})
        elif first is None:
            out.append({"length": n, "amqp": sections})
        else:
            out.append({"offset": first + i, "length": n, "amqp": sections})
    return out


def like_of(buf: bytes, off: int, end: int, sections: dict[str, Any], data_at: list[int]) -> Like | None:
    """What :func:`like_json` needs to make the JSON of messages like the one in ``buf[off:end]``
    (``sections``: what usual_message_json made of it, ``data_at`` filled): its bytes up to the
    length octet of its one short data section, when that section ends it. None for any other
    message."""
    if len(data_at) != 1 or next(reversed(sections)) != "data":
        return None
    h = data_at[0]
    if h + 5 + buf[h + 4] != end:
        return None
    return buf[off:h + 4], {name: value for name, value in sections.items() if name != "data"}


def like_json(buf: bytes, off: int, end: int, like: Like) -> dict[str, Any] | None:
    """message_json of a message made like ``like``'s (:func:`like_of`): the same bytes up to one
    short data section's length octet, that section ending it. A producer's batch is mostly such
    messages (the same properties, bodies of their own): the sections before the body are not read
    again. None for a message that is not like it."""
    prefix, before = like
    h = off + len(prefix)  # the data section's length octet
    if h >= end or h + 1 + buf[h] != end or buf[off:h] != prefix:  # (a slice: startswith parses its arguments)
        return None
    out = before.copy()
    out["data"] = [bytes_json(buf[h + 1:end], "data")]
    return out


def usual_message_json(buf: bytes, off: int, end: int, data_at: list[int] | None = None) -> dict[str, Any] | None:
    """message_json of the usual message, in one pass: every section with the smallulong
    descriptor, each data section short (0xA0), every other one short (taken from _JSON_SEEN, or
    decoded and remembered there), and no section repeated that may not be. None for any other
    message (message_json's general way then decodes it and remembers its sections). The same
    dict in the same order: sections in wire order, a repeatable one as a list where it first
    stands. ``data_at``: gets where each data section starts (for :func:`like_of`)."""
    if end - off < 3:
        return None
    out: dict[str, Any] = {}
    seen = _SEEN
    limit = LIMIT[0]
    pos = off
    name: str | None
    value: Any
    while pos < end:
        p = pos + 3
        if p + 1 >= end or buf[pos] != 0x00 or buf[pos + 1] != 0x53:
            return None
        code = buf[pos + 2]
        c = buf[p]
        if code == 0x75 and c == 0xA0:  # a short data section: its bytes
            stop = p + 2 + buf[p + 1]
            if stop > end:
                return None
            name, value = "data", buf[p + 2:stop]  # made JSON at the end: a cut is recorded only then
            if data_at is not None:
                data_at.append(pos)
        else:
            if c in _SHORT_SIZE:
                stop = p + 2 + buf[p + 1]
            elif c in _LONG_SIZE and p + 5 <= end:
                stop = p + 5 + _LEN32.unpack_from(buf, p + 1)[0]
            else:
                return None
            size = stop - pos
            if stop > end or size > _SEEN_SIZE or (limit and size > limit):
                return None
            name = _SECTIONS.get(code)
            if name is None:
                return None
            key = buf[pos:stop]
            value = seen.get(key, seen)
            if value is seen:
                # Not met yet (application properties that differ message by message): decoded
                # here and remembered, as the general way does, rather than that way's second pass.
                value = flat_map_json(buf, p, stop) if c == 0xC1 and code == 0x74 else None
                if value is not None:
                    remember(seen, key, value, _SEEN_MAX)
                else:
                    try:
                        val, q = decode_value(buf, p, end, 1)
                    except AmqpError:
                        return None
                    if q != stop:
                        return None
                    value = _json_of(name, val, key)
        if name in _REPEATABLE:
            got = out.get(name)
            if got is None:
                out[name] = [value]
            else:
                got.append(value)
        elif name in out:
            return None
        else:
            out[name] = value
        pos = stop
    data = out.get("data")
    if data is not None:  # in wire order, as the general way cuts them (no other section is cut)
        if len(data) == 1:  # the usual message: one body
            one = data[0]
            if type(one) is bytes:
                data[0] = bytes_json(one, "data")
        else:
            out["data"] = [v if type(v) is not bytes else bytes_json(v, "data") for v in data]
    return out


#: What flat_map_json reads besides text: the integer constructors (their struct) and the constants.
_FLAT_INTS: Final[dict[int, struct.Struct]] = {c: st for c, (st, kind) in _FIXED.items() if kind is int}
_FLAT_CONSTS: Final[dict[int, Any]] = {c: v for c, v in _CONST.items() if type(v) is not list}


def flat_map_json(buf: bytes, p: int, stop: int) -> dict[str, Any] | None:
    """The JSON of the map8 at ``p`` (ending at ``stop``) when it is the usual application
    properties: text keys (str8), each once, with text, integer, boolean or null values, which
    its JSON holds as they are. Made in one loop instead of decode_value's call per value and
    _json_of's conversion; None for any other map (the general decode then says what it is).
    tests/test_rabbitmq_stream_json.py holds it to the tree on every capture and random messages."""
    if p + 3 > stop:  # no count octet (the general decode says why)
        return None
    count = buf[p + 2]
    if count & 1 or p + 2 + buf[p + 1] != stop:
        return None
    q = p + 3
    out: dict[str, Any] = {}
    try:
        for _ in range(count >> 1):
            if buf[q] != 0xA1:
                return None
            k_end = q + 2 + buf[q + 1]
            k = buf[q + 2:k_end].decode("utf-8")
            if k_end >= stop or k in out:
                return None
            c = buf[k_end]
            q = k_end + 1
            if c == 0xA1:
                v_end = q + 1 + buf[q]
                if v_end > stop:
                    return None
                out[k] = buf[q + 1:v_end].decode("utf-8")
                q = v_end
            elif c == 0x56:
                out[k] = buf[q] != 0
                q += 1
            elif c in _FLAT_CONSTS:
                out[k] = _FLAT_CONSTS[c]
            else:
                st = _FLAT_INTS.get(c)
                if st is None or q + st.size > stop:
                    return None
                out[k] = st.unpack_from(buf, q)[0]
                q += st.size
    except (IndexError, UnicodeDecodeError):
        return None
    return out if q == stop else None
