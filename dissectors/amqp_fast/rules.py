"""Conformance rules of the AMQP/Fast dissector (RFC 006 §2.2, §3).

Concepts every protocol shares come from the kit's rule families (``amqp_fast.framing.resync``,
``amqp_fast.correlation.unanswered``, ``amqp_fast.handshake.order`` ...); the rest are AMQP/Fast's
own. Each rule has one severity: where another severity is right, it is another rule.
"""

from __future__ import annotations

from analyzer.api import Category as C
from analyzer.api import Rule
from analyzer.api import Severity as S
from dissectors.kit import rules as K
from dissectors.kit.rules import RuleSet

RULES = RuleSet("amqp_fast")
_own, _family = RULES.own, RULES.family

# --- framing (§3.1) -------------------------------------------------------------------------------
FRAMING_RESYNC = _family(K.FRAMING_RESYNC, "Bytes that are no command were skipped to find the next command")
FRAMING_INCOMPLETE = _family(K.FRAMING_INCOMPLETE, "The stream ended inside a command or a message fragment")
FRAMING_TRUNCATED = _family(K.FRAMING_TRUNCATED, "A command's fields run past its size")
FRAMING_TRAILING = _family(K.FRAMING_TRAILING, "Octets left in a command after its last field")
END_MISSING = _own("command.end_missing", S.ERROR, C.MALFORMED,
                   "The last octet a command's size counts is not the command-end 0xCE")
UNKNOWN_COMMAND = _own("command.unknown", S.ERROR, C.UNKNOWN,
                       "A command type RFC 006 does not define")
LONG_SIZE_SHORT = _own("command.long_size_unneeded", S.NOTE, C.SIZE,
                       "The 0xFFFF escape with a 4-octet size below 0xFFFF (the 2-octet size would do)")
BROWSE_ABNF = _own("command.browse_without_tag", S.NOTE, C.VALUE,
                   "HANDLE BROWSE without confirm-tag, as the ABNF summary has it (§3.5.9 has the tag)")
SHORT_STRING_NUL = _own("value.short_string_nul", S.WARNING, C.VALUE,
                        "A short string holds a zero octet (short strings MAY NOT, §3.1.1)")
# --- sizes -----------------------------------------------------------------------------------------
FRAME_MAX = _own("size.frame_max", S.ERROR, C.SIZE,
                 "A command or a message fragment larger than the frame-max of CONNECTION TUNE")
CONNECTION_LIMIT = _own("size.connection_limit", S.ERROR, C.SIZE,
                        "CONNECTION CHALLENGE, RESPONSE or TUNE larger than their 4096-octet limit")
# --- initiation and handshake (§3.2.2, §3.2.10) ---------------------------------------------------
INITIATION_MISSING = _own("initiation.missing", S.ERROR, C.HANDSHAKE,
                          "The client's first octets are not the initiation (protocol id, version)")
INITIATION_OTHER = _own("initiation.other_protocol", S.WARNING, C.HANDSHAKE,
                        "The initiation names another protocol or version than AMQP/Fast (128) version 1")
HANDSHAKE_ORDER = _family(K.HANDSHAKE_ORDER,
                          "Connection negotiation out of order (initiation, CHALLENGE, RESPONSE, further "
                          "CHALLENGE/RESPONSE, server TUNE, client TUNE, OPEN), or channel traffic before it")
OPEN_BEFORE_TUNE = _own("handshake.open_before_tune", S.ERROR, C.HANDSHAKE,
                        "CONNECTION OPEN before the client's CONNECTION TUNE")
HANDSHAKE_INCOMPLETE = _family(K.HANDSHAKE_INCOMPLETE,
                               "The conversation ended before CONNECTION OPEN (and neither side closed it)")
HANDSHAKE_VERSION = _own("handshake.version", S.ERROR, C.HANDSHAKE,
                         "CONNECTION CHALLENGE agrees on a version higher than the client's")
HANDSHAKE_MECHANISM = _own("handshake.mechanism", S.ERROR, C.HANDSHAKE,
                           "CONNECTION RESPONSE picks a mechanism the server's CHALLENGE did not offer")
HANDSHAKE_TUNE = _own("handshake.tune", S.ERROR, C.VALUE,
                      "The client's TUNE asks for more than the server's, or a frame-max below 1024")
NEVER_EXPECTED = _own("flow.never_expected", S.ERROR, C.SEQUENCE,
                      "A command the flow summaries say the receiving side never expects (a fatal error), "
                      "e.g. CONNECTION RESPONSE from the server")
# --- close handshakes (§3.2.9, §3.3.7, §3.5.16) ---------------------------------------------------
CONNECTION_AFTER_CLOSE = _own("connection.after_close", S.ERROR, C.SEQUENCE,
                              "A command other than CONNECTION CLOSE from a side that sent CONNECTION CLOSE")
CONNECTION_CLOSE_UNANSWERED = _own("connection.close_unanswered", S.WARNING, C.SEQUENCE,
                                   "CONNECTION CLOSE never answered by a CONNECTION CLOSE")
# --- channels (§3.3) ------------------------------------------------------------------------------
CHANNEL_NOT_OPEN = _own("channel.not_open", S.ERROR, C.SEQUENCE,
                        "A command on a channel never opened or already closed")
CHANNEL_ALREADY_OPEN = _own("channel.already_open", S.ERROR, C.SEQUENCE,
                            "CHANNEL OPEN on a channel that is open")
CHANNEL_AFTER_CLOSE = _own("channel.after_close", S.ERROR, C.SEQUENCE,
                           "A command other than CHANNEL CLOSE on a channel its sender is closing")
CHANNEL_CLOSE_UNANSWERED = _own("channel.close_unanswered", S.WARNING, C.SEQUENCE,
                                "CHANNEL CLOSE never answered by a CHANNEL CLOSE")
CHANNEL_NOT_TRANSACTED = _own("channel.not_transacted", S.ERROR, C.SEQUENCE,
                              "CHANNEL COMMIT or ROLLBACK on a channel not opened as transacted")
CHANNEL_MAX = _own("channel.too_many", S.ERROR, C.VALUE,
                   "More channels open at once than the channel-max of CONNECTION TUNE")
CHANNEL_ZERO = _own("channel.zero", S.ERROR, C.VALUE, "CHANNEL OPEN of channel 0 (must be greater than zero)")
NOT_RESTARTABLE = _own("channel.not_restartable", S.ERROR, C.SEQUENCE,
                       "HANDLE PREPARE on a channel not opened as restartable")
# --- handles (§3.5) -------------------------------------------------------------------------------
HANDLE_NOT_OPEN = _own("handle.not_open", S.ERROR, C.SEQUENCE,
                       "A destination command on a handle never opened or already closed")
HANDLE_ALREADY_OPEN = _own("handle.already_open", S.ERROR, C.SEQUENCE, "HANDLE OPEN on a handle that is open")
HANDLE_AFTER_CLOSE = _own("handle.after_close", S.ERROR, C.SEQUENCE,
                          "A command other than HANDLE CLOSE on a handle its sender is closing")
HANDLE_CLOSE_UNANSWERED = _own("handle.close_unanswered", S.WARNING, C.SEQUENCE,
                               "HANDLE CLOSE never answered by a HANDLE CLOSE")
HANDLE_MAX = _own("handle.too_many", S.ERROR, C.VALUE,
                  "More handles open at once than the handle-max of CONNECTION TUNE")
SERVICE_TYPE = _own("handle.service_type", S.ERROR, C.VALUE,
                    "HANDLE OPEN with a service type other than 1 (queue), 2 (topic), 3 (peer)")
NOTIFY_UNREQUESTED = _own("handle.notify_unrequested", S.WARNING, C.SEQUENCE,
                          "HANDLE NOTIFY on a handle that sent neither HANDLE CONSUME nor HANDLE BROWSE")
CREATED_NOT_TEMPORARY = _own("handle.created_not_temporary", S.WARNING, C.SEQUENCE,
                             "HANDLE CREATED for a handle not opened as temporary")
# --- confirmations (§3.2.11, §3.3.8) --------------------------------------------------------------
UNANSWERED = _family(K.CORRELATION_UNANSWERED,
                     "A command with a non-zero confirm-tag never confirmed, a HANDLE QUERY never answered "
                     "by HANDLE INDEX, or a HANDLE PREPARE never answered by HANDLE READY")
UNKNOWN_RESPONSE = _family(K.CORRELATION_UNKNOWN_RESPONSE,
                           "A REPLY whose confirm-tag no outstanding command carries, or a HANDLE INDEX or "
                           "READY nothing asked for")
MISMATCH = _family(K.CORRELATION_MISMATCH,
                   "A REPLY of another level than the command whose confirm-tag it carries (CONNECTION "
                   "REPLY for a channel command, ...)")
DUPLICATE = _family(K.CORRELATION_DUPLICATE, "A confirm-tag reused while a command with it is unconfirmed")
# --- messages (§3.4) ------------------------------------------------------------------------------
INTERLEAVED = _own("message.interleaved", S.ERROR, C.SEQUENCE,
                   "Fragments of two messages interleaved on one channel")
MESSAGE_SIZE = _own("message.size", S.ERROR, C.SIZE,
                    "A message's fragments carry more or fewer octets than its head and body-size")
MESSAGE_INCOMPLETE = _family(K.CONTENT_INCOMPLETE, "A message's final fragment never came")
FRAGMENT_SHORT = _own("fragment.short", S.ERROR, C.SIZE,
                      "A message fragment shorter than its fragment-size: a command starts inside it")
FRAGMENT_LONG = _own("fragment.long", S.ERROR, C.SIZE,
                     "A message fragment longer than its fragment-size: octets that are no command follow it")
STREAMING = _own("message.streaming", S.WARNING, C.VALUE,
                 "A streaming fragment with recovery set, partial clear or a non-zero body-size")
PRIORITY = _own("message.priority", S.WARNING, C.VALUE, "A message priority above 9")
# --- heartbeat (§2.2.12, §3.2.7) ------------------------------------------------------------------
HEARTBEAT_SILENCE = _family(K.HEARTBEAT_SILENCE, "A side sent nothing for longer than twice the heartbeat of "
                                                 "the client's CONNECTION TUNE")
# --- reply codes (§2.2.10) ------------------------------------------------------------------------
REPLY_ERROR = _own("reply.error", S.WARNING, C.RESPONSE,
                   "A REPLY or CLOSE with an error reply code (first digit 4 or 5)")
REPLY_UNKNOWN = _own("reply.unknown_code", S.WARNING, C.VALUE,
                     "A reply code whose first digit is no severity (1 to 5)")
# --- bounds ---------------------------------------------------------------------------------------
LIMIT_EXCEEDED = _family(K.LIMIT_EXCEEDED)

ALL_RULES: tuple[Rule, ...] = RULES.all()
