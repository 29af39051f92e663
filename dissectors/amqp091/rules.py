"""Conformance rules of the AMQP 0-9-1 dissector (spec §2, §4, §5, §6, §7)."""

from __future__ import annotations

from analyzer.api import Category as C
from analyzer.api import Rule
from analyzer.api import Severity as S

# --- protocol header and handshake -------------------------------------------------------------
HEADER_VERSION = Rule("amqp091.header.other_version", S.WARNING, C.HANDSHAKE,
                      "The client's protocol header names another AMQP version than 0-9-1")
HEADER_UNKNOWN = Rule("amqp091.header.unknown", S.ERROR, C.UNKNOWN,
                      "An 'AMQP' protocol header with an unknown protocol id or version")
HEADER_MISSING = Rule("amqp091.header.missing", S.ERROR, C.HANDSHAKE,
                      "The client sent something other than the 8-byte protocol header first")
HEADER_REFUSED = Rule("amqp091.header.refused", S.WARNING, C.HANDSHAKE,
                      "The server answered with a protocol header: it refuses the client's version")
HANDSHAKE_ORDER = Rule("amqp091.handshake.order", S.ERROR, C.HANDSHAKE,
                       "Handshake out of order (header, start, start-ok, secure/secure-ok, tune, tune-ok, "
                       "open, open-ok), or channel traffic before the connection is open")
HANDSHAKE_MECHANISM = Rule("amqp091.handshake.mechanism", S.ERROR, C.HANDSHAKE,
                           "start-ok picks a SASL mechanism the server did not offer")
HANDSHAKE_TUNE = Rule("amqp091.handshake.tune", S.ERROR, C.VALUE,
                      "tune-ok asks for more than the server allowed, or a frame-max below frame-min-size")
HANDSHAKE_INCOMPLETE = Rule("amqp091.handshake.incomplete", S.WARNING, C.HANDSHAKE,
                            "The connection ended before the handshake reached open-ok")
# --- framing -------------------------------------------------------------------------------------
FRAME_END = Rule("amqp091.frame.bad_frame_end", S.ERROR, C.MALFORMED,
                 "The octet after a frame's payload is not the frame-end 0xCE")
FRAME_TYPE = Rule("amqp091.frame.unknown_type", S.ERROR, C.UNKNOWN,
                  "A frame type other than 1 (method), 2 (header), 3 (body), 8 (heartbeat)")
FRAME_TOO_LARGE = Rule("amqp091.frame.too_large", S.ERROR, C.SIZE,
                       "A frame larger than the negotiated frame-max (before tune-ok: frame-min-size 4096)")
FRAME_JUNK = Rule("amqp091.frame.junk", S.ERROR, C.MALFORMED,
                  "Bytes that are not an AMQP frame were skipped to find the next frame")
FRAME_TRUNCATED = Rule("amqp091.frame.truncated", S.WARNING, C.TRUNCATED,
                       "The stream ended inside a frame")
FRAME_CHANNEL_MAX = Rule("amqp091.frame.channel_max", S.ERROR, C.VALUE,
                         "A channel number above the negotiated channel-max")
# --- methods -------------------------------------------------------------------------------------
METHOD_UNKNOWN_CLASS = Rule("amqp091.method.unknown_class", S.ERROR, C.UNKNOWN,
                            "A method of a class AMQP 0-9-1 (with RabbitMQ's extensions) does not define")
METHOD_UNKNOWN = Rule("amqp091.method.unknown_method", S.ERROR, C.UNKNOWN,
                      "A method id its class does not define")
METHOD_OVERRUN = Rule("amqp091.method.overrun", S.ERROR, C.MALFORMED,
                      "A method's arguments run past the end of its frame")
METHOD_UNDERRUN = Rule("amqp091.method.underrun", S.ERROR, C.MALFORMED,
                       "Bytes left in a method frame after its last argument")
METHOD_CHANNEL = Rule("amqp091.method.wrong_channel", S.ERROR, C.SEQUENCE,
                      "A connection method on a channel other than 0, or another method on channel 0")
METHOD_DIRECTION = Rule("amqp091.method.wrong_direction", S.ERROR, C.SEQUENCE,
                        "A method sent by the peer that may not send it (e.g. basic.deliver from the client)")
METHOD_OBSOLETE = Rule("amqp091.method.obsolete", S.WARNING, C.VALUE,
                       "A method removed from 0-9-1 or internal to RabbitMQ (access class, basic.credit)")
TABLE_UNKNOWN_TAG = Rule("amqp091.table.unknown_tag", S.ERROR, C.MALFORMED,
                         "A field table or array holds a value with an unknown type tag, or is cut off")
TABLE_SPEC_TAG = Rule("amqp091.table.spec_only_tag", S.NOTE, C.VALUE,
                      "A field table uses tag U or L, which the spec defines but RabbitMQ does not emit "
                      "(and cannot parse, for U)")
# --- channels ------------------------------------------------------------------------------------
CHANNEL_NOT_OPEN = Rule("amqp091.channel.not_open", S.ERROR, C.SEQUENCE,
                        "A frame on a channel before channel.open-ok (or never opened)")
CHANNEL_AFTER_CLOSE = Rule("amqp091.channel.after_close", S.ERROR, C.SEQUENCE,
                           "A frame on a channel after its sender closed it (only close/close-ok may follow)")
CHANNEL_ALREADY_OPEN = Rule("amqp091.channel.already_open", S.ERROR, C.SEQUENCE,
                            "channel.open on a channel that is already open")
CHANNEL_CLOSE_OK = Rule("amqp091.channel.close_ok_without_close", S.ERROR, C.CORRELATION,
                        "close-ok without a close from the peer")
# --- content -------------------------------------------------------------------------------------
CONTENT_UNEXPECTED = Rule("amqp091.content.unexpected", S.ERROR, C.SEQUENCE,
                          "A content header or body frame where a method frame was expected")
CONTENT_HEADER_EXPECTED = Rule("amqp091.content.header_expected", S.ERROR, C.SEQUENCE,
                               "A content-bearing method not followed by its content header")
CONTENT_INTERLEAVED = Rule("amqp091.content.interleaved", S.ERROR, C.SEQUENCE,
                           "A method or header on a channel while body frames of a message are still due")
CONTENT_BODY_SIZE = Rule("amqp091.content.body_size", S.ERROR, C.SIZE,
                         "Body frames carry more bytes than the content header's body-size")
CONTENT_INCOMPLETE = Rule("amqp091.content.incomplete", S.WARNING, C.TRUNCATED,
                          "A message's body frames never added up to its body-size")
CONTENT_CHANNEL_ZERO = Rule("amqp091.content.channel_zero", S.ERROR, C.SEQUENCE,
                            "A content header or body frame on channel 0")
CONTENT_HEADER_BAD = Rule("amqp091.content.bad_header", S.ERROR, C.VALUE,
                          "Content header with a class other than its method's, weight not 0, or reserved "
                          "property flags")
CONTENT_HEADER_MALFORMED = Rule("amqp091.content.malformed_header", S.ERROR, C.MALFORMED,
                                "Content header properties overrun or underrun the frame")
# --- heartbeats ----------------------------------------------------------------------------------
HEARTBEAT_CHANNEL = Rule("amqp091.heartbeat.channel", S.ERROR, C.SEQUENCE,
                         "A heartbeat frame on a channel other than 0")
HEARTBEAT_PAYLOAD = Rule("amqp091.heartbeat.payload", S.ERROR, C.MALFORMED,
                         "A heartbeat frame with a non-empty payload")
HEARTBEAT_MISSED = Rule("amqp091.heartbeat.missed", S.WARNING, C.SEQUENCE,
                        "A peer sent nothing for more than twice the negotiated heartbeat interval")
# --- request / response correlation ----------------------------------------------------------------
SYNC_UNANSWERED = Rule("amqp091.sync.unanswered", S.WARNING, C.CORRELATION,
                       "A synchronous method never got its reply (-ok) on its channel")
SYNC_UNEXPECTED = Rule("amqp091.sync.unexpected_reply", S.ERROR, C.CORRELATION,
                       "A reply method (-ok, get-empty) that answers no pending request of the peer")
ACK_UNKNOWN_TAG = Rule("amqp091.ack.unknown_tag", S.ERROR, C.CORRELATION,
                       "basic.ack/nack/reject for a delivery tag that was never delivered or is already "
                       "settled (RabbitMQ: 406 PRECONDITION_FAILED)")
CONFIRM_UNKNOWN_TAG = Rule("amqp091.confirm.unknown_tag", S.ERROR, C.CORRELATION,
                           "A publisher confirm (server basic.ack/nack) for a publish sequence number that "
                           "is not outstanding")
CONFIRM_NOT_SELECTED = Rule("amqp091.confirm.not_selected", S.ERROR, C.SEQUENCE,
                            "A server basic.ack/nack on a channel that never sent confirm.select")
CONFIRM_MISSING = Rule("amqp091.confirm.unconfirmed", S.WARNING, C.CORRELATION,
                       "A publish on a confirm channel that the server never confirmed")
TX_AND_CONFIRM = Rule("amqp091.channel.tx_and_confirm", S.WARNING, C.SEQUENCE,
                      "confirm.select on a transactional channel or tx.select on a confirm channel "
                      "(the two modes exclude each other; RabbitMQ: 406 PRECONDITION_FAILED)")
# --- reply codes ---------------------------------------------------------------------------------
REPLY_CONNECTION = Rule("amqp091.reply.connection_error", S.ERROR, C.RESPONSE,
                        "connection.close with an error reply code (connection exception)")
REPLY_CHANNEL = Rule("amqp091.reply.channel_error", S.WARNING, C.RESPONSE,
                     "channel.close with an error reply code (channel exception)")
REPLY_RETURN = Rule("amqp091.reply.returned", S.NOTE, C.RESPONSE,
                    "basic.return: the broker sent a mandatory/immediate message back")
REPLY_UNKNOWN = Rule("amqp091.reply.unknown_code", S.WARNING, C.VALUE,
                     "A reply code the spec does not define")

ALL_RULES: tuple[Rule, ...] = tuple(v for v in globals().values() if isinstance(v, Rule))
