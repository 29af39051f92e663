"""Where a wire type's value ends when its ``read`` would neither be cut nor note a problem, or -1:
a findings-only run checks a request with these and leaves its Fields to the view
(``payloads.clean``, ``messages.send_messages_clean``). Each mirrors its type's read in
:mod:`.types`; tests/test_iggy_leave_out.py holds them to the reads."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from dissectors.schema import Int


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
CLEAN_END: dict[type, Callable[[Any, bytes, int, int], int]] = {
    Int: _int_end, Bool8: _bool_end, Identifier: identifier_end, Consumer: _consumer_end,
    PollingStrategy: _strategy_end, OptionalPartition: _partition_end, Partitioning: partitioning_end,
}
