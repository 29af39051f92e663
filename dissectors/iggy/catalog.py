"""The field catalogue of the Iggy dissector (``streamproto fields iggy``), generated from the
command layouts (:mod:`.commands`) and the message layouts (:mod:`.messages`).

Names: what every frame can carry is ``iggy.<field>`` (:data:`COMMON`: the classic frame header,
the V consensus header, computed fields); everything else is ``iggy.<command>.<path>`` with the
frame's command in snake_case (``iggy.poll_messages.strategy.kind``), list elements adding nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from dissectors.iggy import messages as M
from dissectors.iggy import responses as RS
from dissectors.iggy import types as T
from dissectors.iggy.commands import COMMANDS, REGISTER_REPLY, SEND_PAYLOAD, Maybe, Options
from dissectors.kit.catalog import Catalog, int_type, snake
from dissectors.schema import Array, F, Fixed, Int, Prefixed, Rest, Struct, WireType

PROTOCOL = "iggy"
COMMON: dict[str, tuple[str, str]] = {
    "length": ("uint32", "Request: code + payload bytes; response: payload bytes"),
    "code": ("uint32", "Command code"),
    "status": ("uint32", "Response status (0 OK, else an error code)"),
    "payload": ("bytes", "The payload of a frame whose command is unknown, or not decoded"),
    "undecoded": ("bytes", "The rest of a payload too short for its command's fields"),
    "trailing": ("bytes", "Bytes left after every field of the command"),
    "body": ("bytes", "A V body whose command or operation is not decoded"),
    "response_time": ("double", "Seconds from the request to this response (computed)"),
    "results": ("uint32", "V replicated reply: the result section's count"),
    "results.index": ("uint32", "V result entry: index"),
    "results.result": ("uint32", "V result entry: result code"),
    "header": ("struct", "V consensus header (256 bytes)"),
}
_V_HEADER = {
    "checksum": "uint64", "checksum_body": "uint64", "cluster": "uint64", "size": "uint32", "view": "uint32",
    "release": "uint32", "command": "uint8", "replica": "uint8", "client": "uint64", "request_checksum": "uint64",
    "timestamp": "uint64", "request": "uint64", "operation": "uint8", "session": "uint64", "user_id": "uint32",
    "context": "uint64", "op": "uint64", "commit": "uint64", "server_protocol_version": "uint32",
    "server_protocol_version_min": "uint32", "reason": "uint8", "status": "uint32",
}


def field_name(command: str, path: Sequence[str]) -> str:
    """The catalogue name of the field at ``path`` in a frame of ``command``."""
    joined = ".".join(path)
    if joined in COMMON or path[0] == "header":
        return f"{PROTOCOL}.{joined}"
    return f"{PROTOCOL}.{snake(command)}.{joined}"


class _Builder:
    def __init__(self) -> None:
        self.cat = Catalog(PROTOCOL)

    def add(self, path: str, type: str, description: str = "", repeated: bool = False) -> None:
        old = self.cat.get(f"{PROTOCOL}.{path}")
        if old is not None and (old.type != type or old.repeated != repeated):
            return  # the same name in another dialect's layout: the first registration wins
        self.cat.add(path, type, description, repeated)

    def wire(self, path: str, t: WireType, repeated: bool) -> None:
        if isinstance(t, type(T.U128)):
            self.add(path, "bytes", "u128", repeated)  # beyond JSON's integers in most consumers
        elif isinstance(t, Int):
            self.add(path, int_type(t._st.format), t.doc, repeated)
        elif isinstance(t, Prefixed):
            self.add(path, "string" if t.text else "bytes", t.doc, repeated)
        elif isinstance(t, Rest | Fixed):
            self.add(path, "bytes", t.doc, repeated)
        elif isinstance(t, Options | RS.Options):
            self.add(path, "uint32", "V options: typed key/value pairs", True)
            for name, typ in (("key_kind", "uint8"), ("key", "string"), ("kind", "uint8"), ("value", "string"),
                              ("rest", "bytes")):
                self.add(f"{path}.{name}", typ, f"V option {name}", True)
        elif isinstance(t, Maybe):
            self.add(path, "struct", t.doc, repeated)
            self.add(f"{path}.has", "uint8", "Present flag", repeated)
            self.wire(f"{path}.{path.rsplit('.', 1)[-1]}", t.inner, repeated)
        elif isinstance(t, Array):
            if isinstance(t.element, Struct):
                self.add(path, "struct", "", True)
                self.struct(path, t.element, True)
            else:
                self.wire(path, t.element, True)
        elif isinstance(t, Struct):
            self.add(path, "struct", t.doc, repeated)
            self.struct(path, t, repeated)
        elif isinstance(t, T.Identifier):
            self.add(path, "string", "Identifier (numeric id or name)", repeated)
            self.add(f"{path}.kind", "uint8", "Identifier kind (1 numeric, 2 string)", repeated)
            self.add(f"{path}.length", "uint8", "Identifier length", repeated)
            self.add(f"{path}.value", "string", "Identifier value", repeated)
        elif isinstance(t, T.Consumer):
            self.add(path, "string", t.doc, repeated)
            self.add(f"{path}.kind", "uint8", "Consumer kind (1 consumer, 2 consumer group)", repeated)
            if t.legacy:
                self.add(f"{path}.id", "uint32", "Consumer id", repeated)
            else:
                self.wire(f"{path}.id", T.IDENTIFIER, repeated)
        elif isinstance(t, T.Partitioning):
            self.add(path, "string", "Partitioning", repeated)
            self.add(f"{path}.kind", "uint8", "Partitioning kind", repeated)
            self.add(f"{path}.length", "uint8", "Partitioning value length", repeated)
            self.add(f"{path}.value", "bytes", "Partition id or messages key", repeated)
        elif isinstance(t, T.PollingStrategy):
            self.add(path, "uint64", t.doc, repeated)
            self.add(f"{path}.kind", "uint8", "Polling kind", repeated)
            self.add(f"{path}.value", "uint64", "Polling value", repeated)
        elif isinstance(t, T.OptionalPartition):
            self.add(path, "uint32", t.doc, repeated)
            if t.flagged:
                self.add(f"{path}.flag", "uint8", "1 = partition id present", repeated)
                self.add(f"{path}.partition_id", "uint32", "Partition id", repeated)
        elif isinstance(t, T.Permissions):
            self.add(path, "bool", t.doc, repeated)
            self.add(f"{path}.has_permissions", "uint8", "Permissions present", repeated)
            self.add(f"{path}.length", "uint32", "Permissions blob length", repeated)
            self.add(f"{path}.blob", "bytes", "A permissions blob that does not decode", repeated)
            self.add(f"{path}.global", "struct", "Global permissions", repeated)
            for n in T.GLOBAL_PERMISSIONS:
                self.add(f"{path}.global.{n}", "bool", "", repeated)
            self.add(f"{path}.streams", "uint32", "Per-stream permissions", True)
            self.add(f"{path}.streams.stream_id", "uint32", "", True)
            for n in T.STREAM_PERMISSIONS:
                self.add(f"{path}.streams.{n}", "bool", "", True)
            self.add(f"{path}.streams.topics", "uint32", "Per-topic permissions", True)
            self.add(f"{path}.streams.topics.topic_id", "uint32", "", True)
            for n in T.TOPIC_PERMISSIONS:
                self.add(f"{path}.streams.topics.{n}", "bool", "", True)
        else:
            raise TypeError(f"{path}: no catalogue type for {type(t).__name__}")

    def struct(self, prefix: str, s: Struct, repeated: bool) -> None:
        for f in s.fields:
            self.wire(f"{prefix}.{f.name}" if prefix else f.name, f.type, repeated)

    def message_list(self, path: str) -> None:
        """A list of messages in any format (legacy, 56/64-byte headers, V's 48-byte headers)."""
        self.add(path, "uint32", "The messages", True)
        for header in M.FRAME_HEADER.values():
            self.struct(path, header, True)
        for name, typ in (("state", "uint8"), ("headers_length", "uint32"), ("payload", "bytes"),
                          ("headers", "uint32"), ("headers.key", "string"), ("headers.key_kind", "uint8"),
                          ("headers.kind", "uint8"), ("headers.value", "string"), ("headers.rest", "bytes")):
            self.add(f"{path}.{name}", typ, "", True)

    def messages(self, prefix: str) -> None:
        """The fields of a decoded SEND_MESSAGES payload or POLL_MESSAGES response (every format)."""
        self.add(f"{prefix}.metadata_length", "uint32", "Bytes of stream, topic, partitioning and count")
        self.wire(f"{prefix}.stream_id", T.IDENTIFIER, False)
        self.wire(f"{prefix}.topic_id", T.IDENTIFIER, False)
        self.wire(f"{prefix}.partitioning", T.PARTITIONING, False)
        self.add(f"{prefix}.messages_count", "uint32", "Messages announced")
        self.add(f"{prefix}.partition_id", "uint32", "Partition polled")
        self.add(f"{prefix}.current_offset", "uint64", "The partition's highest offset")
        self.add(f"{prefix}.index", "uint32", "Index table (position of each message's end)", True)
        self.struct(f"{prefix}.index", M.INDEX_ENTRY, True)
        self.message_list(f"{prefix}.messages")
        # V: one batch (sent) or several (polled), each a 256-byte header and its messages.
        self.add(f"{prefix}.batches", "uint32", "V message batches", True)
        self.struct(f"{prefix}.batches", M.BATCH_HEADER, True)
        self.message_list(f"{prefix}.batches.messages")
        self.add(f"{prefix}.batch", "struct", "V message batch (SEND_MESSAGES carries one)")
        self.struct(f"{prefix}.batch", M.BATCH_HEADER, False)
        self.message_list(f"{prefix}.batch.messages")
        self.add(f"{prefix}.rest", "bytes", "Bytes that could not be decoded")


def _responses() -> dict[str, list[tuple[Struct, tuple[str, Struct] | None]]]:
    """The response layouts of :mod:`.responses` by command: a header, and the list of entries that
    follows it (details) or the entries repeated to the end (lists, as a layout with one list)."""
    def listed(name: str, *elements: Struct) -> list[tuple[Struct, tuple[str, Struct] | None]]:
        return [(Struct(doc="list"), (name, e)) for e in elements]

    clients = [(RS.CLIENT_HEADER_OLD_NONE, RS.CLIENT_GROUP), (RS.CLIENT_HEADER_NO_USER, RS.CLIENT_GROUP_OLD),
               (RS.CLIENT_HEADER, RS.CLIENT_GROUP)]
    topics = (*RS.TOPIC_HEADERS, RS.TOPIC_HEADER_V)
    streams = [(RS.STREAM_HEADER, ("topics", t)) for t in topics] + [(RS.STREAM_HEADER_V, ("topics", t)) for t in topics]
    topic_details = [(t, ("partitions", p)) for t in topics for p in (RS.PARTITION, RS.PARTITION_V)]
    groups = [(g, ("members", RS.MEMBER)) for g in RS.GROUP_HEADERS]
    users = [(Struct(*h.fields, RS.PERMISSIONS_FIELD), None) for h in (RS.USER_HEADER, RS.USER_HEADER_LEGACY)]
    out: dict[str, list[tuple[Struct, tuple[str, Struct] | None]]] = {
        "get_stats": [(s, None) for ss in RS.STATS_BY_DIALECT.values() for s in ss],
        "get_snapshot_file": [(Struct(F("archive", RS.RAW)), None)],
        "get_cluster_metadata": [(RS.CLUSTER_METADATA, None)],
        "get_me": [(h, ("consumer_groups", g)) for h, g in clients],
        "get_clients": listed("clients", *(h for h, _ in clients)),
        "get_users": listed("users", RS.USER_HEADER, RS.USER_HEADER_LEGACY),
        "login_user": [(RS.IDENTITY, None)],
        "get_personal_access_tokens": listed("tokens", RS.PAT),
        "create_personal_access_token": [(RS.RAW_TOKEN, None)],
        "get_consumer_offset": [(RS.CONSUMER_OFFSET, None)],
        "send_messages": [(RS.SEND_CONFIRMATIONS, None)],
        "get_stream": streams,
        "get_streams": listed("streams", RS.STREAM_HEADER, RS.STREAM_HEADER_V),
        "get_topic": topic_details,
        "get_topics": listed("topics", *topics),
        "get_consumer_group": groups,
        "get_consumer_groups": listed("groups", *RS.GROUP_HEADERS),
        "get_user": users,
    }
    out["get_client"] = out["get_me"]
    out["login_with_personal_access_token"] = out["login_user"]
    out["create_user"] = out["get_user"]
    out["create_stream"] = out["get_stream"]
    out["create_topic"] = out["get_topic"]
    out["create_consumer_group"] = out["get_consumer_group"]
    return out


def build() -> Catalog:
    b = _Builder()
    for name, (typ, doc) in COMMON.items():
        b.add(name, typ, doc, name.startswith("results"))
    for name, typ in _V_HEADER.items():
        b.add(f"header.{name}", typ, "V consensus header field")
    b.add("header.code", "uint32", "V NonReplicated request: the classic command code")
    for cmd in COMMANDS.values():
        for _, layout in cmd.layouts:
            if layout is SEND_PAYLOAD:
                b.messages(snake(cmd.name))
            else:
                assert isinstance(layout, Struct)
                b.struct(snake(cmd.name), layout, False)
    b.struct("login_register_response", REGISTER_REPLY, False)
    for command, layouts in _responses().items():
        for layout, children in layouts:
            b.struct(f"{command}_response", layout, False)
            if children is not None:
                list_name, element = children
                b.add(f"{command}_response.{list_name}", "uint32", f"{element.doc} entries", True)
                b.struct(f"{command}_response.{list_name}", element, True)
    b.messages("poll_messages_response")
    return b.cat


CATALOG = build()
