"""Every conformance rule the RabbitMQ Stream dissector can report (stable ids)."""

from __future__ import annotations

from analyzer.api import Category, Rule, Severity

P = "rabbitmq_stream"
E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE

FRAME_TOO_SMALL = Rule(f"{P}.size.too_small", E, Category.MALFORMED,
                       "Frame Size below 4 (no room for Key and Version); the stream is resynchronised")
FRAME_TRUNCATED = Rule(f"{P}.size.truncated", E, Category.MALFORMED,
                       "Frame Size too small for the fields its command needs")
FRAME_TRAILING = Rule(f"{P}.size.trailing", W, Category.SIZE,
                      "Bytes left in the frame after every field of its command")
FRAME_MAX = Rule(f"{P}.size.frame_max", W, Category.SIZE,
                 "Frame larger than the negotiated frame_max (Deliver is exempt: the server sends whole chunks)")
PRE_OPEN_FRAME = Rule(f"{P}.size.pre_open", N, Category.SIZE,
                      "Client frame before Open with a Size above 8192: RabbitMQ 4.3.5+ closes the connection "
                      "(stream.initial_frame_max); older brokers accept it")
FRAME_INCOMPLETE = Rule(f"{P}.size.incomplete", W, Category.TRUNCATED,
                        "The capture ends inside a frame")
JUNK = Rule(f"{P}.stream.resync", W, Category.MALFORMED,
            "Bytes that do not form a frame were skipped to find the next frame start")
UNKNOWN_KEY = Rule(f"{P}.key.unknown", W, Category.UNKNOWN, "Unknown command key")
UNKNOWN_VERSION = Rule(f"{P}.key.unknown_version", W, Category.UNKNOWN, "Known command key with an unknown version")
WRONG_DIRECTION = Rule(f"{P}.key.wrong_direction", W, Category.SEQUENCE,
                       "A command sent by the side that must not send it")
HANDSHAKE_ORDER = Rule(f"{P}.handshake.out_of_order", W, Category.HANDSHAKE,
                       "Handshake out of order: PeerProperties, SaslHandshake, SaslAuthenticate, Tune (server first), "
                       "Open, and nothing else before Open")
UNKNOWN_RESPONSE = Rule(f"{P}.correlation.unknown_response", W, Category.CORRELATION,
                        "Response whose correlation id no outstanding request used")
KEY_MISMATCH = Rule(f"{P}.correlation.key_mismatch", E, Category.CORRELATION,
                    "Response key does not match the key of the request with that correlation id")
UNANSWERED = Rule(f"{P}.correlation.unanswered", W, Category.CORRELATION,
                  "Request never answered before the capture ended")
DUPLICATE_CORR = Rule(f"{P}.correlation.reused", W, Category.CORRELATION,
                      "Request reuses the correlation id of a request still waiting for its response")
ERROR_RESPONSE = Rule(f"{P}.response.error", N, Category.RESPONSE,
                      "Non-OK response code (warning when it signals a client mistake)")
UNKNOWN_CODE = Rule(f"{P}.response.unknown_code", W, Category.UNKNOWN, "Response code not defined by the protocol")
UNKNOWN_PUBLISHER = Rule(f"{P}.publish.unknown_publisher", W, Category.SEQUENCE,
                         "Publish for a publisher id never declared on this connection")
UNKNOWN_PUBLISHING_ID = Rule(f"{P}.publish.unknown_publishing_id", W, Category.CORRELATION,
                             "PublishConfirm/PublishError for a publishing id that was not published (or already "
                             "confirmed)")
UNKNOWN_SUBSCRIPTION = Rule(f"{P}.deliver.unknown_subscription", W, Category.SEQUENCE,
                            "Deliver for a subscription id never subscribed on this connection")
NO_CREDIT = Rule(f"{P}.deliver.credit_exhausted", W, Category.SEQUENCE,
                 "Deliver beyond the credit the client granted (credit would go negative)")
CRC_MISMATCH = Rule(f"{P}.chunk.crc_mismatch", E, Category.CHECKSUM,
                    "Chunk CRC-32 does not match its data section")
CHUNK_MALFORMED = Rule(f"{P}.chunk.malformed", E, Category.MALFORMED,
                       "Chunk header and entries disagree (magic, lengths, entry or record counts)")
CHUNK_COMPRESSED = Rule(f"{P}.chunk.compressed", N, Category.VALUE,
                        "A compressed sub-batch is shown undecoded (its codec library is not installed)")
HEARTBEAT_SILENCE = Rule(f"{P}.heartbeat.silence", W, Category.SEQUENCE,
                         "A side stayed silent longer than twice the negotiated heartbeat interval")
CLOSE_UNANSWERED = Rule(f"{P}.close.unanswered", W, Category.SEQUENCE, "Close never answered by a CloseResponse")
LEGACY_RESPONSE_KEY = Rule(f"{P}.response.legacy_key", N, Category.VALUE,
                           "Route/Partitions response keyed without the response bit (RabbitMQ 3.9.0-3.11.0)")

RULES: tuple[Rule, ...] = (
    FRAME_TOO_SMALL, FRAME_TRUNCATED, FRAME_TRAILING, FRAME_MAX, PRE_OPEN_FRAME, FRAME_INCOMPLETE, JUNK, UNKNOWN_KEY,
    UNKNOWN_VERSION, WRONG_DIRECTION, HANDSHAKE_ORDER, UNKNOWN_RESPONSE, KEY_MISMATCH, UNANSWERED, DUPLICATE_CORR,
    ERROR_RESPONSE, UNKNOWN_CODE, UNKNOWN_PUBLISHER, UNKNOWN_PUBLISHING_ID, UNKNOWN_SUBSCRIPTION, NO_CREDIT,
    CRC_MISMATCH, CHUNK_MALFORMED, CHUNK_COMPRESSED, HEARTBEAT_SILENCE, CLOSE_UNANSWERED, LEGACY_RESPONSE_KEY,
)

#: Response codes that point at a mistake of the client (the rest are notes: normal outcomes such as
#: "stream already exists" or "no offset stored").
CLIENT_MISTAKES = frozenset({0x03, 0x04, 0x07, 0x08, 0x09, 0x0D, 0x0E, 0x11, 0x12, 0x14, 0x15})
DRAFT_CLIENT_MISTAKES = frozenset({2, 3, 6, 7, 8, 12, 13, 16, 17})
