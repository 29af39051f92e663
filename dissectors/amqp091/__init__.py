"""AMQP 0-9-1 (RabbitMQ's dialect, with its extensions) on TCP port 5672.

The dissector is built on the kit (dissectors/kit); one module per responsibility:
framing (cutting frames), decode (bytes to frames), machines (handshake and channel lifecycle),
content (header/body sequencing), tracking (delivery tags and publisher confirms), hotpath (the
fast path of busy connections), connection (the Connection tying them together), catalog (the
field catalogue), rules (conformance rules).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from analyzer.api import CommandDoc, Connection, Dissector, Rule, Sniff
from dissectors.amqp091.codes import FRAME_END, PROTOCOL_HEADERS

__all__ = ["Amqp091Dissector", "Amqp091Connection", "DEFAULT_LIMITS"]

# The decoder's modules are imported by the methods that need them: a run loads every dissector
# but decodes with those its conversations' ports or heuristics choose (tens of milliseconds of
# start-up each otherwise).

_HDR = struct.Struct(">BHI")


class Amqp091Dissector(Dissector):
    name = "amqp091"
    title = "AMQP 0-9-1"
    default_ports = (5672,)
    #: A method's code is class_id << 16 | method_id: JSON frames carry both parts (code_parts).
    code_parts = (("class_id", 16, 0xFFFF), ("method_id", 0, 0xFFFF))

    def __init__(self, *, hot: bool = True, limits: dict[str, int] | None = None) -> None:
        #: hot=False: every frame takes the general path (the reference the hot path is tested against).
        self.hot = hot
        #: Bounds of the per-connection tables (see connection.DEFAULT_LIMITS).
        self.limits = limits

    def sniff(self, data: bytes) -> Sniff:
        if data[:4] == b"AMQP":
            if len(data) < 8:
                return Sniff(0.6, True)
            tail = bytes(data[4:8])
            if tail == b"\x00\x00\x09\x01":
                return Sniff(1.0, True)
            known = PROTOCOL_HEADERS.get(tail)
            if known is not None and not known[0].startswith(("1.0", "0-10")):
                return Sniff(0.9, True)
            return Sniff(0.3, True)  # AMQP, but another version than this dissector decodes
        if len(data) < 7:
            return Sniff(0.0)
        ftype, ch, size = _HDR.unpack_from(data, 0)
        if ftype not in (1, 2, 3, 8) or size > 16 << 20:
            return Sniff(0.0)
        complete = len(data) >= size + 8
        if complete and data[7 + size] != FRAME_END:
            return Sniff(0.0)
        # What follows a whole frame must start a frame too (one frame end byte is weak evidence).
        if len(data) >= size + 15 and data[size + 8] not in (1, 2, 3, 8):
            return Sniff(0.0)
        if ftype == 1:
            if size < 4 or len(data) < 11:
                return Sniff(0.0)
            from dissectors.amqp091.methods import CLASSES, METHODS

            cid, mid = struct.unpack_from(">HH", data, 7)
            meth = METHODS.get(cid << 16 | mid)
            if meth is None:
                return Sniff(0.4 if complete and cid in CLASSES else 0.0)
            if (cid == 10) != (ch == 0):
                return Sniff(0.2)
            from_client = {"c2s": True, "s2c": False}.get(meth.direction)
            return Sniff(0.9 if complete else 0.6, from_client)
        if ftype == 8:
            return Sniff(0.8 if complete and size == 0 and ch == 0 else 0.0)
        if ftype == 2 and (size < 14 or len(data) < 11 or data[7:11] != b"\x00\x3c\x00\x00"):
            return Sniff(0.0)  # a content header: class Basic (60), weight 0
        return Sniff(0.6 if complete and ch else 0.0)

    def connection(self, midstream: bool) -> Connection:
        from dissectors.amqp091.connection import Amqp091Connection

        return Amqp091Connection(midstream, hot=self.hot, limits=self.limits)

    def resume(self, state: dict[str, Any]) -> Connection:
        from dissectors.amqp091.connection import Amqp091Connection
        from dissectors.kit import state as kit_state

        return kit_state.resume(state, Amqp091Connection)

    def rules(self) -> Sequence[Rule]:
        from dissectors.amqp091.rules import ALL_RULES

        return ALL_RULES

    def machines(self) -> Sequence[Any]:
        from dissectors.amqp091.machines import MACHINES

        return MACHINES

    def fields(self) -> Sequence[Any]:
        # Imported here: building the catalogue costs tens of milliseconds that decoding never needs.
        from dissectors.amqp091.catalog import FIELDS

        return FIELDS

    def commands(self) -> Sequence[CommandDoc]:
        from dissectors.amqp091.methods import METHODS
        from dissectors.amqp091.properties import PROPERTIES

        docs = [CommandDoc("AMQP....", "ProtocolHeader", "c2s", "0-8 .. 1.0", "8-byte protocol header")]
        for meth in METHODS.values():
            flags = []
            if meth.responses:
                flags.append("sync -> " + " | ".join(meth.responses))
            if meth.content:
                flags.append("+content")
            if meth.note:
                flags.append(meth.note)
            fields = meth.layout.describe()
            if flags:
                fields = f"{fields} [{'; '.join(flags)}]" if fields else f"[{'; '.join(flags)}]"
            docs.append(CommandDoc(f"{meth.class_id},{meth.method_id}", meth.name, meth.direction,
                                   "0-9-1" if meth.class_id != 30 else "0-8/0-9", fields))
        props = ", ".join(f"{spec.name}:{spec.type.doc}" for _, spec in PROPERTIES)
        docs += [CommandDoc("type 2", "ContentHeader", "both", "0-9-1",
                            f"class_id:short, weight:short, body_size:longlong, property_flags:short, {props}"),
                 CommandDoc("type 3", "ContentBody", "both", "0-9-1", "payload:bytes*"),
                 CommandDoc("type 8", "Heartbeat", "both", "0-9-1", "(empty, channel 0)")]
        return docs


def __getattr__(name: str) -> Any:
    # The connection class and its default limits stay importable from the package, loaded when
    # asked for.
    if name in ("Amqp091Connection", "DEFAULT_LIMITS"):
        from dissectors.amqp091 import connection

        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
