"""Test encoder: valid and deliberately broken AMQP 0-9-1 frames, from the same tables as the decoder.

Every helper returns bytes; ``Script`` strings them into a two-sided conversation for feeding a
Connection (or for writing a pcap with analyzer.pcapwrite).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from analyzer.api import Direction
from dissectors.amqp091.codes import FRAME_END
from dissectors.amqp091.methods import BY_NAME, Method
from dissectors.amqp091.properties import encode_header_payload
from dissectors.amqp091.wire import LONG, LONGLONG, LONGSTR, OCTET, SHORT, SHORTSTR, TABLE, TIMESTAMP
from dissectors.kit import script as kit_script
from dissectors.kit.catalog import snake
from dissectors.schema import Bit

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
HEADERS = {
    "0-9-1": PROTOCOL_HEADER, "0-9": b"AMQP\x01\x01\x00\x09", "0-8": b"AMQP\x01\x01\x08\x00",
    "1.0": b"AMQP\x00\x01\x00\x00", "1.0-sasl": b"AMQP\x03\x01\x00\x00",
}

_DEFAULTS = {id(OCTET): 0, id(SHORT): 0, id(LONG): 0, id(LONGLONG): 0, id(SHORTSTR): "", id(LONGSTR): "",
             id(TABLE): {}, id(TIMESTAMP): 0}


def frame(ftype: int, channel: int, payload: bytes, *, end: int = FRAME_END, size: int | None = None) -> bytes:
    """One raw frame; ``end`` and ``size`` may be set wrong on purpose."""
    n = len(payload) if size is None else size
    return struct.pack(">BHI", ftype, channel, n) + payload + bytes([end])


def method_payload(name: str, args: Mapping[str, Any] | None = None) -> bytes:
    """class-id, method-id and the arguments of ``name`` (e.g. "Basic.Publish"); missing args get defaults."""
    meth: Method = BY_NAME[name]
    args = {snake(k): v for k, v in (args or {}).items()}  # ``routing-key`` (AMQP's spelling) or ``routing_key``
    values: dict[str, Any] = {}
    for spec in meth.layout.fields:
        if args and spec.name in args:
            values[spec.name] = args[spec.name]
        elif isinstance(spec.type, Bit):
            values[spec.name] = False
        else:
            values[spec.name] = _DEFAULTS[id(spec.type)]
    unknown = set(args or ()) - set(values)
    if unknown:
        raise KeyError(f"{name} has no argument(s) {sorted(unknown)}")
    return struct.pack(">HH", meth.class_id, meth.method_id) + meth.layout.write(values)


def method(name: str, channel: int = 0, args: Mapping[str, Any] | None = None, **kw: Any) -> bytes:
    """A method frame; arguments by their field names (routing_key=...)."""
    merged = dict(args or {})
    merged.update(kw)
    return frame(1, channel, method_payload(name, merged))


def raw_method(class_id: int, method_id: int, channel: int, args: bytes = b"") -> bytes:
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


def content_header(channel: int, body_size: int, props: Mapping[str, Any] | None = None, *,
                   class_id: int = 60, weight: int = 0) -> bytes:
    return frame(2, channel, encode_header_payload(body_size, props, class_id, weight))


def body(channel: int, data: bytes) -> bytes:
    return frame(3, channel, data)


def heartbeat(channel: int = 0) -> bytes:
    return frame(8, channel, b"")


def message(channel: int, data: bytes, props: Mapping[str, Any] | None = None, *, frame_max: int = 131072,
            name: str = "Basic.Publish", **args: Any) -> bytes:
    """A content-bearing method, its header and body frames split at frame_max - 8."""
    out = [method(name, channel, **args), content_header(channel, len(data), props)]
    step = max(frame_max - 8, 1)
    for i in range(0, len(data), step):
        out.append(body(channel, data[i:i + step]))
    return b"".join(out)


class Script(kit_script.Script):
    """A conversation as (direction, bytes, ts) steps, with helpers for the usual handshake: it starts
    at 0 and each frame comes ``dt`` (default 1 ms) after the one before."""

    default_dt = 0.001

    def __init__(self) -> None:
        super().__init__(ts=0.0, step=0.0)

    def handshake(self, *, frame_max: int = 131072, channel_max: int = 2047, heartbeat: int = 0,
                  mechanisms: str = "PLAIN AMQPLAIN") -> Script:
        self.c(PROTOCOL_HEADER)
        self.s(method("Connection.Start", version_major=0, version_minor=9,
                      server_properties={"product": "RabbitMQ", "capabilities": {"publisher_confirms": True}},
                      mechanisms=mechanisms, locales="en_US"))
        self.c(method("Connection.StartOk", client_properties={"product": "test"}, mechanism="PLAIN",
                      response="\0guest\0guest", locale="en_US"))
        self.s(method("Connection.Tune", channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat))
        self.c(method("Connection.TuneOk", channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat))
        self.c(method("Connection.Open", virtual_host="/"))
        self.s(method("Connection.OpenOk"))
        return self

    def open_channel(self, ch: int = 1) -> Script:
        self.c(method("Channel.Open", ch))
        self.s(method("Channel.OpenOk", ch))
        return self

    def close(self, channels: tuple[int, ...] = (1,)) -> Script:
        for ch in channels:
            self.c(method("Channel.Close", ch, reply_code=200, reply_text="bye"))
            self.s(method("Channel.CloseOk", ch))
        self.c(method("Connection.Close", reply_code=200, reply_text="bye"))
        self.s(method("Connection.CloseOk"))
        return self

    def stream(self, direction: Direction) -> bytes:
        return b"".join(d for dr, d, _ in self.steps if dr is direction)
