"""Whether a content header's property list is clean (scan_properties would pass it without a
word), and its content type: the hot path's test of the header of every message (_hot_content,
_hot_header). A publisher that sends the same properties message after message is answered by
one lookup; one whose properties differ per message (ids, timestamps, header tables: aio-pika's)
is tested anew each time, a loop over bytes. Compiled where it can be. properties.py, which
holds the property plan, gives the kinds of a flag word (KINDS_OF) at import."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from dissectors.amqp091.clean_tables import entries_are_clean
from dissectors.kit.memo import remember

#: How the properties after content-type go on, by flag word (None: not a clean word): a fixed
#: run of octets (> 0), a shortstr (0) or a table (-1). Made on first sight by KINDS_OF[0].
REST_KINDS: Final[dict[int, tuple[int, ...] | None]] = {}
#: The function that makes REST_KINDS' entries: properties.py's _rest_kinds, put here at import.
KINDS_OF: Final[list[Callable[[int], tuple[int, ...] | None]]] = []

#: clean_content_type's answers by property bytes. Bounded: short lists only, and emptied when full.
CLEAN_SEEN: Final[dict[bytes, str | None]] = {}
CLEAN_KEY_MAX: Final = 256
CLEAN_SEEN_MAX: Final = 1024


def clean_content_type(buf: bytes, off: int, end: int) -> str | None:
    """The content type of a property list that scan_properties would pass without a word
    (no problem, no table note) and that fills [off, end) exactly; None otherwise.

    The hot path's shortcut for the headers of busy connections: when this says None, the
    general path runs scan_properties to say what is wrong. A function of the bytes alone, so
    the answer for bytes seen before is remembered.
    """
    if end - off > CLEAN_KEY_MAX:
        return content_type_if_clean(buf, off, end)
    key = buf[off:end]
    if key in CLEAN_SEEN:
        return CLEAN_SEEN[key]
    return remember(CLEAN_SEEN, key, content_type_if_clean(buf, off, end), CLEAN_SEEN_MAX)


def content_type_if_clean(buf: bytes, off: int, end: int) -> str | None:
    """clean_content_type without its memory."""
    if off + 2 > end:
        return None
    flags = buf[off] << 8 | buf[off + 1]
    if flags in REST_KINDS:
        kinds = REST_KINDS[flags]
    else:
        kinds = REST_KINDS[flags] = KINDS_OF[0](flags)
    if kinds is None:
        return None
    off += 2
    content_type = ""
    if flags & 0x8000:
        if off >= end:
            return None
        stop = off + 1 + buf[off]
        if stop > end:
            return None
        content_type = buf[off + 1:stop].decode("utf-8", "replace")
        off = stop
    # A fixed run may step past ``end``: the next bounded read or the final test says so.
    for kind in kinds:
        if kind > 0:
            off += kind
        elif off >= end:
            return None
        elif kind == 0:  # shortstr
            off += 1 + buf[off]
        else:  # table: u32 length, then entries
            if off + 4 > end:
                return None
            stop = off + 4 + ((buf[off] << 24) | (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3])
            if stop > end or not entries_are_clean(buf, off + 4, stop, 0, True):
                return None
            off = stop
    return content_type if off == end else None
