"""Every conformance rule of the Iggy dissector (stable ids ``iggy.<family>.<name>``).

Concepts every protocol shares come from the kit's rule families (``iggy.framing.*``,
``iggy.correlation.*``, ``iggy.handshake.order``, ``iggy.limit.exceeded``); the rest are Iggy's own.
A refusal a correct client meets in normal operation (a name already taken, an entity not found)
and one that points at a client mistake (a malformed or unauthenticated request) are two rules
with two severities, so that clean sessions of real clients, which include a refused request,
carry no warning.
"""

from __future__ import annotations

from analyzer.api import Category, Rule, Severity
from dissectors.kit import rules as K
from dissectors.kit.rules import RuleSet

E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE
_RS = RuleSet("iggy")

# framing and sizes
JUNK = _RS.family(K.FRAMING_RESYNC, "Bytes that do not form a frame (an implausible length, an unknown code or "
                                    "status, a V size below its header) were skipped to find the next frame start")
INCOMPLETE = _RS.family(K.FRAMING_INCOMPLETE)
TRUNCATED = _RS.family(K.FRAMING_TRUNCATED, "A payload too short for the fields its command needs (a length or "
                                            "count inside it overruns the frame)")
TRAILING = _RS.family(K.FRAMING_TRAILING)
TOO_SHORT = _RS.own("size.too_short", E, Category.SIZE,
                    "A request whose length is below 4 (it must cover the command code); the server answers "
                    "InvalidCommand")
OVER_LIMIT = _RS.own("size.over_limit", E, Category.SIZE,
                     "A frame length over the 64 MiB limit: servers drop such frames")
ERROR_PAYLOAD = _RS.own("size.error_payload", W, Category.SIZE,
                        "An error response with a payload (error responses are exactly 8 bytes)")
PAYLOAD_SIZE = _RS.own("size.payload", E, Category.SIZE,
                       "A length or size field inside a payload disagrees with the bytes (message lengths, index "
                       "positions, metadata_length, user headers, V batch_length)")
# commands
UNKNOWN_COMMAND = _RS.own("command.unknown", W, Category.UNKNOWN,
                          "A command code the dialect does not define (the server answers InvalidCommand)")
UNKNOWN_OPERATION = _RS.own("vsr.unknown_operation", W, Category.UNKNOWN,
                            "A V request operation (or V header command) the protocol does not define")
# values
INVALID_VALUE = _RS.own("value.invalid", W, Category.VALUE,
                        "An invalid value: identifier kind or length, an empty or non-UTF-8 name, partitioning, "
                        "polling or consumer kind, a boolean or status out of range")
COUNT = _RS.own("value.count", E, Category.VALUE, "A message count that disagrees with the messages in the bytes")
HEADER_KIND = _RS.own("value.header_kind", W, Category.VALUE, "A user-header key or value kind that does not exist, "
                                                              "or a value whose size does not fit its kind")
RESERVED = _RS.own("value.reserved", W, Category.VALUE,
                   "Non-zero reserved bytes where the dialect requires zero (C message header, V headers and "
                   "batch header)")
CHECKSUM = _RS.own("message.checksum", E, Category.CHECKSUM,
                   "A message checksum (CRC32 or XXH3-64 by dialect) that does not match the message bytes")
PROTOCOL_VERSION = _RS.own("login.protocol_version", W, Category.VALUE,
                           "A V client protocol version the server cannot accept (below its minimum, or a newer "
                           "major.minor)")
# login and pairing
BEFORE_LOGIN = _RS.family(K.HANDSHAKE_ORDER, "A command other than PING, LOGIN_USER and "
                                             "LOGIN_WITH_PERSONAL_ACCESS_TOKEN (LOGIN_REGISTER in V) before a "
                                             "successful login (the server answers Unauthenticated)")
UNKNOWN_RESPONSE = _RS.family(K.CORRELATION_UNKNOWN_RESPONSE,
                              "A response with no request outstanding (other than the Disconnected status a "
                              "server sends when it stops)")
UNANSWERED = _RS.family(K.CORRELATION_UNANSWERED)
UNKNOWN_REPLY = _RS.own("correlation.unknown_request_number", W, Category.CORRELATION,
                        "A V reply whose request number matches no outstanding request")
DUPLICATE = _RS.family(K.CORRELATION_DUPLICATE, "A V replicated request reuses the request number of an earlier "
                                                "one (replicated requests number 1, 2, 3, ...; reads share the "
                                                "next number, which is no reuse)")
MISMATCH = _RS.family(K.CORRELATION_MISMATCH, "A V reply whose operation differs from the request it answers")
LIMIT = _RS.family(K.LIMIT_EXCEEDED)
# responses
ERROR_STATUS = _RS.own("response.error", W, Category.RESPONSE,
                       "An error status that points at a mistake of the client (InvalidCommand, Unauthenticated, "
                       "an invalid name, id, size or message format, ...)")
REFUSED = _RS.own("response.refused", N, Category.RESPONSE,
                  "An error status that is a normal outcome (already exists, not found, feature unavailable, "
                  "bad credentials, the server disconnecting)")
UNKNOWN_STATUS = _RS.own("response.unknown_status", W, Category.UNKNOWN,
                         "A status code no server version defines")
EVICTION = _RS.own("vsr.eviction", W, Category.RESPONSE, "A V server evicted the client session (the reason named)")

RULES: tuple[Rule, ...] = _RS.all()

#: Problem kinds of the payload decoders (types.PROBLEM_KINDS) -> rule.
PROBLEM_RULES: dict[str, Rule] = {"checksum": CHECKSUM, "size": PAYLOAD_SIZE, "count": COUNT, "value": INVALID_VALUE,
                                  "header_kind": HEADER_KIND, "reserved": RESERVED}
