"""The wire dialects of Iggy (iggy.md section 0) as :class:`~dissectors.kit.Dialect` values, and the
evidence that tells them apart.

Names as in the spec: ``L0`` (the 2023 page, 0.0.4-0.0.32), ``L1`` (legacy classic, 0.0.33 to
server-0.4.300), ``Z1`` (zero-copy, server-0.5), ``Z2`` (0-based ids, XXH3, server-0.6), ``C``
(64-byte message header, typed header keys, server-0.7/0.8) and ``V`` (the 0.9 edge: 256-byte
consensus header on every frame).

What a dialect changes is data here (quirks and values); the command table (:mod:`.commands`)
says per command which layout each dialect uses. A connection starts with every classic dialect
as a candidate and drops those whose layouts cannot decode what it sees, or whose ids cannot be 0
when a request names stream, topic or group 0 (:func:`zero_id`); ``V`` is recognised by its
framing alone.
"""

from __future__ import annotations

import re

from analyzer.api import Field
from dissectors.iggy.commands import COMMANDS
from dissectors.iggy.names import DIALECT_NAMES
from dissectors.iggy.status import STATUS
from dissectors.kit import Dialect

#: Quirks a decoder asks about (``dialect.has(...)``).
VSR = "vsr"  # 256-byte consensus header on every frame, request numbers
ZERO_COPY = "zero-copy"  # SendMessages with metadata_length and index table; 56/64-byte message headers
LEGACY_MESSAGES = "legacy-messages"  # u128 id + headers + payload; 45-byte polled-message prefix
ZERO_BASED_IDS = "zero-based-ids"  # stream/topic/partition ids start at 0 (server-0.6 on)


def _dialect(name: str, title: str, quirks: set[str], **values: object) -> Dialect:
    return Dialect(name, title, commands={c.code: c for c in COMMANDS.values() if c.known_in(name)},
                   codes=STATUS, quirks=frozenset(quirks), values=values)


L0 = _dialect("L0", "The 2023 protocol (0.0.4-0.0.32): consumer id u32, legacy messages",
              {LEGACY_MESSAGES}, checksum="crc32", message_header=0, sdk=None, first_id=1)
L1 = _dialect("L1", "Legacy classic (0.0.33 - server-0.4.300): consumer Identifier, legacy messages, CRC32",
              {LEGACY_MESSAGES}, checksum="crc32", message_header=0, sdk=((0, 0), (0, 6)), first_id=1)
Z1 = _dialect("Z1", "Zero-copy v1 (server-0.5): 56-byte message header, CRC32, 1-based ids",
              {ZERO_COPY}, checksum="crc32", message_header=56, sdk=((0, 7), (0, 7)), first_id=1)
Z2 = _dialect("Z2", "Zero-copy v2 (server-0.6): 0-based ids, partition flag, XXH3-64",
              {ZERO_COPY, ZERO_BASED_IDS}, checksum="xxh3", message_header=56, sdk=((0, 8), (0, 8)), first_id=0)
C = _dialect("C", "Current stable (server-0.7/0.8): 64-byte message header, typed user-header keys",
             {ZERO_COPY, ZERO_BASED_IDS}, checksum="xxh3", message_header=64, sdk=((0, 9), (0, 10)), first_id=0)
V = _dialect("V", "VSR edge (server-0.9): 256-byte consensus header, login+register, 256-byte batch header",
             {VSR, ZERO_COPY, ZERO_BASED_IDS}, checksum="xxh3", message_header=48, sdk=((0, 11), (999, 0)),
             first_id=0)

DIALECTS: dict[str, Dialect] = {d.name: d for d in (L0, L1, Z1, Z2, C, V)}
assert tuple(DIALECTS) == DIALECT_NAMES, "names.py lists the dialects this module defines, in this order"
#: The classic dialects (framing of sections 1.1/1.2), newest first: the order in which a
#: connection prefers its remaining candidates while the bytes do not decide.
CLASSIC: tuple[str, ...] = ("C", "Z2", "Z1", "L1", "L0")

_SEMVER = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def from_sdk_version(text: str) -> str | None:
    """The dialect an SDK crate version implies (LOGIN_USER's ``version``, e.g. ``0.10.0`` -> C), or
    None when the text is no version. Only a preference: the layouts decide (a binding may send its
    own version rather than the Rust crate's)."""
    m = _SEMVER.match(text)
    if m is None:
        return None
    ver = (int(m.group(1)), int(m.group(2)))
    for d in DIALECTS.values():
        span = d["sdk"]
        if span is not None and span[0] <= ver <= span[1]:
            return d.name
    return None


#: Identifier fields whose numeric value names an entity (0 exists only where ids are 0-based).
ID_FIELDS = frozenset({"stream_id", "topic_id", "group_id"})


def zero_id(fields: list[Field]) -> bool:
    """Whether a request names a stream, topic or group by the numeric id 0: ids are 0-based from
    server-0.6 (Z2) on and start at 1 before, where 0 names nothing."""
    for f in fields:
        if f.name not in ID_FIELDS or f.value != 0:  # (an identifier's children are made when read)
            continue
        kids = f.children
        if kids and kids[0].name == "kind" and kids[0].value == 1:
            return True
    return False


_ZERO_BASED = frozenset(d.name for d in DIALECTS.values() if d["first_id"] == 0)


def zero_based(candidates: list[str]) -> list[str]:
    """The candidates whose ids start at 0."""
    return [c for c in candidates if c in _ZERO_BASED]


def order(candidates: list[str], preferred: str | None) -> list[str]:
    """Candidates with ``preferred`` first (when it is one), the rest newest first."""
    rest = [c for c in CLASSIC if c in candidates and c != preferred]
    return ([preferred] if preferred in candidates else []) + rest


def pack_version(major: int, minor: int, patch: int) -> int:
    """A V protocol version as the wire packs it: major<<20 | minor<<10 | patch."""
    return (major << 20) | (minor << 10) | patch


def unpack_version(v: int) -> tuple[int, int, int]:
    return v >> 20, (v >> 10) & 0x3FF, v & 0x3FF


def accepts(server: int, client: int, minimum: int | None = None) -> bool:
    """Whether a V server of protocol ``server`` (lowest accepted ``minimum``) accepts ``client``:
    the client is at least the minimum and its major.minor is not above the server's (section 9.5)."""
    if minimum is not None and client < minimum:
        return False
    return unpack_version(client)[:2] <= unpack_version(server)[:2]
