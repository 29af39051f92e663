"""The AMQP 0-9-1 field catalogue, generated from the method and property tables.

Every field a frame can carry is registered once as ``amqp091.<command>.<field>``, the command
in snake_case path form: ``amqp091.basic.publish.routing_key``, ``amqp091.content_header.
content_type``, ``amqp091.content_body.message.body_size``. :func:`field_name` maps a frame's
command and field path to that name; display filters and the pipeline's schema use both.
"""

from __future__ import annotations

from dissectors.amqp091.methods import METHODS, RESPONSE_CODES
from dissectors.amqp091.properties import PROPERTIES
from dissectors.amqp091.wire import TABLE, TIMESTAMP
from dissectors.kit.catalog import Catalog, FieldDef, snake
from dissectors.schema import Bit, Int, Prefixed, WireType


def command_path(command: str) -> str:
    """``Basic.Publish`` -> ``basic.publish``; frames of unknown methods or types share one name."""
    if "Unknown(" in command:
        return "unknown_frame" if command.startswith("Unknown(") else "unknown_method"
    return ".".join(snake(part) for part in command.split("."))


def field_name(command: str, path: str) -> str:
    """The catalogue name of field ``path`` (dotted for nested fields) of a frame of ``command``."""
    return f"amqp091.{command_path(command)}.{path}"


def wire_type(t: WireType) -> str:
    if isinstance(t, Int):
        return {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}[t.size]
    if isinstance(t, Bit):
        return "bool"
    if isinstance(t, Prefixed):
        return "string" if t.text else "bytes"
    if t is TABLE:
        return "table"
    if t is TIMESTAMP:
        return "timestamp"
    raise ValueError(f"no catalogue type for {t!r}")


_HEAD = (("frame_type", "uint8", "frame type (1 method, 2 content header, 3 content body, 8 heartbeat)"),
         ("channel", "uint16", "channel number"), ("size", "uint32", "payload size"))
_MESSAGE = (("message", "struct", "the whole message, on its last frame"),
            ("message.method", "string", "the content-bearing method"),
            ("message.body_size", "uint64", "body bytes received"),
            ("message.body_frames", "uint32", "body frames received"),
            ("message.body", "bytes", "the body (text when it is printable UTF-8; binary: a short prefix)"),
            ("message.body_truncated", "bool", "only a prefix of the body is kept"))


def build() -> Catalog:
    cat = Catalog("amqp091")

    def add(command: str, fields: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]],
            repeated: frozenset[str] = frozenset()) -> None:
        for path, type_, doc in fields:
            cat.add(f"{command_path(command)}.{path}", type_, doc, path in repeated)

    add("ProtocolHeader", (("protocol", "string", "'AMQP'"), ("protocol_id", "uint8", "protocol id"),
                           ("major", "uint8", "major version"), ("minor", "uint8", "minor version"),
                           ("revision", "uint8", "revision"), ("version", "string", "the version it names")))
    for meth in METHODS.values():
        fields = [*_HEAD, ("class", "uint16", "class id"), ("method", "uint16", "method id")]
        fields += [(f.name, wire_type(f.type), f.doc or "") for f in meth.layout.fields]
        fields.append(("undecoded", "bytes", "the arguments, when they overrun the frame"))
        if meth.code in RESPONSE_CODES:
            fields.append(("response_time", "double", "seconds since the request it answers"))
        if meth.name == "Basic.Publish":
            fields.append(("publish_seq", "uint64", "publisher-confirm sequence number"))
        if meth.name in ("Basic.Ack", "Basic.Nack"):
            fields.append(("confirms", "uint64", "publish sequence numbers this confirm settles"))
        add(meth.name, fields, frozenset({"confirms"}))
    props = [(spec.name, wire_type(spec.type), spec.doc or "") for _bit, spec in PROPERTIES]
    add("ContentHeader", (*_HEAD, ("class_id", "uint16", "class of the content-bearing method"),
                          ("weight", "uint16", "unused, 0"), ("body_size", "uint64", "announced body size"),
                          ("property_flags", "uint16", "which properties follow"), *props,
                          ("properties", "bytes", "properties that could not be decoded"),
                          ("payload", "bytes", "a content header too short for its fixed part"), *_MESSAGE))
    add("ContentBody", (*_HEAD, ("payload", "bytes", "body bytes (the first 1024)"), *_MESSAGE))
    add("Heartbeat", (*_HEAD, ("payload", "bytes", "payload (must be empty)")))
    add("Method", (*_HEAD, ("payload", "bytes", "a method frame too short for its ids")))
    add("Basic.Unknown(0)", (*_HEAD, ("class", "uint16", "class id"), ("method", "uint16", "method id"),
                             ("arguments", "bytes", "undecoded arguments")))
    add("Unknown(0)", (*_HEAD, ("payload", "bytes", "payload of a frame of unknown type")))
    return cat


CATALOG = build()
FIELDS: tuple[FieldDef, ...] = tuple(CATALOG)
