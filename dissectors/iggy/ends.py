"""Where a wire type's value ends when its ``read`` would neither be cut nor note a problem, or -1:
a request is checked with these and its Fields are left to the view (``payloads.clean``,
``messages.send_messages_clean``); and what an Info line shows of a value of clean bytes, without
its Field (``payloads.info_items``). Each mirrors its type's read in :mod:`.types`;
tests/test_iggy_leave_out.py and tests/test_iggy_quick_info.py hold them to the reads."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from dissectors.iggy.types import (
    CONSUMER_KIND,
    POLLING_KIND,
    Bool8,
    Consumer,
    Identifier,
    OptionalPartition,
    Partitioning,
    PollingStrategy,
)
from dissectors.schema import F, Int, show


def _int_end(t: Any, buf: bytes, off: int, end: int) -> int:
    return off + t.size if off + t.size <= end else -1


def _bool_end(t: Any, buf: bytes, off: int, end: int) -> int:
    return off + 1 if off < end else -1


def _kind_length(buf: bytes, off: int, end: int) -> tuple[int, int, int]:
    """(kind, length, where the value ends) of a kind u8 + length u8 + value at ``off``; a stop
    of -1 when they do not fit before ``end``."""
    if off + 2 > end:
        return 0, 0, -1
    kind, n = buf[off], buf[off + 1]
    stop = off + 2 + n
    return kind, n, stop if stop <= end else -1


def identifier_end(t: Any, buf: bytes, off: int, end: int) -> int:
    kind, n, stop = _kind_length(buf, off, end)
    if stop < 0:
        return -1
    if kind == 1:
        return stop if n == 4 else -1
    if kind != 2 or not n:
        return -1
    try:
        buf[off + 2:stop].decode("utf-8")
    except UnicodeDecodeError:
        return -1
    return stop


def _consumer_end(t: Any, buf: bytes, off: int, end: int) -> int:
    if off >= end or buf[off] not in CONSUMER_KIND:
        return -1
    if t.legacy:
        return off + 5 if off + 5 <= end else -1
    return identifier_end(None, buf, off + 1, end)


def _strategy_end(t: Any, buf: bytes, off: int, end: int) -> int:
    return off + 9 if off + 9 <= end and buf[off] in POLLING_KIND else -1


def _partition_end(t: Any, buf: bytes, off: int, end: int) -> int:
    stop = off + (5 if t.flagged else 4)
    return stop if stop <= end else -1


def partitioning_end(t: Any, buf: bytes, off: int, end: int) -> int:
    kind, n, stop = _kind_length(buf, off, end)
    if stop < 0:
        return -1
    if kind == 1:
        return stop if not n else -1
    if kind == 2:
        return stop if n == 4 else -1
    return stop if kind == 3 and n else -1


#: Exact type -> its end function (a subclass that notes problems of its own has none).
CLEAN_END: Final[dict[type, Callable[[Any, bytes, int, int], int]]] = {
    Int: _int_end, Bool8: _bool_end, Identifier: identifier_end, Consumer: _consumer_end,
    PollingStrategy: _strategy_end, OptionalPartition: _partition_end, Partitioning: partitioning_end,
}


# ------------------------------------------------------------------------------ Info items
# Each takes clean bytes (its end function above passed them) and gives (what the Info line shows
# of the Field its type's read would make: the display, or the value where there is no display or
# the value is text; where the value ends).


def _int_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    (v,) = t._st.unpack_from(buf, off)
    shown = show(v, spec)
    return (v if shown is None else shown), off + t.size


def _bool_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    return ("true" if buf[off] else "false"), off + 1


def _identifier(buf: bytes, off: int) -> tuple[Any, int]:
    """An Identifier's value (int or str) and where it ends."""
    n = buf[off + 1]
    stop = off + 2 + n
    if buf[off] == 1:
        return int.from_bytes(buf[off + 2:stop], "little"), stop
    return buf[off + 2:stop].decode("utf-8"), stop


def _identifier_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    v, stop = _identifier(buf, off)
    return (v if type(v) is str else str(v)), stop


def _consumer_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    if t.legacy:
        v: Any = int.from_bytes(buf[off + 1:off + 5], "little")
        stop = off + 5
    else:
        v, stop = _identifier(buf, off + 1)
    return (v if type(v) is str else f"{CONSUMER_KIND[buf[off]]} {v}"), stop


def _strategy_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    kind = buf[off]
    label = POLLING_KIND[kind]
    if kind == 1 or kind == 2:
        return f"{label} {int.from_bytes(buf[off + 1:off + 9], 'little')}", off + 9
    return label, off + 9


def _partition_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    if not t.flagged:
        v = int.from_bytes(buf[off:off + 4], "little")
        return (str(v) if v else "none"), off + 4
    if buf[off] == 1:
        return str(int.from_bytes(buf[off + 1:off + 5], "little")), off + 5
    return "none", off + 5


def _partitioning_item(t: Any, buf: bytes, off: int, spec: F) -> tuple[Any, int]:
    kind, n = buf[off], buf[off + 1]
    stop = off + 2 + n
    if kind == 1:
        return "balanced", stop
    if kind == 2:
        return f"partition {int.from_bytes(buf[off + 2:stop], 'little')}", stop
    return f"key {buf[off + 2:min(stop, off + 34)].hex()}", stop


#: Exact type -> its Info item function: one for every type with an end function.
INFO_ITEM: Final[dict[type, Callable[[Any, bytes, int, F], tuple[Any, int]]]] = {
    Int: _int_item, Bool8: _bool_item, Identifier: _identifier_item, Consumer: _consumer_item, PollingStrategy: _strategy_item,
    OptionalPartition: _partition_item, Partitioning: _partitioning_item,
}
