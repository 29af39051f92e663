"""Test encoder: Iggy frames of every dialect from the same command table the decoder reads
(:mod:`.commands`), the message encoders of :mod:`.messages`, whole sessions (the only source of
dialect L0 traffic) and deliberately broken frames.

    request("CREATE_STREAM", "L0", stream_id=1, name="orders")
    response(0, struct.pack("<I", 1))
    v_request("GET_STREAMS", number=3)
    session("L0").pcap("l0.pcap")
"""

from __future__ import annotations

import struct
from typing import Any

from analyzer.api import Direction, Event
from dissectors.iggy.commands import (
    BY_NAME,
    OPERATIONS,
    REPLICATED,
    SEND_PAYLOAD,
    V_EVICTION,
    V_REPLY,
    V_REQUEST,
)
from dissectors.iggy.dialects import pack_version
from dissectors.iggy.messages import encode_polled, encode_send_messages
from dissectors.kit import script as kit_script
from dissectors.kit.script import all_findings as all_findings
from dissectors.kit.script import frames as frames
from dissectors.kit.script import play
from dissectors.schema import Struct

C2S, S2C = Direction.C2S, Direction.S2C
#: V: operation of each classic command that has one of its own (the rest are NonReplicated, 2).
OPERATION_OF = {code: op for op, (_, code) in OPERATIONS.items() if code is not None}
PROTOCOL_0_11 = pack_version(0, 11, 0)


# ----------------------------------------------------------------------------- classic frames
def frame(code: int, payload: bytes = b"") -> bytes:
    """A classic request: length (code + payload), code, payload."""
    return struct.pack("<II", 4 + len(payload), code) + payload


def payload(name: str, dialect: str = "C", /, **values: Any) -> bytes:
    """A request payload of ``name`` as ``dialect`` lays it out, every field from ``values``.
    SEND_MESSAGES takes ``stream_id``, ``topic_id``, ``messages`` (and ``partitioning``)."""
    cmd = BY_NAME[name]
    layout = cmd.layout(dialect)
    if layout is None:
        raise ValueError(f"{name} does not exist in dialect {dialect}")
    if layout is SEND_PAYLOAD:
        return encode_send_messages(dialect, values["stream_id"], values["topic_id"], values["messages"],
                                    values.get("partitioning"), messages_count=values.get("messages_count"))
    assert isinstance(layout, Struct)
    return layout.write(values)


def request(name: str, dialect: str = "C", /, **values: Any) -> bytes:
    return frame(BY_NAME[name].code, payload(name, dialect, **values))


def response(status: int = 0, body: bytes = b"") -> bytes:
    """A classic response: status, length (payload only), payload."""
    return struct.pack("<II", status, len(body)) + body


def polled(dialect: str, messages: list[dict[str, Any]], **kw: Any) -> bytes:
    return response(0, encode_polled(dialect, messages, **kw))


def stream_details(stream_id: int, name: str, *, created_at: int = 1_700_000_000_000_000) -> bytes:
    """StreamDetails with no topics (section 5.4)."""
    raw = name.encode()
    return struct.pack("<IQIQQB", stream_id, created_at, 0, 0, 0, len(raw)) + raw


def topic_details(topic_id: int, name: str, partitions: int = 1, first_partition: int = 0,
                  *, created_at: int = 1_700_000_000_000_000) -> bytes:
    """TopicDetails as server 0.3.0 and later write it (section 5.6), with empty partitions."""
    raw = name.encode()
    head = struct.pack("<IQIQBQBQQB", topic_id, created_at, partitions, 0, 1, 0, 1, 0, 0, len(raw)) + raw
    parts = b"".join(struct.pack("<IQIQQQ", first_partition + i, created_at, 1, 0, 0, 0) for i in range(partitions))
    return head + parts


# ----------------------------------------------------------------------------- broken classic frames
def set_length(raw: bytes, length: int) -> bytes:
    return struct.pack("<I", length) + raw[4:]


def with_trailing(raw: bytes, extra: bytes) -> bytes:
    """The same request with bytes appended and its length adjusted (consistent framing)."""
    return set_length(raw + extra, len(raw) + len(extra) - 4)


def truncate(raw: bytes, drop: int) -> bytes:
    """The same request with its last ``drop`` bytes removed and its length adjusted."""
    body = raw[:len(raw) - drop]
    return set_length(body, len(body) - 4)


# ----------------------------------------------------------------------------- V frames
def v_header(command: int, body_len: int, *, checksum: int = 0, release: int = 0, view: int = 0) -> bytearray:
    head = bytearray(256)
    head[0:16] = checksum.to_bytes(16, "little")
    struct.pack_into("<III", head, 48, 256 + body_len, view, release)
    head[60] = command
    return head


def v_request(name: str, number: int, /, *, session: int = 0, user_id: int = 0, client: int = 0x1234,
              operation: int | None = None, timestamp: int = 0, **values: Any) -> bytes:
    """A V request frame: header (command 5) and the command's payload as V lays it out."""
    cmd = BY_NAME[name]
    body = payload(name, "V", **values)
    op = operation if operation is not None else OPERATION_OF.get(cmd.code, 2)
    head = v_header(V_REQUEST, len(body))
    head[128:144] = client.to_bytes(16, "little")
    struct.pack_into("<QQB", head, 160, timestamp, number, op)
    struct.pack_into("<QI", head, 184, session, user_id)
    if op == 2 or (op == 1 and cmd.code != 40):
        struct.pack_into("<I", head, 196, cmd.code)
    return bytes(head) + body


def v_reply(number: int, operation: int, status: int = 0, body: bytes = b"", *, results: bool | None = None,
            client: int = 0x1234, checksum: int = 0) -> bytes:
    """A V reply; replicated operations get the (empty) result section before ``body`` unless
    ``results`` says otherwise."""
    if results is None:
        results = operation in REPLICATED and status == 0 and (operation != 1 or bool(body))
    if results:
        body = struct.pack("<I", 0) + body
    head = v_header(V_REPLY, len(body), checksum=checksum)
    head[160:176] = client.to_bytes(16, "little")
    struct.pack_into("<QB", head, 200, number, operation)
    struct.pack_into("<I", head, 216, status)
    return bytes(head) + body


def register_reply(user_id: int = 0, session: int = 1, server_version: int = PROTOCOL_0_11,
                   server: str = "0.9.0-edge.2") -> bytes:
    raw = server.encode()
    return struct.pack("<IQIB", user_id, session, server_version, len(raw)) + raw


def v_eviction(reason: int, server_version: int = PROTOCOL_0_11, minimum: int = PROTOCOL_0_11,
               client: int = 0x1234) -> bytes:
    head = v_header(V_EVICTION, 0)
    head[128:144] = client.to_bytes(16, "little")
    struct.pack_into("<II", head, 144, server_version, minimum)
    head[255] = reason
    return bytes(head)


# ----------------------------------------------------------------------------- conversations
class Script(kit_script.Script):
    """A conversation under construction (:class:`dissectors.kit.script.Script`) that can be written
    as a capture."""

    def pcap(self, path: str, *, port: int = 8090, client_port: int = 40000, mss: int = 1448) -> None:
        """Write the conversation as a TCP capture (handshake, segments of ``mss``, close)."""
        from analyzer.pcapwrite import TcpConversation, write_capture

        conv = TcpConversation(("127.0.0.1", client_port), ("127.0.0.1", port), ts=self.items[0][2] - 0.001
                               if self.items else 1_700_000_000.0, step=0.0001)
        conv.handshake()
        for d, data, ts in self.items:
            conv.ts = max(conv.ts, ts)
            conv.send(str(d), data, mss)
        conv.close()
        write_capture(path, [conv])


def run(script: Script, *, midstream: bool = False, split: int | None = None, dialect: str | None = None) -> list[Event]:
    """Feed a script to a fresh connection (``split``: cut every frame into pieces of that size)."""
    from dissectors.iggy.connection import IggyConnection

    return play(IggyConnection(midstream, dialect), script.items, split=split, start_ts=script.ts)


# ----------------------------------------------------------------------------- whole sessions
MESSAGES = [{"id": 0, "payload": f"order-{i}".encode(), "headers": [{"key": "n", "kind": 11, "value": i}]}
            for i in range(3)]


def _stored(dialect: str, messages: list[dict[str, Any]], first_id: int = 0x1000) -> list[dict[str, Any]]:
    """The messages as a server stores them: ids and offsets assigned, timestamps set."""
    return [{**m, "id": first_id + i, "offset": i, "timestamp": 1_700_000_000_000_000 + i,
             "origin_timestamp": 1_700_000_000_000_000 + i} for i, m in enumerate(messages)]


def login(s: Script, dialect: str) -> Script:
    if dialect == "L0":
        s.c(request("LOGIN_USER", "L0", username="iggy", password="iggy"))
    elif dialect == "V":
        return s
    else:
        version = {"L1": "0.6.202", "Z1": "0.7.0", "Z2": "0.8.0", "C": "0.10.0"}[dialect]
        s.c(request("LOGIN_USER", dialect, username="iggy", password="iggy", version=version, context=""))
    return s.s(response(0, struct.pack("<I", 1)))


def session(dialect: str, messages: list[dict[str, Any]] | None = None) -> Script:
    """A clean session of ``dialect`` as a real client and server run it: ping, login, create a
    stream and a topic, send messages, poll them back, a consumer group with offsets, a request that
    fails (the duplicate stream name), and a PING."""
    msgs = MESSAGES if messages is None else messages
    if dialect == "V":
        return _v_session(msgs)
    s = Script()
    s.c(request("PING", dialect)).s(response())
    login(s, dialect)
    old = dialect in ("L0", "L1", "Z1")
    first = 1 if old else 0
    created = b"" if dialect == "L0" else stream_details(first, "orders")
    if old:
        s.c(request("CREATE_STREAM", dialect, stream_id=first, name="orders")).s(response(0, created))
    else:
        s.c(request("CREATE_STREAM", dialect, name="orders")).s(response(0, created))
    if dialect == "L0":
        s.c(request("CREATE_TOPIC", "L0", stream_id=1, topic_id=1, partitions_count=1, message_expiry=0,
                    name="orders")).s(response())
    else:
        topic = {"stream_id": first, "partitions_count": 1, "compression": 1, "message_expiry": 0,
                 "max_topic_size": 0, "replication_factor": 1, "name": "orders"}
        if old:
            topic["topic_id"] = first
        s.c(request("CREATE_TOPIC", dialect, **topic)).s(response(0, topic_details(first, "orders", 1, first)))
    s.c(request("SEND_MESSAGES", dialect, stream_id=first, topic_id=first, messages=msgs,
                partitioning={"kind": 2, "value": first})).s(response())
    consumer = {"kind": 1, "id": 1} if dialect == "L0" else {"kind": 1, "id": 1}
    part = first if old else first
    s.c(request("POLL_MESSAGES", dialect, consumer=consumer, stream_id=first, topic_id=first, partition_id=part,
                strategy={"kind": 1, "value": 0}, count=10, auto_commit=0))
    s.s(polled(dialect, _stored(dialect, msgs), partition_id=first))
    group = {"L0": {"group_id": 1}, "L1": {"group_id": 1, "name": "g"}, "Z1": {"group_id": 1, "name": "g"}}.get(
        dialect, {"name": "g"})
    s.c(request("CREATE_CONSUMER_GROUP", dialect, stream_id=first, topic_id=first, **group))
    s.s(response(0, b"" if dialect == "L0" else struct.pack("<IIIB", first, 1, 0, 1) + b"g"))
    s.c(request("JOIN_CONSUMER_GROUP", dialect, stream_id=first, topic_id=first, group_id=first)).s(response())
    s.c(request("STORE_CONSUMER_OFFSET", dialect, consumer=consumer, stream_id=first, topic_id=first,
                partition_id=part, offset=len(msgs) - 1)).s(response())
    s.c(request("GET_CONSUMER_OFFSET", dialect, consumer=consumer, stream_id=first, topic_id=first,
                partition_id=part)).s(response(0, struct.pack("<IQQ", first, len(msgs) - 1, len(msgs) - 1)))
    if old:
        s.c(request("CREATE_STREAM", dialect, stream_id=first + 1, name="orders"))
    else:
        s.c(request("CREATE_STREAM", dialect, name="orders"))
    s.s(response(1012))
    return s.c(request("PING", dialect)).s(response())


def _v_session(msgs: list[dict[str, Any]]) -> Script:
    s = Script()
    n = iter(range(1, 1000))
    s.c(v_request("LOGIN_REGISTER", next(n), client_version={"protocol_version": PROTOCOL_0_11,
                                                             "sdk_name": "iggy-rust", "sdk_version": "0.11.0"},
                  username="iggy", password="iggy", context=""))
    s.s(v_reply(1, 1, 0, register_reply()))
    s.c(v_request("PING", next(n), session=1)).s(v_reply(2, 2))
    s.c(v_request("CREATE_STREAM", next(n), session=1, name="orders")).s(v_reply(3, 128, 0, stream_details(0, "orders")))
    s.c(v_request("CREATE_TOPIC", next(n), session=1, stream_id=0, partitions_count=1, name="orders",
                  options=[{"key": "durability", "kind": 2, "value": "replicated"}]))
    s.s(v_reply(4, 132, 0, topic_details(0, "orders", 1, 0)))
    s.c(v_request("SEND_MESSAGES", next(n), session=1, stream_id=0, topic_id=0, messages=msgs,
                  partitioning={"kind": 2, "value": 0}))
    # SendMessagesResponse (as apache-iggy 0.9.0 reads it): count, then stream, topic, partition, base offset.
    s.s(v_reply(5, 160, 0, struct.pack("<IIIIQ", 1, 0, 0, 0, 0)))
    s.c(v_request("POLL_MESSAGES", next(n), session=1, consumer={"kind": 1, "id": 1}, stream_id=0, topic_id=0,
                  partition_id=0, strategy={"kind": 1, "value": 0}, count=10, auto_commit=0))
    s.s(v_reply(6, 2, 0, encode_polled("V", _stored("V", msgs))))
    s.c(v_request("CREATE_STREAM", next(n), session=1, name="orders")).s(v_reply(7, 128, 1012))
    return s


# ----------------------------------------------------------------------------- one anomaly per rule
def opened(dialect: str = "C") -> Script:
    """PING and a successful login."""
    s = Script()
    s.c(request("PING", dialect)).s(response())
    return login(s, dialect)


def v_opened() -> Script:
    s = Script()
    s.c(v_request("LOGIN_REGISTER", 1, client_version={"protocol_version": PROTOCOL_0_11, "sdk_name": "iggy-rust",
                                                       "sdk_version": "0.11.0"},
                  username="iggy", password="iggy", context=""))
    return s.s(v_reply(1, 1, 0, register_reply()))


def _send_c(**kw: Any) -> bytes:
    return request("SEND_MESSAGES", "C", stream_id=0, topic_id=0, messages=kw.pop("messages", MESSAGES[:1]),
                   partitioning={"kind": 2, "value": 0}, **kw)


def _poll_c() -> bytes:
    return request("POLL_MESSAGES", "C", consumer={"kind": 1, "id": 1}, stream_id=0, topic_id=0, partition_id=0,
                   strategy={"kind": 1, "value": 0}, count=10, auto_commit=0)


def _a_resync() -> Script:
    # A status no server defines with a payload length: no frame start; the real response follows.
    return opened().c(request("GET_STREAMS")).s(struct.pack("<II", 0xEEEEEEEE, 5) + b"junk!" + response())


def _a_incomplete() -> Script:
    return opened().c(request("GET_STREAM", stream_id=0)[:-2])


def _a_truncated() -> Script:
    # CREATE_STREAM whose name8 says 10 bytes but the frame holds 3.
    return opened().c(frame(202, b"\x0aabc")).s(response(4))


def _a_trailing() -> Script:
    return opened().c(with_trailing(request("GET_STREAM", stream_id=0), b"\x00\x00")).s(response())


def _a_too_short() -> Script:
    return opened().c(struct.pack("<IH", 2, 0)).s(response(3))


def _a_over_limit() -> Script:
    # The length cannot be waited for: its bytes are skipped (framing.resync) up to the next frame.
    return opened().c(struct.pack("<II", (64 << 20) + 1, 101) + request("GET_STREAMS")).s(response())


def _a_error_payload() -> Script:
    return opened().c(request("GET_STREAM", stream_id=7)).s(struct.pack("<II", 1009, 2) + b"xx")


def _a_payload_size() -> Script:
    raw = bytearray(_send_c())
    raw[8:12] = struct.pack("<I", 99)  # metadata_length
    return opened().c(bytes(raw)).s(response(4036))


def _a_unknown_command() -> Script:
    return opened().c(frame(999)).s(response(3))


def _a_unknown_operation() -> Script:
    return v_opened().c(v_request("PING", 2, session=1, operation=99)).s(v_reply(2, 99, 3))


def _a_invalid_value() -> Script:
    return opened().c(request("GET_STREAM", stream_id={"kind": 3, "value": 1})).s(response(6))


def _a_count() -> Script:
    return opened().c(_poll_c()).s(polled("C", _stored("C", MESSAGES[:2]), messages_count=3))


def _a_header_kind() -> Script:
    msgs = [{"id": 0, "payload": b"x", "headers": [{"key": "k", "kind": 99, "value": b"v"}]}]
    return opened().c(request("POLL_MESSAGES", "C", consumer={"kind": 1, "id": 1}, stream_id=0, topic_id=0,
                              partition_id=0, strategy={"kind": 1, "value": 0}, count=10, auto_commit=0)) \
        .s(polled("C", _stored("C", msgs)))


def _a_reserved() -> Script:
    return opened().c(_poll_c()).s(polled("C", [{**_stored("C", MESSAGES[:1])[0], "reserved": 5}]))


def _a_checksum() -> Script:
    return opened().c(_poll_c()).s(polled("C", [{**_stored("C", MESSAGES[:1])[0], "checksum": 12345}]))


def _a_protocol_version() -> Script:
    s = Script()
    s.c(v_request("LOGIN_REGISTER", 1, client_version={"protocol_version": pack_version(0, 12, 0),
                                                       "sdk_name": "iggy-rust", "sdk_version": "0.12.0"},
                  username="iggy", password="iggy", context=""))
    return s.s(v_reply(1, 1, 0, register_reply()))


def _a_before_login() -> Script:
    s = Script()
    return s.c(request("GET_STREAMS")).s(response(40))


def _a_unknown_response() -> Script:
    return opened().s(response(1009))


def _a_unanswered() -> Script:
    return opened().c(request("GET_STATS"))


def _a_unknown_reply() -> Script:
    return v_opened().s(v_reply(42, 2))


def _a_duplicate() -> Script:
    s = v_opened().c(v_request("CREATE_STREAM", 1, session=1, name="a")).s(v_reply(1, 128, 0, stream_details(0, "a")))
    return s.c(v_request("CREATE_STREAM", 1, session=1, name="b")).s(v_reply(1, 128, 59))


def _a_mismatch() -> Script:
    return v_opened().c(v_request("PING", 2, session=1)).s(v_reply(2, 128))


def _a_error_status() -> Script:
    return opened().c(request("GET_STREAM", stream_id=0)).s(response(1014))


def _a_refused() -> Script:
    return opened().c(request("CREATE_STREAM", name="orders")).s(response(1012))


def _a_unknown_status() -> Script:
    return opened().c(request("GET_STREAMS")).s(response(77777))


def _a_eviction() -> Script:
    return v_opened().s(v_eviction(1))


#: Rules that necessarily come with another's anomaly: a length over the limit cannot be framed, so
#: its bytes are also skipped as junk.
ALSO = {"iggy.size.over_limit": frozenset({"iggy.framing.resync"}),
        # The payload of an error response is one finding, its status (a normal refusal) another.
        "iggy.size.error_payload": frozenset({"iggy.response.refused"})}
#: rule id -> a conversation that breaks that rule (and no other), for tests and synthetic captures.
ANOMALIES = {
    "iggy.framing.resync": _a_resync, "iggy.framing.incomplete": _a_incomplete,
    "iggy.framing.truncated": _a_truncated, "iggy.framing.trailing": _a_trailing,
    "iggy.size.too_short": _a_too_short, "iggy.size.over_limit": _a_over_limit,
    "iggy.size.error_payload": _a_error_payload, "iggy.size.payload": _a_payload_size,
    "iggy.command.unknown": _a_unknown_command, "iggy.vsr.unknown_operation": _a_unknown_operation,
    "iggy.value.invalid": _a_invalid_value, "iggy.value.count": _a_count, "iggy.value.header_kind": _a_header_kind,
    "iggy.value.reserved": _a_reserved, "iggy.message.checksum": _a_checksum,
    "iggy.login.protocol_version": _a_protocol_version, "iggy.handshake.order": _a_before_login,
    "iggy.correlation.unknown_response": _a_unknown_response, "iggy.correlation.unanswered": _a_unanswered,
    "iggy.correlation.unknown_request_number": _a_unknown_reply, "iggy.correlation.duplicate": _a_duplicate,
    "iggy.correlation.mismatch": _a_mismatch, "iggy.response.error": _a_error_status,
    "iggy.response.refused": _a_refused, "iggy.response.unknown_status": _a_unknown_status,
    "iggy.vsr.eviction": _a_eviction,
}


def limit_anomaly(outstanding: int = 100_001) -> Script:
    """``iggy.limit.exceeded``: more requests outstanding than the connection remembers (100,000),
    pipelined PINGs that are never answered. Kept out of :data:`ANOMALIES`: it is big to replay."""
    return opened().c(request("PING") * outstanding)
