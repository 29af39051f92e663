"""Conversation bookkeeping: the summary of a TCP conversation that outlives it (:class:`FlowInfo`),
and the state of an open one (:class:`Conversation`, one :class:`Side` per direction).

Compiled where it can be (analyzer/native.py), with the reassembly its sides are made of and the
engine's per-packet path that reads them (analyzer/segment_feed.py): code compiled together reads
the attributes of these classes directly, where Python reads them through descriptors."""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import Any, ClassVar

from analyzer.api import Connection, Direction, Dissector, Severity
from analyzer.community_id import community_id
from analyzer.packets import flow_key
from analyzer.reassembly import Data, Gap, StreamReassembler, b64, unb64
from analyzer.segments import Older, consumed

_C2S, _S2C = Direction.C2S, Direction.S2C


class FlowInfo:
    """One TCP conversation, as `streamproto flows` shows it: the summary that stays after the
    conversation is finished, so kept small (slots, counters as plain attributes, the endpoints as
    four plain fields: two (address, port) tuples cost about 100 bytes more per conversation)."""

    __slots__ = ("id", "client_ip", "client_port", "server_ip", "server_port", "protocol", "dialect", "packets",
                 "frames", "bytes_c2s", "bytes_s2c", "errors", "warnings", "notes", "first_ts", "last_ts", "complete",
                 "_cid")
    #: The fields of :meth:`to_plain`, in the checkpoint's order (endpoints as [address, port]).
    PLAIN: ClassVar[tuple[str, ...]] = (
        "id", "client", "server", "protocol", "dialect", "packets", "frames", "bytes_c2s", "bytes_s2c", "errors",
        "warnings", "notes", "first_ts", "last_ts", "complete", "community_id")

    def __init__(self, id: int, client: tuple[str, int], server: tuple[str, int], first_ts: float = 0.0,
                 last_ts: float = 0.0) -> None:
        self.id = id
        self.client_ip, self.client_port = client
        self.server_ip, port = server
        # The conversations of one server share its port number (an int above 256 is an object of
        # 28 bytes); bounded like the endpoint texts.
        shared = _PORTS.get(port)
        if shared is None:
            if len(_PORTS) >= _ENDPOINTS_MAX:
                _PORTS.clear()
            shared = _PORTS[port] = port
        self.server_port = shared
        self.protocol: str | None = None
        self.dialect: str | None = None
        self.packets = 0
        self.frames = 0
        self.bytes_c2s = 0
        self.bytes_s2c = 0
        self.errors = 0
        self.warnings = 0
        self.notes = 0
        self.first_ts = first_ts
        self.last_ts = last_ts
        self.complete = False  # both SYN and FIN/RST seen
        self._cid: str | None = None  # see community_id

    @property
    def community_id(self) -> str:
        """Its Community ID, made when first asked for: a findings-only run never needs it for a
        conversation it shows nothing of, and a SHA-1 per conversation counts on captures of many
        short ones. Symmetric in the endpoints, so the same after they trade places."""
        cid = self._cid
        if cid is None:
            cid = self._cid = community_id((self.client_ip, self.client_port), (self.server_ip, self.server_port))
        return cid

    @community_id.setter
    def community_id(self, value: str) -> None:
        self._cid = value

    @property
    def client(self) -> tuple[str, int]:
        return self.client_ip, self.client_port

    @client.setter
    def client(self, ep: tuple[str, int]) -> None:
        self.client_ip, self.client_port = ep

    @property
    def server(self) -> tuple[str, int]:
        return self.server_ip, self.server_port

    @server.setter
    def server(self, ep: tuple[str, int]) -> None:
        self.server_ip, self.server_port = ep

    @property
    def name(self) -> str:
        return f"{fmt_endpoint(self.client)} <-> {fmt_endpoint(self.server)}"

    @property
    def bytes(self) -> dict[str, int]:
        return {"c2s": self.bytes_c2s, "s2c": self.bytes_s2c}

    @property
    def findings(self) -> dict[str, int]:
        return {"error": self.errors, "warning": self.warnings, "note": self.notes}

    def count(self, severity: Severity) -> None:
        if severity is Severity.ERROR:
            self.errors += 1
        elif severity is Severity.WARNING:
            self.warnings += 1
        else:
            self.notes += 1

    def to_plain(self) -> list[Any]:
        """The fields of ``PLAIN`` in order, as JSON types (endpoints as lists)."""
        return [list(v) if type(v) is tuple else v for v in (getattr(self, k) for k in self.PLAIN)]

    @classmethod
    def from_plain(cls, values: list[Any]) -> FlowInfo:
        info = FlowInfo(0, ("", 0), ("", 0))  # (a compiled class has no __new__ to call)
        for k, v in zip(cls.PLAIN, values, strict=True):
            setattr(info, k, tuple(v) if k in ("client", "server") else v)
        return info


def fmt_endpoint(ep: tuple[str, int]) -> str:
    ip, port = ep
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


#: Endpoint texts made recently, so that the conversations of one server share its text (about
#: 65 bytes each) instead of each holding its own copy. Bounded: emptied when full.
_ENDPOINTS: dict[tuple[str, int], str] = {}
_ENDPOINTS_MAX = 4096
#: Server port numbers seen recently (see :class:`FlowInfo`), emptied when full.
_PORTS: dict[int, int] = {}


def endpoint_text(ip: str, port: int) -> str:
    """:func:`fmt_endpoint`, the same string object for the same endpoint while it is remembered."""
    key = (ip, port)
    text = _ENDPOINTS.get(key)
    if text is None:
        if len(_ENDPOINTS) >= _ENDPOINTS_MAX:
            _ENDPOINTS.clear()
        text = _ENDPOINTS[key] = fmt_endpoint(key)
    return text


class Side(StreamReassembler):
    """One direction: its reassembly (this object is its :class:`StreamReassembler`), the map from
    stream offsets back to packets, and what the packet loop's fast path needs (it is the value of
    the analyzer's flow-key map: ``conv`` and ``direction``).

    Kept small, as 100,000 open conversations hold 200,000 of these: one object per direction
    rather than a side, a reassembler and a tuple for the fast path; the newest delivered segment
    inline (``seg_*``) and a list (``older``) only while earlier segments still hold bytes of a
    frame not yet made (a list and a tuple per direction cost about 150 bytes); ``sniff_buf``
    exists only while the protocol is undecided, in the reassembler's :class:`Rare` (None in the
    common case, as are the out-of-order fields kept there). The endpoints' texts are not kept:
    they are made from :class:`FlowInfo` when frames are stamped."""

    __slots__ = ("conv", "seg_end", "seg_packet", "seg_ts", "older", "last_ack")

    def __init__(self, max_buffer: int, conv: Conversation | None = None) -> None:
        super().__init__(max_buffer)
        self.conv = conv
        # The newest delivered data: its end offset, packet number and time (end -1: none yet).
        self.seg_end = -1
        self.seg_packet = 0
        self.seg_ts = 0.0
        # (end offset, packet number, ts) of the data delivered before it and not yet consumed,
        # oldest first from its ``head`` (the entries before it are dropped in batches, see
        # :func:`analyzer.segments.consumed`); None when there are none, the usual case.
        self.older: Older | None = None
        self.last_ack: int | None = None  # the last acknowledgement number this side sent

    @property
    def sniff_buf(self) -> bytearray | None:
        """The first bytes for the heuristics, while the protocol is undecided (else None)."""
        rare = self.rare
        return None if rare is None else rare.sniff_buf

    @sniff_buf.setter
    def sniff_buf(self, buf: bytearray | None) -> None:
        rare = self.rare
        if buf is not None:
            self._rare().sniff_buf = buf
        elif rare is not None:
            rare.sniff_buf = None
            if rare.empty():
                self.rare = None

    @property
    def direction(self) -> Direction:
        """Which direction this is: the conversation's ``c2s`` or ``s2c`` (C2S without one)."""
        conv = self.conv
        return _S2C if conv is not None and conv.s2c is self else _C2S

    @property
    def fin(self) -> bool:
        """This direction sent a FIN."""
        rare = self.rare
        return rare is not None and rare.fin

    @fin.setter
    def fin(self, fin: bool) -> None:
        rare = self.rare
        if fin:
            self._rare().fin = True
        elif rare is not None:
            rare.fin = False
            if rare.empty():
                self.rare = None

    @property
    def head(self) -> int:
        """How many entries at the front of ``older`` are consumed (0 without ``older``)."""
        older = self.older
        return 0 if older is None else older.head

    @property
    def segments(self) -> list[tuple[int, int, float]]:
        """The unconsumed delivered segments, oldest first (a copy: for checkpoints and tests)."""
        older = self.older[self.older.head:] if self.older is not None else []
        return older + [(self.seg_end, self.seg_packet, self.seg_ts)] if self.seg_end >= 0 else older

    def add(self, end: int, packet: int, ts: float) -> None:
        """Data ending at stream offset ``end`` was delivered from ``packet`` at ``ts``."""
        if self.seg_end >= 0:
            entry = (self.seg_end, self.seg_packet, self.seg_ts)
            older = self.older
            if older is None:
                self.older = Older((entry,))
            else:
                older.append(entry)
                if len(older) - older.head >= 100_000:  # a dissector that never makes a frame
                    older.head += 1
                    consumed(older)
        self.seg_end, self.seg_packet, self.seg_ts = end, packet, ts

    def only_newest(self) -> None:
        """Every segment but the newest is done with."""
        self.older = None

    def packets_for(self, start: int, end: int) -> tuple[int, int, float]:
        """Packet numbers holding stream bytes [start, end) and the time of the last one; the
        segments ending at or before ``start`` are consumed (the newest always stays)."""
        if self.seg_end < 0:
            return 0, 0, 0.0
        older = self.older
        if older is not None:
            h = older.head
            n = len(older)
            while h < n and older[h][0] <= start:
                h += 1
            if h == n:  # all consumed: the newest alone is left
                self.older = None
            else:
                older.head = h
                consumed(older)
                h = older.head
                n = len(older)
                first = older[h][1]
                for i in range(h, n):
                    seg_end, last, ts = older[i]
                    if seg_end >= end:
                        return first, last, ts
                return first, self.seg_packet, self.seg_ts
        return self.seg_packet, self.seg_packet, self.seg_ts

    def to_plain(self) -> dict[str, Any]:
        return {"reasm": super().to_plain(), "segments": [list(s) for s in self.segments],
                "sniff": b64(self.sniff_buf or b""), "fin": self.fin, "last_ack": self.last_ack}

    def load(self, d: dict[str, Any]) -> None:
        self.load_plain(d["reasm"])
        segs = [tuple(s) for s in d["segments"]]
        if segs:
            self.seg_end, self.seg_packet, self.seg_ts = segs.pop()
        self.older = Older(segs) if segs else None
        self.sniff_buf = bytearray(unb64(d["sniff"])) if d["sniff"] else None
        self.fin, self.last_ack = d["fin"], d["last_ack"]


#: What a finished conversation's directions point to (see :meth:`Conversation.release`).
_RELEASED = Side(0)


#: Past this many requests with findings awaiting their response in one conversation, a
#: findings-only run gives back every response again (memory stays bounded; see shown_requests).
SHOWN_REQUESTS_MAX = 4096
#: Conversation.shown_requests once past the limit: every response is given back.
SHOWN_ALL: set[int] = set()


class Conversation:
    """An open conversation: both directions, its dissector once chosen, and its wake-up entry."""

    __slots__ = ("info", "key", "c2s", "s2c", "dissector", "conn", "pending", "undecided", "midstream", "closed",
                 "isn_client", "timed", "deadline", "wake", "foreign", "leaves_out", "shown_requests")

    def __init__(self, info: FlowInfo, max_buffer: int, midstream: bool) -> None:
        self.info = info
        self.key = flow_key(info.client, info.server)  # the client-to-server direction's
        # One slot per direction rather than a dict keyed by Direction (about 200 bytes more).
        self.c2s = Side(max_buffer, self)
        self.s2c = Side(max_buffer, self)
        self.dissector: Dissector | None = None
        self.conn: Connection | None = None
        # Stream events held back while the protocol is not yet known (None: none, the usual case).
        self.pending: list[tuple[Direction, Data | Gap]] | None = None
        self.undecided = True
        self.midstream = midstream
        self.closed = False
        self.isn_client: int | None = None
        self.timed = False  # the dissector's connection has deadlines (overrides Connection.deadline)
        self.deadline: float | None = None  # its last answer
        # This conversation's valid wake-up heap entry, (time, id, sequence number, self): any
        # other entry for it is stale. None while it has none.
        self.wake: tuple[float, int, int, Conversation] | None = None
        #: Another analyzer decodes this conversation (one shard of ``--jobs``): this one only
        #: follows it far enough to number conversations as that one does.
        self.foreign = False
        #: Its connection leaves out plain frames (a findings-only run): their count is collected.
        self.leaves_out = False
        #: A findings-only run: the anchors (by identity) of the requests given back with findings
        #: whose response has not come (the linker holds each for its response, which is given back
        #: then even without findings); None: none. SHOWN_ALL past SHOWN_REQUESTS_MAX of them.
        self.shown_requests: set[int] | None = None

    def reopened_by(self, isn: int) -> bool:
        """Whether a client SYN with sequence number ``isn`` starts a new conversation on this
        4-tuple (port reuse) instead of retrying this one. Only a conversation that carried bytes
        is replaced: a SYN flood on one 4-tuple (a new ISN in every SYN, no data) stays one
        conversation and one row in `flows`, not 200,000 of them."""
        info = self.info
        return self.isn_client is not None and self.isn_client != isn and bool(info.bytes_c2s or info.bytes_s2c)

    @property
    def wake_at(self) -> float | None:
        """The time of the valid wake-up entry (None: none)."""
        wake = self.wake
        return None if wake is None else wake[0]

    @property
    def wake_seq(self) -> int:
        """The sequence number of the valid wake-up entry (0: none)."""
        wake = self.wake
        return 0 if wake is None else wake[2]

    def side(self, direction: Direction) -> Side:
        return self.c2s if direction is _C2S else self.s2c

    @property
    def sides(self) -> dict[Direction, Side]:
        """Both directions, for the code that goes over them (not on the hot path)."""
        return {_C2S: self.c2s, _S2C: self.s2c}

    def release(self) -> None:
        """The conversation is finished: drop both directions' state. A stale wake-up entry may
        still hold this object until it is popped, so it must keep nothing big. (The sides point
        back here, but nothing points to them any more, so they go at once, without the cyclic
        garbage collector.)"""
        self.c2s = self.s2c = _RELEASED
