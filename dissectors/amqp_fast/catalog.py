"""The AMQP/Fast field catalogue, generated from the command table.

Every field a frame can carry is registered once as ``amqp_fast.<command>.<field>``, the command
as a dotted path of the RFC's mnemonic in lower case: ``amqp_fast.connection.tune.frame_max``,
``amqp_fast.handle.send.fragment_size``, ``amqp_fast.message.fragment.head.body_size``.
"""

from __future__ import annotations

from dissectors.amqp_fast.commands import COMMANDS, MESSAGE_HEAD, REPLIES
from dissectors.kit.catalog import Catalog, FieldDef

_TYPES = {"octet": "uint8", "short": "uint16", "long": "uint32", "bit": "bool", "shortstr": "string",
          "longstr": "bytes", "table": "bytes", "date": "timestamp"}
_FRAME = (("size", "uint32", "command size: the octets after the size header, command-end included"),
          ("type", "uint8", "command type"), ("command_end", "uint8", "the command-end octet (0xCE)"),
          ("trailing", "bytes", "octets after the last field"),
          ("undecoded", "bytes", "the fields from where they overrun the command"))


def command_path(command: str) -> str:
    """``HANDLE SEND`` -> ``handle.send``; ``UNKNOWN(99)`` -> ``unknown``."""
    if command.startswith("UNKNOWN("):
        return "unknown"
    return command.lower().replace(" ", ".")


def build() -> Catalog:
    cat = Catalog("amqp_fast")
    cat.add("initiation.protocol_id", "uint8", "protocol id (128: AMQP/Fast)")
    cat.add("initiation.protocol_version", "uint8", "the client's highest protocol version")
    for c in COMMANDS:
        p = c.path
        for name, type_, doc in _FRAME:
            cat.add(f"{p}.{name}", type_, doc)
        for name, key in c.fields:
            cat.add(f"{p}.{name}", _TYPES[key], name.replace("_", "-"))
        if c.name in REPLIES or c.name in ("HANDLE INDEX", "HANDLE READY"):
            cat.add(f"{p}.response_time", "double", "seconds since the command it answers")
        if c.data:
            cat.add(f"{p}.message", "struct", "the message, when this command carries an empty final fragment")
            _message(cat, f"{p}.message")
    for name, type_, doc in _FRAME[:2]:
        cat.add(f"unknown.{name}", type_, doc)
    cat.add("unknown.command_end", "uint8", "the command-end octet (0xCE)")
    cat.add("unknown.payload", "bytes", "the undecoded command")
    f = "message.fragment"
    cat.add(f"{f}.fragment", "bytes", "the fragment's octets (the first 4096)")
    cat.add(f"{f}.head", "struct", "the message head, on the fragment where it ends")
    for name, key in MESSAGE_HEAD:
        cat.add(f"{f}.head.{name}", _TYPES[key], name.replace("_", "-"))
    cat.add(f"{f}.message", "struct", "the whole message, on its final fragment")
    _message(cat, f"{f}.message")
    return cat


def _message(cat: Catalog, p: str) -> None:
    cat.add(f"{p}.handle_id", "uint16", "the handle it was sent on")
    cat.add(f"{p}.message_nbr", "uint32", "the server's message number (HANDLE NOTIFY)")
    cat.add(f"{p}.size", "uint32", "octets of all its fragments: head and body")
    cat.add(f"{p}.fragments", "uint32", "fragments received")
    cat.add(f"{p}.body", "bytes", "the body (the first 1024 octets)")
    cat.add(f"{p}.body_truncated", "bool", "only a prefix of the body is kept")


CATALOG = build()
FIELDS: tuple[FieldDef, ...] = tuple(CATALOG)
