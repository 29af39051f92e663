"""The pipeline's two stages, the same for every engine.

Stage 1 decodes one capture file on its own. When the file is not the first of its chain (one
host's rotated files, in time order), a TCP conversation whose first packet in this file is not a
SYN may have begun in an earlier file: its packets are held back (each replaced by a placeholder
packet, so that time and packet numbers go on exactly as in the whole capture) and handed on as
raw edges. At the end of a file that is not the last of its chain, the conversations still open
(and those just closed, which absorb late packets) are handed on as a checkpoint edge each, and the
file's packet times as its timeline.

Stage 2 gets the edges of one conversation address (chain, Community ID) from every file, in
order, and replays them: it restores the checkpoint from the file where the conversation was last
decoded, feeds the held-back packets, and replays from the timelines only the packet times at which
the conversation wakes up (deadlines, idle expiry), so that it sees capture time exactly as the
whole capture's decoder would. The frames and findings equal decoding the unsplit capture, without
any task reading a whole chain of files.

A SYN in a later file that reuses the addresses of a conversation still open closes it there, as
the engine does; the new conversation is stage 1's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from typing import Any

from analyzer.api import Finding, Frame
from analyzer.capture import CaptureError, RawPacket, read_packets
from analyzer.capture_files import CaptureFiles
from analyzer.engine import Analyzer, NoDecodableLinkType
from analyzer.flows import FlowInfo
from analyzer.packets import ACK, SYN, LinkDecoder, reverse_key
from analyzer.pipeline import remote
from analyzer.pipeline.tables import Tables, conversation_id
from analyzer.registry import load_dissectors, parse_decode_as, parse_options

# An Ethernet frame carrying ARP: the placeholder for a packet held back or a replayed time. The
# engine counts it as a packet (numbers stay those of the file) and reads only its time.
_PLACEHOLDER = bytes(12) + b"\x08\x06" + bytes(28)

#: A held-back packet: (packet number in its file, time, link type, bytes, length on the wire).
Raw = tuple[int, float, int, bytes, int]


@dataclass(frozen=True)
class Settings:
    """What the decoder is told on the command line; plain data, sent to every worker."""

    decode_as: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    dialects: tuple[str, ...] = ()
    idle_timeout: float = 300.0

    def analyzer(self) -> Analyzer:
        dissectors = _dissectors(self.options, self.dialects)
        return Analyzer(dissectors, parse_decode_as(list(self.decode_as), dissectors),
                        idle_timeout=self.idle_timeout)

    def dissectors(self) -> dict[str, Any]:
        return _dissectors(self.options, self.dialects)


@cache
def _dissectors(options: tuple[str, ...], dialects: tuple[str, ...]) -> dict[str, Any]:
    return parse_options(options, dialects, load_dissectors())


@dataclass
class Edge:
    """What stage 1 of one file hands on about one conversation address."""

    position: int
    #: Checkpoint of the analyzer reduced to this address's conversations (open and just closed).
    state: dict[str, Any] | None = None
    #: Packets held back: this file's packets of a conversation that may have begun earlier.
    raw: list[Raw] = field(default_factory=list)
    #: The SYN that starts this address's first conversation in this file (it closes an older one).
    syn: Raw | None = None


@dataclass
class Timeline:
    """A file's packet times, for replaying wake-ups."""

    position: int
    capture: str
    times: bytes  # array('d') of every packet's time, in file order

    @property
    def array(self) -> array:
        a = array("d")
        a.frombytes(self.times)
        return a


@dataclass
class FileResult:
    capture: str
    edges: dict[str, Edge]  # by Community ID
    timeline: Timeline | None
    packets: int
    error: str | None


def _placeholder(ts: float) -> RawPacket:
    return RawPacket(0, ts, 1, _PLACEHOLDER, len(_PLACEHOLDER))


def _canonical(key: bytes) -> bytes:
    rk = reverse_key(key)
    return key if key <= rk else rk


class _Events:
    """Turns an analyzer's events into table rows."""

    def __init__(self, an: Analyzer, tables: Tables, chain: str, capture: str) -> None:
        self.an = an
        self.tables = tables
        self.chain = chain
        self.capture = capture
        self._ids: dict[int, str] = {}

    def conv_id(self, flow: int | None) -> str | None:
        if flow is None:
            return None
        cid = self._ids.get(flow)
        if cid is None:
            info = self.an.flow(flow)
            if info is None:
                return None
            cid = self._ids[flow] = conversation_id(self.chain, info.community_id, info.first_ts)
        return cid

    def add(self, ev: Frame | Finding) -> None:
        an = self.an
        if isinstance(ev, Frame):
            ref = ev.request
            request = None
            if ref is not None and ref[2]:
                file, number = an.locate(ref[2])
                request = (file or self.capture, number)
            self.tables.frame(ev, ev.file or self.capture, self.chain, self.conv_id(ev.flow) or "", request)
        else:
            info = an.flow(ev.flow)
            self.tables.finding(ev, ev.file or self.capture, self.chain, an.last_ts, self.conv_id(ev.flow),
                                info.protocol if info is not None else None)


def decode_file(path: str, chain: str, position: int, last: bool, settings: Settings, tables: Tables,
                size: int | None = None) -> FileResult:
    """Stage 1: one file of a chain. Rows go to ``tables``; what stage 2 needs is returned."""
    an = settings.analyzer()
    first = position == 0
    ld = LinkDecoder()
    held: dict[bytes, str | None] = {}  # canonical flow key -> Community ID when held back, else None
    edges: dict[str, Edge] = {}
    times = array("d")
    error: list[str] = []

    def packets() -> Iterator[RawPacket]:
        try:
            with contextlib.ExitStack() as stack:
                local = path
                if remote.is_uri(path):  # copied to this machine first, streamed (any size)
                    local = stack.enter_context(remote.local_copy(path))
                yield from held_back(read_packets(local))
        except CaptureError as exc:  # what was readable is kept; the file's row says what happened
            error.append(str(exc).replace(local, path) if local != path else str(exc))

    def held_back(source: Iterator[RawPacket]) -> Iterator[RawPacket]:
        for pkt in source:
            times.append(pkt.ts)
            if not first:
                seg = ld.decode(pkt)
                if seg is not None:
                    key = _canonical(ld.key)
                    if key not in held:
                        # The first packet of these addresses in this file decides: a SYN opens a
                        # conversation here; anything else may continue one from an earlier file.
                        syn = seg.flags & (SYN | ACK) == SYN
                        cid = None if syn else _community_id(seg)
                        held[key] = cid
                        if syn:
                            edge = edges.setdefault(_community_id(seg), Edge(position))
                            edge.syn = (pkt.number, pkt.ts, pkt.linktype, pkt.data, pkt.orig_len)
                    cid = held[key]
                    if cid is not None:
                        edges.setdefault(cid, Edge(position)).raw.append(
                            (pkt.number, pkt.ts, pkt.linktype, pkt.data, pkt.orig_len))
                        yield _placeholder(pkt.ts)
                        continue
            yield pkt

    if not (first and last):
        # A file of a chain: events name their file and messages say "packet N of FILE", as when
        # the whole chain is read as one capture. Every ordinal here is a packet of this file.
        an._capture_files = _Numbering(path, sys.maxsize)  # noqa: SLF001 - the pipeline owns this analyzer
        an.multi_file = True
    out = _Events(an, tables, chain, path)
    try:
        for ev in an.run(packets(), final=last):
            out.add(ev)
    except NoDecodableLinkType as exc:
        error.append(f"{path}: {exc}")
    keep: set[int] = set()  # flows handed on: their rows come from stage 2
    if not last:
        state = an.checkpoint()
        for sub, cid in _split_state(state):
            edges.setdefault(cid, Edge(position)).state = sub
        keep = {c["flow"] for c in state["live"]} | {fid for _, fid in state["closed"]}
    for info in an.flows:
        if info.id not in keep:
            tables.conversation(info, chain, [path])
    tables.file(path, chain, position, size, len(times), times[0] if times else None,
                times[-1] if times else None, error[0] if error else None)
    # Runs of stage 2 replay the times of every file after their first: all but the first's are kept.
    timeline = None if first else Timeline(position, path, times.tobytes())
    return FileResult(path, edges, timeline, len(times), error[0] if error else None)


def _community_id(seg: Any) -> str:
    from analyzer.community_id import community_id

    return community_id((seg.src, seg.sport), (seg.dst, seg.dport))


def _split_state(state: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """The analyzer's checkpoint cut into one per Community ID, each with only that address's
    conversations (renumbered from 1), to be restored on its own."""
    flows = state["flows"]
    by_cid: dict[str, dict[str, list[Any]]] = {}
    for c in state["live"]:
        cid = flows[c["flow"] - 1][-1]
        by_cid.setdefault(cid, {"live": [], "closed": []})["live"].append(c)
    for k, fid in state["closed"]:
        cid = flows[fid - 1][-1]
        by_cid.setdefault(cid, {"live": [], "closed": []})["closed"].append([k, fid])
    for cid, parts in by_cid.items():
        ids = sorted({c["flow"] for c in parts["live"]} | {fid for _, fid in parts["closed"]})
        new = {old: i + 1 for i, old in enumerate(ids)}
        sub = {**state, "flows": [[new[fid], *flows[fid - 1][1:]] for fid in ids],
               "live": [{**c, "flow": new[c["flow"]]} for c in parts["live"]],
               "closed": [[k, new[fid]] for k, fid in parts["closed"]]}
        yield sub, cid


# ------------------------------------------------------------------- stage 2
class _Numbering(CaptureFiles):
    """Packet ordinals of a replay back to (file, packet number in it): those up to ``base`` are
    the checkpointed file's own numbers, each later one a packet fed by the replay."""

    __slots__ = ("base_file", "base", "fed")

    def __init__(self, base_file: str, base: int) -> None:
        super().__init__()
        self.base_file = base_file
        self.base = base
        self.fed: list[tuple[str, int]] = []

    def locate(self, packet: int) -> tuple[str | None, int]:
        if packet <= self.base:
            return self.base_file, packet
        i = packet - self.base - 1
        return self.fed[i] if i < len(self.fed) else (None, packet)


@cache
def _running_max(times: bytes) -> tuple[list[float], array]:
    a = array("d")
    a.frombytes(times)
    return list(accumulate(a, max)), a


def continue_address(chain: str, captures: list[str], edges: dict[int, Edge], timelines: dict[int, Timeline],
                     settings: Settings, tables: Tables) -> None:
    """Stage 2: one conversation address (chain, Community ID) over the files of its chain.

    ``captures``: the chain's files in order; ``edges``: this address's edges by file position;
    ``timelines``: the times of the chain's files from the first edge's file on."""
    positions = sorted(edges)
    n = len(captures)
    i = 0
    while i < len(positions):
        pos = positions[i]
        edge = edges[pos]
        if edge.raw:
            start, state = pos, None
        elif edge.state is not None:
            start, state = pos + 1, edge.state
        else:  # a SYN with nothing before it: stage 1 decoded all of it
            i += 1
            continue
        # This run goes on until the next file where a SYN starts a new conversation (or the end).
        stop = next((p for p in positions[i + 1:] if edges[p].syn is not None), n)
        if state is not None and not state["live"] and not any(edges[p].raw for p in range(start, stop)
                                                                 if p in edges):
            # Only conversations already closed, and nothing after them: their rows as they are.
            for plain in state["flows"]:
                tables.conversation(FlowInfo.from_plain(plain), chain, [captures[pos]])
        else:
            _replay(chain, captures, edges, timelines, settings, tables, pos, start, stop, state)
        i = next((k for k, p in enumerate(positions) if p >= stop), len(positions))


def _replay(chain: str, captures: list[str], edges: dict[int, Edge], timelines: dict[int, Timeline],
            settings: Settings, tables: Tables, origin: int, start: int, stop: int,
            state: dict[str, Any] | None) -> None:
    an = settings.analyzer()
    restored = 0
    if state is not None:
        an.restore(state)
        restored = len(an.flows)
    numbering = _Numbering(captures[origin], an.packets)
    # The replay numbers packets itself: the checkpointed file's, then each packet it feeds.
    an._capture_files = numbering  # noqa: SLF001 - the pipeline owns this analyzer
    an.multi_file = True
    n = len(captures)
    final = stop >= n
    seen: list[tuple[float, int]] = []  # (time, position) of every held-back packet fed
    closing = [0]  # flows up to this id are the replay's; 0: not closing
    out = _Events(an, tables, chain, captures[origin])

    def ticks(pos: int, lo: int, hi: int) -> Iterator[RawPacket]:
        """Placeholders for the packets of file ``pos`` in [lo, hi) at which a wake-up is due."""
        runmax, times = _running_max(timelines[pos].times)
        capture = captures[pos]
        while lo < hi:
            w = an.next_wakeup()
            if w is None:
                return
            k = bisect_left(runmax, w, lo, hi)
            while k < hi and times[k] < w:  # out-of-order times: the first packet at or after w
                k += 1
            if k >= hi:
                return
            numbering.fed.append((capture, k + 1))
            yield _placeholder(times[k])
            lo = k + 1

    def packets() -> Iterator[RawPacket]:
        for pos in range(start, min(stop + 1, n)):
            edge = edges.get(pos)
            real: Iterable[Raw] = ()
            if edge is not None and pos < stop and edge.raw:
                real = edge.raw
            elif edge is not None and pos == stop and edge.syn is not None:
                real = (edge.syn,)
            if not real and an.live == 0 and not any(p in edges and edges[p].raw for p in range(pos, stop)):
                return  # nothing open and nothing more to feed: later times change nothing
            tl = timelines.get(pos)
            count = len(tl.times) // 8 if tl is not None else 0
            lo = 0
            for number, ts, linktype, data, orig_len in real:
                if tl is not None:
                    yield from ticks(pos, lo, number - 1)
                if pos == stop:
                    closing[0] = len(an.flows)
                numbering.fed.append((captures[pos], number))
                seen.append((ts, pos))
                yield RawPacket(number, ts, linktype, data, orig_len)
                lo = number
            if pos == stop:
                return
            if tl is None:
                continue
            if pos == n - 1:
                yield from ticks(pos, lo, count - 1)
                if lo < count:  # the capture's last packet: its time ends every open conversation
                    numbering.fed.append((captures[pos], count))
                    yield _placeholder(tl.array[count - 1])
            else:
                yield from ticks(pos, lo, count)

    for ev in an.run(packets(), final=final):
        if closing[0] and (ev.flow is None or ev.flow > closing[0]):
            continue  # made by the SYN that starts stage 1's new conversation
        out.add(ev)
    for info in an.flows[:closing[0] or len(an.flows)]:
        files = [captures[origin]] if info.id <= restored else []
        for ts, pos in seen:
            if info.first_ts <= ts <= info.last_ts and captures[pos] not in files:
                files.append(captures[pos])
        tables.conversation(info, chain, files)


def file_size(path: str) -> int | None:
    if remote.is_uri(path):
        return remote.size(path)
    try:
        return os.path.getsize(path)
    except OSError:
        return None


Callback = Callable[[str], None]
