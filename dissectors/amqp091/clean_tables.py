"""Whether an AMQP field table or array is clean (check_table would neither raise nor note anything
about it), value by value without decoding a name: the hot path's test of the headers of every
message whose property bytes were not seen lately (per-message ids, timestamps, header tables).
Compiled where it can be: a loop over bytes. wire.py fills the tag table at import (it holds the
field types), so the sizes are declared once, there."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Final

#: How a value of each tag goes on, by tag octet: a fixed size (>= 0), LONG (S, x: a u32-prefixed
#: value skipped), TABLE (F) or ARRAY (A) (u32-prefixed, checked inside), or UNKNOWN (not clean).
#: Filled in place by dissectors/amqp091/wire.py.
SIZES: Final[list[int]] = [-4] * 256
LONG: Final = -1
TABLE: Final = -2
ARRAY: Final = -3
UNKNOWN: Final = -4
#: The deepest nesting check_table accepts.
MAX_DEPTH: Final = 32


def entries_are_clean(buf: bytes, off: int, end: int, depth: int, named: bool) -> bool:
    """Whether the entries (``named``) or items of a table/array filling [off, end) are such that
    check_table would neither raise nor note anything about them.

    When this says False, check_table is run to say what is wrong."""
    sizes = SIZES
    while off < end:
        if named:
            off += 1 + buf[off]
            if off >= end:  # the name overruns, or no type tag follows it
                return False
        size = sizes[buf[off]]
        off += 1
        if size >= 0:
            off += size
            if off > end:
                return False
            continue
        if size == UNKNOWN or off + 4 > end:
            return False
        stop = off + 4 + ((buf[off] << 24) | (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3])
        if stop > end:
            return False
        if size != LONG and (depth > MAX_DEPTH
                             or not entries_are_clean(buf, off + 4, stop, depth + 1, size == TABLE)):
            return False
        off = stop
    return True
