"""In-memory Iggy state and command handlers for the capture responder (dialects L1, Z1, Z2, C, V).

A handler takes the session, the request payload and returns (status, response payload); it may add
facts (messages sent or polled, the login's version string) to ``session.note`` for the run log.
Layouts follow /work/shared/specs/iggy.md: requests §4, responses §5, status codes §6, login §7.2.
The transport lives in responder.py (classic framing, §1) and vsr.py (the consensus header, §9).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import messages
from wire import (
    CONSUMER_GROUP_ID_NOT_FOUND,
    CONSUMER_GROUP_MEMBER_NOT_FOUND,
    CONSUMER_GROUP_NAME_ALREADY_EXISTS,
    CONSUMER_GROUP_NAME_NOT_FOUND,
    FEATURE_UNAVAILABLE,
    INVALID_COMMAND,
    INVALID_CREDENTIALS,
    INVALID_MESSAGES_COUNT,
    OK,
    PARTITION_NOT_FOUND,
    STREAM_ID_ALREADY_EXISTS,
    STREAM_ID_NOT_FOUND,
    STREAM_NAME_ALREADY_EXISTS,
    STREAM_NAME_NOT_FOUND,
    TOPIC_ID_ALREADY_EXISTS,
    TOPIC_ID_NOT_FOUND,
    TOPIC_NAME_ALREADY_EXISTS,
    TOPIC_NAME_NOT_FOUND,
    UNAUTHENTICATED,
    Dialect,
    Malformed,
    Reader,
    name8,
    parse_user_headers,
    str32,
    u8,
    u16,
    u32,
    u64,
)

USERNAME, PASSWORD = "iggy", "iggy"  # the default root credentials (§7.2)
BIG_PAYLOAD = 256  # payloads longer than this are logged as sha256 + length, not hex
SERVER_PROTOCOL = 11 << 10  # V: binary protocol 0.11.0 packed as major<<20 | minor<<10 | patch (§9.5)
SERVER_VERSION = "0.9.0-edge.2"  # what the V Register reply announces


def now_us() -> int:
    return time.time_ns() // 1000


class Failure(Exception):
    """A request the server refuses with an error status (answered as an 8-byte error frame)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class Partition:
    id: int
    created_at: int
    messages: list[messages.Stored] = field(default_factory=list)
    offsets: dict[tuple[int, int | str], int] = field(default_factory=dict)

    def current_offset(self) -> int:
        return len(self.messages) - 1 if self.messages else 0

    def size(self) -> int:
        return sum(m.size() for m in self.messages)


@dataclass
class Group:
    id: int
    name: str
    members: dict[int, list[int]] = field(default_factory=dict)  # client id -> partition ids
    turn: int = 0  # which assigned partition the next member poll reads (round robin)
    generation: int = 0  # V: bumped on every rebalance, reported by SYNC_CONSUMER_GROUP


@dataclass
class Topic:
    id: int
    name: str
    created_at: int
    compression: int
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    options: bytes = b""  # V: the options block given at create, echoed in topic headers
    partitions: dict[int, Partition] = field(default_factory=dict)
    groups: dict[int, Group] = field(default_factory=dict)
    balanced_turn: int = 0


@dataclass
class Stream:
    id: int
    name: str
    created_at: int
    topics: dict[int, Topic] = field(default_factory=dict)


@dataclass
class Session:
    """One client connection."""

    client_id: int
    address: str
    user_id: int | None = None
    session: int = 0  # V: the session number the Register reply hands out
    note: dict = field(default_factory=dict)


def _next_id(existing, base: int) -> int:
    return max(existing, default=base - 1) + 1


class Broker:
    def __init__(self, dialect: Dialect, port: int = 8090) -> None:
        self.d = dialect
        self.port = port  # announced in V's cluster metadata
        self.base = 0 if dialect.zero_based else 1
        self.streams: dict[int, Stream] = {}
        self.sessions: dict[int, Session] = {}
        self.handlers: dict[int, Callable[[Session, Reader], bytes]] = {
            1: self.ping, 12: self.cluster_metadata, 20: self.get_me, 38: self.login, 39: self.logout,
            100: self.poll_messages, 101: self.send_messages, 102: self.flush,
            120: self.get_offset, 121: self.store_offset, 122: self.delete_offset,
            200: self.get_stream, 201: self.get_streams, 202: self.create_stream, 203: self.delete_stream,
            205: self.purge_stream,
            300: self.get_topic, 301: self.get_topics, 302: self.create_topic, 303: self.delete_topic,
            305: self.purge_topic,
            600: self.get_group, 601: self.get_groups, 602: self.create_group, 603: self.delete_group,
            604: self.join_group, 605: self.leave_group, 606: self.sync_group,
        }

    # ---- dispatch -------------------------------------------------------------------------------

    def handle(self, s: Session, code: int, payload: bytes) -> tuple[int, bytes]:
        s.note = {}
        handler = self.handlers.get(code)
        if handler is None:
            return INVALID_COMMAND, b""  # §3: an unknown (or, here, unimplemented) code
        if code not in (1, 38, 44) and s.user_id is None:
            return UNAUTHENTICATED, b""
        r = Reader(payload)
        try:
            body = handler(s, r)
        except Failure as f:
            return f.status, b""
        except (Malformed, UnicodeDecodeError, ValueError) as e:
            s.note["malformed"] = str(e)
            return INVALID_COMMAND, b""
        return OK, body

    # ---- lookups --------------------------------------------------------------------------------

    def stream(self, ident: int | str) -> Stream:
        if isinstance(ident, int):
            if ident in self.streams:
                return self.streams[ident]
            raise Failure(STREAM_ID_NOT_FOUND)
        for st in self.streams.values():
            if st.name == ident:
                return st
        raise Failure(STREAM_NAME_NOT_FOUND)

    def topic(self, st: Stream, ident: int | str) -> Topic:
        if isinstance(ident, int):
            if ident in st.topics:
                return st.topics[ident]
            raise Failure(TOPIC_ID_NOT_FOUND)
        for t in st.topics.values():
            if t.name == ident:
                return t
        raise Failure(TOPIC_NAME_NOT_FOUND)

    def group(self, t: Topic, ident: int | str) -> Group:
        if isinstance(ident, int):
            if ident in t.groups:
                return t.groups[ident]
            raise Failure(CONSUMER_GROUP_ID_NOT_FOUND)
        for g in t.groups.values():
            if g.name == ident:
                return g
        raise Failure(CONSUMER_GROUP_NAME_NOT_FOUND)

    def stream_topic(self, r: Reader) -> tuple[Stream, Topic]:
        st = self.stream(r.identifier())
        return st, self.topic(st, r.identifier())

    def maybe(self, lookup: Callable[[], object]) -> object | None:
        """§1.2: a GET of a missing entity is an empty OK (server ≥ 0.4.10), not an error."""
        try:
            return lookup()
        except Failure:
            return None

    # ---- encoders (§5) --------------------------------------------------------------------------

    def enc_stream_header(self, st: Stream) -> bytes:
        count = sum(len(p.messages) for t in st.topics.values() for p in t.partitions.values())
        size = sum(p.size() for t in st.topics.values() for p in t.partitions.values())
        out = u32(st.id) + u64(st.created_at) + u32(len(st.topics)) + u64(size) + u64(count) + name8(st.name)
        if self.d.vsr:
            out += u32(0)  # V: u32-prefixed options block (TLV, none set)
        return out

    def enc_stream_details(self, st: Stream) -> bytes:
        return self.enc_stream_header(st) + b"".join(self.enc_topic_header(t) for t in st.topics.values())

    def enc_topic_header(self, t: Topic) -> bytes:
        parts = t.partitions.values()
        sizes = u64(sum(p.size() for p in parts)) + u64(sum(len(p.messages) for p in parts))
        head = u32(t.id) + u64(t.created_at) + u32(len(t.partitions)) + u64(t.message_expiry) + u8(t.compression)
        if self.d.vsr:
            # V: no replication factor; two u32-prefixed option blocks (explicit, derived) after the name.
            return head + u64(t.max_topic_size) + sizes + name8(t.name) + u32(len(t.options)) + t.options + u32(0)
        return head + u64(t.max_topic_size) + u8(t.replication_factor) + sizes + name8(t.name)

    def enc_topic_details(self, t: Topic) -> bytes:
        out = [self.enc_topic_header(t)]
        for p in t.partitions.values():
            part = u32(p.id) + u64(p.created_at) + u32(1) + u64(p.current_offset()) + u64(p.size()) + u64(len(p.messages))
            if self.d.vsr:
                part += bytes(24)  # V: partition context (incarnation, owner generation, metadata op)
            out.append(part)
        return b"".join(out)

    def enc_group(self, t: Topic, g: Group, details: bool) -> bytes:
        out = [u32(g.id), u32(len(t.partitions)), u32(len(g.members)), name8(g.name)]
        if details:
            for member, parts in g.members.items():
                out.append(u32(member) + u32(len(parts)) + b"".join(u32(p) for p in parts))
        return b"".join(out)

    # ---- system and users -----------------------------------------------------------------------

    def ping(self, s: Session, r: Reader) -> bytes:
        return b""

    def cluster_metadata(self, s: Session, r: Reader) -> bytes:
        if not self.d.vsr:
            # §7.2: a non-clustered server answers status 5, which the SDK ignores.
            raise Failure(FEATURE_UNAVAILABLE)
        # V: apache-iggy 0.9.0 routes polls by the cluster metadata and gives up on status 5, so
        # describe one healthy leader node at our own address (§5.13 layout).
        node = (str32("iggy-node-0") + str32("127.0.0.1") + u16(self.port) + u16(8080) + u16(3000)
                + u16(8092) + u8(0) + u8(0))
        return str32("iggy-cluster") + u32(1) + node

    def login(self, s: Session, r: Reader) -> bytes:
        username = r.name8()
        password = r.take(r.u8()).decode("utf-8")
        if r.remaining():  # §4.8: version and context, from server-0.3.0
            s.note["client_version"] = r.take(r.u32()).decode("utf-8")
            s.note["context"] = r.take(r.u32()).decode("utf-8")
        s.note["username"] = username
        if (username, password) != (USERNAME, PASSWORD):
            raise Failure(INVALID_CREDENTIALS)
        s.user_id = self.base
        return u32(s.user_id)

    def login_register(self, s: Session, payload: bytes) -> tuple[int, bytes]:
        """§9.5 (dialect V): login and session registration in one request."""
        s.note = {}
        r = Reader(payload)
        try:
            version = r.u32()
            s.note["protocol_version"] = f"{version >> 20}.{(version >> 10) & 0x3FF}.{version & 0x3FF}"
            s.note["sdk_name"], s.note["client_version"] = r.name8(), r.name8()
            username = s.note["username"] = r.name8()
            password = r.take(r.u8()).decode("utf-8")
            s.note["context"] = r.take(r.u32()).decode("utf-8")
        except (Malformed, UnicodeDecodeError) as e:
            s.note["malformed"] = str(e)
            return INVALID_COMMAND, b""
        if r.remaining():
            s.note["trailing_hex"] = r.rest().hex()
        if (username, password) != (USERNAME, PASSWORD):
            return INVALID_CREDENTIALS, b""
        s.user_id = self.base
        s.session = s.client_id  # any non-zero number the client echoes in later requests
        return OK, (u32(s.user_id) + u64(s.session) + u32(SERVER_PROTOCOL) + name8(SERVER_VERSION))

    def logout(self, s: Session, r: Reader) -> bytes:
        s.user_id = None
        return b""

    def get_me(self, s: Session, r: Reader) -> bytes:
        memberships = []
        for st in self.streams.values():
            for t in st.topics.values():
                for g in t.groups.values():
                    if s.client_id in g.members:
                        memberships.append(u32(st.id) + u32(t.id) + u32(g.id))
        return (u32(s.client_id) + u32(s.user_id) + u8(1) + str32(s.address) + u32(len(memberships))
                + b"".join(memberships))

    # ---- streams --------------------------------------------------------------------------------

    def get_stream(self, s: Session, r: Reader) -> bytes:
        ident = r.identifier()
        st = self.maybe(lambda: self.stream(ident))
        return self.enc_stream_details(st) if st else b""

    def get_streams(self, s: Session, r: Reader) -> bytes:
        return b"".join(self.enc_stream_header(st) for st in self.streams.values())

    def create_stream(self, s: Session, r: Reader) -> bytes:
        wanted = r.u32() if self.d.create_ids else 0  # §4.4: 0 = auto
        name = r.name8()
        if self.d.vsr and r.remaining():
            parse_user_headers(self.d, r.rest())  # V: options TLV block to the end (not kept)
        if any(st.name == name for st in self.streams.values()):
            raise Failure(STREAM_NAME_ALREADY_EXISTS)
        if wanted and wanted in self.streams:
            raise Failure(STREAM_ID_ALREADY_EXISTS)
        sid = wanted or _next_id(self.streams, self.base)
        self.streams[sid] = st = Stream(sid, name, now_us())
        return self.enc_stream_details(st)

    def delete_stream(self, s: Session, r: Reader) -> bytes:
        del self.streams[self.stream(r.identifier()).id]
        return b""

    def purge_stream(self, s: Session, r: Reader) -> bytes:
        for t in self.stream(r.identifier()).topics.values():
            for p in t.partitions.values():
                p.messages.clear()
        return b""

    # ---- topics ---------------------------------------------------------------------------------

    def get_topic(self, s: Session, r: Reader) -> bytes:
        sident, tident = r.identifier(), r.identifier()
        t = self.maybe(lambda: self.topic(self.stream(sident), tident))
        return self.enc_topic_details(t) if t else b""

    def get_topics(self, s: Session, r: Reader) -> bytes:
        st = self.stream(r.identifier())
        return b"".join(self.enc_topic_header(t) for t in st.topics.values())

    def create_topic(self, s: Session, r: Reader) -> bytes:
        # §4.5: stream, [topic_id u32 in 0.3.0-0.5.x], partitions_count, compression, expiry u64,
        # max size u64, replication factor, name8.
        st = self.stream(r.identifier())
        wanted = r.u32() if self.d.create_ids else 0
        options = b""
        if self.d.vsr:
            # V (seen from apache-iggy 0.9.0, not in the spec's layout): partitions_count, name8, then
            # the options TLV block to the end; compression, expiry and size limits travel as options.
            count, compression, expiry, max_size, rf = r.u32(), 1, 0, 0, 1
            name = r.name8()
            options = r.rest()
            parse_user_headers(self.d, options)  # same TLV as typed user headers; raises if malformed
        else:
            count, compression, expiry, max_size, rf = r.u32(), r.u8(), r.u64(), r.u64(), r.u8()
            name = r.name8()
        if any(t.name == name for t in st.topics.values()):
            raise Failure(TOPIC_NAME_ALREADY_EXISTS)
        if wanted and wanted in st.topics:
            raise Failure(TOPIC_ID_ALREADY_EXISTS)
        tid = wanted or _next_id(st.topics, self.base)
        created = now_us()
        t = Topic(tid, name, created, compression, expiry, max_size, rf or 1, options)
        for i in range(count):
            t.partitions[self.base + i] = Partition(self.base + i, created)
        st.topics[tid] = t
        return self.enc_topic_details(t)

    def delete_topic(self, s: Session, r: Reader) -> bytes:
        st, t = self.stream_topic(r)
        del st.topics[t.id]
        return b""

    def purge_topic(self, s: Session, r: Reader) -> bytes:
        for p in self.stream_topic(r)[1].partitions.values():
            p.messages.clear()
        return b""

    # ---- consumer groups (§4.6, §5.8) -----------------------------------------------------------

    def get_group(self, s: Session, r: Reader) -> bytes:
        sident, tident, gident = r.identifier(), r.identifier(), r.identifier()
        t = self.maybe(lambda: self.topic(self.stream(sident), tident))
        g = t and self.maybe(lambda: self.group(t, gident))
        return self.enc_group(t, g, details=True) if g else b""

    def get_groups(self, s: Session, r: Reader) -> bytes:
        t = self.stream_topic(r)[1]
        return b"".join(self.enc_group(t, g, details=False) for g in t.groups.values())

    def create_group(self, s: Session, r: Reader) -> bytes:
        t = self.stream_topic(r)[1]
        wanted = r.u32() if self.d.create_ids else 0
        name = r.name8()
        if any(g.name == name for g in t.groups.values()):
            raise Failure(CONSUMER_GROUP_NAME_ALREADY_EXISTS)
        gid = wanted or _next_id(t.groups, self.base)
        t.groups[gid] = g = Group(gid, name)
        return self.enc_group(t, g, details=True)

    def delete_group(self, s: Session, r: Reader) -> bytes:
        t = self.stream_topic(r)[1]
        del t.groups[self.group(t, r.identifier()).id]
        return b""

    def join_group(self, s: Session, r: Reader) -> bytes:
        t = self.stream_topic(r)[1]
        g = self.group(t, r.identifier())
        g.members.setdefault(s.client_id, [])
        self.rebalance(t, g)
        return b""

    def leave_group(self, s: Session, r: Reader) -> bytes:
        t = self.stream_topic(r)[1]
        g = self.group(t, r.identifier())
        if g.members.pop(s.client_id, None) is None:
            raise Failure(CONSUMER_GROUP_MEMBER_NOT_FOUND)
        self.rebalance(t, g)
        return b""

    def sync_group(self, s: Session, r: Reader) -> bytes:
        """SYNC_CONSUMER_GROUP (606, V only; not in the spec's tables): the member's assignment as
        generation u64, partitions_count u32, partition ids; an empty reply means not a member."""
        t = self.stream_topic(r)[1]
        g = self.group(t, r.identifier())
        if s.client_id not in g.members:
            return b""
        parts = g.members[s.client_id]
        return u64(g.generation) + u32(len(parts)) + b"".join(u32(p) for p in parts)

    @staticmethod
    def rebalance(t: Topic, g: Group) -> None:
        """Deal the partitions out to the members in turn (the server's round-robin assignment)."""
        g.generation += 1
        members = sorted(g.members)
        for m in members:
            g.members[m] = []
        for i, pid in enumerate(sorted(t.partitions)):
            if members:
                g.members[members[i % len(members)]].append(pid)

    # ---- messages -------------------------------------------------------------------------------

    def pick_partition(self, t: Topic, kind: int, value: bytes) -> Partition:
        """§2.3: 1 balanced (round robin), 2 partition id, 3 messages key (hashed)."""
        ids = sorted(t.partitions)
        if not ids:
            raise Failure(PARTITION_NOT_FOUND)
        if kind == 2:
            pid = int.from_bytes(value, "little")
        elif kind == 3:
            pid = ids[int.from_bytes(hashlib.sha256(value).digest()[:4], "little") % len(ids)]
        else:
            pid = ids[t.balanced_turn % len(ids)]
            t.balanced_turn += 1
        if pid not in t.partitions:
            raise Failure(PARTITION_NOT_FOUND)
        return t.partitions[pid]

    def send_messages(self, s: Session, r: Reader) -> bytes:
        if not self.d.legacy_messages:
            r.u32()  # metadata_length (§4.1); the fields it covers follow
        st, t = self.stream_topic(r)
        p = self.pick_partition(t, *r.partitioning())
        if self.d.vsr:
            batch, s.note["batch"] = messages.parse_batch(r)
        else:
            batch = messages.parse_send(self.d, r)
        if not batch:
            raise Failure(INVALID_MESSAGES_COUNT)
        facts = []
        base, stamp = len(p.messages), now_us()
        for m in batch:
            m.offset = len(p.messages)
            m.timestamp = stamp  # one append time per batch (V's base_timestamp)
            m.batch_base = base
            wire_id = m.id
            if m.id == 0:
                m.id = self.new_id()
            p.messages.append(m)
            fact = self.fact(st, t, p, m)
            if wire_id == 0:  # the fact says what the client sent; the server's choice beside it
                fact["id"], fact["assigned_id"] = 0, m.id
            facts.append(fact)
        s.note["sent"] = facts
        if self.d.vsr:
            # V: SendMessagesResponse, count u32 + {stream_id, topic_id, partition_id u32, base_offset u64}
            return u32(1) + u32(st.id) + u32(t.id) + u32(p.id) + u64(base)
        return b""

    def new_id(self) -> int:
        """§4.1: the server assigns a UUID to id 0: v7 up to Z1, v4 from 0.6.0 (Z2)."""
        if self.d.zero_based:
            return uuid.uuid4().int
        ms = time.time_ns() // 1_000_000
        rand = uuid.uuid4().int
        return (ms << 80) | (0x7 << 76) | (rand & ((1 << 76) - 1) & ~(0xC << 60)) | (0x8 << 60)

    def consumer_partition(self, s: Session, t: Topic, kind: int, cident: int | str,
                           pid: int | None, advance: bool) -> tuple[Partition, tuple[int, int | str]]:
        """The partition a consumer reads and the key its offsets are stored under."""
        if kind == 2:
            g = self.group(t, cident)
            key = (2, g.id)
            if pid is None:
                assigned = g.members.get(s.client_id)
                if not assigned:
                    raise Failure(CONSUMER_GROUP_MEMBER_NOT_FOUND)
                pid = assigned[g.turn % len(assigned)]
                if advance:
                    g.turn += 1
        else:
            key = (1, cident)
            if pid is None:
                pid = min(t.partitions, default=self.base)
        if pid not in t.partitions:
            raise Failure(PARTITION_NOT_FOUND)
        return t.partitions[pid], key

    def poll_messages(self, s: Session, r: Reader) -> bytes:
        kind, cident = r.consumer()
        st, t = self.stream_topic(r)
        pid = r.optional_partition(self.d)
        strategy, value, count, auto_commit = r.u8(), r.u64(), r.u32(), r.u8()
        p, key = self.consumer_partition(s, t, kind, cident, pid, advance=True)
        if strategy == 1:  # offset
            start = value
        elif strategy == 2:  # timestamp
            start = next((m.offset for m in p.messages if m.timestamp >= value), len(p.messages))
        elif strategy == 4:  # last
            start = max(0, len(p.messages) - count)
        elif strategy == 5:  # next: after the stored offset
            start = p.offsets[key] + 1 if key in p.offsets else 0
        else:  # first
            start = 0
        batch = p.messages[start:start + count]
        if auto_commit and batch:
            p.offsets[key] = batch[-1].offset
        s.note["poll"] = {"consumer_kind": kind, "consumer": cident, "partition_field": pid, "partition": p.id,
                          "strategy": strategy, "value": value, "count": count, "auto_commit": auto_commit,
                          "returned": len(batch)}
        s.note["polled"] = [dict(self.fact(st, t, p, m), checksum=messages.polled_checksum(self.d, m))
                            for m in batch]
        return messages.encode_polled(self.d, p.id, p.current_offset(), batch)

    def flush(self, s: Session, r: Reader) -> bytes:
        self.stream_topic(r)
        return b""

    # ---- consumer offsets (§4.3, §5.7) ----------------------------------------------------------

    def _offset_target(self, s: Session, r: Reader) -> tuple[Partition, tuple[int, int | str]]:
        kind, cident = r.consumer()
        t = self.stream_topic(r)[1]
        pid = r.optional_partition(self.d)
        return self.consumer_partition(s, t, kind, cident, pid, advance=False)

    def get_offset(self, s: Session, r: Reader) -> bytes:
        try:
            p, key = self._offset_target(s, r)
        except Failure:
            return b""  # §1.2: not found is an empty OK
        if key not in p.offsets:
            return b""
        return u32(p.id) + u64(p.current_offset()) + u64(p.offsets[key])

    def store_offset(self, s: Session, r: Reader) -> bytes:
        p, key = self._offset_target(s, r)
        p.offsets[key] = r.u64()
        s.note["stored_offset"] = p.offsets[key]
        if self.d.vsr and r.remaining():
            s.note["ack"] = r.u8()  # V: StoreConsumerOffset gains an ack level byte (§9 end)
        return b""

    def delete_offset(self, s: Session, r: Reader) -> bytes:
        p, key = self._offset_target(s, r)
        p.offsets.pop(key, None)
        return b""

    # ---- run-log facts --------------------------------------------------------------------------

    def fact(self, st: Stream, t: Topic, p: Partition, m: messages.Stored) -> dict:
        out = {"stream": st.id, "topic": t.id, "partition": p.id, "offset": m.offset, "id": m.id}
        if len(m.payload) > BIG_PAYLOAD:
            out["payload_sha256"] = hashlib.sha256(m.payload).hexdigest()
            out["len"] = len(m.payload)
        else:
            out["payload_hex"] = m.payload.hex()
        headers = parse_user_headers(self.d, m.headers)
        if headers:
            out["headers_hex"] = m.headers.hex()  # the user-header map exactly as on the wire
            out["headers"] = {_header_key(h): {"kind": h["kind"], "value_hex": h["value_hex"]} for h in headers}
        return out


def _header_key(h: dict) -> str:
    raw = bytes.fromhex(h["key_hex"])
    if h["key_kind"] == "string":
        return raw.decode("utf-8", "replace")
    return f"{h['key_kind']}:{h['key_hex']}"
