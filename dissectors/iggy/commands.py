"""Every Iggy command of every dialect, with its request payload layout, described once as data.

A :class:`Command` says in which dialects its code exists and which layout each dialect uses
(iggy.md sections 3 and 4). The same table drives the decoder (:mod:`.connection`), the test
encoder (:mod:`.encode`), dialect detection (a dialect whose layout cannot decode a request is no
longer a candidate), ``streamproto protocols`` and the field catalogue. SEND_MESSAGES' payload is
irregular (index tables, message frames) and decoded by :mod:`.messages`; its entry here is
:data:`SEND_PAYLOAD`.

The V (0.9 edge) part: the consensus header's commands, the request operations and which classic
command each stands for, the eviction reasons, and the V-only layouts (LOGIN_REGISTER with its
ClientVersionInfo, the register reply).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from analyzer.api import Field
from dissectors.iggy.messages import decode_headers, encode_headers
from dissectors.iggy.types import (
    BOOL,
    COMPRESSION,
    CONSUMER,
    CONSUMER_L0,
    EXPIRY,
    EXPIRY_SECS,
    IDENTIFIER,
    MAX_TOPIC_SIZE,
    NAME8,
    PARTITION_FLAGGED,
    PARTITION_U32,
    PERMISSIONS,
    POLLING_STRATEGY,
    SNAPSHOT_COMPRESSION,
    SNAPSHOT_TYPE,
    STR8,
    STR32,
    U8,
    U32,
    U64,
    USER_STATUS_T,
    Checked,
    mark,
)
from dissectors.schema import Array, F, Int, Rest, Struct, WireType

ALL = ("L0", "L1", "Z1", "Z2", "C", "V")
L1_ON = ("L1", "Z1", "Z2", "C", "V")
Z2_ON = ("Z2", "C", "V")
EMPTY = Struct(doc="empty")


class Maybe(WireType):
    """``has u8``; when it is 1, the value follows (UPDATE_USER's username and status)."""

    __slots__ = ("doc", "inner")

    def __init__(self, inner: WireType) -> None:
        self.inner = inner
        self.doc = f"has u8 [, {inner.doc}]"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        flag, at = U8.read("has", buf, off, end)
        if flag.value != 1:
            return Field(name, None, off, 1, "absent", [flag]), at
        f, new = self.inner.read(name, buf, at, end, spec)
        return Field(name, f.value, off, new - off, f.display, [flag, f]), new

    def write(self, value: Any) -> bytes:
        if isinstance(value, Mapping) and "has" in value:  # what field_values gives back
            return b"\x01" + self.inner.write(value[next(k for k in value if k != "has")]) if value["has"] == 1 \
                else b"\x00"
        return b"\x00" if value is None else b"\x01" + self.inner.write(value)


class ProtocolVersion(Int):
    """V's protocol version: u32 packed as major<<20 | minor<<10 | patch, shown as ``0.11.0``."""

    def __init__(self) -> None:
        super().__init__("u32 major<<20|minor<<10|patch", "<I")

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        f, off = super().read(name, buf, off, end, spec)
        v = f.value
        f.display = f"{v >> 20}.{(v >> 10) & 0x3FF}.{v & 0x3FF}"
        return f, off


PROTOCOL_VERSION = ProtocolVersion()
COMPRESSION_T = Checked("u8 compression", "<B", COMPRESSION, "compression")
SNAPSHOT_COMPRESSION_T = Checked("u8 snapshot compression", "<B", SNAPSHOT_COMPRESSION, "snapshot compression")
SNAPSHOT_TYPE_T = Checked("u8 snapshot type", "<B", SNAPSHOT_TYPE, "snapshot type")
BODY = Rest()


class Options(WireType):
    """V's options block: typed key/value pairs (the C user-header format: key kind u8, key length
    u32, key, value kind u8, value length u32, value) up to the end of the request. Seen from
    apache-iggy 0.9.0 after CREATE_TOPIC's name (iggy.md 9.6 names the block, not its format)."""

    doc = "options: [key_kind u8, key str32, kind u8, value bytes32]*"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        problems: list[tuple[str, str]] = []
        pairs = decode_headers(buf, off, end, True, name, problems)
        f = Field(name, len(pairs), off, end - off, None, pairs, True)
        for kind, message in problems:
            f = mark(f, kind, message)
        return f, end

    def write(self, value: Any) -> bytes:
        return encode_headers("V", value)


OPTIONS = Options()


class _SendPayload:
    """Marker: SEND_MESSAGES' payload is decoded by :func:`dissectors.iggy.messages.decode_send_messages`."""

    doc = "metadata_length?, stream Identifier, topic Identifier, Partitioning, [count, index,] messages"

    def describe(self) -> str:
        return self.doc


SEND_PAYLOAD = _SendPayload()
Layout = Struct | _SendPayload


@dataclass(frozen=True)
class Command:
    code: int
    name: str
    #: Needs a successful login first (section 3, "Auth").
    auth: bool
    #: (dialects, layout) pairs: the layout of the request payload in those dialects. A dialect in
    #: none of them does not know the code; a dialect in several has older layouts after its own
    #: (servers inside one dialect that wrote the command differently), tried in order.
    layouts: tuple[tuple[tuple[str, ...], Layout], ...]
    #: Info line items: (label, top-level field name).
    info: tuple[tuple[str, str], ...] = ()
    since: str = ""

    #: dialect -> its layouts, its own first (worked out once from ``layouts``: asked per frame).
    by_dialect: Mapping[str, tuple[Layout, ...]] = field(init=False, repr=False, compare=False)
    #: The field names ``info`` reads (asked per frame by a view that prints Info lines).
    info_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        table: dict[str, tuple[Layout, ...]] = {}
        for ds, layout in self.layouts:
            for d in ds:
                table[d] = (*table.get(d, ()), layout)
        object.__setattr__(self, "by_dialect", table)
        object.__setattr__(self, "info_names", frozenset(key for _, key in self.info))

    def known_in(self, dialect: str) -> bool:
        return dialect in self.by_dialect

    def layout(self, dialect: str) -> Layout | None:
        """The dialect's own layout (what the encoder writes)."""
        got = self.by_dialect.get(dialect)
        return got[0] if got else None

    def candidates(self, dialect: str) -> tuple[Layout, ...]:
        """Every layout of the dialect, its own first."""
        return self.by_dialect.get(dialect, ())


def _f(name: str, t: WireType, **kw: Any) -> F:
    return F(name, t, **kw)


STREAM = _f("stream_id", IDENTIFIER)
TOPIC = _f("topic_id", IDENTIFIER)
ST = (STREAM, TOPIC)
S_T = (("stream", "stream_id"), ("topic", "topic_id"))


def _cmd(code: int, name: str, layouts: Any, info: tuple[tuple[str, str], ...] = (), *, auth: bool = True,
         since: str = "") -> Command:
    if isinstance(layouts, Struct | _SendPayload):
        layouts = ((ALL, layouts),)
    return Command(code, name, auth, tuple(layouts), info, since)


def _by(**named: Layout) -> tuple[tuple[tuple[str, ...], Layout], ...]:
    """Layouts per dialect group: ``_by(L0=a, L1_Z1=b, Z2_C_V=c)``."""
    return tuple((tuple(k.split("_")), v) for k, v in named.items())


def _only(dialects: tuple[str, ...], layout: Layout) -> tuple[tuple[tuple[str, ...], Layout], ...]:
    return ((dialects, layout),)


def _offsets(extra: tuple[F, ...] = (), v_extra: tuple[F, ...] = ()) -> tuple[tuple[tuple[str, ...], Layout], ...]:
    """GET/STORE/DELETE_CONSUMER_OFFSET: consumer, stream, topic, optional partition id (+ extra)."""
    return _by(L0=Struct(_f("consumer", CONSUMER_L0), *ST, _f("partition_id", PARTITION_U32), *extra),
               L1_Z1=Struct(_f("consumer", CONSUMER), *ST, _f("partition_id", PARTITION_U32), *extra),
               Z2_C=Struct(_f("consumer", CONSUMER), *ST, _f("partition_id", PARTITION_FLAGGED), *extra),
               V=Struct(_f("consumer", CONSUMER), *ST, _f("partition_id", PARTITION_FLAGGED), *extra, *v_extra))


def _group() -> tuple[tuple[tuple[str, ...], Layout], ...]:
    """Commands naming a consumer group: the group id is a u32 in L0, an Identifier later."""
    return _by(L0=Struct(*ST, _f("group_id", U32)), L1_Z1_Z2_C_V=Struct(*ST, _f("group_id", IDENTIFIER)))


GROUP_INFO = (*S_T, ("group", "group_id"))
CONSUMER_INFO = (("consumer", "consumer"), *S_T, ("partition", "partition_id"))
TOPIC_TAIL = (_f("compression", COMPRESSION_T), _f("message_expiry", EXPIRY), _f("max_topic_size", MAX_TOPIC_SIZE),
              _f("replication_factor", U8), _f("name", NAME8))



def _older_l1(*head: F) -> tuple[tuple[tuple[str, ...], Layout], ...]:
    """CREATE/UPDATE_TOPIC as L1 servers before 0.3.0 read them (section 4.5), newest first."""
    old_size = _f("max_topic_size", U64)
    return tuple((("L1",), Struct(*head, *tail, _f("name", NAME8), doc=doc)) for doc, tail in (
        ("0.2.13-0.2.24", (_f("compression", COMPRESSION_T), _f("message_expiry", EXPIRY_SECS), old_size,
                           _f("replication_factor", U8))),
        ("0.1.9-0.2.12", (_f("message_expiry", EXPIRY_SECS), old_size, _f("replication_factor", U8))),
        ("up to 0.1.8", (_f("message_expiry", EXPIRY_SECS),))))


_LIST = [
    _cmd(1, "PING", EMPTY, auth=False),
    _cmd(10, "GET_STATS", EMPTY),
    _cmd(11, "GET_SNAPSHOT_FILE", _only(L1_ON, Struct(_f("compression", SNAPSHOT_COMPRESSION_T),
                                                      _f("types", Array("<B", SNAPSHOT_TYPE_T)))),
         since="server-0.4.61"),
    _cmd(12, "GET_CLUSTER_METADATA", _only(Z2_ON, EMPTY), since="server-0.6.0"),
    _cmd(13, "DESCRIBE_OPTIONS", _only(("V",), Struct(_f("body", BODY, optional=True))), since="V"),
    _cmd(20, "GET_ME", EMPTY),
    _cmd(21, "GET_CLIENT", Struct(_f("client_id", U32)), (("client", "client_id"),)),
    _cmd(22, "GET_CLIENTS", EMPTY),
    _cmd(31, "GET_USER", Struct(_f("user_id", IDENTIFIER)), (("user", "user_id"),)),
    _cmd(32, "GET_USERS", EMPTY),
    _cmd(33, "CREATE_USER", _by(L0_L1_Z1_Z2_C=Struct(_f("username", NAME8), _f("password", STR8),
                                                   _f("status", USER_STATUS_T), _f("permissions", PERMISSIONS)),
                                V=Struct(_f("username", NAME8), _f("password", STR8), _f("status", USER_STATUS_T),
                                         _f("permissions", PERMISSIONS), _f("options", OPTIONS, optional=True))),
         (("user", "username"),)),
    _cmd(34, "DELETE_USER", Struct(_f("user_id", IDENTIFIER)), (("user", "user_id"),)),
    _cmd(35, "UPDATE_USER", _by(L0_L1_Z1_Z2_C=Struct(_f("user_id", IDENTIFIER), _f("username", Maybe(NAME8)),
                                                   _f("status", Maybe(USER_STATUS_T))),
                                V=Struct(_f("user_id", IDENTIFIER), _f("username", Maybe(NAME8)),
                                         _f("status", Maybe(USER_STATUS_T)), _f("options", OPTIONS, optional=True))),
         (("user", "user_id"),)),
    _cmd(36, "UPDATE_PERMISSIONS", Struct(_f("user_id", IDENTIFIER), _f("permissions", PERMISSIONS)),
         (("user", "user_id"),)),
    _cmd(37, "CHANGE_PASSWORD", Struct(_f("user_id", IDENTIFIER), _f("current_password", STR8),
                                       _f("new_password", STR8)), (("user", "user_id"),)),
    # The version and context fields came with server-0.3.0, inside L1: optional there.
    _cmd(38, "LOGIN_USER", _by(L0=Struct(_f("username", NAME8), _f("password", STR8)),
                               L1=Struct(_f("username", NAME8), _f("password", STR8),
                                         _f("version", STR32, optional=True), _f("context", STR32, optional=True)),
                               Z1_Z2_C_V=Struct(_f("username", NAME8), _f("password", STR8), _f("version", STR32),
                                                _f("context", STR32))),
         (("user", "username"),), auth=False),
    _cmd(39, "LOGOUT_USER", EMPTY),
    _cmd(40, "LOGIN_REGISTER", _only(("V",), Struct(
        _f("client_version", Struct(_f("protocol_version", PROTOCOL_VERSION), _f("sdk_name", NAME8),
                                    _f("sdk_version", NAME8), doc="ClientVersionInfo")),
        _f("username", NAME8), _f("password", STR8), _f("context", STR32))),
         (("user", "username"),), auth=False, since="V"),
    _cmd(41, "GET_PERSONAL_ACCESS_TOKENS", _only(L1_ON, EMPTY), since="0.0.40"),
    # L1 spans the expiry change of server-0.3.0 (u32 seconds -> u64 µs).
    _cmd(42, "CREATE_PERSONAL_ACCESS_TOKEN", (*_only(L1_ON, Struct(_f("name", NAME8), _f("expiry", EXPIRY))),
                                              (("L1",), Struct(_f("name", NAME8), _f("expiry", EXPIRY_SECS),
                                                               doc="before server-0.3.0"))),
         (("name", "name"),), since="0.0.40"),
    _cmd(43, "DELETE_PERSONAL_ACCESS_TOKEN", _only(L1_ON, Struct(_f("name", NAME8))), (("name", "name"),),
         since="0.0.40"),
    _cmd(44, "LOGIN_WITH_PERSONAL_ACCESS_TOKEN", _only(L1_ON, Struct(_f("token", NAME8))), auth=False,
         since="0.0.40"),
    _cmd(45, "LOGIN_REGISTER_WITH_PAT", _only(("V",), Struct(_f("body", BODY, optional=True))), auth=False,
         since="V"),
    _cmd(100, "POLL_MESSAGES", _by(
        L0=Struct(_f("consumer", CONSUMER_L0), *ST, _f("partition_id", PARTITION_U32), _f("strategy", POLLING_STRATEGY),
                  _f("count", U32), _f("auto_commit", BOOL)),
        L1_Z1=Struct(_f("consumer", CONSUMER), *ST, _f("partition_id", PARTITION_U32),
                     _f("strategy", POLLING_STRATEGY), _f("count", U32), _f("auto_commit", BOOL)),
        Z2_C_V=Struct(_f("consumer", CONSUMER), *ST, _f("partition_id", PARTITION_FLAGGED),
                      _f("strategy", POLLING_STRATEGY), _f("count", U32), _f("auto_commit", BOOL))),
         (*S_T, ("partition", "partition_id"), ("strategy", "strategy"), ("count", "count"))),
    _cmd(101, "SEND_MESSAGES", SEND_PAYLOAD, S_T),
    _cmd(102, "FLUSH_UNSAVED_BUFFER", _only(L1_ON, Struct(*ST, _f("partition_id", U32), _f("fsync", BOOL))),
         (*S_T, ("partition", "partition_id")), since="server-0.4.22"),
    _cmd(120, "GET_CONSUMER_OFFSET", _offsets(), CONSUMER_INFO),
    # V adds an ack byte (position after the offset: inferred).
    _cmd(121, "STORE_CONSUMER_OFFSET", _offsets((_f("offset", U64),), (_f("ack", U8, optional=True),)),
         (*CONSUMER_INFO, ("offset", "offset"))),
    _cmd(122, "DELETE_CONSUMER_OFFSET", tuple((ds, lay) for ds, lay in _offsets() if ds != ("L0",)), CONSUMER_INFO,
         since="server-0.4.110"),
    _cmd(200, "GET_STREAM", Struct(STREAM), (("stream", "stream_id"),)),
    _cmd(201, "GET_STREAMS", EMPTY),
    _cmd(202, "CREATE_STREAM", _by(L0_L1_Z1=Struct(_f("stream_id", U32), _f("name", NAME8)),
                                   Z2_C=Struct(_f("name", NAME8)),
                                   V=Struct(_f("name", NAME8), _f("options", OPTIONS, optional=True))),
         (("name", "name"),)),
    _cmd(203, "DELETE_STREAM", Struct(STREAM), (("stream", "stream_id"),)),
    _cmd(204, "UPDATE_STREAM", Struct(STREAM, _f("name", NAME8)), (("stream", "stream_id"), ("name", "name"))),
    _cmd(205, "PURGE_STREAM", _only(L1_ON, Struct(STREAM)), (("stream", "stream_id"),), since="server-0.1.7"),
    _cmd(300, "GET_TOPIC", Struct(*ST), S_T),
    _cmd(301, "GET_TOPICS", Struct(STREAM), (("stream", "stream_id"),)),
    # L0 is the layout up to server-0.1.8; L1 spans every change after it (section 4.5): its own
    # layout is the last (0.3.0-0.4.300), the older ones follow.
    _cmd(302, "CREATE_TOPIC", (*_by(
        L0=Struct(STREAM, _f("topic_id", U32), _f("partitions_count", U32), _f("message_expiry", EXPIRY_SECS),
                  _f("name", NAME8)),
        L1_Z1=Struct(STREAM, _f("topic_id", U32), _f("partitions_count", U32), *TOPIC_TAIL),
        Z2_C=Struct(STREAM, _f("partitions_count", U32), *TOPIC_TAIL),
        # V, as apache-iggy 0.9.0 sends it: compression, expiry and size limits travel as options.
        V=Struct(STREAM, _f("partitions_count", U32), _f("name", NAME8), _f("options", OPTIONS, optional=True))),
        *_older_l1(STREAM, _f("topic_id", U32), _f("partitions_count", U32))),
         (("stream", "stream_id"), ("name", "name"), ("partitions", "partitions_count"))),
    _cmd(303, "DELETE_TOPIC", Struct(*ST), S_T),
    _cmd(304, "UPDATE_TOPIC", (*_by(L0=Struct(*ST, _f("message_expiry", EXPIRY_SECS), _f("name", NAME8)),
                                    L1_Z1_Z2_C_V=Struct(*ST, *TOPIC_TAIL)), *_older_l1(*ST)), (*S_T, ("name", "name"))),
    _cmd(305, "PURGE_TOPIC", _only(L1_ON, Struct(*ST)), S_T, since="server-0.1.7"),
    _cmd(402, "CREATE_PARTITIONS", Struct(*ST, _f("partitions_count", U32)), (*S_T, ("count", "partitions_count"))),
    _cmd(403, "DELETE_PARTITIONS", Struct(*ST, _f("partitions_count", U32)), (*S_T, ("count", "partitions_count"))),
    _cmd(503, "DELETE_SEGMENTS", _only(L1_ON, Struct(*ST, _f("partition_id", U32), _f("segments_count", U32))),
         (*S_T, ("partition", "partition_id"), ("count", "segments_count")), since="server-0.4.300"),
    _cmd(600, "GET_CONSUMER_GROUP", _group(), GROUP_INFO),
    _cmd(601, "GET_CONSUMER_GROUPS", Struct(*ST), S_T),
    _cmd(602, "CREATE_CONSUMER_GROUP", _by(L0=Struct(*ST, _f("group_id", U32)),
                                           L1_Z1=Struct(*ST, _f("group_id", U32), _f("name", NAME8)),
                                           Z2_C_V=Struct(*ST, _f("name", NAME8))), (*S_T, ("name", "name"))),
    _cmd(603, "DELETE_CONSUMER_GROUP", _group(), GROUP_INFO),
    _cmd(604, "JOIN_CONSUMER_GROUP", _group(), GROUP_INFO),
    _cmd(605, "LEAVE_CONSUMER_GROUP", _group(), GROUP_INFO),
    # Not in the spec's tables: stream, topic and group, as apache-iggy 0.9.0 sends it.
    _cmd(606, "SYNC_CONSUMER_GROUP", _only(("V",), Struct(*ST, _f("group_id", IDENTIFIER))), GROUP_INFO, since="V"),
]

#: code -> Command.
COMMANDS: dict[int, Command] = {c.code: c for c in _LIST}
BY_NAME: dict[str, Command] = {c.name: c for c in _LIST}
#: Commands that log in (their OK response authenticates the connection).
LOGINS = frozenset({38, 40, 44, 45})
LOGOUT = 39

# ------------------------------------------------------------------------------ V (section 9)

#: Consensus header command values (9.1).
V_COMMANDS = {0: "Reserved", 1: "Ping", 2: "Pong", 3: "PingClient", 4: "PongClient", 5: "Request", 6: "Prepare",
              7: "PrepareOk", 8: "Reply", 9: "Commit", 10: "StartViewChange", 11: "DoViewChange", 12: "StartView",
              13: "Eviction", **{v: "Replica" for v in range(14, 30)}}
V_REQUEST, V_REPLY, V_EVICTION = 5, 8, 13
NON_REPLICATED = 2
REGISTER = 1
#: Request operations (9.2) -> the classic command code they carry (NonReplicated: the code at 196).
OPERATIONS: dict[int, tuple[str, int | None]] = {
    1: ("Register", 40), 2: ("NonReplicated", None), 3: ("Logout", 39),
    128: ("CreateStream", 202), 129: ("UpdateStream", 204), 130: ("DeleteStream", 203), 131: ("PurgeStream", 205),
    132: ("CreateTopic", 302), 133: ("UpdateTopic", 304), 134: ("DeleteTopic", 303), 135: ("PurgeTopic", 305),
    136: ("CreatePartitions", 402), 137: ("DeletePartitions", 403), 138: ("DeleteSegments", 503),
    139: ("CreateConsumerGroup", 602), 140: ("DeleteConsumerGroup", 603), 141: ("CreateUser", 33),
    142: ("UpdateUser", 35), 143: ("DeleteUser", 34), 144: ("ChangePassword", 37), 145: ("UpdatePermissions", 36),
    146: ("CreatePersonalAccessToken", 42), 147: ("DeletePersonalAccessToken", 43),
    148: ("JoinConsumerGroup", 604), 149: ("LeaveConsumerGroup", 605), 160: ("SendMessages", 101),
    161: ("StoreConsumerOffset", 121), 162: ("DeleteConsumerOffset", 122),
    **{op: ("ServerInternal", None) for op in range(64, 69)},
}
#: Replies of these operations start with the result section (count u32, count x {index, result}):
#: the metadata operations, Register and the consumer offsets. SendMessages answers with its own
#: SendMessagesResponse instead (as apache-iggy 0.9.0 reads it).
REPLICATED = frozenset(op for op in OPERATIONS if 128 <= op < 160) | {REGISTER, 161, 162}
EVICTION_REASONS = {0: "RESERVED", 1: "NO_SESSION", 2: "CLIENT_RELEASE_TOO_LOW", 3: "CLIENT_RELEASE_TOO_HIGH",
                    4: "INVALID_REQUEST_OPERATION", 5: "INVALID_REQUEST_BODY", 6: "INVALID_REQUEST_BODY_SIZE",
                    7: "SESSION_TOO_LOW", 8: "SESSION_RELEASE_MISMATCH", 9: "INVALID_CREDENTIALS",
                    10: "INVALID_TOKEN", 11: "USER_INACTIVE", 12: "SESSION_ERROR", 13: "STALE_CLIENT",
                    14: "INCOMPATIBLE_PROTOCOL", 15: "MALFORMED_LOGIN"}
#: Eviction reasons that mean the server cannot accept the client's protocol version.
VERSION_EVICTIONS = frozenset({2, 3, 14})

#: The register reply body after its result section (9.5).
REGISTER_REPLY = Struct(_f("user_id", U32), _f("session", U64), _f("server_protocol_version", PROTOCOL_VERSION),
                        _f("server_version", NAME8))
RESULT_ENTRY = Struct(_f("index", U32), _f("result", U32))
RESULTS = Array("<I", RESULT_ENTRY)
