"""Conversation bookkeeping: the summary of a TCP conversation that outlives it (:class:`FlowInfo`),
and the state of an open one (:class:`Conversation`, one :class:`Side` per direction)."""

from __future__ import annotations

from typing import Any

from analyzer.api import Connection, Direction, Dissector, Severity
from analyzer.community_id import community_id
from analyzer.packets import flow_key
from analyzer.reassembly import Data, Gap, StreamReassembler, b64, unb64

_C2S, _S2C = Direction.C2S, Direction.S2C


class FlowInfo:
    """One TCP conversation, as `streamproto flows` shows it: the summary that stays after the
    conversation is finished, so kept small (slots, counters as plain attributes)."""

    __slots__ = ("id", "client", "server", "protocol", "dialect", "packets", "frames", "bytes_c2s", "bytes_s2c",
                 "errors", "warnings", "notes", "first_ts", "last_ts", "complete", "community_id")

    def __init__(self, id: int, client: tuple[str, int], server: tuple[str, int], first_ts: float = 0.0,
                 last_ts: float = 0.0) -> None:
        self.id = id
        self.client = client
        self.server = server
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
        self.community_id = community_id(client, server)

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
        """The slots in order, as JSON types (endpoints as lists)."""
        return [list(v) if type(v) is tuple else v for v in (getattr(self, k) for k in self.__slots__)]

    @classmethod
    def from_plain(cls, values: list[Any]) -> FlowInfo:
        info = cls.__new__(cls)
        for k, v in zip(cls.__slots__, values, strict=True):
            setattr(info, k, tuple(v) if k in ("client", "server") else v)
        return info


def fmt_endpoint(ep: tuple[str, int]) -> str:
    ip, port = ep
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class Side:
    """One direction: reassembly plus the map from stream offsets back to packets.

    Kept small, as 100,000 open conversations hold 200,000 of these: ``segments`` is a plain list
    consumed from ``head`` (a deque costs about 600 bytes even when empty), ``sniff_buf`` exists
    only while the protocol is undecided."""

    __slots__ = ("reasm", "segments", "head", "sniff_buf", "fin", "endpoint", "peer", "last_ack")

    def __init__(self, max_buffer: int) -> None:
        self.reasm = StreamReassembler(max_buffer)
        # (end offset, packet number, ts) of delivered data, oldest first from ``head``: the
        # entries before it are consumed and dropped in batches (see :meth:`consumed`).
        self.segments: list[tuple[int, int, float]] = []
        self.head = 0
        self.sniff_buf: bytearray | None = None  # first bytes for the heuristics, while undecided
        self.fin = False
        self.endpoint = ""
        self.peer = ""  # the other side's endpoint
        self.last_ack: int | None = None  # the last acknowledgement number this side sent

    def packets_for(self, start: int, end: int) -> tuple[int, int, float]:
        """Packet numbers holding stream bytes [start, end) and the time of the last one; the
        segments ending at or before ``start`` are consumed (the last one always stays)."""
        segs = self.segments
        h = self.head
        n = len(segs)
        while n - h > 1 and segs[h][0] <= start:
            h += 1
        self.head = h
        if h == n:
            return 0, 0, 0.0
        first = last = segs[h][1]
        ts = segs[h][2]
        for i in range(h, n):
            seg_end, last, ts = segs[i]
            if seg_end >= end:
                break
        return first, last, ts

    def consumed(self) -> None:
        """Drop the consumed entries once they are at least half the list: amortised O(1) per
        entry, and an idle side keeps at most as many dead entries as live ones."""
        h = self.head
        if h and 2 * h >= len(self.segments):
            del self.segments[:h]
            self.head = 0

    def to_plain(self) -> dict[str, Any]:
        return {"reasm": self.reasm.to_plain(), "segments": [list(s) for s in self.segments[self.head:]],
                "sniff": b64(self.sniff_buf or b""), "fin": self.fin, "last_ack": self.last_ack}

    def load(self, d: dict[str, Any]) -> None:
        self.reasm = StreamReassembler.from_plain(d["reasm"])
        self.segments = [tuple(s) for s in d["segments"]]  # type: ignore[misc]
        self.head = 0
        self.sniff_buf = bytearray(unb64(d["sniff"])) if d["sniff"] else None
        self.fin, self.last_ack = d["fin"], d["last_ack"]


#: What a finished conversation's directions point to (see :meth:`Conversation.release`).
_RELEASED = Side(0)


class Conversation:
    """An open conversation: both directions, its dissector once chosen, and its wake-up entry."""

    __slots__ = ("info", "key", "c2s", "s2c", "dissector", "conn", "pending", "undecided", "midstream", "closed",
                 "isn_client", "timed", "deadline", "wake_at", "wake_seq")

    def __init__(self, info: FlowInfo, max_buffer: int, midstream: bool) -> None:
        self.info = info
        self.key = flow_key(info.client, info.server)  # the client-to-server direction's
        # One slot per direction rather than a dict keyed by Direction (about 200 bytes more).
        self.c2s = c = Side(max_buffer)
        self.s2c = s = Side(max_buffer)
        c.endpoint = s.peer = fmt_endpoint(info.client)
        s.endpoint = c.peer = fmt_endpoint(info.server)
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
        self.wake_at: float | None = None  # the time of this conversation's valid heap entry
        self.wake_seq = 0  # and its sequence number: any other entry for it is stale

    def side(self, direction: Direction) -> Side:
        return self.c2s if direction is _C2S else self.s2c

    @property
    def sides(self) -> dict[Direction, Side]:
        """Both directions, for the code that goes over them (not on the hot path)."""
        return {_C2S: self.c2s, _S2C: self.s2c}

    def release(self) -> None:
        """The conversation is finished: drop both directions' state. A stale wake-up entry may
        still hold this object until it is popped, so it must keep nothing big."""
        self.c2s = self.s2c = _RELEASED
