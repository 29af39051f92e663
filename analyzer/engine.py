"""From packets to protocol frames: conversations, roles, protocol choice, reassembly, dissection.

Protocol-agnostic. The engine owns everything that touches packets (numbers, timestamps,
addresses) and hands each dissector only ordered bytes per direction.

Time and release. Capture time drives the wake-ups (:mod:`analyzer.wakeups`): a conversation
wakes at the earlier of its dissector's :meth:`Connection.deadline` (the engine then calls
:meth:`Connection.tick`) and its idle expiry (no packet for ``idle_timeout`` seconds of capture
time: the conversation is finished as at the end of a capture). A conversation closed by FIN on
both sides or by RST is finished at once; what stays of it is its :class:`FlowInfo`. Opening and
expiring cost a heap operation (O(log n) in the open conversations), closing O(1) amortised;
nothing scans all conversations.

Packet identity. The engine numbers packets itself, 1-based and across every file it reads (a
global ordinal): with one file that is the file's own packet number; with several
(:meth:`Analyzer.run_files`) events are given back as (file, packet number within that file).

The pieces live beside it: conversation bookkeeping in :mod:`analyzer.flows`, the Community ID in
:mod:`analyzer.community_id`, protocol choice in :mod:`analyzer.protocol_choice`, wake-ups in
:mod:`analyzer.wakeups`, multi-file numbering in :mod:`analyzer.capture_files`, the checkpoint
format in :mod:`analyzer.checkpoint`. Their public names are importable from here as well.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from analyzer.api import Category, Connection, Direction, Dissector, Event, Finding, Frame, Rule, Severity
from analyzer.capture import RawPacket, order_captures, read_packets
from analyzer.capture_files import CaptureFiles
from analyzer.checkpoint import (
    CHECKPOINT_VERSION,
    conversation_from_plain,
    conversation_to_plain,
    linkdec_to_plain,
    load_linkdec,
    snapshot,
)
from analyzer.community_id import community_id
from analyzer.flows import (
    SHOWN_ALL,
    SHOWN_REQUESTS_MAX,
    Conversation,
    FlowInfo,
    Side,
    endpoint_text,
    fmt_endpoint,
)
from analyzer.packets import (
    ACK,
    FIN,
    RST,
    SYN,
    LinkDecoder,
    TcpSegment,
    reverse_key,
)
from analyzer.protocol_choice import SNIFF_LIMIT, SNIFF_THRESHOLD, best_guess, port_table, roles
from analyzer.reassembly import GAP, Data, Gap, Note
from analyzer.reassembly import RULES as TCP_RULES
from analyzer.registry import load_dissectors
from analyzer.segment_feed import feed, foreign_bytes, run_packets
from analyzer.wakeups import Wakeups

__all__ = [
    "CHECKPOINT_VERSION", "CHECKPOINT_FINISHED", "CLOSED_KEEP", "DEFAULT_IDLE_TIMEOUT", "DISSECTOR_ERROR",
    "ENGINE_RULES", "SNIFF_LIMIT", "SNIFF_THRESHOLD", "TRUNCATED_PACKET", "UNKNOWN_LINKTYPE", "Analyzer",
    "FlowInfo", "NoDecodableLinkType", "analyze_file", "community_id", "fmt_endpoint",
]

TRUNCATED_PACKET = Rule("capture.truncated_packet", Severity.WARNING, Category.TRUNCATED,
                        "A packet was cut by the capture's snap length; the rest of its bytes are missing")
UNKNOWN_LINKTYPE = Rule("capture.unknown_linktype", Severity.WARNING, Category.CAPTURE,
                        "Packets of a link type the analyzer cannot decode were skipped")
DISSECTOR_ERROR = Rule("engine.dissector_error", Severity.ERROR, Category.MALFORMED,
                       "A dissector raised an exception; the rest of that conversation may be undecoded")
CHECKPOINT_FINISHED = Rule("engine.checkpoint_finished", Severity.NOTE, Category.CAPTURE,
                           "A conversation was finished at a checkpoint because its dissector cannot save "
                           "its state; it continues as a new, mid-stream conversation")
UNDECODED = Rule("engine.undecoded", Severity.NOTE, Category.UNKNOWN,
                 "No dissector claimed a conversation that carried data: its bytes were not decoded "
                 "(`streamproto follow FLOW` shows them; --decode-as PORT=PROTO forces a protocol)")
ENGINE_RULES: tuple[Rule, ...] = (*TCP_RULES, TRUNCATED_PACKET, UNKNOWN_LINKTYPE, DISSECTOR_ERROR,
                                  CHECKPOINT_FINISHED, UNDECODED)

#: Closed conversations remembered to absorb their trailing packets.
CLOSED_KEEP = 4096
#: Seconds of capture time without a packet after which a conversation is finished (Zeek's
#: default for TCP inactivity is the same 5 minutes). 0 or None: never.
DEFAULT_IDLE_TIMEOUT = 300.0
_C2S, _S2C = Direction.C2S, Direction.S2C


class NoDecodableLinkType(Exception):
    """Every packet of the capture had a link type the analyzer cannot decode."""


class Analyzer:
    """Runs packets through reassembly and dissectors. Iterate :meth:`run` for events."""

    def __init__(self, dissectors: dict[str, Dissector] | None = None, decode_as: dict[int, str] | None = None,
                 max_buffer: int = 8 * 1024 * 1024, idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 fallback: Dissector | None = None, max_finished_rows: int | None = None,
                 shard: tuple[int, int] | None = None) -> None:
        self.dissectors = dissectors if dissectors is not None else load_dissectors()
        #: Decodes the conversations no dissector claims (`streamproto follow` hands their bytes on
        #: this way); None: they stay undecoded and each gets an ``engine.undecoded`` note.
        self.fallback = fallback
        self.decode_as = dict(decode_as or {})
        self.max_buffer = max_buffer
        self.idle_timeout = idle_timeout or None
        self.by_port: dict[int, str] = port_table(self.dissectors.values())
        # Every conversation's row, indexed by id - 1; None with a bound on finished rows.
        self._flow_list: list[FlowInfo] | None = []
        #: At most this many finished conversations keep their row (None: all, as `flows` of a file
        #: needs): a live capture runs for days and a row per finished conversation (~480 bytes)
        #: would grow without end. Open conversations always keep theirs; the oldest finished go first.
        self.max_finished_rows: int | None = None
        # With a bound: the kept rows by id (a dict, so that dropping one from the middle is O(1);
        # insertion order is id order) and the ids of the finished ones, oldest first.
        self._rows: dict[int, FlowInfo] = {}
        self._finished_ids: deque[int] = deque()
        self._next_flow = 1  # ids keep increasing after rows are dropped: never reused
        #: What the dropped rows counted, so totals over all conversations stay exact (the live
        #: summary): frames per protocol ("undecoded" for none) and findings per severity.
        self.dropped_frames: Counter[str] = Counter()
        self.dropped_findings = {"error": 0, "warning": 0, "note": 0}
        # Conversations are keyed by flow keys (:func:`analyzer.packets.flow_key`: packed addresses
        # and ports, as packets carry them); open ones by their client-to-server key.
        self._live: dict[bytes, Conversation] = {}
        # Conversations closed by FIN/RST, so their last ACKs do not open a new one.
        self._closed: OrderedDict[bytes, FlowInfo] = OrderedDict()
        # For decided live conversations, both directions' keys -> that direction's Side, which
        # knows its conversation and direction: what the packet loop needs, in one lookup (one
        # object per direction that exists anyway, rather than a 5-tuple each: ~80 bytes).
        self._fast: dict[bytes, Side] = {}
        self._wakeups = Wakeups()
        # The same list for the analyzer's life: the packet loop tests its earliest entry directly.
        self._heap = self._wakeups.heap
        # Files read as one capture, for numbering packets per file.
        self._capture_files = CaptureFiles()
        #: Events name (file, packet within the file) instead of the global packet ordinal.
        self.multi_file = False
        self.linkdec = LinkDecoder()
        self.packets = 0
        self.first_ts: float | None = None
        self.last_ts = 0.0
        self.truncated_packets = 0
        #: Findings about the capture itself (no conversation), by severity.
        self.capture_findings = {"error": 0, "warning": 0, "note": 0}
        self._startup_errors: list[Finding] = []
        self._texts: tuple[Conversation | None, str, str] = (None, "", "")
        self._texts_prev: tuple[Conversation | None, str, str] = (None, "", "")
        #: (k, n): this analyzer decodes only the conversations of shard k of n (``--jobs``; see
        #: :meth:`owns`), and the capture's own findings only as shard 0. It still follows every
        #: conversation far enough (SYN, FIN, RST, idle expiry) to number them all as one analyzer
        #: would, so that n shards' events, merged by :meth:`order_key`, are one analyzer's.
        self.shard: tuple[int, int] | None = None
        #: With a shard: the worker each sampled conversation goes to, by its 4-tuple (the lesser
        #: of its two directions' flow keys; see :meth:`set_shard`), and the conversation ids
        #: placed that way on another worker than id % n.
        self._placed: Mapping[bytes, int] = {}
        self._owner: dict[int, int] = {}
        self._capture_owner = True
        if shard is not None:
            self.set_shard(*shard)
        #: Give back only the frames a view of findings can show or link: frames with findings, and
        #: the responses to requests given back with findings (the linker names the response on
        #: its request). The others are still decoded, checked, counted and consumed (inspect
        #: --only-findings sets this: most frames have nothing to say, and each frame given back
        #: costs the views' plumbing a few microseconds).
        self.findings_only = False
        #: The view reads the frames' Info lines, seldom their fields (inspect -T summary sets
        #: this): every new connection is told (Connection.read_for_info_lines).
        self.info_lines_only = False
        # What the events being given back come from (see order_key): None for a packet's own
        # processing, else (phase, a, b) for the wake-ups (0, wake time, conversation id) and the
        # end of the capture (2, ...).
        self._waking: tuple[int, float, int] | None = None
        if max_finished_rows is not None:
            self.limit_finished_rows(max_finished_rows)

    @property
    def live(self) -> int:
        """Open conversations (not yet finished)."""
        return len(self._live)

    def limit_finished_rows(self, n: int) -> None:
        """Keep at most ``n`` finished conversations' rows from now on (see ``max_finished_rows``);
        for an analyzer made elsewhere (the CLI's), before it has seen packets."""
        if n < 0:
            raise ValueError(f"max_finished_rows must be 0 or more, not {n}")
        if self.packets or self._next_flow > 1:
            raise ValueError("limit_finished_rows needs a fresh analyzer")
        self.max_finished_rows = n
        self._flow_list = None

    @property
    def flows(self) -> list[FlowInfo]:
        """The kept conversation rows in id order: every conversation's without a bound (the list
        itself), else the open ones' and the latest ``max_finished_rows`` finished ones' (a copy)."""
        if self._flow_list is not None:
            return self._flow_list
        return list(self._rows.values())

    @property
    def conversations(self) -> int:
        """Conversations seen so far, kept rows or not."""
        return self._next_flow - 1

    def frames_per_protocol(self) -> Counter[str]:
        """Frames of every conversation so far by protocol ("undecoded": none), dropped rows included."""
        frames = Counter(self.dropped_frames)
        for f in self._flow_list if self._flow_list is not None else self._rows.values():
            if f.frames:
                frames[f.protocol or "undecoded"] += f.frames
        return frames

    def findings_per_severity(self) -> dict[str, int]:
        """Findings so far by severity: the capture's own, every conversation's (dropped rows included)."""
        totals = dict(self.capture_findings)
        for k, v in self.dropped_findings.items():
            totals[k] += v
        for f in self._flow_list if self._flow_list is not None else self._rows.values():
            totals["error"] += f.errors
            totals["warning"] += f.warnings
            totals["note"] += f.notes
        return totals

    def run_files(self, paths: Sequence[str], *, final: bool = True, per_file: bool = True) -> Iterator[Event]:
        """Several capture files as one capture, as ``tcpdump -C``/``-G`` rotates them: ordered by
        their first packet's time, each read in turn, conversations continuing across files.

        With more than one file, events name packets as (``file``, number within that file)
        (a frame whose bytes span files gives its first packet's number within that packet's
        own file); ``per_file=False`` keeps the engine's ordinals across all files instead."""
        ordered = order_captures(paths)
        if per_file and len(self._capture_files) + len(ordered) > 1:
            self.multi_file = True
        return self.run(self._capture_files.packets(ordered, lambda: self.packets), final=final)

    def next_wakeup(self) -> float | None:
        """The capture time at which the earliest open conversation wakes (deadline or idle
        expiry), or None: the pipeline replays only the packets that wake it when it continues a
        conversation from another file. May be a stale entry's time (waking then does nothing)."""
        return self._heap[0][0] if self._heap else None

    def locate(self, packet: int) -> tuple[str | None, int]:
        """(file, packet number within it) of a packet ordinal; file None when not reading files."""
        return self._capture_files.locate(packet)

    def place(self, packet: int) -> tuple[str | None, int]:
        """How events name a packet ordinal: (file, number within it) when several files are read
        as one capture, else (None, the ordinal)."""
        return self.locate(packet) if self.multi_file else (None, packet)

    # ----------------------------------------------------------------- driving
    def run(self, packets: Iterable[RawPacket], *, final: bool = True) -> Iterator[Event]:
        """Every frame and finding, in order. With ``final=False`` the capture is not over: open
        conversations stay open (those whose dissector cannot save its state are finished, see
        :meth:`checkpoint`) and the analyzer can be checkpointed or run on more packets."""
        events = self._run(packets, final)
        return self._capture_files.localise(events, lambda: self.packets) if self.multi_file else events

    def feed(self, packets: Iterable[RawPacket]) -> Iterator[Event]:
        """Packets of a capture that is still going on (a live capture, batch by batch): unlike
        ``run(..., final=False)`` nothing is suspended for a checkpoint; call :meth:`advance` when
        time passes without packets and :meth:`finish` at the end."""
        return self._run(packets, None)

    def advance(self, now: float) -> Iterator[Event]:
        """Capture time reached ``now`` without a packet (a live capture's clock): what the due
        wake-ups make (heartbeat silence, unanswered requests, idle expiry), as a packet at that
        time would have made them."""
        if now > self.last_ts and self.first_ts is not None:
            self.last_ts = now
        if self._heap and self._heap[0][0] <= now:
            yield from self._timers(now)
        yield from self._pop_startup_errors()

    def _run(self, packets: Iterable[RawPacket], final: bool | None) -> Iterator[Event]:
        yield from run_packets(self, packets)  # the packet loop (compiled: analyzer/segment_feed.py)
        if final:
            yield from self.finish()
        else:
            yield from self._pop_startup_errors()
            if final is not None:  # None: fed by feed(), the capture goes on as it is
                yield from self._suspend()

    def _fast_released(self, conv: Conversation, direction: Direction, side: Side, peer: list[Data | Gap | Note],
                       seq: int, payload: bytes, number: int, ts: float) -> Iterator[Event]:
        """The rest of analyzer.segment_feed's fast_segment once the acknowledgement released the
        other direction's held-back data: that stream first, then this segment's own bytes."""
        yield from self._stream(conv, direction.other, peer, ts)
        if payload:
            events = side.segment(seq, payload, False, number, ts)
            if events:
                yield from self._stream(conv, direction, events, ts)

    def _index(self, conv: Conversation) -> None:
        """(Re)register a conversation's flow keys for the fast path."""
        if conv.undecided:
            return
        self._fast[conv.key] = conv.c2s
        self._fast[reverse_key(conv.key)] = conv.s2c

    def _unindex(self, conv: Conversation) -> None:
        for k in (conv.key, reverse_key(conv.key)):
            side = self._fast.get(k)
            if side is not None and side.conv is conv:
                del self._fast[k]

    def flow(self, flow_id: int | None) -> FlowInfo | None:
        """The conversation with this id (ids count from 1 in order of appearance)."""
        if flow_id is None:
            return None
        if self._flow_list is None:
            return self._rows.get(flow_id)  # None as well once its row was dropped
        if not 0 < flow_id <= len(self._flow_list):
            return None
        return self._flow_list[flow_id - 1]

    def _add_row(self, info: FlowInfo) -> None:
        if self._flow_list is not None:
            self._flow_list.append(info)
        else:
            self._rows[info.id] = info
        self._next_flow = max(self._next_flow, info.id + 1)

    def _finished_row(self, info: FlowInfo) -> None:
        """A conversation was finished: with a bound, drop the oldest finished rows beyond it,
        adding what they counted to the totals kept for them."""
        if self.max_finished_rows is None or info.id not in self._rows:
            return
        finished = self._finished_ids
        finished.append(info.id)
        while len(finished) > self.max_finished_rows:
            old = self._rows.pop(finished.popleft())
            self._owner.pop(old.id, None)  # placed on a shard (see set_shard): no row, nothing to own
            if old.frames:
                self.dropped_frames[old.protocol or "undecoded"] += old.frames
            dropped = self.dropped_findings
            dropped["error"] += old.errors
            dropped["warning"] += old.warnings
            dropped["note"] += old.notes

    def _pop_startup_errors(self) -> Iterator[Event]:
        errors, self._startup_errors = self._startup_errors, []
        yield from errors

    def finish(self) -> Iterator[Event]:
        # In id order (not the order conversations were last re-keyed in): shards agree on it.
        for conv in sorted(self._live.values(), key=_conv_id):
            self._waking = (2, 0, conv.info.id)
            yield from self._close(conv, self.last_ts)
        self._waking = (2, 1, -1)  # the findings' own conversations order them
        yield from self._pop_startup_errors()
        self._waking = (2, 2, 0)
        if self.linkdec.unknown_linktype:
            if self.packets and self.linkdec.unsupported == self.packets:
                kinds = ", ".join(str(x) for x in sorted(self.linkdec.unknown_linktype))
                raise NoDecodableLinkType(f"unsupported link type {kinds}")
            if self._capture_owner:
                f = UNKNOWN_LINKTYPE(f"{self.linkdec.unsupported} packets of link type(s) "
                                     f"{sorted(self.linkdec.unknown_linktype)} were skipped")
                self.capture_findings[f.severity] += 1
                yield f
        self._waking = None

    # ------------------------------------------------------------------- time
    def _timers(self, now: float) -> Iterator[Event]:
        """Wake every conversation whose wake-up is due: expire it if idle, else tick it."""
        wakeups = self._wakeups
        idle = self.idle_timeout
        for conv in wakeups.due(now):
            self._waking = (0, wakeups.woke_at, conv.info.id)
            if idle is not None and conv.info.last_ts + idle <= now:
                yield from self._close(conv, now, expired=True)
                continue
            if conv.deadline is not None and conv.deadline <= now and conv.conn is not None:
                yield from self._tick(conv, now)
                if conv.deadline is not None and conv.deadline <= now:
                    # Not due after all by the dissector's own (strict) test, e.g. silence "longer
                    # than" the limit at exactly the limit: try again at the next instant, not now,
                    # or this loop would pop the same entry for ever.
                    conv.deadline = math.nextafter(now, math.inf)
            wakeups.schedule(conv, idle)
        self._waking = None

    def _tick(self, conv: Conversation, now: float) -> list[Event]:
        conn = conv.conn
        assert conn is not None
        try:
            out = conn.tick(now)
            result = self._emit(conv, out) if out else []
            conv.deadline = conn.deadline()
        except Exception as exc:  # a dissector bug must not end the whole analysis
            conv.deadline = None
            return [self._account(conv, _dissector_crash(conv, exc))]
        return result

    # ------------------------------------------------------------ conversations
    def _segment(self, seg: TcpSegment, key: bytes, number: int, ts: float) -> Iterator[Event]:
        """Any segment the packet loop's fast path does not take; ``key``: its flow key."""
        rkey = reverse_key(key)
        conv = self._live.get(key) or self._live.get(rkey)
        syn_only = seg.flags & (SYN | ACK) == SYN
        if conv is not None and syn_only and conv.reopened_by(seg.seq):
            # Port reuse: a fresh SYN on the same 4-tuple starts a new conversation.
            yield from self._close(conv, ts)
            conv = None
        if conv is None:
            old = self._closed.get(key) or self._closed.get(rkey)
            if old is not None and not seg.flags & SYN:
                old.packets += 1  # a straggler (last ACK, late retransmission) of a closed one
                old.last_ts = ts
                return
            if (old is not None and syn_only and not old.bytes_c2s and not old.bytes_s2c
                    and self.max_finished_rows is None and self.flow(old.id) is old):
                # Another attempt after one that carried nothing (a SYN refused by a RST, again and
                # again: a scan or a client retrying a closed port): the same row counts them all.
                conv = self._open(seg, ts, old)
            else:
                conv = self._open(seg, ts)
        direction = _C2S if (seg.src, seg.sport) == conv.info.client else _S2C
        yield from self._on_segment(conv, direction, seg.seq, seg.ack, seg.flags, seg.payload, number, ts)

    def _on_segment(self, conv: Conversation, direction: Direction, seq: int, ack: int, flags: int, payload: bytes,
                    number: int, ts: float) -> Iterator[Event]:
        """A segment of ``conv`` in ``direction``, in general: SYN, FIN, RST, and what the fast
        path leaves (see :meth:`_segment`)."""
        info = conv.info
        info.packets += 1
        info.last_ts = ts
        side = conv.side(direction)
        if conv.foreign:
            yield from self._foreign_segment(conv, direction, side, seq, flags, payload, ts)
            return
        events: list[Data | Gap | Note] = []
        if flags & SYN:
            side.syn(seq)
            if direction is _C2S:
                conv.isn_client = seq
        if flags & ACK:
            events_peer = conv.side(direction.other).peer_ack(ack, number, ts)
            if events_peer:
                yield from self._stream(conv, direction.other, events_peer, ts)
        if payload or flags & FIN:
            events = side.segment(seq, payload, bool(flags & FIN), number, ts)
            if events:
                yield from self._stream(conv, direction, events, ts)
                # Heuristics may have swapped the roles.
                direction = _C2S if conv.c2s is side else _S2C
        if flags & FIN:
            side.fin = True
        if flags & RST or (side.fin and conv.side(direction.other).fin):
            info.complete = not conv.midstream
            yield from self._close(conv, ts)

    def _foreign_segment(self, conv: Conversation, direction: Direction, side: Side, seq: int, flags: int,
                         payload: bytes, ts: float) -> Iterator[Event]:
        """:meth:`_on_segment` for another shard's conversation: what decides when it ends, and
        whether it carried bytes (a new SYN on its 4-tuple then starts a new one), nothing more."""
        if flags & SYN:
            side.syn(seq)
            if direction is _C2S:
                conv.isn_client = seq
        foreign_bytes(conv, side, len(payload))
        if flags & FIN:
            side.fin = True
        if flags & RST or (side.fin and conv.side(direction.other).fin):
            conv.info.complete = not conv.midstream
            yield from self._close(conv, ts)

    def set_shard(self, k: int, n: int, placed: Mapping[bytes, int] | None = None) -> None:
        """Decode only shard ``k`` of ``n`` from now on (see ``shard``); on a fresh analyzer.
        ``placed``: the shard of each conversation known beforehand by its 4-tuple (the lesser of
        its two directions' flow keys), as the capture's samples spread the work; the others are
        dealt out in turn (see :meth:`owns`). Every shard must be given the same."""
        if not 0 <= k < n:
            raise ValueError(f"shard {k} of {n} does not exist")
        if self.packets or self._next_flow > 1:
            raise ValueError("set_shard needs a fresh analyzer")
        if placed and not all(0 <= w < n for w in placed.values()):
            raise ValueError(f"a conversation placed on a shard outside 0..{n - 1}")
        self.shard = (k, n)
        self._placed = placed or {}
        self._capture_owner = k == 0

    def shard_state(self) -> dict[str, Any]:
        """What this shard knows that the merged totals need: its own conversations' rows, the
        capture's counters (the same in every shard), and the capture's findings (shard 0's)."""
        return {"rows": [f.to_plain() for f in self.flows if self.owns(f.id)],
                "conversations": self.conversations, "packets": self.packets, "first_ts": self.first_ts,
                "last_ts": self.last_ts, "truncated_packets": self.truncated_packets,
                "capture_findings": dict(self.capture_findings) if self._capture_owner else None,
                "multi_file": self.multi_file, "files": self._capture_files.to_plain()}

    def adopt_shards(self, states: Sequence[dict[str, Any]]) -> None:
        """Take the totals of shard analyzers that ran over the whole capture (their
        :meth:`shard_state`), as if this analyzer had run it: every conversation's row from the
        shard that decoded it."""
        if self.packets or self._next_flow > 1:
            raise ValueError("adopt_shards needs a fresh analyzer")
        rows = sorted((FlowInfo.from_plain(r) for st in states for r in st["rows"]), key=lambda f: f.id)
        for info in rows:
            self._add_row(info)
        first = states[0]
        self._next_flow = first["conversations"] + 1
        self.packets, self.first_ts, self.last_ts = first["packets"], first["first_ts"], first["last_ts"]
        self.truncated_packets = first["truncated_packets"]
        self.multi_file = first["multi_file"]
        self._capture_files.load(first["files"])
        for st in states:
            if st["capture_findings"] is not None:
                self.capture_findings = dict(st["capture_findings"])

    def owns(self, flow_id: int) -> bool:
        """Whether this analyzer decodes the conversation with this id. A conversation placed
        beforehand (see :meth:`set_shard`) goes where it was placed; the others are dealt out in
        turn (id modulo the shards): every shard numbers them alike, and a capture of two
        conversations keeps two workers busy, which a hash of the 4-tuple would not."""
        shard = self.shard
        return shard is None or self._owner.get(flow_id, flow_id % shard[1]) == shard[0]

    def order_key(self, ev: Event) -> tuple:
        """Where an event just given back by :meth:`run` stands in the order one analyzer of the
        whole capture gives events in: shards' events merged by this key are that analyzer's
        (each shard's own events come in increasing keys; a running count breaks the ties)."""
        waking = self._waking
        if waking is not None:
            if waking[2] < 0:
                return (self.packets, waking[0], waking[1], ev.flow or 0)
            return (self.packets, *waking)
        return (self.packets, 1, 0 if ev.flow is None else 1, 0)

    def _open(self, seg: TcpSegment, ts: float, again: FlowInfo | None = None) -> Conversation:
        """A new conversation; ``again``: the finished row of an empty one on this 4-tuple that
        this attempt continues (no new row)."""
        midstream = not seg.flags & SYN
        if again is None:
            client, server = roles((seg.src, seg.sport), (seg.dst, seg.dport), seg.flags, self._port_proto)
            info = FlowInfo(self._next_flow, client, server, ts, ts)
            self._add_row(info)
        else:
            info = again
            info.last_ts = ts
        conv = Conversation(info, self.max_buffer, midstream)
        self._live[conv.key] = conv
        if self._placed and again is None:
            key = conv.key
            worker = self._placed.get(min(key, reverse_key(key)))
            if worker is not None and self.shard is not None and worker != info.id % self.shard[1]:
                self._owner[info.id] = worker
        if self.shard is not None and not self.owns(info.id):
            conv.foreign = True
            conv.undecided = False
            self._index(conv)
            self._wakeups.schedule(conv, self.idle_timeout)
            return conv
        name = self._port_proto(info.server_port) or self._port_proto(info.client_port)
        if name:
            self._choose(conv, self.dissectors[name])
        if not self.dissectors and conv.conn is None:
            if self.fallback is not None:
                self._choose(conv, self.fallback)
            else:
                conv.undecided = False  # nothing could decode it: only reassemble
                self._index(conv)
        self._wakeups.schedule(conv, self.idle_timeout)
        return conv

    def _port_proto(self, port: int) -> str | None:
        return self.decode_as.get(port) or self.by_port.get(port)

    def _choose(self, conv: Conversation, dissector: Dissector) -> None:
        conv.dissector = dissector
        try:
            conv.conn = dissector.connection(conv.midstream)
            conv.leaves_out = self.findings_only and _leaves_out(conv.conn)
            if self.info_lines_only:
                _tell_info_lines(conv.conn)
        except Exception as exc:  # a broken plugin leaves the conversation undecoded, not the run dead
            conv.conn = None
            conv.info.protocol = dissector.name
            self._startup_errors.append(self._account(conv, _dissector_crash(conv, exc)))
        conv.info.protocol = dissector.name
        conv.undecided = False
        self._decided(conv)
        self._timing(conv)

    def _decided(self, conv: Conversation) -> None:
        """The protocol question is settled: index the conversation for the fast path and drop
        the bytes kept for the heuristics."""
        conv.c2s.sniff_buf = conv.s2c.sniff_buf = None
        self._index(conv)

    def _timing(self, conv: Conversation) -> None:
        """Does the conversation's dissector connection have deadlines? Read its first one."""
        conn = conv.conn
        # Duck-typed connections (not subclassing Connection) may have no deadline at all.
        method = getattr(type(conn), "deadline", None)
        conv.timed = conn is not None and method is not None and method is not Connection.deadline
        if conv.timed:
            try:
                conv.deadline = conn.deadline()  # type: ignore[union-attr]
            except Exception as exc:
                conv.timed, conv.deadline = False, None
                self._startup_errors.append(self._account(conv, _dissector_crash(conv, exc)))
            if conv.deadline is not None:
                self._wakeups.schedule(conv, self.idle_timeout)

    def _sniff(self, conv: Conversation, direction: Direction) -> bool:
        """Try the heuristics; True when it swapped the client and server roles."""
        data = bytes(conv.side(direction).sniff_buf or b"")
        confidence, dissector, from_client = best_guess(self.dissectors.values(), data)
        if dissector is None or confidence < SNIFF_THRESHOLD:
            if len(data) >= SNIFF_LIMIT:
                if self.fallback is not None:
                    self._choose(conv, self.fallback)
                    return False
                conv.undecided = False  # give up: the conversation stays undecoded
                self._decided(conv)
            return False
        swap = conv.midstream and from_client is not None and from_client != (direction is _C2S)
        if swap:
            self._swap_roles(conv)
        self._choose(conv, dissector)
        return swap

    def _swap_roles(self, conv: Conversation) -> None:
        self._texts = self._texts_prev = (None, "", "")  # the remembered endpoint texts may be swapped
        info = conv.info
        info.client, info.server = info.server, info.client
        info.bytes_c2s, info.bytes_s2c = info.bytes_s2c, info.bytes_c2s
        conv.c2s, conv.s2c = conv.s2c, conv.c2s
        if conv.pending is not None:
            conv.pending = [(d.other, ev) for d, ev in conv.pending]
        del self._live[conv.key]
        conv.key = reverse_key(conv.key)
        self._live[conv.key] = conv

    # ------------------------------------------------------------------ streams
    def _stream(self, conv: Conversation, direction: Direction, events: list[Data | Gap | Note],
                ts: float) -> Iterator[Event]:
        info = conv.info
        for ev in events:
            if isinstance(ev, Note):
                yield self._account(conv, ev.finding)
                continue
            if isinstance(ev, Gap):
                f = GAP(f"{ev.length} bytes missing from the {direction} stream at offset {ev.offset} "
                        f"(capture loss)")
                f.frame = ev.packet
                yield self._account(conv, f)
            elif direction is _C2S:
                info.bytes_c2s += len(ev.data)
            else:
                info.bytes_s2c += len(ev.data)
            if conv.undecided:
                if conv.pending is None:
                    conv.pending = []
                conv.pending.append((direction, ev))
                if isinstance(ev, Data):
                    side = conv.side(direction)
                    buf = side.sniff_buf
                    if buf is None:
                        buf = side.sniff_buf = bytearray()
                    if len(buf) < SNIFF_LIMIT:
                        buf += ev.data[:SNIFF_LIMIT - len(buf)]
                    if self._sniff(conv, direction):
                        direction = direction.other
                if conv.conn is not None:
                    pending, conv.pending = conv.pending, None
                    for d, p in pending or ():
                        yield from self._deliver(conv, d, p)
                elif not conv.undecided:
                    conv.pending = None
                continue
            if conv.conn is not None:
                yield from self._deliver(conv, direction, ev)

    def _deliver(self, conv: Conversation, direction: Direction, ev: Data | Gap) -> Sequence[Event]:
        """Hand a stream event (bytes or a hole) to the dissector; what it returns, stamped."""
        if type(ev) is Data:
            return feed(self, conv, direction, ev.offset, ev.data, ev.packet, ev.ts)
        return feed(self, conv, direction, ev.offset, None, ev.packet or 0, ev.ts, ev.length)

    def _truncated(self, number: int, captured: int, orig_len: int) -> Finding:
        """A packet cut by the snap length (the packet loop, analyzer/segment_feed.py), counted."""
        self.truncated_packets += 1
        file, local = self.place(number)
        f = TRUNCATED_PACKET(f"packet {local}{f' of {file}' if file else ''} was cut by the snap "
                             f"length ({captured} of {orig_len} bytes captured)")
        f.frame = number
        self.capture_findings[f.severity] += 1
        return f

    def _crashed(self, conv: Conversation, exc: Exception) -> list[Event]:
        """What a dissector's exception while fed becomes (analyzer/segment_feed.py's feed)."""
        return [self._account(conv, _dissector_crash(conv, exc))]

    def _emit(self, conv: Conversation, out: Iterable[Event], fed: Direction | None = None, fed_at: int = 0,
              packet: int = 0, ts: float = 0.0, fed_end: int = 0) -> list[Event]:
        """Stamp a dissector's frames and findings with where they came from; given back as the
        dissector's own list when it made one (stamped in place: no copy), or in a findings-only
        run, as a new list of what that run shows (see ``drop`` below).

        ``fed``, ``fed_at``, ``packet``, ``ts``, ``fed_end``: the direction, stream offsets (start,
        end), packet and time of the bytes just fed (None after a hole, a tick or the end), which
        analyzer/segment_feed.py's feed left to this method to record in that direction's
        segments. A frame of that direction starting at or after ``fed_at`` lies wholly in that one
        segment: it ends within
        the bytes fed so far, and every earlier segment ends at or before ``fed_at``. So it takes
        that packet and time without a look at the segments, which end up holding just that
        segment, as the general path would leave them (it consumes the segments ending at or before
        a frame's start and always keeps the newest)."""
        events = out if type(out) is list else list(out)
        info = conv.info
        c2s, s2c = conv.c2s, conv.s2c
        fid = info.id
        cid = info._cid  # None until a stamp below asks for it (FlowInfo.community_id)
        protocol = info.protocol or ""
        here = (packet, packet)  # shared by the frames of this one segment
        unrecorded = fed is not None  # the fed segment is not in its side's segments yet
        cli = srv = None  # the endpoints' texts, made for the first frame (not kept per conversation)
        n_frames = 0
        # A findings-only run gives back the findings, the frames that carry findings, and the
        # responses to requests given back; the other frames are only counted, and their segments
        # consumed, without being stamped (an anchor, which a later finding may name, learns its
        # packet).
        drop = self.findings_only
        kept: list[Event] = []
        for ev in events:
            if isinstance(ev, Frame):
                d = ev.direction
                start = ev.offset
                if d is fed and start >= fed_at:
                    side = c2s if d is _C2S else s2c
                    if unrecorded:  # once per call: the later frames find it done
                        unrecorded = False
                        side.older = None
                        side.seg_end, side.seg_packet, side.seg_ts = fed_end, packet, ts
                    elif side.older is not None:
                        side.only_newest()
                    last = packet
                    packets = here
                    fts = ts
                else:
                    if unrecorded:  # the general path needs it among the segments
                        unrecorded = False
                        (c2s if fed is _C2S else s2c).add(fed_end, packet, ts)
                    side = c2s if d == _C2S else s2c
                    if side.older is None:  # at most one segment: the frame lies in it
                        last = side.seg_packet
                        packets = None
                        fts = side.seg_ts
                    else:
                        first, last, fts = side.packets_for(start, start + ev.size)
                        packets = (first, last)
                n_frames += 1
                ref = ev.ref
                if drop:
                    # A request is shown only with findings; a response without findings only when
                    # the linker holds its request (one given back with findings) for it.
                    request = ev.request
                    if ev.findings:
                        keep = True
                        if ev.awaits:
                            _shown_request(conv, ref)
                    else:
                        keep = request is not None and _answers_shown(conv, request)
                    if not keep:
                        # Not given back, so its own fields are never read: what outlives it is
                        # the packet a later finding can name (its anchor) and the dialect it saw.
                        if ref is not None:
                            ref[2] = last
                        if ev.dialect:
                            info.dialect = ev.dialect
                        continue
                ev.packets = packets if packets is not None else (last, last)
                ev.ts = fts
                ev.flow = fid
                if cid is None:
                    cid = info.community_id
                ev.community_id = cid
                if cli is None:
                    # The texts of the two conversations that emitted last are remembered here, not
                    # per conversation (there can be 100,000 open): busy ones emit batch after batch.
                    texts = self._texts
                    if texts[0] is conv:
                        cli, srv = texts[1], texts[2]
                    else:
                        texts = self._texts_prev
                        if texts[0] is conv:
                            cli, srv = texts[1], texts[2]
                        else:
                            cli = endpoint_text(info.client_ip, info.client_port)
                            srv = endpoint_text(info.server_ip, info.server_port)
                            texts = (conv, cli, srv)
                        self._texts_prev, self._texts = self._texts, texts
                if side is c2s:
                    ev.src, ev.dst = cli, srv
                else:
                    ev.src, ev.dst = srv, cli
                ev.protocol = protocol
                if ref is not None:  # the dissector kept a reference: later findings can point here
                    ref[2] = last
                if ev.dialect:
                    info.dialect = ev.dialect
                else:  # every frame of a conversation names the dialect seen so far, as flows does
                    ev.dialect = info.dialect
                for f in ev.findings:
                    f.flow, f.frame, f.community_id = fid, last, cid
                    f.service = endpoint_text(info.server_ip, info.server_port)
                    info.count(f.severity)
                if drop and keep:
                    kept.append(ev)
            else:
                ev.flow = fid
                if cid is None:
                    cid = info.community_id
                ev.community_id = cid
                ev.service = endpoint_text(info.server_ip, info.server_port)
                related = ev.related
                if related is not None:  # about an earlier frame (a FrameRef): the packet that carried it
                    ev.frame = related[2]
                    ev.related = None
                info.count(ev.severity)
                if drop:
                    kept.append(ev)
        if unrecorded:
            (c2s if fed is _C2S else s2c).add(fed_end, packet, ts)
        info.frames += n_frames
        return kept if drop else events

    def _account(self, conv: Conversation, f: Finding) -> Finding:
        """Stamp an engine finding with its conversation and count it."""
        info = conv.info
        f.flow = info.id
        f.community_id = info.community_id
        f.service = endpoint_text(info.server_ip, info.server_port)
        info.count(f.severity)
        return f

    def _close(self, conv: Conversation, ts: float, expired: bool = False) -> Iterator[Event]:
        """Finish a conversation (closed, expired, or the capture ended) and release its state."""
        if conv.closed:
            return
        conv.closed = True
        self._wakeups.cancel(conv)
        self._unindex(conv)
        if conv.foreign:
            self._forget(conv, expired)
            return
        for direction, side in conv.sides.items():
            events = side.flush(ts)
            if events:
                yield from self._stream(conv, direction, events, ts)
        if conv.undecided and conv.pending and (self.dissectors or self.fallback):
            # Short conversation: decide on whatever arrived.
            for direction in (_C2S, _S2C):
                if conv.side(direction).sniff_buf and conv.conn is None:
                    self._sniff(conv, direction)
            if conv.conn is None and self.fallback is not None:
                self._choose(conv, self.fallback)
            if conv.conn is not None:
                pending, conv.pending = conv.pending, None
                for d, p in pending or ():
                    yield from self._deliver(conv, d, p)
        if conv.conn is not None:
            try:
                yield from self._emit(conv, conv.conn.end(ts))
                if conv.leaves_out:
                    conn = conv.conn
                    if conn.frames_left_out:
                        conv.info.frames += conn.frames_left_out
                        conn.frames_left_out = 0
                    if conn.other_frames_left_out:
                        conv.info.frames += conn.other_frames_left_out
                        conn.other_frames_left_out = 0
            except Exception as exc:
                yield self._account(conv, _dissector_crash(conv, exc))
            if conv.conn.dialect:
                conv.info.dialect = conv.conn.dialect
        elif conv.info.protocol is None and (conv.info.bytes_c2s or conv.info.bytes_s2c):
            yield self._account(conv, _undecoded(conv.info))
        self._forget(conv, expired)

    def _forget(self, conv: Conversation, expired: bool) -> None:
        """The rest of :meth:`_close`: the finished conversation's state goes, its row stays."""
        if self._live.get(conv.key) is conv:
            del self._live[conv.key]
        if not expired:
            # Only the summary stays, to absorb the trailing packets (last ACKs) of a closed one.
            self._closed[conv.key] = conv.info
            if len(self._closed) > CLOSED_KEEP:
                self._closed.popitem(last=False)
        self._finished_row(conv.info)
        # A stale heap entry may still hold the object until it is popped: keep nothing big in it.
        conv.release()
        conv.conn = None
        conv.pending = None

    # -------------------------------------------------------------- checkpoints
    def _suspend(self) -> Iterator[Event]:
        """Before a checkpoint: finish the conversations whose dissector cannot save its state."""
        for conv in list(self._live.values()):
            if conv.conn is None:
                continue
            try:
                snapshot(conv.conn)
                continue
            except NotImplementedError:
                f = CHECKPOINT_FINISHED(f"{conv.info.protocol} cannot save its state: conversation finished "
                                        f"at the checkpoint")
            except Exception as exc:
                f = _dissector_crash(conv, exc)
            yield self._account(conv, f)
            yield from self._close(conv, self.last_ts, expired=True)

    def checkpoint(self) -> dict[str, Any]:
        """The analyzer's whole state as JSON-serialisable data, for :meth:`restore` in this or
        another process: counters, every conversation's summary, and for each open conversation its
        reassembly state (unconsumed and out-of-order bytes), undecided protocol sniffing (buffered
        bytes and held-back stream events), wake-up times, and its dissector connection's
        :meth:`Connection.snapshot`.

        Take it after ``run(..., final=False)``, which finishes (with an
        ``engine.checkpoint_finished`` note) the conversations whose dissector cannot snapshot
        (``NotImplementedError``); later packets of such a conversation start a new, mid-stream one.
        Raises NotImplementedError if an open conversation still cannot be snapshotted."""
        live = [conversation_to_plain(conv) for conv in self._live.values()]
        state: dict[str, Any] = {
            "version": CHECKPOINT_VERSION, "packets": self.packets, "first_ts": self.first_ts,
            "last_ts": self.last_ts, "truncated_packets": self.truncated_packets,
            "capture_findings": dict(self.capture_findings),
            "linkdec": linkdec_to_plain(self.linkdec),
            "flows": [f.to_plain() for f in self.flows],
            "closed": [[k.hex(), info.id] for k, info in self._closed.items()],
            "live": live, "seq": self._wakeups.seq,
            "files": self._capture_files.to_plain(), "multi_file": self.multi_file,
        }
        if self.max_finished_rows is not None:
            # Rows were (or may be) dropped: ids no longer follow from the list, nor totals from rows.
            state["rows"] = {"next_flow": self._next_flow, "finished": list(self._finished_ids),
                             "dropped_frames": dict(self.dropped_frames),
                             "dropped_findings": dict(self.dropped_findings)}
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`checkpoint` (on a new analyzer with the same dissectors); the next
        :meth:`run` goes on with the capture's next packets. Raises ValueError on a state that
        does not fit."""
        if self.packets or self._next_flow > 1:
            raise ValueError("restore needs a fresh analyzer")
        if state.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"unsupported checkpoint version {state.get('version')!r}")
        self.packets, self.first_ts, self.last_ts = state["packets"], state["first_ts"], state["last_ts"]
        self.truncated_packets = state["truncated_packets"]
        self.capture_findings = dict(state["capture_findings"])
        load_linkdec(self.linkdec, state["linkdec"])
        for f in state["flows"]:
            self._add_row(FlowInfo.from_plain(f))
        rows = state.get("rows")
        if rows is not None:
            if self._flow_list is not None:
                raise ValueError("checkpoint of an analyzer with max_finished_rows needs one as well")
            self._next_flow = rows["next_flow"]
            self._finished_ids.extend(fid for fid in rows["finished"] if fid in self._rows)
            self.dropped_frames.update(rows["dropped_frames"])
            self.dropped_findings = dict(rows["dropped_findings"])
        elif self._flow_list is None:
            # An unbounded checkpoint into a bounded analyzer: the finished rows, in id order.
            open_ids = {c["flow"] for c in state["live"]}
            for fid in list(self._rows):
                if fid not in open_ids:
                    self._finished_row(self._rows[fid])
        for k, fid in state["closed"]:
            info = self.flow(fid)
            if info is not None:  # a dropped row's stragglers just open a new conversation
                self._closed[bytes.fromhex(k)] = info
        restored = []
        for c in state["live"]:
            info = self.flow(c["flow"])
            if info is None:
                raise ValueError(f"checkpoint has no row for open conversation {c['flow']}")
            conv = conversation_from_plain(c, info, self.max_buffer)
            name = c["dissector"]
            if name is not None:
                conv.dissector = self.dissectors.get(name)
                if conv.dissector is None:
                    raise ValueError(f"checkpoint needs dissector {name!r}, which is not loaded")
                if c["conn"] is not None:
                    try:
                        conv.conn = conv.dissector.resume(c["conn"])
                        conv.leaves_out = self.findings_only and _leaves_out(conv.conn)
                        if self.info_lines_only:
                            _tell_info_lines(conv.conn)
                    except Exception as exc:  # a broken snapshot: that conversation stays undecoded
                        conv.timed, conv.deadline = False, None
                        self._startup_errors.append(self._account(conv, _dissector_crash(conv, exc)))
            self._live[conv.key] = conv
            self._index(conv)
            restored.append(conv)
        self._wakeups.restore(restored, state["seq"])
        self._capture_files.load(state["files"])
        self.multi_file = state["multi_file"]


def _conv_id(conv: Conversation) -> int:
    return conv.info.id


def _shown_request(conv: Conversation, ref: Any) -> None:
    """A request given back with findings in a findings-only run: its response will be too."""
    shown = conv.shown_requests
    if shown is None:
        conv.shown_requests = {id(ref)}
    elif shown is not SHOWN_ALL:
        if len(shown) >= SHOWN_REQUESTS_MAX:
            conv.shown_requests = SHOWN_ALL
        else:
            shown.add(id(ref))


def _answers_shown(conv: Conversation, request: Any) -> bool:
    """Whether a response (without findings) answers a request given back with findings. The
    request's anchor is one object from the request to its response (the dissector keeps it
    meanwhile), so its identity names it; an identity met again after an anchor was let go only
    gives back a frame that the views then skip."""
    shown = conv.shown_requests
    if shown is None:
        return False
    if shown is SHOWN_ALL:
        return True
    if id(request) in shown:
        shown.discard(id(request))
        return True
    return False


def _leaves_out(conn: Connection) -> bool:
    """Whether a connection will leave out the frames a findings-only run does not show (see
    Connection.leave_out_plain_frames; duck-typed connections without it make every frame)."""
    ask = getattr(conn, "leave_out_plain_frames", None)
    return ask is not None and ask() is True


def _tell_info_lines(conn: Connection) -> None:
    """Tell a connection that the view reads Info lines (Connection.read_for_info_lines;
    duck-typed connections without it are not told)."""
    tell = getattr(conn, "read_for_info_lines", None)
    if tell is not None:
        tell()


def _dissector_crash(conv: Conversation, exc: Exception) -> Finding:
    f = DISSECTOR_ERROR(f"{conv.info.protocol} dissector failed: {type(exc).__name__}: {exc}")
    f.flow = conv.info.id
    return f


def _undecoded(info: FlowInfo) -> Finding:
    return UNDECODED(f"no dissector claimed this conversation: {info.bytes_c2s} bytes c2s, {info.bytes_s2c} "
                     f"bytes s2c undecoded (client port {info.client_port}, server port {info.server_port})")


def analyze_file(path: str, decode_as: dict[int, str] | None = None) -> Iterator[Event]:
    """Convenience: every frame and finding of one capture file, in order."""
    return Analyzer(decode_as=decode_as).run(read_packets(path))
