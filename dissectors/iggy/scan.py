"""The inner loops of :mod:`.messages`' checks, typed so that setup.py can compile them: the run of
usual messages a scan takes without a word, and a V batch's checksum. Every message these stop at
goes through messages._frame, which says what is wrong with it."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Callable

import xxhash


def usual_run(mv: memoryview, off: int, end: int, room: int, unpack: Callable[[memoryview, int], tuple[int, ...]],
              plan: tuple[int, int, int, int], summed: bool, checksum: Callable[[memoryview], int], limit: int,
              starts: list[int]) -> int:
    """Appends to ``starts`` where each usual message from ``off`` starts (whole before ``end``, a
    payload within ``limit``, no user headers, reserved bytes 0, its checksum verifying or, not
    ``summed``, unset), at most ``room`` of them (negative: no limit); returns where the first
    other one starts, or where the run stopped. ``plan``: the header's size and where ``unpack``'s
    values hold user_headers_length, payload_length and the reserved u64 (0: none); the checksum
    is value 0, over the bytes after it."""
    hsize, ih, ip, ir = plan
    while off < end and room != 0:
        if off + hsize > end:
            break
        v = unpack(mv, off)
        plen = v[ip]
        stop = off + hsize + plen
        if stop > end or v[ih] != 0 or plen > limit or (ir != 0 and v[ir] != 0):
            break
        stored = v[0]
        if (summed or stored != 0) and stored != checksum(mv[off + 8:stop]):
            break
        starts.append(off)
        off = stop
        room -= 1
    return off


def batch_checksum(mv: memoryview, at: int, starts: list[int]) -> int:
    """A V batch's checksum (XXH3-64): over its header's numbers before the checksum, its
    message_count, and the first 8 bytes (the checksum) of each message starting at ``starts``."""
    h = xxhash.xxh3_64()
    h.update(mv[at:at + 40])  # partition_id, base_offset, base_timestamp, origin_timestamp, batch_length
    h.update(mv[at + 48:at + 52])  # message_count
    for start in starts:
        h.update(mv[start:start + 8])
    return int(h.intdigest())


def index_clean(buf: bytes, at: int, count: int, starts: list[int], stop: int, msg_at: int) -> bool:
    """Whether the ``count`` index entries at ``at`` (offset u32, position u32, timestamp u64, little
    endian) are what messages._check_index passes without a word for the messages starting at
    ``starts`` (one each; the last ends at ``stop``): offsets and timestamps 0, each position where
    its message ends, counted from ``msg_at``."""
    if len(starts) != count:
        return False
    for i in range(count):
        p = at + 16 * i
        for j in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15):
            if buf[p + j] != 0:
                return False
        want = (starts[i + 1] if i + 1 < count else stop) - msg_at
        if buf[p + 4] | buf[p + 5] << 8 | buf[p + 6] << 16 | buf[p + 7] << 24 != want:
            return False
    return True
