"""The encoder: valid and deliberately broken AMQP/Fast commands and messages, from the same command
table as the decoder (no implementation of AMQP/Fast survives to record; tests and the bundled
captures are built with this).

Every helper returns bytes; :class:`Script` strings them into a two-sided conversation for feeding
a Connection or writing a pcap with analyzer.pcapwrite.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from analyzer.api import Direction
from dissectors.amqp_fast.commands import (
    BY_NAME,
    COMMAND_END,
    LONG_SIZE,
    PROTOCOL_ID,
    PROTOCOL_VERSION,
    head_layout,
    layout,
)
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit import script as kit_script

DEFAULT = Encoding()
_DEFAULTS = {"octet": 0, "short": 0, "long": 0, "bit": False, "shortstr": "", "longstr": b"", "table": b"",
             "date": 0}


def initiation(protocol_id: int = PROTOCOL_ID, version: int = PROTOCOL_VERSION) -> bytes:
    return bytes([protocol_id, version])


def fields(name: str, values: Mapping[str, Any], enc: Encoding = DEFAULT) -> bytes:
    """The encoded fields of command ``name``; missing fields get their type's zero value."""
    cmd = BY_NAME[name]
    unknown = set(values) - {n for n, _ in cmd.fields}
    if unknown:
        raise KeyError(f"{name} has no field(s) {sorted(unknown)}")
    full = {n: values.get(n, _DEFAULTS[t]) for n, t in cmd.fields}
    return layout(cmd.code, enc).write(full)


def frame(code: int, payload: bytes, *, end: int = COMMAND_END, long_size: bool = False,
          size: int | None = None) -> bytes:
    """One command: size header, type, ``payload``, command-end. The size escapes to 0xFFFF and 4
    octets when it must (or ``long_size``); ``end`` and ``size`` may be set wrong on purpose."""
    n = len(payload) + 2 if size is None else size
    head = struct.pack(">HI", LONG_SIZE, n) if long_size or n >= LONG_SIZE else struct.pack(">H", n)
    return head + bytes([code]) + payload + bytes([end])


def command(name: str, enc: Encoding = DEFAULT, *, end: int = COMMAND_END, long_size: bool = False,
            size: int | None = None, **values: Any) -> bytes:
    """A command by its RFC name, fields by their snake_case names (``frame_max=48000``)."""
    return frame(BY_NAME[name].code, fields(name, values, enc), end=end, long_size=long_size, size=size)


def head(body_size: int, *, persistent: bool = False, priority: int = 0, expiration: int = 0, mime_type: str = "",
         encoding: str = "", identifier: str = "", headers: bytes = b"", enc: Encoding = DEFAULT) -> bytes:
    """A message head (§3.4.4)."""
    return head_layout(enc).write({"body_size": body_size, "persistent": persistent, "priority": priority,
                                   "expiration": expiration, "mime_type": mime_type, "encoding": encoding,
                                   "identifier": identifier, "headers": headers})


def message(name: str, handle: int, body: bytes, *, fragment: int = 0, head_bytes: bytes | None = None,
            dest_name: str = "", enc: Encoding = DEFAULT, **values: Any) -> bytes:
    """A whole message after HANDLE SEND or HANDLE NOTIFY commands: the head and body cut into
    fragments of at most ``fragment`` octets (0: one fragment), partial set on all but the last,
    dest-name only on the last (§3.5.3)."""
    data = (head(len(body), enc=enc) if head_bytes is None else head_bytes) + body
    step = fragment or len(data) or 1
    pieces = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
    out = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        out.append(command(name, enc, handle_id=handle, fragment_size=len(piece), partial=not last,
                           dest_name=dest_name if last else "", **values))
        out.append(piece)
    return b"".join(out)


class Script(kit_script.Script):
    """A conversation as (direction, bytes, ts) steps, with helpers for the usual negotiation: it starts
    at 0 and each frame comes ``dt`` (default 1 ms) after the one before."""

    default_dt = 0.001

    def __init__(self, enc: Encoding = DEFAULT) -> None:
        super().__init__(ts=0.0, step=0.0)
        self.enc = enc

    def cc(self, name: str, **values: Any) -> Script:
        return self.c(command(name, self.enc, **values))

    def sc(self, name: str, **values: Any) -> Script:
        return self.s(command(name, self.enc, **values))

    def negotiate(self, *, frame_max: int = 131072, channel_max: int = 16, handle_max: int = 64,
                  heartbeat: int = 0, client_frame_max: int | None = None) -> Script:
        """Initiation, CHALLENGE, RESPONSE, TUNE both ways, OPEN (unconfirmed)."""
        self.c(initiation())
        self.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN", challenges=b"login password")
        self.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest password:guest")
        self.sc("CONNECTION TUNE", frame_max=frame_max, channel_max=channel_max, handle_max=handle_max,
                heartbeat=heartbeat)
        self.cc("CONNECTION TUNE", frame_max=client_frame_max or frame_max, channel_max=channel_max,
                handle_max=handle_max, heartbeat=heartbeat)
        self.cc("CONNECTION OPEN", virtual_path="/", client_name="test-client")
        return self

    def open_channel(self, ch: int = 1, **values: Any) -> Script:
        return self.cc("CHANNEL OPEN", channel_id=ch, **values)

    def open_handle(self, ch: int = 1, handle: int = 1, dest: str = "queue.a", service: int = 1,
                    **values: Any) -> Script:
        return self.cc("HANDLE OPEN", channel_id=ch, handle_id=handle, service_type=service, producer=True,
                       consumer=True, dest_name=dest, **values)

    def close(self, channels: tuple[int, ...] = (1,)) -> Script:
        for ch in channels:
            self.cc("CHANNEL CLOSE", channel_id=ch, reply_code=200, reply_text="Ok")
            self.sc("CHANNEL CLOSE", channel_id=ch, reply_code=200, reply_text="Ok")
        self.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
        self.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
        return self

    def stream(self, direction: Direction) -> bytes:
        return b"".join(d for dr, d, _ in self.steps if dr is direction)
