"""Every command of today's RabbitMQ Stream protocol, described once as data.

A layout lists the fields after Key and Version (frame offset 8 on). The same tables drive the
decoder (:mod:`.connection`), the test encoder (:mod:`.encode`) and ``Dissector.commands()``.
Irregular values (OffsetSpecification, Publish entries, the Osiris chunk, the SASL challenge,
the 3.9 Route response) are WireTypes of their own.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzer.api import Field
from analyzer.jsonout import field_json
from dissectors.kit.lazy import LazyField
from dissectors.rabbitmq_stream import amqp_json
from dissectors.rabbitmq_stream import chunk as ch
from dissectors.rabbitmq_stream.sub_batch import ChunkProblem, publish_scan
from dissectors.rabbitmq_stream.wire import (
    BYTES,
    CODES,
    I64,
    STRING,
    U8,
    U16,
    U32,
    U64,
    OffsetSpec,
    Properties,
    RouteStreams,
    SaslData,
    array,
)
from dissectors.schema import DecodeError, F, Struct, WireType

RESPONSE_BIT = 0x8000
_COUNT = struct.Struct(">I")  # a Publish's message count, and a simple message's length
_ID = struct.Struct(">Q")


class PublishEntries(WireType):
    """Publish: uint32 MessageCount, then publishing entries.

    v1 entry: PublishingId u64, then a simple message (uint32 length, top bit 0) or a sub-batch
    (first byte top bit 1). v2 entry: PublishingId u64, FilterValue string, uint32 length, message.
    Written from a list of dicts: ``{"publishing_id", "message"}`` (+ ``"filter_value"`` in v2) or
    ``{"publishing_id", "sub_batch": [messages], "compression": 0|1}``.
    """

    __slots__ = ("doc", "version", "draft")

    def __init__(self, version: int, draft: bool = False) -> None:
        self.version = version
        self.draft = draft
        self.doc = ("[PublishingId int64, Message bytes]" if draft else
                    "[PublishingId u64, (FilterValue string,) message]" if version == 2 else
                    "[PublishingId u64, message | sub-batch]")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None,
             whole: bool = False) -> tuple[Field, int]:
        """The entries as a list field; simple messages alone (a producer sending one by one) as a
        lazy one, unless ``whole``: the list made when a view looks inside, its JSON from the
        bytes (a Publish carries thousands)."""
        raw: bytes = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)  # type: ignore[assignment]
        start = off
        # (The first entry's length octet tells a Publish of sub-batches, the other usual one,
        # without the scan's call.)
        if (not whole and not self.draft and self.version == 1 and off + 16 <= end
                and not raw[off + 12] & 0x80):
            stop = _simple_messages_end(raw, off, end)
            if stop >= 0:
                count = _COUNT.unpack_from(raw, off)[0]
                # A message that is no AMQP 1.0 one: its JSON by its tree, the list's element.
                lazy = LazyField(name, count, start, stop - start,
                                 lambda: self.read(name, memoryview(raw), start, end, None, True)[0].children or [],
                                 json=lambda: amqp_json.records_json(
                                     raw, start + 4, count, None,
                                     lambda i, _at, _n: field_json((lazy.children or [])[i], name), True))
                return lazy, stop
        if off + 4 > end:
            raise DecodeError(f"{name}: count needs 4 bytes, {max(end - off, 0)} left", off)
        (count,) = struct.unpack_from(">i" if self.draft else ">I", raw, off)
        off += 4
        items: list[Field] = []
        problems = None  # one for the frame, made at its first sub-batch: they share one decompression budget
        for i in range(count):
            if off >= end:
                raise DecodeError(f"{name}: count {count} but the frame ends after {i} messages", off)
            if off + 8 > end:
                raise DecodeError(f"{name}[{i}]: publishing id needs 8 bytes", off)
            (pid,) = struct.unpack_from(">Q", raw, off)
            at = off
            extra = [Field("publishing_id", pid, off, 8)]
            off += 8
            if self.version == 2 and not self.draft:
                fv, off = STRING.read("filter_value", buf, off, end)
                extra.append(fv)
            if off + 4 > end:
                raise DecodeError(f"{name}[{i}]: message length needs 4 bytes", off)
            if raw[off] & 0x80 and self.version == 1 and not self.draft:
                problems = problems or ChunkProblem()
                entries, _recs, new = ch.decode_entries(raw, off, end, 0, 1, None, problems, lazy=True)
                if problems.errors or problems.limits or not entries:
                    raise DecodeError(f"{name}[{i}]: " + "; ".join(problems.errors or problems.limits
                                                                   or ["bad sub-batch"]), off)
                sb = entries[0]
                assert sb.children is not None
                sb.children[:0] = extra
                sb.value = pid
                sb.offset, sb.size = at, new - at
                items.append(sb)
                off = new
                continue
            (n,) = struct.unpack_from(">i" if self.draft else ">I", raw, off)
            if n < 0 or off + 4 + n > end:
                raise DecodeError(f"{name}[{i}]: message length {n} overruns the frame", off)
            items.append(ch.RecordField("message", pid, at, off + 4 + n - at, raw, off + 4, n, 0, extra))
            off += 4 + n
        return Field(name, count, start, off - start, None, items, True), off

    def scan(self, raw: bytes, off: int, end: int) -> list[int] | None:
        """The publishing ids of the entries in ``raw[off:end]`` when :meth:`read` would decode
        them without a problem and they fill it exactly, with no Field made (a sub-batch's records
        are checked by the chunk's record scan); None otherwise, and :meth:`read` says what is
        wrong. Today's protocol only (the draft's layout is left to read); version 1 (sub-batches)
        by sub_batch.publish_scan, compiled where it can be."""
        if self.draft:
            return None
        if self.version == 1:
            return publish_scan(raw, off, end)
        if off + 4 > end:
            return None
        (count,) = _COUNT.unpack_from(raw, off)
        off += 4
        published: list[int] = []
        for _ in range(count):
            if off + 8 > end:
                return None
            published.append(_ID.unpack_from(raw, off)[0])
            try:
                _filter, off = STRING.value("filter_value", raw, off + 8, end)
            except DecodeError:
                return None
            if off + 4 > end:
                return None
            off += 4 + _COUNT.unpack_from(raw, off)[0]
            if off > end:
                return None
        return published if off == end else None

    def write(self, value: Sequence[Mapping[str, Any]]) -> bytes:
        parts = [struct.pack(">I", len(value))]
        for m in value:
            parts.append(struct.pack(">Q", m["publishing_id"]))
            if "sub_batch" in m:
                parts.append(ch.sub_batch_entry(list(m["sub_batch"]), m.get("compression", 0)))
                continue
            if self.version == 2 and not self.draft:
                parts.append(STRING.write(m.get("filter_value")))
            parts.append(ch.simple_entry(bytes(m["message"])))
        return b"".join(parts)


def _simple_messages_end(raw: bytes, off: int, end: int) -> int:
    """Where the entries from ``off`` (their count first) end when each is a simple message
    (today's protocol, version 1) that :meth:`PublishEntries.read` reads without a word; -1 for
    any other (a sub-batch, or what read says is wrong)."""
    if off + 4 > end:
        return -1
    unpack = _COUNT.unpack_from
    (count,) = unpack(raw, off)
    off += 4
    for _ in range(count):  # each entry takes 12 bytes or more: at most the frame's size / 12 turns
        if off + 12 > end or raw[off + 8] & 0x80:
            return -1
        off += 12 + unpack(raw, off + 8)[0]
        if off > end:
            return -1
    return off


class DeliverChunk(WireType):
    """The Osiris chunk: 48-byte header, then DataLength bytes of entries, then an optional trailer.
    Decoded by the connection (it needs the findings); here only for layout docs and encoding."""

    doc = "OsirisChunk"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        raw: bytes = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)  # type: ignore[assignment]
        problems = ChunkProblem()
        info = ch.ChunkInfo()
        kids = ch.decode_chunk(raw, off, end, problems, info)
        return Field(name, None, off, end - off, None, kids), end

    def write(self, value: Any) -> bytes:
        return bytes(value)


CORR = F("correlation_id", U32)
CODE = F("response_code", U16, enum=CODES)
STD_RESPONSE = Struct(CORR, CODE, doc="CorrelationId, ResponseCode")
PROPERTIES = Properties()
STRINGS = array(STRING)
OFFSET_SPEC = OffsetSpec()


@dataclass(frozen=True)
class Command:
    key: int
    name: str
    #: Who sends the request (or the one-way command): "c2s", "s2c" or "both".
    sender: str
    requests: Mapping[int, Struct]
    response: Struct | None = None
    #: Request carries a correlation id (so a response is expected with the same id).
    correlated: bool = False
    #: (label, field) pairs for the Info line of requests and responses.
    info: tuple[tuple[str, str], ...] = ()
    response_info: tuple[tuple[str, str], ...] = ()
    doc: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _c(key: int, name: str, sender: str, requests: Mapping[int, Struct], response: Struct | None = None,
       correlated: bool = True, info: tuple[tuple[str, str], ...] = (),
       response_info: tuple[tuple[str, str], ...] = (), doc: str = "") -> Command:
    return Command(key, name, sender, requests, response, correlated, info, response_info, doc)


def S(*fields: F) -> Struct:  # noqa: N802 - reads like a constructor in the table below
    return Struct(*fields, doc="{" + ", ".join(f"{f.name}:{f.type.doc}" for f in fields) + "}")


ENTRY_V1 = PublishEntries(1)
ENTRY_V2 = PublishEntries(2)
CHUNK = DeliverChunk()
VERSION_TRIPLE = S(F("key", U16), F("min_version", U16), F("max_version", U16))
BROKER = S(F("reference", U16), F("host", STRING), F("port", U32))
STREAM_METADATA = S(F("stream", STRING), CODE, F("leader_reference", U16), F("replicas", array(U16)))

COMMANDS: dict[int, Command] = {c.key: c for c in (
    _c(0x0001, "DeclarePublisher", "c2s",
       {1: S(CORR, F("publisher_id", U8), F("publisher_reference", STRING), F("stream", STRING))},
       STD_RESPONSE, info=(("publisher", "publisher_id"), ("stream", "stream"), ("ref", "publisher_reference"))),
    _c(0x0002, "Publish", "c2s",
       {1: S(F("publisher_id", U8), F("messages", ENTRY_V1)),
        2: S(F("publisher_id", U8), F("messages", ENTRY_V2))},
       correlated=False, info=(("publisher", "publisher_id"), ("messages", "messages"))),
    _c(0x0003, "PublishConfirm", "s2c", {1: S(F("publisher_id", U8), F("publishing_ids", array(U64)))},
       correlated=False, info=(("publisher", "publisher_id"), ("confirmed", "publishing_ids"))),
    _c(0x0004, "PublishError", "s2c",
       {1: S(F("publisher_id", U8), F("errors", array(S(F("publishing_id", U64), CODE))))},
       correlated=False, info=(("publisher", "publisher_id"), ("errors", "errors"))),
    _c(0x0005, "QueryPublisherSequence", "c2s", {1: S(CORR, F("publisher_reference", STRING), F("stream", STRING))},
       S(CORR, CODE, F("sequence", U64)), info=(("ref", "publisher_reference"), ("stream", "stream")),
       response_info=(("sequence", "sequence"),)),
    _c(0x0006, "DeletePublisher", "c2s", {1: S(CORR, F("publisher_id", U8))}, STD_RESPONSE,
       info=(("publisher", "publisher_id"),)),
    _c(0x0007, "Subscribe", "c2s",
       {1: S(CORR, F("subscription_id", U8), F("stream", STRING), F("offset_spec", OFFSET_SPEC),
             F("credit", U16), F("properties", PROPERTIES, optional=True))},
       STD_RESPONSE, info=(("sub", "subscription_id"), ("stream", "stream"), ("from", "offset_spec"),
                           ("credit", "credit"))),
    _c(0x0008, "Deliver", "s2c",
       {1: S(F("subscription_id", U8), F("chunk", CHUNK)),
        2: S(F("subscription_id", U8), F("committed_chunk_id", U64), F("chunk", CHUNK))},
       correlated=False),
    _c(0x0009, "Credit", "c2s", {1: S(F("subscription_id", U8), F("credit", U16))},
       S(CODE, F("subscription_id", U8)), correlated=False,
       info=(("sub", "subscription_id"), ("credit", "credit")), response_info=(("sub", "subscription_id"),)),
    _c(0x000A, "StoreOffset", "c2s", {1: S(F("reference", STRING), F("stream", STRING), F("offset", U64))},
       correlated=False, info=(("ref", "reference"), ("stream", "stream"), ("offset", "offset"))),
    _c(0x000B, "QueryOffset", "c2s", {1: S(CORR, F("reference", STRING), F("stream", STRING))},
       S(CORR, CODE, F("offset", U64)), info=(("ref", "reference"), ("stream", "stream")),
       response_info=(("offset", "offset"),)),
    _c(0x000C, "Unsubscribe", "c2s", {1: S(CORR, F("subscription_id", U8))}, STD_RESPONSE,
       info=(("sub", "subscription_id"),)),
    _c(0x000D, "Create", "c2s", {1: S(CORR, F("stream", STRING), F("arguments", PROPERTIES))}, STD_RESPONSE,
       info=(("stream", "stream"),)),
    _c(0x000E, "Delete", "c2s", {1: S(CORR, F("stream", STRING))}, STD_RESPONSE, info=(("stream", "stream"),)),
    _c(0x000F, "Metadata", "c2s", {1: S(CORR, F("streams", STRINGS))},
       S(CORR, F("brokers", array(BROKER)), F("stream_metadata", array(STREAM_METADATA))),
       info=(("streams", "streams"),), response_info=(("brokers", "brokers"), ("streams", "stream_metadata"))),
    _c(0x0010, "MetadataUpdate", "s2c", {1: S(CODE, F("stream", STRING))}, correlated=False,
       info=(("code", "response_code"), ("stream", "stream"))),
    _c(0x0011, "PeerProperties", "c2s", {1: S(CORR, F("properties", PROPERTIES))},
       S(CORR, CODE, F("properties", PROPERTIES, optional=True))),
    _c(0x0012, "SaslHandshake", "c2s", {1: S(CORR)}, S(CORR, CODE, F("mechanisms", STRINGS, optional=True)),
       response_info=(("mechanisms", "mechanisms"),)),
    _c(0x0013, "SaslAuthenticate", "c2s", {1: S(CORR, F("mechanism", STRING), F("sasl_data", BYTES))},
       S(CORR, CODE, F("sasl_challenge", SaslData(), optional=True)), info=(("mechanism", "mechanism"),)),
    _c(0x0014, "Tune", "s2c", {1: S(F("frame_max", U32), F("heartbeat", U32))},
       S(F("frame_max", U32), F("heartbeat", U32)), correlated=False,
       info=(("frame_max", "frame_max"), ("heartbeat", "heartbeat")),
       response_info=(("frame_max", "frame_max"), ("heartbeat", "heartbeat"))),
    _c(0x0015, "Open", "c2s", {1: S(CORR, F("virtual_host", STRING))},
       S(CORR, CODE, F("properties", PROPERTIES, optional=True)), info=(("vhost", "virtual_host"),)),
    _c(0x0016, "Close", "both", {1: S(CORR, F("closing_code", U16, enum=CODES), F("closing_reason", STRING))},
       STD_RESPONSE, info=(("code", "closing_code"), ("reason", "closing_reason"))),
    _c(0x0017, "Heartbeat", "both", {1: S()}, correlated=False),
    _c(0x0018, "Route", "c2s", {1: S(CORR, F("routing_key", STRING), F("super_stream", STRING))},
       S(CORR, CODE, F("streams", RouteStreams())), info=(("key", "routing_key"), ("super_stream", "super_stream")),
       response_info=(("streams", "streams"),)),
    _c(0x0019, "Partitions", "c2s", {1: S(CORR, F("super_stream", STRING))}, S(CORR, CODE, F("streams", STRINGS)),
       info=(("super_stream", "super_stream"),), response_info=(("streams", "streams"),)),
    _c(0x001A, "ConsumerUpdate", "s2c", {1: S(CORR, F("subscription_id", U8), F("active", U8))},
       S(CORR, CODE, F("offset_spec", OffsetSpec())), info=(("sub", "subscription_id"), ("active", "active")),
       response_info=(("from", "offset_spec"),)),
    _c(0x001B, "ExchangeCommandVersions", "c2s", {1: S(CORR, F("commands", array(VERSION_TRIPLE)))},
       S(CORR, CODE, F("commands", array(VERSION_TRIPLE))), info=(("commands", "commands"),),
       response_info=(("commands", "commands"),)),
    _c(0x001C, "StreamStats", "c2s", {1: S(CORR, F("stream", STRING))},
       S(CORR, CODE, F("stats", Properties(I64, "{string:int64}"))), info=(("stream", "stream"),)),
    _c(0x001D, "CreateSuperStream", "c2s",
       {1: S(CORR, F("name", STRING), F("partitions", STRINGS), F("binding_keys", STRINGS),
             F("arguments", PROPERTIES))},
       STD_RESPONSE, info=(("name", "name"), ("partitions", "partitions"))),
    _c(0x001E, "DeleteSuperStream", "c2s", {1: S(CORR, F("name", STRING))}, STD_RESPONSE,
       info=(("name", "name"),)),
    _c(0x001F, "ResolveOffsetSpec", "c2s",
       {1: S(CORR, F("stream", STRING), F("offset_spec", OFFSET_SPEC), F("properties", PROPERTIES, optional=True))},
       S(CORR, CODE, F("offset_type", U16), F("offset", U64)), info=(("stream", "stream"), ("from", "offset_spec")),
       response_info=(("offset", "offset"),)),
)}

#: Commands a client may send before Open, in the order it must send them.
HANDSHAKE = ("PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open")
