"""Test encoder: valid and deliberately broken RabbitMQ Stream frames, from the same layouts the
decoder uses (:mod:`.layouts`, :mod:`.draft`), plus whole conversations for tests and benchmarks.

    request("DeclarePublisher", correlation_id=3, publisher_id=1, publisher_reference="", stream="s")
    response("DeclarePublisher", correlation_id=3, response_code=1)
    deliver(0, build_chunk([simple_entry(m) for m in msgs], len(msgs), first_offset=0))
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from analyzer.api import Direction, Event
from dissectors.kit.script import Script, all_findings, frames, play
from dissectors.rabbitmq_stream.amqp import encode_message
from dissectors.rabbitmq_stream.chunk import build_chunk, simple_entry, sub_batch_entry
from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS
from dissectors.rabbitmq_stream.layouts import COMMANDS, RESPONSE_BIT, Command

C2S, S2C = Direction.C2S, Direction.S2C
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS.values()}
DRAFT_BY_NAME: dict[str, Command] = {c.name: c for c in DRAFT_COMMANDS.values()}

__all__ = ["BY_NAME", "build_chunk", "simple_entry", "sub_batch_entry", "encode_message", "frame", "request",
           "response", "deliver", "draft_request", "draft_response", "draft_deliver", "truncate", "with_trailing",
           "set_size", "handshake", "Script", "run", "frames", "all_findings"]


def frame(key: int, version: int, body: bytes = b"") -> bytes:
    return struct.pack(">IHH", 4 + len(body), key, version) + body


def request(name: str, version: int = 1, /, **values: Any) -> bytes:
    """A request or one-way command, every field from ``values`` (names as in the layouts)."""
    cmd = BY_NAME[name]
    return frame(cmd.key, version, cmd.requests[version].write(values))


def response(name: str, version: int = 1, /, *, raw_key: int | None = None, **values: Any) -> bytes:
    """A response (key | 0x8000); ``raw_key`` overrides the key (e.g. the 3.9-3.11.0 Route/Partitions quirk)."""
    cmd = BY_NAME[name]
    assert cmd.response is not None, f"{name} has no response"
    return frame(cmd.key | RESPONSE_BIT if raw_key is None else raw_key, version, cmd.response.write(values))


def deliver(subscription_id: int, chunk: bytes, version: int = 1, committed_chunk_id: int = 0) -> bytes:
    body = struct.pack(">B", subscription_id)
    if version == 2:
        body += struct.pack(">Q", committed_chunk_id)
    return frame(0x0008, version, body + chunk)


def draft_request(name: str, /, **values: Any) -> bytes:
    cmd = DRAFT_BY_NAME[name]
    return frame(cmd.key, 0, cmd.requests[0].write(values))


def draft_response(name: str, /, **values: Any) -> bytes:
    cmd = DRAFT_BY_NAME[name]
    assert cmd.response is not None
    return frame(cmd.key, 0, cmd.response.write(values))


def draft_deliver(subscription_id: int, messages: Sequence[bytes], first_offset: int) -> bytes:
    """A draft Deliver: int32 subscription id and the 31-byte chunk header of the draft document."""
    import zlib

    data = b"".join(simple_entry(m) for m in messages)
    head = struct.pack(">BHIQQiI", 0x50, len(messages), len(messages), 1, first_offset,
                       struct.unpack(">i", struct.pack(">I", zlib.crc32(data)))[0], len(data))
    return frame(3, 0, struct.pack(">i", subscription_id) + head + data)


# ----------------------------------------------------------------------------- broken frames
def set_size(raw: bytes, size: int) -> bytes:
    return struct.pack(">I", size) + raw[4:]


def truncate(raw: bytes, drop: int) -> bytes:
    """The same frame with its last ``drop`` bytes removed and Size adjusted (a consistent but too
    short frame)."""
    body = raw[:len(raw) - drop]
    return set_size(body, len(body) - 4)


def with_trailing(raw: bytes, extra: bytes) -> bytes:
    return set_size(raw + extra, len(raw) + len(extra) - 4)


# ----------------------------------------------------------------------------- conversations
def handshake(*, broker_version: str = "3.13.7", frame_max: int = 1048576, heartbeat: int = 60,
              client_frame_max: int | None = None) -> list[tuple[Direction, bytes]]:
    """A clean handshake as a real client and broker do it (correlation ids 1..4)."""
    cfm = frame_max if client_frame_max is None else client_frame_max
    return [
        (C2S, request("PeerProperties", correlation_id=1, properties={"product": "streamproto-test"})),
        (S2C, response("PeerProperties", correlation_id=1, response_code=1,
                       properties={"product": "RabbitMQ", "version": broker_version})),
        (C2S, request("SaslHandshake", correlation_id=2)),
        (S2C, response("SaslHandshake", correlation_id=2, response_code=1, mechanisms=["PLAIN"])),
        (C2S, request("SaslAuthenticate", correlation_id=3, mechanism="PLAIN", sasl_data=b"\0guest\0guest")),
        (S2C, response("SaslAuthenticate", correlation_id=3, response_code=1)),
        (S2C, request("Tune", frame_max=frame_max, heartbeat=heartbeat)),
        (C2S, response("Tune", frame_max=cfm, heartbeat=heartbeat)),
        (C2S, request("Open", correlation_id=4, virtual_host="/")),
        (S2C, response("Open", correlation_id=4, response_code=1,
                       properties={"advertised_host": "localhost", "advertised_port": "5552"})),
    ]


def run(script: Script, *, midstream: bool = False, split: int | None = None) -> list[Event]:
    """Feed a script to a fresh connection (``split``: cut every frame into pieces of that size)."""
    from dissectors.rabbitmq_stream.connection import StreamConnection

    return play(StreamConnection(midstream), script.items, split=split, start_ts=script.ts)
