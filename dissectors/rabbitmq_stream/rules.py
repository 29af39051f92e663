"""Every conformance rule the RabbitMQ Stream dissector can report (stable ids).

Concepts every protocol shares come from the kit's rule families (``rabbitmq_stream.framing.*``,
``.correlation.*``, ``.heartbeat.silence``, ``.handshake.order``, ``.limit.exceeded``); the rest are
the protocol's own. Each rule has one severity: a refusal the server may give in normal operation
(``response.refused``, a note) and one that points at a client mistake (``response.error``, a
warning) are two rules.
"""

from __future__ import annotations

from analyzer.api import Category, Rule, Severity
from dissectors.kit import rules as K
from dissectors.kit.rules import RuleSet

E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE
_RS = RuleSet("rabbitmq_stream")

# framing
JUNK = _RS.family(K.FRAMING_RESYNC, "Bytes that do not form a frame (Size below 4 or implausible, unknown key) were "
                                    "skipped to find the next frame start")
FRAME_INCOMPLETE = _RS.family(K.FRAMING_INCOMPLETE)
FRAME_TRUNCATED = _RS.family(K.FRAMING_TRUNCATED, "Frame Size too small for the fields its command needs")
FRAME_TRAILING = _RS.family(K.FRAMING_TRAILING)
FRAME_MAX = _RS.own("size.frame_max", W, Category.SIZE,
                    "Frame larger than the negotiated frame_max (Deliver is exempt: the server sends whole chunks)")
PRE_OPEN_FRAME = _RS.own("size.pre_open", N, Category.SIZE,
                         "Client frame before Open with a Size above 8192: RabbitMQ 4.3.5+ closes the connection "
                         "(stream.initial_frame_max); older brokers accept it")
# keys
UNKNOWN_KEY = _RS.own("key.unknown", W, Category.UNKNOWN, "Unknown command key")
UNKNOWN_VERSION = _RS.own("key.unknown_version", W, Category.UNKNOWN, "Known command key with an unknown version")
WRONG_DIRECTION = _RS.own("key.wrong_direction", W, Category.SEQUENCE,
                          "A command sent by the side that must not send it")
# handshake
HANDSHAKE_ORDER = _RS.family(K.HANDSHAKE_ORDER,
                             "Handshake out of order: PeerProperties, SaslHandshake, SaslAuthenticate, Tune (server "
                             "first), Open, and nothing else before Open")
NO_CLIENT_TUNE = _RS.own("handshake.no_client_tune", N, Category.HANDSHAKE,
                         "Open without the client's Tune (the broker accepts it)")
# correlation
UNKNOWN_RESPONSE = _RS.family(K.CORRELATION_UNKNOWN_RESPONSE,
                              "Response whose correlation id no outstanding request used")
KEY_MISMATCH = _RS.family(K.CORRELATION_MISMATCH,
                          "Response key does not match the key of the request with that correlation id")
UNANSWERED = _RS.family(K.CORRELATION_UNANSWERED)
DUPLICATE_CORR = _RS.family(K.CORRELATION_DUPLICATE,
                            "Request reuses the correlation id of a request still waiting for its response")
CLOSE_UNANSWERED = _RS.own("close.unanswered", W, Category.SEQUENCE, "Close never answered by a CloseResponse")
# responses
ERROR_RESPONSE = _RS.own("response.error", W, Category.RESPONSE,
                         "Non-OK response or closing code that signals a mistake of the client (bad credentials, "
                         "unknown publisher or subscription, frame too large, ...)")
REFUSED = _RS.own("response.refused", N, Category.RESPONSE,
                  "Non-OK response code that is a normal outcome (stream already exists, no offset stored, "
                  "access refused, ...)")
UNKNOWN_CODE = _RS.own("response.unknown_code", W, Category.UNKNOWN, "Response code not defined by the protocol")
LEGACY_RESPONSE_KEY = _RS.own("response.legacy_key", N, Category.VALUE,
                              "Route/Partitions response keyed without the response bit (RabbitMQ 3.9.0-3.11.0)")
# publishing and consuming
UNKNOWN_PUBLISHER = _RS.own("publish.unknown_publisher", W, Category.SEQUENCE,
                            "Publish for a publisher id never declared on this connection")
UNKNOWN_PUBLISHING_ID = _RS.own("publish.unknown_publishing_id", W, Category.CORRELATION,
                                "PublishConfirm/PublishError for a publishing id that was not published (or already "
                                "confirmed)")
UNKNOWN_SUBSCRIPTION = _RS.own("deliver.unknown_subscription", W, Category.SEQUENCE,
                               "Deliver for a subscription id never subscribed on this connection")
NO_CREDIT = _RS.own("deliver.credit_exhausted", W, Category.SEQUENCE,
                    "Deliver beyond the credit the client granted (credit would go negative)")
# chunks
CRC_MISMATCH = _RS.own("chunk.crc_mismatch", E, Category.CHECKSUM, "Chunk CRC-32 does not match its data section")
CHUNK_MALFORMED = _RS.own("chunk.malformed", E, Category.MALFORMED,
                          "Chunk header and entries disagree (magic, lengths, entry or record counts)")
CHUNK_COMPRESSED = _RS.own("chunk.compressed", N, Category.VALUE,
                           "A compressed sub-batch is shown undecoded (its codec library is not installed)")
# time and bounds
HEARTBEAT_SILENCE = _RS.family(K.HEARTBEAT_SILENCE)
LIMIT = _RS.family(K.LIMIT_EXCEEDED)

RULES: tuple[Rule, ...] = _RS.all()
