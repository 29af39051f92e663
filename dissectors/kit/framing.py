"""Cutting one direction's byte stream into frames, with resynchronisation.

Protocol-agnostic: a dissector supplies ``measure`` (how long is the frame that starts here?) and
``resync`` (where does the next plausible frame start?). The queue only ever holds bytes that
really arrived, so a length read from the wire never decides an allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from analyzer.api import Finding, Rule
from dissectors.kit.state import plain_state

#: ``measure(buf, pos)`` -> total length of the frame at ``pos``; 0 = need more bytes to tell;
#: -1 = not a frame start (the stream is out of sync).
Measure = Callable[[memoryview, int], int]
#: ``resync(buf, pos)`` -> (index, found). found: a frame starts at index. Not found: every byte
#: before index can be dropped and more data is needed.
Resync = Callable[[memoryview, int], tuple[int, bool]]


@dataclass(slots=True)
class Piece:
    """A cut piece of the stream: a whole frame, or bytes skipped while out of sync."""

    offset: int  # stream offset of the first byte
    data: bytes
    junk: bool = False


@plain_state
class ByteQueue:
    """Ordered bytes of one direction, addressed by stream offset."""

    __slots__ = ("_buf", "_pos", "_base", "synced", "_rescan", "need")
    #: ``need`` is left out of snapshots: a resumed queue measures its waiting frame again.
    TRANSIENT = ("need",)

    #: Bytes buffered beyond this while waiting for the rest of one frame are given up as
    #: unframeable: a length from the wire never makes the queue grow without bound.
    LIMIT = 64 << 20
    #: Out of sync, ``resync`` scans every unread byte again on each call until it confirms a frame
    #: start. Runs of unconfirmed bytes up to this size are scanned again on every segment; longer
    #: ones only once they grew by a quarter: a run of junk in small segments (a fuzzer found one of
    #: plausible-looking headers: 128 KiB took 6 s, a MiB minutes) costs linear work, not
    #: quadratic. The price: a frame start that the newest bytes would confirm waits for the next
    #: scan, and at the end of the stream the bytes after the last scan are left unframed.
    RESCAN_FREE = 4096

    def __init__(self, synced: bool = True) -> None:
        # None while nothing is buffered (the usual state between segments): an idle queue holds
        # no bytearray, and every fully read one is let go rather than kept empty.
        self._buf: bytearray | None = None
        self._pos = 0  # read position inside _buf
        self._base = 0  # stream offset of _buf[0]
        self.synced = synced
        self._rescan = 0  # out of sync: unread bytes needed before resync looks again (see RESCAN_FREE)
        #: The stream offset the frame waiting at the read position ends at, as ``measure`` said
        #: (0: not known). See :attr:`Framer.stable_measure`.
        self.need = 0

    def _rebuild(self) -> None:
        self.need = 0

    @property
    def offset(self) -> int:
        """Stream offset of the next unread byte."""
        return self._base + self._pos

    def __len__(self) -> int:
        buf = self._buf
        return 0 if buf is None else len(buf) - self._pos

    def append(self, data: bytes) -> None:
        if self._buf is None:
            self._buf = bytearray(data)
        else:
            self._buf += data

    def skip(self, length: int) -> None:
        """``length`` bytes were consumed without passing through the queue (a dissector cut whole
        frames straight from a segment while the queue was empty): move the stream offset past them."""
        buf = self._buf
        if buf is not None and self._pos != len(buf):
            raise ValueError("skip needs an empty queue: buffered bytes come first")
        self._base += length

    def lost(self, length: int) -> int:
        """A hole of ``length`` bytes follows what is buffered: drop the unread (now useless)
        partial frame, skip the hole, and fall out of sync. Returns how many bytes were dropped."""
        dropped = len(self)
        self._base += (len(self._buf) if self._buf is not None else 0) + length
        self._buf = None
        self._pos = 0
        self.synced = False
        self._rescan = 0
        self.need = 0
        return dropped

    def cut(self, measure: Measure, resync: Resync) -> Iterator[Piece]:
        self.need = 0
        buf = self._buf
        if buf is None:
            return
        view = memoryview(buf)
        try:
            while True:
                pos = self._pos
                if pos >= len(buf):
                    break
                if not self.synced:
                    if len(buf) - pos < getattr(self, "_rescan", 0):
                        break  # scanned already: wait until enough new bytes came
                    at, found = resync(view, pos)
                    at = max(pos, min(at, len(buf)))
                    if at > pos:
                        yield Piece(self._base + pos, bytes(view[pos:at]), junk=True)
                        self._pos = at
                    if not found:
                        waiting = len(buf) - at
                        self._rescan = waiting + waiting // 4 if waiting > self.RESCAN_FREE else 0
                        break
                    self._rescan = 0
                    self.synced = True
                    continue
                n = measure(view, pos)
                if n > 0 and pos + n > len(buf):
                    self.need = self._base + pos + n
                    break
                if n == 0:
                    break
                if n < 0:
                    self.synced = False
                    continue
                self._pos = pos + n
                yield Piece(self._base + pos, bytes(view[pos:pos + n]))
        finally:
            view.release()
            self._compact()

    def drain(self) -> Piece | None:
        """At end of stream: whatever is left unframed."""
        if len(self) == 0:
            return None
        buf = self._buf
        assert buf is not None
        piece = Piece(self.offset, bytes(buf[self._pos:]), junk=True)
        self._base += len(buf)
        self._buf = None
        self._pos = 0
        self._rescan = 0
        self.need = 0
        return piece

    def _compact(self) -> None:
        buf = self._buf
        if buf is None:
            return
        pos = self._pos
        if pos >= len(buf):  # all read: let the buffer go
            self._base += len(buf)
            self._buf = None
            self._pos = 0
        elif pos > 65536:
            del buf[:pos]
            self._base += pos
            self._pos = 0


@plain_state
class Framer:
    """One direction of a length-prefixed protocol: cuts whole frames, resynchronises after junk,
    reports junk once per run (when the next frame or the end comes) and an incomplete frame at the
    end, and stays quiet about bytes a capture gap or a mid-stream start explains.

    ``cut`` yields :class:`Piece` objects for frames and :class:`Finding` objects for junk runs, in
    stream order. ``measure`` may set :attr:`reason` to say why the bytes at a position are no
    frame start; the reason goes into the junk finding.
    """

    __slots__ = ("queue", "midstream", "seen_frame", "after_gap", "junk_at", "junk_len", "reason", "label")

    def __init__(self, label: str, synced: bool = True) -> None:
        self.queue = ByteQueue(synced=synced)
        self.label = label  # "c2s" / "s2c", for messages
        self.midstream = not synced
        self.seen_frame = False
        self.after_gap = False
        self.junk_at = -1  # stream offset of the junk run being accumulated, -1 when none
        self.junk_len = 0
        self.reason = ""

    #: Whether whole frames are cut straight from a segment when nothing is buffered (False: every
    #: segment goes through the queue; tests/test_kit_direct_cut.py holds the two to each other).
    direct_cut = True
    #: A dissector's promise that a positive ``measure`` answer (the length of a frame not yet
    #: whole) stays the same as more bytes come, until it calls :meth:`remeasure` (a setting that
    #: measure reads changed). The bytes of a frame that spans many segments then only join the
    #: queue, without the cut being run again until the frame can be whole.
    stable_measure = False

    def cut(self, data: bytes, measure: Measure, resync: Resync, junk_rule: Rule) -> Iterator[Piece | Finding]:
        q = self.queue
        waiting = False
        if self.direct_cut and type(data) is bytes and q._buf is None and q.synced and self.junk_at < 0:
            # Nothing buffered and in sync (the usual state between segments): frames are cut from
            # the segment itself, without copying it into the queue and out again. Whatever is left
            # goes to the queue in the state the queue's own cut would have left: waiting when
            # measure said wait (measure is asked again only with more bytes, as there), out of
            # sync when it said junk. The queue's base stays at the segment's start meanwhile, as
            # measure may address the segment through it (pos is then an index into the segment).
            pos = 0
            n = len(data)
            m = 0
            try:
                while pos < n:
                    m = measure(data, pos)  # type: ignore[arg-type]
                    if m <= 0 or pos + m > n:
                        break
                    start = pos
                    pos += m
                    self.seen_frame = True
                    self.after_gap = False
                    yield Piece(q._base + start, data if m == n else data[start:pos])
            finally:
                q._base += pos
                if pos < n:
                    q.append(data[pos:] if pos else data)
            if pos == n:
                return
            if m < 0:
                q.synced = False
            else:
                waiting = True
                if m > 0:  # what the queue's cut would have noted (it starts at the frame)
                    q.need = q._base + m
        else:
            q.append(data)
            need = q.need
            if need and self.stable_measure:
                buf = q._buf
                assert buf is not None
                waiting = q._base + len(buf) < need
        for piece in () if waiting else q.cut(measure, resync):
            if piece.junk:
                self._junk(piece)
                continue
            self.seen_frame = True
            self.after_gap = False
            if self.junk_at >= 0:
                yield self._junk_finding(junk_rule)
            yield piece
        if len(q) > ByteQueue.LIMIT:
            self._junk(q.drain())  # type: ignore[arg-type]
            q.synced = False

    def remeasure(self) -> None:
        """Something ``measure`` reads changed: the frame waiting in the queue is measured again
        with the next bytes (see :attr:`stable_measure`)."""
        self.queue.need = 0

    def lost(self, length: int) -> None:
        """A capture hole: the partial frame before it is useless, the bytes after it until the next
        frame start are explained by the hole (the engine reports it)."""
        self.queue.lost(length)
        self.after_gap = True

    def end(self, junk_rule: Rule, incomplete_rule: Rule) -> list[Finding]:
        out: list[Finding] = []
        if self.junk_at >= 0:
            out.append(self._junk_finding(junk_rule))
        piece = self.queue.drain()
        if piece is not None and piece.data:
            out.append(incomplete_rule(f"{self.label}: the capture ends {len(piece.data)} bytes into a frame at "
                                       f"stream offset {piece.offset}"))
        return out

    def _junk(self, piece: Piece) -> None:
        if (self.midstream and not self.seen_frame) or self.after_gap:
            # Joining a connection midway, or after a hole: the first bytes are the tail of an unseen frame.
            self.reason = ""
            return
        if self.junk_at < 0:
            self.junk_at, self.junk_len = piece.offset, 0
        self.junk_len += len(piece.data)

    def _junk_finding(self, rule: Rule) -> Finding:
        reason, self.reason = self.reason, ""
        at, n = self.junk_at, self.junk_len
        self.junk_at, self.junk_len = -1, 0
        return rule(f"{self.label}: {n} bytes at stream offset {at} skipped to resynchronise"
                    + (f" ({reason})" if reason else ""))
