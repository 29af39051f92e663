"""TCP reassembly of one direction: sequence numbers in, ordered stream bytes and gaps out.

Positions are kept as 64-bit stream offsets (0 = the first byte after the SYN, or the first byte
seen when the capture starts mid-connection), so 32-bit sequence wraparound costs nothing.

A hole is declared lost (a :class:`Gap`) only when the capture cannot fill it any more: the peer
acknowledged bytes beyond it while later data waits, the out-of-order buffer overflows (in bytes,
``max_buffer``, or in segments, one per ``SEGMENT_BYTES`` of it), or the stream is flushed at the end. A hole the peer has not acknowledged may still be filled by a
retransmission, so it is waited for.

Memory. An idle direction costs a few small objects: the out-of-order buffer exists only while
something waits in it, and delivered bytes are kept for comparing retransmissions
(``tcp.overlap_mismatch``) only until the peer acknowledges them, and never more than the last
``TAIL_KEEP`` (amortised: up to twice that) when the capture shows no acknowledgements. The
trade-off: a retransmission of bytes the capture already saw acknowledged (a spurious
retransmission after a lost ACK, or one older than the window) is not compared, so a differing copy
of such bytes goes unreported. A sender retransmits what it believes unacknowledged, which is what
the capture usually also shows unacknowledged, so the common case is still covered, and an
open but quiet conversation keeps no stream bytes at all.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

import base64
import heapq
from typing import Any, NamedTuple

from analyzer.api import Category, Finding, Rule, Severity

GAP = Rule("tcp.gap", Severity.WARNING, Category.CAPTURE,
           "Bytes of a TCP stream are missing from the capture; decoding resynchronises after the hole")
OVERLAP_MISMATCH = Rule("tcp.overlap_mismatch", Severity.WARNING, Category.CAPTURE,
                        "A retransmitted or overlapping TCP segment carries bytes that differ from the first copy")
BUFFER_OVERFLOW = Rule("tcp.buffer_overflow", Severity.WARNING, Category.CAPTURE,
                       "Out-of-order data exceeded the reassembly buffer (bytes or segments); the hole was "
                       "given up as lost")
RULES: tuple[Rule, ...] = (GAP, OVERLAP_MISMATCH, BUFFER_OVERFLOW)

MOD = 1 << 32
HALF = 1 << 31
#: Delivered, unacknowledged bytes kept per direction to compare retransmissions with (trimmed
#: when twice this size, so up to 2 x TAIL_KEEP while the peer acknowledges nothing).
TAIL_KEEP = 16 * 1024
#: Out-of-order segments that may wait behind a hole, beside the byte limit (``max_buffer``): one
#: per this many bytes of it. A waiting segment costs about 250 bytes of bookkeeping whatever its
#: size, so a flood of one-byte segments would otherwise hold a million entries (250 MB) under an
#: 8 MiB byte limit; with the default limit this allows 131,072 segments (8 MiB in 64-byte segments).
SEGMENT_BYTES = 64


class Data(NamedTuple):
    offset: int
    data: bytes
    packet: int
    ts: float


class Gap(NamedTuple):
    offset: int
    length: int
    packet: int | None  # where the stream resumes after the hole; None when it never does
    ts: float


class Note(NamedTuple):
    finding: Finding


Event = Data | Gap | Note
_new = tuple.__new__  # builds a named tuple without its Python-level constructor (hot path)


class Rare:
    """The state a direction needs only off the in-order path: out-of-order data, the FIN's offset,
    and (for the engine's sides) the bytes kept for the protocol heuristics and whether a FIN was
    seen. One object, None in the common case (:meth:`StreamReassembler.segment`'s fast path
    requires that), instead of six slots in every direction of every conversation."""

    __slots__ = ("pending", "order", "pending_bytes", "fin_abs", "sniff_buf", "fin")

    def __init__(self) -> None:
        # Out-of-order data, offset -> (data, packet, ts); None while nothing waits (a dict emptied
        # after holding many entries keeps its large table).
        self.pending: dict[int, tuple[bytes, int, float]] | None = None
        # The keys of ``pending`` as a min-heap: the lowest waiting offset in O(1), insertion in
        # O(log n) (a ``min()`` per segment made reversed delivery quadratic). Always the same set
        # as ``pending``'s keys: entries are only ever removed lowest first. None with ``pending``.
        self.order: list[int] | None = None
        self.pending_bytes = 0
        self.fin_abs: int | None = None
        self.sniff_buf: bytearray | None = None  # see :class:`analyzer.flows.Side`
        self.fin = False  # see :class:`analyzer.flows.Side`

    def empty(self) -> bool:
        return self.pending is None and self.fin_abs is None and self.sniff_buf is None and not self.fin


class StreamReassembler:
    __slots__ = ("max_buffer", "next_seq", "next_abs", "tail", "acked_abs", "rare")

    def __init__(self, max_buffer: int = 8 * 1024 * 1024) -> None:
        self.max_buffer = max_buffer
        self.next_seq: int | None = None  # sequence number of the next expected byte
        self.next_abs = 0  # its stream offset
        # Delivered bytes not yet acknowledged, ending at next_abs (so starting at :attr:`tail_start`,
        # not kept); None, not an empty bytearray, when there are none (idle directions). A single
        # segment's bytes are held as they came, not copied: most are acknowledged before the next.
        self.tail: bytes | bytearray | None = None
        self.acked_abs = 0  # highest offset the peer acknowledged
        # Out-of-order data and the FIN's offset (see :class:`Rare`); None while there are none.
        self.rare: Rare | None = None

    @property
    def tail_start(self) -> int:
        """The stream offset of ``tail``'s first byte (``next_abs`` when there is no tail)."""
        tail = self.tail
        return self.next_abs if tail is None else self.next_abs - len(tail)

    @property
    def pending(self) -> dict[int, tuple[bytes, int, float]] | None:
        rare = self.rare
        return None if rare is None else rare.pending

    @property
    def order(self) -> list[int] | None:
        rare = self.rare
        return None if rare is None else rare.order

    @property
    def pending_bytes(self) -> int:
        rare = self.rare
        return 0 if rare is None else rare.pending_bytes

    @property
    def fin_abs(self) -> int | None:
        rare = self.rare
        return None if rare is None else rare.fin_abs

    def _rare(self) -> Rare:
        rare = self.rare
        if rare is None:
            rare = self.rare = Rare()
        return rare

    def syn(self, seq: int) -> None:
        if self.next_seq is None or self.next_abs == 0 and not self.pending:
            self.next_seq = (seq + 1) % MOD
            self.next_abs = 0

    def _abs(self, seq: int) -> int:
        d = (seq - self.next_seq) % MOD  # type: ignore[operator]
        if d >= HALF:
            d -= MOD
        return self.next_abs + d

    def in_order(self, seq: int, payload: bytes) -> int:
        """The common case of :meth:`segment`, for a non-empty ``payload`` without FIN: when it is
        the next bytes in order and nothing waits out of order, take it and give back its stream
        offset (the one Data :meth:`segment` would give); else -1, nothing changed. The engine's
        fast path calls it first, without the list and the Data that :meth:`segment` makes."""
        if seq != self.next_seq or self.rare is not None:
            return -1
        start = self.next_abs
        self._advance(payload, len(payload))
        return start

    def segment(self, seq: int, payload: bytes, fin: bool, packet: int, ts: float) -> list[Event]:
        if payload and not fin:
            start = self.in_order(seq, payload)
            if start >= 0:
                return [_new(Data, (start, payload, packet, ts))]
        if self.next_seq is None:
            self.next_seq, self.next_abs = seq, 0  # the capture starts mid-stream
        start = self._abs(seq)
        n = len(payload)
        if fin:
            end = start + n
            rare = self._rare()
            if rare.fin_abs is None or end < rare.fin_abs:
                rare.fin_abs = end
        if not n:
            return []
        nxt = self.next_abs
        if start == nxt and not self.pending:  # the common case: the next bytes, in order
            self._advance(payload, n)
            return [Data(start, payload, packet, ts)]
        out: list[Event] = []
        if start < nxt:
            overlap = min(nxt, start + n) - start
            self._compare(start, payload[:overlap], out)
            if start + n <= nxt:
                return out  # a retransmission of delivered bytes
            payload, start, n = payload[overlap:], nxt, n - overlap
        if start == nxt:
            self._advance(payload, n)
            out.append(Data(start, payload, packet, ts))
            self._drain(out)
            return out
        rare = self._rare()
        pending, order = rare.pending, rare.order
        if pending is None or order is None:
            pending, order = rare.pending, rare.order = {}, []
        old = pending.get(start)
        if old is None or len(old[0]) < n:
            if old is None:
                heapq.heappush(order, start)
            else:
                rare.pending_bytes -= len(old[0])
            pending[start] = (payload, packet, ts)
            rare.pending_bytes += n
        if self.acked_abs > nxt:
            self._lose(min(self.acked_abs, order[0]), packet, ts, out)
        elif rare.pending_bytes > self.max_buffer:
            out.append(Note(BUFFER_OVERFLOW(
                f"{rare.pending_bytes} bytes waited behind a hole at offset {nxt}; limit {self.max_buffer}")))
            self._lose(order[0], packet, ts, out)
        elif len(order) > self.max_buffer // SEGMENT_BYTES:
            out.append(Note(BUFFER_OVERFLOW(
                f"{len(order)} segments waited behind a hole at offset {nxt}; limit "
                f"{self.max_buffer // SEGMENT_BYTES} segments")))
            self._lose(order[0], packet, ts, out)
        return out

    def peer_ack(self, ack: int, packet: int, ts: float) -> list[Event]:
        """The other side acknowledged up to ``ack``: bytes before it will not be retransmitted."""
        if ack == self.next_seq and self.rare is None:
            # Everything delivered is acknowledged (the usual acknowledgement): _acknowledged
            # would find the same offset, next_abs, and drop the whole tail.
            if self.next_abs > self.acked_abs:
                self.acked_abs = self.next_abs
                self.tail = None
            return []
        return self._acknowledged(ack, packet, ts)

    def _acknowledged(self, ack: int, packet: int, ts: float) -> list[Event]:
        """:meth:`peer_ack` in general (tests/test_reassembly.py proves its shortcut agrees)."""
        if self.next_seq is None:
            # Mid-stream start: the acknowledgement tells where this direction stands.
            self.next_seq, self.next_abs = ack, 0
            return []
        a = self._abs(ack)
        rare = self.rare
        if rare is not None and rare.fin_abs is not None and a > rare.fin_abs:
            a = rare.fin_abs
        if a <= self.acked_abs:
            return []
        if a == self.next_abs:
            a = self.next_abs  # the same int: a fully acknowledged direction holds one offset object
        self.acked_abs = a
        tail = self.tail
        if tail:
            # Acknowledged bytes will not be compared again (see the module's notes on memory).
            cut = min(a, self.next_abs) - (self.next_abs - len(tail))
            if cut >= len(tail):
                self.tail = None
            elif cut > 0:
                if type(tail) is bytearray:
                    del tail[:cut]
                else:
                    self.tail = tail[cut:]
        order = rare.order if rare is not None else None
        if order and a > self.next_abs:
            out: list[Event] = []
            self._lose(min(a, order[0]), packet, ts, out)
            return out
        return []

    def flush(self, ts: float) -> list[Event]:
        """End of capture: whatever waits behind holes is delivered, the holes reported."""
        out: list[Event] = []
        while self.order:
            self._lose(self.order[0], None, ts, out)
        # Bytes the FIN or the peer's acknowledgement prove were sent, but the capture never saw:
        # no packet resumes the stream after them, so the hole belongs to no packet.
        end = max(self.fin_abs or 0, self.acked_abs)
        if self.next_seq is not None and end > self.next_abs:
            self._lose(end, None, ts, out)
        return out

    # ------------------------------------------------------------------ checkpoints
    def to_plain(self) -> dict[str, Any]:
        """The whole state as JSON-serialisable data (for :meth:`Analyzer.checkpoint`)."""
        pending = self.pending or {}
        return {"max_buffer": self.max_buffer, "next_seq": self.next_seq, "next_abs": self.next_abs,
                "pending": [[off, b64(pending[off][0]), pending[off][1], pending[off][2]]
                            for off in sorted(pending)],
                "tail": b64(self.tail or b""), "tail_start": self.tail_start, "fin_abs": self.fin_abs,
                "acked_abs": self.acked_abs}

    @classmethod
    def from_plain(cls, d: dict[str, Any]) -> StreamReassembler:
        r = cls(d["max_buffer"])
        r.load_plain(d)
        return r

    def load_plain(self, d: dict[str, Any]) -> None:
        """The state of :meth:`to_plain` back into this (fresh) reassembler."""
        self.max_buffer = d["max_buffer"]
        self.next_seq, self.next_abs = d["next_seq"], d["next_abs"]
        if d["pending"]:
            rare = self._rare()
            pending: dict[int, tuple[bytes, int, float]] = {}
            order: list[int] = []
            rare.pending, rare.order = pending, order
            for off, data, packet, ts in d["pending"]:
                raw = unb64(data)
                pending[off] = (raw, packet, ts)
                rare.pending_bytes += len(raw)
                order.append(off)  # sorted: already a heap
        self.tail = bytearray(unb64(d["tail"])) if d["tail"] else None
        self.acked_abs = d["acked_abs"]  # (tail_start is next_abs - len(tail))
        if d["fin_abs"] is not None:
            self._rare().fin_abs = d["fin_abs"]

    # ------------------------------------------------------------------ internals
    def _advance(self, payload: bytes, n: int) -> None:
        self.next_abs += n
        self.next_seq = (self.next_seq + n) % MOD  # type: ignore[operator]
        tail = self.tail
        if tail is None:
            self.tail = payload if type(payload) is bytes else bytearray(payload)
        else:
            if type(tail) is not bytearray:
                self.tail = tail = bytearray(tail)
            tail += payload
            if len(tail) > 2 * TAIL_KEEP:
                self._trim(tail)

    def _trim(self, tail: bytearray) -> None:
        cut = len(tail) - TAIL_KEEP
        del tail[:cut]

    def _compare(self, start: int, data: bytes, out: list[Event]) -> None:
        """Bytes at ``start`` were delivered already; report if this copy differs."""
        tail = self.tail
        if tail is None:
            return
        tail_start = self.next_abs - len(tail)
        lo = max(start, tail_start)
        if lo >= start + len(data):
            return
        old = tail[lo - tail_start:lo - tail_start + (start + len(data) - lo)]
        new = data[lo - start:]
        if old != new:
            out.append(Note(OVERLAP_MISMATCH(
                f"{len(new)} bytes at stream offset {lo} were sent again with different content")))

    def _lose(self, upto: int, packet: int | None, ts: float, out: list[Event]) -> None:
        """Give up on the bytes before ``upto``, then deliver whatever is now in order.

        ``packet`` is the one that proved the loss; the gap is reported at the packet whose data
        resumes the stream right after the hole when the capture holds it (as Wireshark reports
        "previous segment not captured"), else at ``packet``."""
        nxt = self.next_abs
        if upto > nxt:
            resumed = self.pending.get(upto) if self.pending is not None else None
            if resumed is not None:
                packet = resumed[1]
            out.append(Gap(nxt, upto - nxt, packet, ts))
            self.next_seq = (self.next_seq + upto - nxt) % MOD  # type: ignore[operator]
            self.next_abs = upto
            self.tail = None
        self._drain(out)

    def _drain(self, out: list[Event]) -> None:
        rare = self.rare
        if rare is None:
            return
        pending = rare.pending
        order = rare.order
        if pending is None or order is None:
            return
        while order:
            first = order[0]
            nxt = self.next_abs
            if first > nxt:
                return
            heapq.heappop(order)
            data, packet, ts = pending.pop(first)
            rare.pending_bytes -= len(data)
            end = first + len(data)
            if first < nxt:
                overlap = min(nxt, end) - first
                self._compare(first, data[:overlap], out)
                if end <= nxt:
                    continue
                data, first = data[overlap:], nxt
            self._advance(data, len(data))
            out.append(Data(first, data, packet, ts))
        rare.pending = rare.order = None  # all delivered: drop the (possibly large) empty table
        if rare.empty():
            self.rare = None


def b64(data: bytes | bytearray) -> str:
    """Bytes as JSON text (checkpoints)."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)
