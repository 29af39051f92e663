"""Conformance rules of the AMQP 0-9-1 dissector (spec §2, §4, §5, §6, §7).

Concepts every protocol shares come from the kit's rule families (``amqp091.framing.resync``,
``amqp091.correlation.unanswered``, ``amqp091.heartbeat.silence`` ...); the rest are AMQP's own.
Each rule has one severity: where another severity is right, it is another rule.
"""

from __future__ import annotations

from analyzer.api import Category as C
from analyzer.api import Rule
from analyzer.api import Severity as S
from dissectors.kit import rules as K
from dissectors.kit.rules import RuleSet

RULES = RuleSet("amqp091")
_own, _family = RULES.own, RULES.family

# --- protocol header and handshake -------------------------------------------------------------
HEADER_VERSION = _own("header.other_version", S.WARNING, C.HANDSHAKE,
                      "The client's protocol header names another AMQP version than 0-9-1")
HEADER_UNKNOWN = _own("header.unknown", S.ERROR, C.UNKNOWN,
                      "An 'AMQP' protocol header with an unknown protocol id or version")
HEADER_MISSING = _own("header.missing", S.ERROR, C.HANDSHAKE,
                      "The client sent something other than the 8-byte protocol header first")
HEADER_REFUSED = _own("header.refused", S.WARNING, C.HANDSHAKE,
                      "The server answered with a protocol header: it refuses the client's version")
HANDSHAKE_ORDER = _family(K.HANDSHAKE_ORDER,
                          "Handshake out of order (header, start, start-ok, secure/secure-ok, tune, tune-ok, "
                          "open, open-ok), or channel traffic before the connection is open")
HANDSHAKE_MECHANISM = _own("handshake.mechanism", S.ERROR, C.HANDSHAKE,
                           "start-ok picks a SASL mechanism the server did not offer")
HANDSHAKE_TUNE = _own("handshake.tune", S.ERROR, C.VALUE,
                      "tune-ok asks for more than the server allowed, or a frame-max below frame-min-size")
HANDSHAKE_INCOMPLETE = _family(K.HANDSHAKE_INCOMPLETE, "The connection ended before the handshake reached "
                                                       "open-ok (and neither side closed it)")
# --- framing -------------------------------------------------------------------------------------
FRAMING_RESYNC = _family(K.FRAMING_RESYNC, "Bytes that are not an AMQP frame were skipped to find the next frame")
FRAMING_INCOMPLETE = _family(K.FRAMING_INCOMPLETE, "The stream ended inside a frame")
FRAMING_TRUNCATED = _family(K.FRAMING_TRUNCATED,
                            "A method's arguments or a content header's properties run past the end of its "
                            "frame, or the frame is shorter than its fixed part")
FRAMING_TRAILING = _family(K.FRAMING_TRAILING,
                           "Bytes left in a method frame after its last argument, or in a content header "
                           "after its last property")
FRAME_END = _own("frame.bad_frame_end", S.ERROR, C.MALFORMED,
                 "The octet after a frame's payload is not the frame-end 0xCE")
FRAME_TYPE = _own("frame.unknown_type", S.ERROR, C.UNKNOWN,
                  "A frame type other than 1 (method), 2 (header), 3 (body), 8 (heartbeat)")
FRAME_TOO_LARGE = _own("frame.too_large", S.ERROR, C.SIZE,
                       "A frame larger than the negotiated frame-max (before tune-ok: frame-min-size 4096)")
FRAME_CHANNEL_MAX = _own("frame.channel_max", S.ERROR, C.VALUE,
                         "A channel number above the negotiated channel-max")
# --- methods -------------------------------------------------------------------------------------
METHOD_UNKNOWN_CLASS = _own("method.unknown_class", S.ERROR, C.UNKNOWN,
                            "A method of a class AMQP 0-9-1 (with RabbitMQ's extensions) does not define")
METHOD_UNKNOWN = _own("method.unknown_method", S.ERROR, C.UNKNOWN,
                      "A method id its class does not define")
METHOD_CHANNEL = _own("method.wrong_channel", S.ERROR, C.SEQUENCE,
                      "A connection method on a channel other than 0, or another method on channel 0")
METHOD_DIRECTION = _own("method.wrong_direction", S.ERROR, C.SEQUENCE,
                        "A method sent by the peer that may not send it (e.g. basic.deliver from the client)")
METHOD_OBSOLETE = _own("method.obsolete", S.WARNING, C.VALUE,
                       "A method removed from 0-9-1 or internal to RabbitMQ (access class, basic.credit)")
TABLE_UNKNOWN_TAG = _own("table.unknown_tag", S.ERROR, C.MALFORMED,
                         "A field table or array holds a value with an unknown type tag, or is cut off")
TABLE_SPEC_TAG = _own("table.spec_only_tag", S.NOTE, C.VALUE,
                      "A field table uses tag U or L, which the spec defines but RabbitMQ does not emit "
                      "(and cannot parse, for U)")
# --- channels ------------------------------------------------------------------------------------
CHANNEL_NOT_OPEN = _own("channel.not_open", S.ERROR, C.SEQUENCE,
                        "A frame on a channel before channel.open-ok (or never opened)")
CHANNEL_AFTER_CLOSE = _own("channel.after_close", S.ERROR, C.SEQUENCE,
                           "A frame on a channel after its sender closed it (only close/close-ok may follow)")
CHANNEL_ALREADY_OPEN = _own("channel.already_open", S.ERROR, C.SEQUENCE,
                            "channel.open on a channel that is already open")
CHANNEL_CLOSE_OK = _own("channel.close_ok_without_close", S.ERROR, C.CORRELATION,
                        "close-ok without a close from the peer")
TX_AND_CONFIRM = _own("channel.tx_and_confirm", S.WARNING, C.SEQUENCE,
                      "confirm.select on a transactional channel or tx.select on a confirm channel "
                      "(the two modes exclude each other; RabbitMQ: 406 PRECONDITION_FAILED)")
# --- content -------------------------------------------------------------------------------------
CONTENT_UNEXPECTED = _family(K.CONTENT_UNEXPECTED,
                             "A content header or body frame where a method frame was expected")
CONTENT_HEADER_EXPECTED = _own("content.header_expected", S.ERROR, C.SEQUENCE,
                               "A content-bearing method not followed by its content header")
CONTENT_INTERLEAVED = _own("content.interleaved", S.ERROR, C.SEQUENCE,
                           "A method or header on a channel while body frames of a message are still due")
CONTENT_BODY_SIZE = _own("content.body_size", S.ERROR, C.SIZE,
                         "Body frames carry more bytes than the content header's body-size")
CONTENT_INCOMPLETE = _family(K.CONTENT_INCOMPLETE,
                             "A message's content header or body frames never arrived in full")
CONTENT_CHANNEL_ZERO = _own("content.channel_zero", S.ERROR, C.SEQUENCE,
                            "A content header or body frame on channel 0")
CONTENT_HEADER_BAD = _own("content.bad_header", S.ERROR, C.VALUE,
                          "Content header with a class other than its method's, weight not 0, or reserved "
                          "property flags")
# --- heartbeats ----------------------------------------------------------------------------------
HEARTBEAT_CHANNEL = _own("heartbeat.channel", S.ERROR, C.SEQUENCE,
                         "A heartbeat frame on a channel other than 0")
HEARTBEAT_PAYLOAD = _own("heartbeat.payload", S.ERROR, C.MALFORMED,
                         "A heartbeat frame with a non-empty payload")
HEARTBEAT_SILENCE = _family(K.HEARTBEAT_SILENCE)
# --- request / response correlation ----------------------------------------------------------------
UNANSWERED = _family(K.CORRELATION_UNANSWERED, "A synchronous method never got its reply (-ok) on its channel")
UNKNOWN_RESPONSE = _family(K.CORRELATION_UNKNOWN_RESPONSE,
                           "A reply method (-ok, get-empty) while the peer has no request outstanding on "
                           "the channel")
MISMATCH = _family(K.CORRELATION_MISMATCH,
                   "A reply method that does not answer the oldest outstanding request of the peer on "
                   "the channel (synchronous methods are answered in order)")
ACK_UNKNOWN_TAG = _own("ack.unknown_tag", S.ERROR, C.CORRELATION,
                       "basic.ack/nack/reject for a delivery tag that was never delivered or is already "
                       "settled (RabbitMQ: 406 PRECONDITION_FAILED)")
CONFIRM_UNKNOWN_TAG = _own("confirm.unknown_tag", S.ERROR, C.CORRELATION,
                           "A publisher confirm (server basic.ack/nack) for a publish sequence number that "
                           "is not outstanding")
CONFIRM_NOT_SELECTED = _own("confirm.not_selected", S.ERROR, C.SEQUENCE,
                            "A server basic.ack/nack on a channel that never sent confirm.select")
CONFIRM_MISSING = _own("confirm.unconfirmed", S.WARNING, C.CORRELATION,
                       "A publish on a confirm channel that the server never confirmed")
# --- reply codes ---------------------------------------------------------------------------------
REPLY_CONNECTION = _own("reply.connection_error", S.ERROR, C.RESPONSE,
                        "connection.close with an error reply code (connection exception)")
REPLY_CHANNEL = _own("reply.channel_error", S.WARNING, C.RESPONSE,
                     "channel.close with an error reply code (channel exception)")
REPLY_RETURN = _own("reply.returned", S.NOTE, C.RESPONSE,
                    "basic.return: the broker sent a mandatory/immediate message back")
REPLY_UNKNOWN = _own("reply.unknown_code", S.WARNING, C.VALUE,
                     "A reply code the spec does not define")
REPLY_ZERO = _own("reply.zero_code", S.NOTE, C.VALUE,
                  "Reply code 0, which the spec does not define: clients such as pika use it for a normal close")
# --- bounds --------------------------------------------------------------------------------------
LIMIT_EXCEEDED = _family(K.LIMIT_EXCEEDED)

ALL_RULES: tuple[Rule, ...] = RULES.all()
