"""Payloads of successful Iggy responses, decoded by the request command they answer (iggy.md 5).

``decode_response(command, dialect, buf, start, end)`` takes the payload ``buf[start:end]`` of an
OK response (status 0): in dialects L0-C the bytes after the 8-byte status/length header; in V the
reply body after the 256-byte consensus header AND after the result section of replicated
operations (the caller decodes that section). Field offsets are positions in ``buf``.

The regular structures are ``schema.Struct`` layouts below. What is irregular is which layout a
version used: fields that grew across server releases inside one dialect (TopicHeader in L1, the
stats tail, GroupHeader's name in L0) are listed as candidate layouts, newest first, and the first
that accounts for the payload exactly, with no invalid value, wins; when none does, the first is
shown with its problems.

An empty payload is a valid answer to the single-entity GETs ("not found" since about 0.4.10) and
to the lists (zero entries); commands whose response is empty (deletes, updates, SEND_MESSAGES...)
get a ("size", ...) problem when bytes come back. Unknown commands: the raw bytes, no problem.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from analyzer.api import Field
from dissectors.iggy.messages import decode_headers, decode_polled, encode_headers
from dissectors.iggy.types import (
    COMPRESSION,
    EXPIRY,
    EXPIRY_SECS,
    F32,
    MARKS,
    MAX_TOPIC_SIZE,
    NAME8,
    NODE_ROLE,
    NODE_STATUS,
    PERMISSIONS_RESPONSE,
    STR32,
    TIMESTAMP,
    TRANSPORT,
    U8,
    U16,
    U32,
    U32_MAX,
    U64,
    USER_STATUS_T,
    Checked,
    Decoded,
    Micros,
    mark,
    micros_display,
    problems_of,
)
from dissectors.schema import Array, DecodeError, F, Int, Rest, Struct, WireType

# ------------------------------------------------------------------------------ value types


class Semver(Int):
    """Stats' ``iggy_server_semver``: major*1 000 000 + minor*1 000 + patch (0 = unknown)."""

    def __init__(self) -> None:
        super().__init__("u32 semver (decimal packing)", "<I")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        v = f.value
        f.display = f"{v // 1_000_000}.{v // 1000 % 1000}.{v % 1000}" if v else "unknown"
        return f, off


class LegacyCreatedAt(Micros):
    """UserHeader.created_at of L0/L1: servers 0.0.8-0.0.49 wrote it big-endian (a bug fixed in
    0.0.50). Read little-endian; when that is no plausible date and big-endian is, take that."""

    _PLAUSIBLE = 7_258_118_400_000_000  # 2200-01-01 in µs

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, new = super().read(name, buf, off, end, spec)
        if f.value > self._PLAUSIBLE:
            be = int.from_bytes(buf[off:off + 8], "big")
            if 0 < be <= self._PLAUSIBLE:
                f.value = be
                f.display = f"{micros_display(be)} (big-endian, servers 0.0.8-0.0.49)"
        return f, new


class UserId(Int):
    """ClientHeader.user_id: not logged in is 0 up to Z1, u32::MAX from Z2 (IDs became 0-based)."""

    def __init__(self, none: int) -> None:
        super().__init__("u32 user id", "<I")
        self.none = none

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        if f.value == self.none:
            f.display = "not logged in"
        return f, off


class PatExpiry(Micros):
    """A PAT's ``expiry_at``: µs since the epoch, 0 = never."""

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        if f.value == 0:
            f.display = "never"
        return f, off


class Options(WireType):
    """V's options block: ``length u32``, then key/value pairs in the typed user-header format
    (5.5; key kind, key, value kind, value). Written from raw bytes or a list of header dicts."""

    doc = "options(u32 length, TLV)"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 4 > end:
            raise DecodeError(f"{name}: length needs 4 bytes, {max(end - off, 0)} left", off)
        n = int.from_bytes(buf[off:off + 4], "little")
        if off + 4 + n > end:
            raise DecodeError(f"{name}: length {n} overruns the payload by {off + 4 + n - end} bytes", off)
        problems: list[tuple[str, str]] = []
        pairs = decode_headers(buf, off + 4, off + 4 + n, True, name, problems)
        f = Field(name, len(pairs), off, 4 + n, None, pairs, True)
        for kind, message in problems:
            f = mark(f, kind, message)
        return f, off + 4 + n

    def write(self, value: Any) -> bytes:
        raw = bytes(value) if isinstance(value, bytes | bytearray) else encode_headers("V", value or [])
        return len(raw).to_bytes(4, "little") + raw


COMPRESSION_T = Checked("u8 compression", "<B", COMPRESSION, "compression")
TRANSPORT_T = Checked("u8 transport", "<B", TRANSPORT, "transport")
NODE_ROLE_T = Checked("u8 node role", "<B", NODE_ROLE, "node role")
NODE_STATUS_T = Checked("u8 node status", "<B", NODE_STATUS, "node status")
LEGACY_CREATED_AT = LegacyCreatedAt()
PAT_EXPIRY = PatExpiry()
SEMVER = Semver()
OPTIONS = Options()
MAX_TOPIC_SIZE_OLD = Int("u64 bytes (0 none)", "<Q")
RAW = Rest()


def S(*fields: F, doc: str) -> Struct:  # noqa: N802 - reads like a constructor in the tables below
    return Struct(*fields, doc=doc)


# ------------------------------------------------------------------------------ layouts (data)

STREAM_HEADER = S(F("id", U32), F("created_at", TIMESTAMP), F("topics_count", U32), F("size_bytes", U64),
                  F("messages_count", U64), F("name", NAME8), doc="StreamHeader")

_TOPIC_HEAD = (F("id", U32), F("created_at", TIMESTAMP), F("partitions_count", U32))
_TOPIC_TAIL = (F("size_bytes", U64), F("messages_count", U64), F("name", NAME8))
#: TopicHeader, newest first: >= 0.3.0, 0.2.13-0.2.24, 0.1.9-0.2.12, <= 0.1.8 (5.6).
TOPIC_HEADERS = (
    S(*_TOPIC_HEAD, F("message_expiry", EXPIRY), F("compression", COMPRESSION_T),
      F("max_topic_size", MAX_TOPIC_SIZE), F("replication_factor", U8), *_TOPIC_TAIL, doc="TopicHeader"),
    S(*_TOPIC_HEAD, F("message_expiry", EXPIRY_SECS), F("compression", COMPRESSION_T),
      F("max_topic_size", MAX_TOPIC_SIZE_OLD), F("replication_factor", U8), *_TOPIC_TAIL, doc="TopicHeader 0.2.13"),
    S(*_TOPIC_HEAD, F("message_expiry", EXPIRY_SECS), F("max_topic_size", MAX_TOPIC_SIZE_OLD),
      F("replication_factor", U8), *_TOPIC_TAIL, doc="TopicHeader 0.1.9"),
    S(*_TOPIC_HEAD, F("message_expiry", EXPIRY_SECS), *_TOPIC_TAIL, doc="TopicHeader 0.0.x"),
)
PARTITION = S(F("id", U32), F("created_at", TIMESTAMP), F("segments_count", U32), F("current_offset", U64),
              F("size_bytes", U64), F("messages_count", U64), doc="Partition")
# Dialect V (0.9 edge) changed these; iggy.md 9 only says options were added to the creates. The
# layouts follow the Apache Iggy sources (core/binary_protocol/src/responses/{streams,topics}) and
# the responder the V capture was recorded against: an options block after the stream's name; no
# replication_factor and two options blocks (explicit, derived) in TopicHeader; a 24-byte partition
# context. The spec's layouts stay candidates, so a V server writing those still decodes cleanly.
STREAM_HEADER_V = S(*STREAM_HEADER.fields, F("options", OPTIONS), doc="StreamHeader (V)")
TOPIC_HEADER_V = S(*_TOPIC_HEAD, F("message_expiry", EXPIRY), F("compression", COMPRESSION_T),
                   F("max_topic_size", MAX_TOPIC_SIZE), *_TOPIC_TAIL, F("options", OPTIONS),
                   F("derived_options", OPTIONS), doc="TopicHeader (V)")
PARTITION_V = S(*PARTITION.fields, F("incarnation", U64), F("owner_generation", U64), F("metadata_op", U64),
                doc="Partition (V)")
#: V's SEND_MESSAGES reply: one confirmation per partition written.
SEND_CONFIRMATIONS = S(F("confirmations", Array("<I", S(F("stream_id", U32), F("topic_id", U32),
                                                          F("partition_id", U32), F("base_offset", U64),
                                                          doc="SendConfirmation"))), doc="SendMessagesResponse (V)")
CONSUMER_OFFSET = S(F("partition_id", U32), F("current_offset", U64), F("stored_offset", U64), doc="ConsumerOffset")
#: GroupHeader with its name (0.0.30 on), and before.
GROUP_HEADERS = (
    S(F("id", U32), F("partitions_count", U32), F("members_count", U32), F("name", NAME8), doc="GroupHeader"),
    S(F("id", U32), F("partitions_count", U32), F("members_count", U32), doc="GroupHeader 0.0.x"),
)
MEMBER = S(F("member_id", U32), F("partitions", Array("<I", U32)), doc="GroupMember")


def _client_header(user_id: bool, none: int) -> Struct:
    uid = (F("user_id", UserId(none)),) if user_id else ()
    return S(F("client_id", U32), *uid, F("transport", TRANSPORT_T), F("address", STR32),
             F("consumer_groups_count", U32), doc="ClientHeader")


#: ClientHeader: user_id since 0.0.9; "not logged in" is 0 up to Z1 and u32::MAX from Z2.
CLIENT_HEADER_OLD_NONE = _client_header(True, 0)
CLIENT_HEADER = _client_header(True, U32_MAX)
CLIENT_HEADER_NO_USER = _client_header(False, 0)
CLIENT_GROUP = S(F("stream_id", U32), F("topic_id", U32), F("group_id", U32), doc="ClientConsumerGroup")
CLIENT_GROUP_OLD = S(F("group_id", U32), F("topic_id", U32), F("stream_id", U32), doc="ClientConsumerGroup 0.0.x")

USER_HEADER = S(F("id", U32), F("created_at", TIMESTAMP), F("status", USER_STATUS_T), F("username", NAME8),
                doc="UserHeader")
USER_HEADER_LEGACY = S(F("id", U32), F("created_at", LEGACY_CREATED_AT), F("status", USER_STATUS_T),
                       F("username", NAME8), doc="UserHeader")
PERMISSIONS_FIELD = F("permissions", PERMISSIONS_RESPONSE)
PAT = S(F("name", NAME8), F("expiry_at", PAT_EXPIRY), doc="PersonalAccessToken")
RAW_TOKEN = S(F("token", NAME8), doc="RawPersonalAccessToken")
IDENTITY = S(F("user_id", U32), doc="IdentityInfo")
CLUSTER_NODE = S(F("name", STR32), F("ip", STR32), F("tcp_port", U16), F("quic_port", U16), F("http_port", U16),
                 F("websocket_port", U16), F("role", NODE_ROLE_T), F("status", NODE_STATUS_T), doc="ClusterNode")
CLUSTER_METADATA = S(F("name", STR32), F("nodes", Array("<I", CLUSTER_NODE)), doc="ClusterMetadata")
CACHE_METRIC = S(F("stream_id", U32), F("topic_id", U32), F("partition_id", U32), F("hits", U64), F("misses", U64),
                 F("hit_ratio", F32), doc="CacheMetrics")

_STATS_HEAD = (F("process_id", U32), F("cpu_usage", F32))
_STATS_BODY = (
    F("memory_usage", U64), F("total_memory", U64), F("available_memory", U64), F("run_time", U64),
    F("start_time", TIMESTAMP), F("read_bytes", U64), F("written_bytes", U64), F("messages_size_bytes", U64),
    F("streams_count", U32), F("topics_count", U32), F("partitions_count", U32), F("segments_count", U32),
    F("messages_count", U64), F("clients_count", U32), F("consumer_groups_count", U32),
    F("hostname", STR32), F("os_name", STR32), F("os_version", STR32), F("kernel_version", STR32),
)
_VERSION = (F("iggy_server_version", STR32),)
_SEMVER = (F("iggy_server_semver", SEMVER),)
_CACHE = (F("cache_metrics", Array("<I", CACHE_METRIC)),)
_DISK = (F("threads_count", U32), F("free_disk_space", U64), F("total_disk_space", U64))
_CPU = (F("total_cpu_usage", F32),)


def _stats(*groups: tuple[F, ...], doc: str) -> Struct:
    return S(*_STATS_HEAD, *(f for g in groups for f in g), doc=doc)


#: Stats (5.12) by server range, newest first.
STATS_080 = _stats(_CPU, _STATS_BODY, _VERSION, _SEMVER, _CACHE, _DISK, doc="Stats 0.8.0")
STATS_CACHE = _stats(_CPU, _STATS_BODY, _VERSION, _SEMVER, _CACHE, doc="Stats 0.4.131")
STATS_CACHE_NO_SEMVER = _stats(_CPU, _STATS_BODY, _VERSION, _CACHE, doc="Stats 0.4.131 (semver unknown)")
STATS_VERSION = _stats(_CPU, _STATS_BODY, _VERSION, _SEMVER, doc="Stats 0.4.112")
STATS_CPU = _stats(_CPU, _STATS_BODY, doc="Stats 0.2.4")
STATS_OLD = _stats(_STATS_BODY, doc="Stats 0.0.x")

STATS_BY_DIALECT: dict[str, tuple[Struct, ...]] = {
    "L0": (STATS_OLD,),
    "L1": (STATS_CACHE, STATS_CACHE_NO_SEMVER, STATS_VERSION, STATS_CPU, STATS_OLD),
    "Z1": (STATS_CACHE, STATS_CACHE_NO_SEMVER),
    "Z2": (STATS_CACHE, STATS_CACHE_NO_SEMVER),
    "C": (STATS_080, STATS_CACHE, STATS_CACHE_NO_SEMVER),
    "V": (STATS_080,),
}
TOPIC_HEADERS_BY_DIALECT: dict[str, tuple[Struct, ...]] = {
    "L0": TOPIC_HEADERS[3:], "L1": TOPIC_HEADERS,
}
GROUP_HEADERS_BY_DIALECT: dict[str, tuple[Struct, ...]] = {"L0": GROUP_HEADERS}


def _pick(table: dict[str, tuple[Struct, ...]], dialect: str, default: tuple[Struct, ...]) -> tuple[Struct, ...]:
    return table.get(dialect, default)


def _client_headers(dialect: str) -> tuple[tuple[Struct, Struct], ...]:
    """(ClientHeader, consumer-group entry) candidates: user_id since 0.0.9, entry order since 0.0.30."""
    if dialect == "L0":
        return ((CLIENT_HEADER_OLD_NONE, CLIENT_GROUP), (CLIENT_HEADER_OLD_NONE, CLIENT_GROUP_OLD),
                (CLIENT_HEADER_NO_USER, CLIENT_GROUP_OLD))
    if dialect in ("L1", "Z1"):
        return ((CLIENT_HEADER_OLD_NONE, CLIENT_GROUP),)
    return ((CLIENT_HEADER, CLIENT_GROUP),)


# ------------------------------------------------------------------------------ decoding machinery


Shape = Callable[[memoryview, int, int], tuple[list[Field], int, str]]


def _value(fields: Sequence[Field], name: str) -> object:
    for f in fields:
        if f.name == name:
            return f.value
    return None


def _struct(layout: Struct) -> Shape:
    def dec(mv: memoryview, off: int, end: int) -> tuple[list[Field], int, str]:
        fields, off = layout.read_fields(mv, off, end)
        return fields, off, ""
    return dec


def _with_children(header: Struct, count_field: str, element: Struct, list_name: str) -> Shape:
    """A header, then as many ``element``s as the header's ``count_field`` says (StreamDetails...).

    The count is not trusted for allocation: elements are read while it lasts and bytes remain.
    """
    def dec(mv: memoryview, off: int, end: int) -> tuple[list[Field], int, str]:
        fields, off = header.read_fields(mv, off, end)
        n = _value(fields, count_field)
        assert isinstance(n, int)
        at = off
        items: list[Field] = []
        for i in range(n):
            if off >= end:
                raise DecodeError(f"{count_field} is {n} but the payload ends after {i} {list_name}", off)
            item_at = off
            kids, off = element.read_fields(mv, off, end)
            first = kids[0].value if kids else None
            items.append(Field(f"[{i}]", first, item_at, off - item_at, _entry_display(kids), kids))
        fields.append(Field(list_name, n, at, off - at, None, items, True))
        return fields, off, ""
    return dec


def _repeated(element: Shape, list_name: str) -> Shape:
    """Entries back to back until the payload ends (GET_STREAMS, GET_USERS...). Every entry has a
    fixed part, so each turn consumes bytes and the loop ends."""
    def dec(mv: memoryview, off: int, end: int) -> tuple[list[Field], int, str]:
        items: list[Field] = []
        at = off
        while off < end:
            kids, new, _ = element(mv, off, end)
            items.append(Field(f"[{len(items)}]", _value(kids, "id") if _value(kids, "id") is not None
                               else _value(kids, "name"), off, new - off, _entry_display(kids), kids))
            off = new
        return [Field(list_name, len(items), at, off - at, None, items, True)], off, f"{list_name}={len(items)}"
    return dec


def _entry_display(kids: Sequence[Field]) -> str | None:
    for n in ("name", "username", "address"):
        v = _value(kids, n)
        if isinstance(v, str):
            return v
    return None


def _first_fit(shapes: Sequence[Shape], mv: memoryview, start: int,
               end: int) -> tuple[list[Field], str, list[tuple[str, str]]]:
    """Try each candidate; the first that reads exactly ``start:end`` with no problem wins,
    else the first that reads exactly, else the first one with its error."""
    results: list[tuple[list[Field] | None, str, list[tuple[str, str]], DecodeError | None]] = []
    for shape in shapes:
        since = MARKS[0]
        try:
            fields, off, info = shape(mv, start, end)
        except DecodeError as e:
            results.append((None, "", [("size", str(e))], e))
            continue
        probs = problems_of(fields, since)
        if off < end:
            probs = [*probs, ("size", f"{end - off} bytes after the response")]
            fields = [*fields, Field("trailing", bytes(mv[off:end]), off, end - off)]
        results.append((fields, info, probs, None))
        if not probs:
            return fields, info, []
    for fields, info, probs, _err in results:
        if fields is not None and not any(k == "size" for k, _ in probs):
            return fields, info, probs
    fields, info, probs, err = results[0]
    if fields is None:
        at = err.offset if err is not None and start <= err.offset <= end else start
        fields = [Field("payload", bytes(mv[start:end]), start, end - start, f"malformed at {at}")]
    return fields, info, probs


# ------------------------------------------------------------------------------ per command


def _stream_details() -> Shape:
    return _with_children(STREAM_HEADER, "topics_count", TOPIC_HEADERS[0], "topics")


def _topic_details(header: Struct) -> Shape:
    return _with_children(header, "partitions_count", PARTITION, "partitions")


def _group_details(header: Struct) -> Shape:
    return _with_children(header, "members_count", MEMBER, "members")


def _client_details(header: Struct, group: Struct) -> Shape:
    return _with_children(header, "consumer_groups_count", group, "consumer_groups")


def _user_details(header: Struct) -> Shape:
    layout = Struct(*header.fields, PERMISSIONS_FIELD, doc="UserDetails")
    return _struct(layout)


@cache
def _shapes(command: int, dialect: str) -> tuple[Sequence[Shape], str] | None:
    """Candidate shapes for the response to ``command`` and its kind: "one" (a single entity,
    empty = not found), "list", "value" (always present). Made once per command and dialect (the
    shapes keep no state)."""
    topics = _pick(TOPIC_HEADERS_BY_DIALECT, dialect, TOPIC_HEADERS[:1])
    groups = _pick(GROUP_HEADERS_BY_DIALECT, dialect, GROUP_HEADERS[:1])
    users = (USER_HEADER_LEGACY,) if dialect in ("L0", "L1") else (USER_HEADER,)
    clients = _client_headers(dialect)
    if command == 10:
        return [_struct(s) for s in STATS_BY_DIALECT[dialect]], "value"
    if command == 11:
        return [_struct(S(F("archive", RAW), doc="snapshot"))], "value"
    if command == 12:
        return [_struct(CLUSTER_METADATA)], "value"
    if command in (20, 21):
        return [_client_details(h, g) for h, g in clients], "one"
    if command == 22:
        return [_repeated(_struct(h), "clients") for h, _ in clients], "list"
    if command in (31, 33):
        return [_user_details(h) for h in users], "one"
    if command == 32:
        return [_repeated(_struct(h), "users") for h in users], "list"
    if command in (38, 44):
        return [_struct(IDENTITY)], "value"
    if command == 41:
        return [_repeated(_struct(PAT), "tokens")], "list"
    if command == 42:
        return [_struct(RAW_TOKEN)], "value"
    if command == 120:
        return [_struct(CONSUMER_OFFSET)], "one"
    v = dialect == "V"
    if command == 101 and v:
        return [_struct(SEND_CONFIRMATIONS)], "value"
    if command in (200, 202):
        stream_shapes: list[Shape] = [_with_children(STREAM_HEADER_V, "topics_count", TOPIC_HEADER_V, "topics")] \
            if v else []
        stream_shapes.append(_stream_details())
        stream_shapes += [_with_children(STREAM_HEADER, "topics_count", t, "topics") for t in topics
                          if t is not TOPIC_HEADERS[0]]
        return stream_shapes, "one"
    if command == 201:
        return [_repeated(_struct(h), "streams") for h in ((STREAM_HEADER_V, STREAM_HEADER) if v
                                                          else (STREAM_HEADER,))], "list"
    if command in (300, 302):
        return ([_with_children(TOPIC_HEADER_V, "partitions_count", PARTITION_V, "partitions")] if v else []) \
            + [_topic_details(t) for t in topics], "one"
    if command == 301:
        return [_repeated(_struct(t), "topics") for t in ((TOPIC_HEADER_V, *topics) if v else topics)], "list"
    if command in (600, 602):
        return [_group_details(g) for g in groups], "one"
    if command == 601:
        return [_repeated(_struct(g), "groups") for g in groups], "list"
    return None


#: Commands whose OK response has no payload (3, 1.2).
EMPTY = frozenset({1, 34, 35, 36, 37, 39, 43, 101, 102, 121, 122, 203, 204, 205, 303, 304, 305, 402, 403, 503,
                   603, 604, 605})
#: Commands answered by an empty payload in older servers and by the created entity later
#: (CREATE_USER/STREAM/TOPIC from 0.4.0, CREATE_CONSUMER_GROUP from 0.2.24).
CREATE = frozenset({33, 202, 302, 602})


def _info(command: int, fields: Sequence[Field], info: str) -> str:
    """Info-line text from the decoded fields (names and counts that say what came back)."""
    if info:
        return info
    v = {f.name: f for f in fields}

    def val(name: str) -> object:
        f = v.get(name)
        return None if f is None else f.value

    if command in (200, 202):
        return f"stream={val('name')} id={val('id')} topics={val('topics_count')}"
    if command in (300, 302):
        return f"topic={val('name')} id={val('id')} partitions={val('partitions_count')}"
    if command in (600, 602):
        name = val("name")
        return (f"group={name} " if name is not None else "") + f"id={val('id')} members={val('members_count')}"
    if command in (31, 33):
        return f"user={val('username')} id={val('id')}"
    if command in (20, 21):
        return f"client={val('client_id')} address={val('address')}"
    if command in (38, 44):
        return f"user_id={val('user_id')}"
    if command == 42:
        f = v.get("token")
        return f"token ({f.size - 1} bytes)" if f is not None else ""
    if command == 120:
        return f"partition={val('partition_id')} current={val('current_offset')} stored={val('stored_offset')}"
    if command == 10:
        ver = v.get("iggy_server_version")
        return (f"streams={val('streams_count')} topics={val('topics_count')} clients={val('clients_count')}"
                + (f" version={ver.value}" if ver is not None else ""))
    if command == 12:
        nodes = v.get("nodes")
        return f"cluster={val('name')} nodes={nodes.value if nodes is not None else 0}"
    if command == 101:
        f = v.get("confirmations")
        confirmed = f.children or [] if f is not None else []
        return " ".join(f"partition={c.children[2].value} base_offset={c.children[3].value}"
                        for c in confirmed if c.children and len(c.children) == 4)
    if command == 11:
        f = v.get("archive")
        return f"archive {f.size if f is not None else 0} bytes"
    return ""


#: One SendConfirmation as confirmations_clean and confirmations_info read it.
_CONFIRMATION = struct.Struct("<IIIQ")
assert _CONFIRMATION.format == "<" + "".join(f.type._st.format[1:] for f in SEND_CONFIRMATIONS.fields[0].type.element.fields)


def confirmations_clean(buf: bytes, start: int) -> bool:
    """Whether decode_response(101, "V", buf, start, len(buf)) would find nothing wrong, told without
    its Fields: a count, then exactly that many confirmations (a findings-only run's test of a V
    send's reply, each one a frame)."""
    n = len(buf) - start
    return n >= 4 and n == 4 + _CONFIRMATION.size * int.from_bytes(buf[start:start + 4], "little")


def confirmations_info(buf: bytes, start: int) -> str:
    """The Info decode_response gives a clean V send's reply (confirmations_clean): each
    confirmation's partition and base offset."""
    return " ".join(f"partition={p} base_offset={b}" for _, _, p, b in _CONFIRMATION.iter_unpack(buf[start + 4:]))


_NOT_FOUND = "empty (not found)"


def decode_response(command: int, dialect: str, buf: bytes | memoryview, start: int, end: int) -> Decoded:
    """The payload ``buf[start:end]`` of a successful response to a request of ``command``."""
    if command == 100:  # the caller's buffer as it is: a poll's messages keep referring to it
        return decode_polled(dialect, buf, start, end)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = max(start, min(end, len(mv)))
    n = end - start
    if command in EMPTY and not (command == 101 and dialect == "V"):
        if n == 0:
            return Decoded([])
        return Decoded([Field("payload", bytes(mv[start:end]), start, n)], "",
                       [("size", f"the response to command {command} is empty, this one has {n} bytes")])
    found = _shapes(command, dialect)
    if found is None:
        return Decoded([Field("payload", bytes(mv[start:end]), start, n)] if n else [])
    shapes, kind = found
    if n == 0:
        if kind == "list":
            return Decoded([], _empty_list_info(command))
        if kind == "one" or command in CREATE:
            return Decoded([], _NOT_FOUND if command not in CREATE else "")
        return Decoded([], "", [("size", f"the response to command {command} has no payload")])
    if n == 1 and kind in ("one", "list"):
        # The SDKs read any OK payload of at most one byte as empty.
        return Decoded([Field("payload", bytes(mv[start:end]), start, 1)],
                       _empty_list_info(command) if kind == "list" else _NOT_FOUND)
    fields, info, problems = _first_fit(shapes, mv, start, end)
    return Decoded(fields, _info(command, fields, info), problems)


def _empty_list_info(command: int) -> str:
    names = {22: "clients", 32: "users", 41: "tokens", 201: "streams", 301: "topics", 601: "groups"}
    return f"{names.get(command, 'entries')}=0"
