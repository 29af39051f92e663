"""The 2020 pre-release draft of the stream protocol (dialect ``2020-draft``).

Version field 0, keys 0..15 plus 998/999, no response bit (a response reuses its request's key and
is told apart by direction), 0-based response codes, int32 subscription ids, Publish naming the
stream and PublishConfirm/PublishError without publisher id. Layouts follow the draft document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analyzer.api import Field
from dissectors.rabbitmq_stream.layouts import Command, PublishEntries, S
from dissectors.rabbitmq_stream.wire import (
    BYTES,
    DRAFT_CODES,
    I16,
    I32,
    I64,
    STRING,
    OffsetSpec,
    Properties,
    array,
)
from dissectors.schema import DecodeError, F, WireType

DIALECT = "2020-draft"
CORR = F("correlation_id", I32)
CODE = F("response_code", I16, enum=DRAFT_CODES)
STD = S(CORR, CODE)
PROPS = Properties()
#: From 2020-06-02 the draft's OffsetSpecification had 0-based types.
DRAFT_OFFSET_TYPES = {0: "first", 1: "last", 2: "next", 3: "offset", 4: "timestamp"}
DRAFT_OFFSET_SPEC = OffsetSpec(DRAFT_OFFSET_TYPES, offset_code=3, timestamp_code=4)


class DraftSubscribeStart(WireType):
    """Where a draft Subscribe starts reading. The first draft had a bare uint64 offset; from
    2020-06-02 an OffsetSpecification (0-based types) followed by a Credit int16. The bytes left in
    the frame tell which: exactly 8 for the first; 4 (type, credit) or 12 (type, value, credit)."""

    doc = "uint64 offset | OffsetSpecification(0-based) credit:int16"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        start = off
        if end - off == 8:
            v, off = I64.read("offset", buf, off, end)
            return Field(name, v.value, start, 8, f"offset {v.value}", [v]), off
        if end - off not in (4, 12):
            raise DecodeError(f"{name}: {end - off} bytes fit neither draft Subscribe layout (8, 4 or 12)", off)
        ospec, off = DRAFT_OFFSET_SPEC.read("offset_spec", buf, off, end)
        credit, off = I16.read("credit", buf, off, end)
        return Field(name, ospec.value, start, off - start, ospec.display, [ospec, credit]), off

    def write(self, value: Mapping[str, Any]) -> bytes:
        if "offset" in value:
            return I64.write(value["offset"])
        return DRAFT_OFFSET_SPEC.write(value["offset_spec"]) + I16.write(value["credit"])


def _d(key: int, name: str, sender: str, request: S, response: S | None = None, correlated: bool = True,
       info: tuple[tuple[str, str], ...] = (), response_info: tuple[tuple[str, str], ...] = ()) -> Command:
    return Command(key, name, sender, {0: request}, response, correlated, info, response_info)


DRAFT_COMMANDS: dict[int, Command] = {c.key: c for c in (
    _d(0, "Publish", "c2s", S(F("stream", STRING), F("messages", PublishEntries(1, draft=True))), correlated=False,
       info=(("stream", "stream"), ("messages", "messages"))),
    _d(1, "PublishConfirm", "s2c", S(F("publishing_ids", array(I64))), correlated=False,
       info=(("confirmed", "publishing_ids"),)),
    _d(2, "Subscribe", "c2s", S(CORR, F("subscription_id", I32), F("stream", STRING),
                                F("start", DraftSubscribeStart())), STD,
       info=(("sub", "subscription_id"), ("stream", "stream"), ("from", "start"))),
    _d(3, "Deliver", "s2c", S(F("subscription_id", I32)), correlated=False),
    _d(4, "Credit", "c2s", S(F("subscription_id", I32), F("credit", I16)), correlated=False,
       info=(("sub", "subscription_id"), ("credit", "credit"))),
    _d(5, "Unsubscribe", "c2s", S(CORR, F("subscription_id", I32)), STD, info=(("sub", "subscription_id"),)),
    _d(6, "PublishError", "s2c", S(F("errors", array(S(F("publishing_id", I64), CODE)))), correlated=False,
       info=(("errors", "errors"),)),
    _d(7, "MetadataUpdate", "s2c", S(CODE, F("stream", STRING)), correlated=False,
       info=(("code", "response_code"), ("stream", "stream"))),
    _d(8, "Metadata", "c2s", S(CORR, F("streams", array(STRING))),
       S(CORR, F("brokers", array(S(F("reference", I16), F("host", STRING), F("port", I32)))),
         F("stream_metadata", array(S(F("stream", STRING), CODE, F("leader_reference", I16),
                                      F("replicas", array(I16)))))),
       info=(("streams", "streams"),)),
    _d(9, "SaslHandshake", "c2s", S(CORR, F("mechanism", STRING, optional=True)),
       S(CORR, CODE, F("mechanisms", array(STRING), optional=True))),
    _d(10, "SaslAuthenticate", "c2s", S(CORR, F("mechanism", STRING), F("sasl_data", BYTES)),
       S(CORR, CODE, F("sasl_data", BYTES, optional=True)), info=(("mechanism", "mechanism"),)),
    _d(11, "Tune", "s2c", S(F("frame_max", I32), F("heartbeat", I32)), S(F("frame_max", I32), F("heartbeat", I32)),
       correlated=False, info=(("frame_max", "frame_max"), ("heartbeat", "heartbeat")),
       response_info=(("frame_max", "frame_max"), ("heartbeat", "heartbeat"))),
    _d(12, "Open", "c2s", S(CORR, F("virtual_host", STRING)), STD, info=(("vhost", "virtual_host"),)),
    _d(13, "Close", "both", S(CORR, F("closing_code", I16, enum=DRAFT_CODES), F("closing_reason", STRING)), STD,
       info=(("code", "closing_code"), ("reason", "closing_reason"))),
    _d(14, "Heartbeat", "both", S(), correlated=False),
    _d(15, "PeerProperties", "c2s", S(CORR, F("properties", PROPS)), S(CORR, CODE, F("properties", PROPS))),
    _d(998, "Create", "c2s", S(CORR, F("stream", STRING), F("arguments", PROPS)), STD, info=(("stream", "stream"),)),
    _d(999, "Delete", "c2s", S(CORR, F("stream", STRING)), STD, info=(("stream", "stream"),)),
)}
