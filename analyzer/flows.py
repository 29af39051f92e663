"""Conversation bookkeeping: the summary of a TCP conversation that outlives it (:class:`FlowInfo`),
and the state of an open one (:class:`Conversation`, one :class:`Side` per direction)."""

from __future__ import annotations

from collections import deque
from typing import Any

from analyzer.api import Connection, Direction, Dissector, Severity
from analyzer.community_id import community_id
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
    """One direction: reassembly plus the map from stream offsets back to packets."""

    __slots__ = ("reasm", "segments", "sniff_buf", "fin", "endpoint", "peer", "last_ack")

    def __init__(self, max_buffer: int) -> None:
        self.reasm = StreamReassembler(max_buffer)
        # (end offset, packet number, ts) of delivered data, oldest first.
        self.segments: deque[tuple[int, int, float]] = deque()
        self.sniff_buf = bytearray()
        self.fin = False
        self.endpoint = ""
        self.peer = ""  # the other side's endpoint
        self.last_ack: int | None = None  # the last acknowledgement number this side sent

    def packets_for(self, start: int, end: int) -> tuple[int, int, float]:
        """Packet numbers holding stream bytes [start, end) and the time of the last one."""
        segs = self.segments
        while len(segs) > 1 and segs[0][0] <= start:
            segs.popleft()
        first = segs[0][1] if segs else 0
        last, ts = first, segs[0][2] if segs else 0.0
        for seg_end, pkt, seg_ts in segs:
            last, ts = pkt, seg_ts
            if seg_end >= end:
                break
        return first, last, ts

    def to_plain(self) -> dict[str, Any]:
        return {"reasm": self.reasm.to_plain(), "segments": [list(s) for s in self.segments],
                "sniff": b64(self.sniff_buf), "fin": self.fin, "last_ack": self.last_ack}

    def load(self, d: dict[str, Any]) -> None:
        self.reasm = StreamReassembler.from_plain(d["reasm"])
        self.segments = deque(tuple(s) for s in d["segments"])  # type: ignore[misc]
        self.sniff_buf = bytearray(unb64(d["sniff"]))
        self.fin, self.last_ack = d["fin"], d["last_ack"]


class Conversation:
    """An open conversation: both directions, its dissector once chosen, and its wake-up entry."""

    __slots__ = ("info", "key", "sides", "dissector", "conn", "pending", "undecided", "midstream", "closed",
                 "isn_client", "timed", "deadline", "wake_at", "wake_seq")

    def __init__(self, info: FlowInfo, max_buffer: int, midstream: bool) -> None:
        self.info = info
        self.key = (info.client[0], info.client[1], info.server[0], info.server[1])
        self.sides = {_C2S: Side(max_buffer), _S2C: Side(max_buffer)}
        c, s = self.sides[_C2S], self.sides[_S2C]
        c.endpoint = s.peer = fmt_endpoint(info.client)
        s.endpoint = c.peer = fmt_endpoint(info.server)
        self.dissector: Dissector | None = None
        self.conn: Connection | None = None
        # Stream events held back while the protocol is not yet known.
        self.pending: list[tuple[Direction, Data | Gap]] = []
        self.undecided = True
        self.midstream = midstream
        self.closed = False
        self.isn_client: int | None = None
        self.timed = False  # the dissector's connection has deadlines (overrides Connection.deadline)
        self.deadline: float | None = None  # its last answer
        self.wake_at: float | None = None  # the time of this conversation's valid heap entry
        self.wake_seq = 0  # and its sequence number: any other entry for it is stale
