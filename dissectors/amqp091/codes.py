"""Reply codes (spec §6) and the protocol headers of the AMQP versions one may meet on port 5672."""

from __future__ import annotations

#: code -> (name, hard = connection exception)
REPLY_CODES: dict[int, tuple[str, bool]] = {
    200: ("REPLY_SUCCESS", False),
    311: ("CONTENT_TOO_LARGE", False),
    312: ("NO_ROUTE", False),
    313: ("NO_CONSUMERS", False),
    320: ("CONNECTION_FORCED", True),
    402: ("INVALID_PATH", True),
    403: ("ACCESS_REFUSED", False),
    404: ("NOT_FOUND", False),
    405: ("RESOURCE_LOCKED", False),
    406: ("PRECONDITION_FAILED", False),
    501: ("FRAME_ERROR", True),
    502: ("SYNTAX_ERROR", True),
    503: ("COMMAND_INVALID", True),
    504: ("CHANNEL_ERROR", True),
    505: ("UNEXPECTED_FRAME", True),
    506: ("RESOURCE_ERROR", True),
    530: ("NOT_ALLOWED", True),
    540: ("NOT_IMPLEMENTED", True),
    541: ("INTERNAL_ERROR", True),
}
REPLY_ENUM: dict[int, str] = {k: v[0] for k, v in REPLY_CODES.items()}

#: Bytes 4..7 of an "AMQP" protocol header -> (dialect name, description).
PROTOCOL_HEADERS: dict[bytes, tuple[str, str]] = {
    b"\x00\x00\x09\x01": ("0-9-1", "AMQP 0-9-1"),
    b"\x01\x01\x00\x09": ("0-9", "AMQP 0-9"),
    b"\x01\x01\x08\x00": ("0-8", "AMQP 0-8"),
    b"\x01\x01\x09\x01": ("0-8", "AMQP 0-8 (Qpid/RabbitMQ variant)"),
    b"\x01\x01\x00\x0a": ("0-10", "AMQP 0-10"),
    b"\x00\x01\x00\x00": ("1.0", "AMQP 1.0"),
    b"\x02\x01\x00\x00": ("1.0-tls", "AMQP 1.0 TLS"),
    b"\x03\x01\x00\x00": ("1.0-sasl", "AMQP 1.0 SASL"),
}

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_TYPES: dict[int, str] = {1: "Method", 2: "ContentHeader", 3: "ContentBody", 8: "Heartbeat",
                               4: "OOB-Method (0-9)", 5: "OOB-Header (0-9)", 6: "OOB-Body (0-9)",
                               7: "Trace (0-9)"}
FRAME_MIN_SIZE = 4096
#: RabbitMQ 4.1 and later accept frames up to this size before tune-ok.
RABBITMQ_41_FRAME_MIN_SIZE = 8192
