"""The two dialects of the stream protocol as :class:`~dissectors.kit.Dialect` objects.

Everything that differs between today's protocol and the 2020 draft is here, as data: the command
table, the response codes and which of them are client mistakes, the OK code, and the quirks the
decoder asks about (``dialect.has(...)``) instead of carrying a ``draft`` flag around.
"""

from __future__ import annotations

from dissectors.kit import Dialect
from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS
from dissectors.rabbitmq_stream.layouts import COMMANDS
from dissectors.rabbitmq_stream.wire import CODES, DRAFT_CODES

#: Quirks.
RESPONSE_BIT = "response-bit"  # responses carry key | 0x8000 (else: told apart by direction)
DRAFT_CHUNK = "draft-chunk"  # 31/39-byte chunk header, 9-byte sub-batch header
INT32_SUBSCRIPTION = "int32-subscription"  # Deliver's subscription id is an int32 (else uint8)
PUBLISHER_IDS = "publisher-ids"  # Publish names a declared publisher (the draft names the stream)

CURRENT = Dialect(
    "current", "RabbitMQ Stream as released since RabbitMQ 3.9 (Version 1/2)",
    commands=COMMANDS, codes=CODES, quirks=frozenset({RESPONSE_BIT, PUBLISHER_IDS}),
    values={
        "ok": 0x01,
        "versions": frozenset({1, 2}),
        #: Codes that point at a mistake of the client (the rest are normal outcomes).
        "client_mistakes": frozenset({0x03, 0x04, 0x07, 0x08, 0x09, 0x0D, 0x0E, 0x11, 0x12, 0x14, 0x15}),
        "sasl_challenge": 0x0A,
        "subscription_gone": 0x04,
        #: Responses keyed without the response bit: key -> who sends them, and whether that is worth a note.
        "unflagged_responses": {0x18: ("s2c", True), 0x19: ("s2c", True), 0x14: ("c2s", False)},
    },
)

DRAFT = Dialect(
    "2020-draft", "The 2020 pre-release draft (Version 0, no response bit, 0-based codes)",
    commands=DRAFT_COMMANDS, codes=DRAFT_CODES, quirks=frozenset({DRAFT_CHUNK, INT32_SUBSCRIPTION}),
    values={
        "ok": 0,
        "versions": frozenset({0}),
        "client_mistakes": frozenset({2, 3, 6, 7, 8, 12, 13, 16, 17}),
        "sasl_challenge": 9,
        "subscription_gone": 3,
        "unflagged_responses": {},
    },
)

DIALECTS: dict[str, Dialect] = {d.name: d for d in (CURRENT, DRAFT)}


def plausible(dialect: Dialect | None, key_raw: int, version: int) -> bool:
    """Could a frame of ``dialect`` (either, when not known yet) start with this key and version?"""
    if dialect is None:
        return plausible(CURRENT, key_raw, version) or plausible(DRAFT, key_raw, version)
    if dialect.has(RESPONSE_BIT):
        return version in dialect["versions"] and (key_raw & 0x7FFF) in dialect.commands
    return version in dialect["versions"] and key_raw in dialect.commands
