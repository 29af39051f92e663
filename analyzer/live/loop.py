"""The live loop: packets from a source into the engine, time-driven findings on the clock.

Packets are fed to :meth:`Analyzer.feed` batch by batch, through the same link/IP/TCP decoding,
reassembly, conversations and dissectors as a file. Between batches, and whenever no packet
arrives for :data:`TICK` seconds, the capture clock is handed to :meth:`Analyzer.advance`, so a
heartbeat silence or an idle expiry is reported when it becomes true rather than at the next
packet. A :class:`Tick` marks each such moment for the display (it releases what it held back
and flushes its output).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from analyzer.api import Event
from analyzer.engine import Analyzer
from analyzer.live.sources import PacketSource
from analyzer.live.tee import PcapngTee

#: Longest wait for packets, in seconds: how late a stop request (Ctrl-C, SIGTERM) or the end of
#: --duration is noticed at most, and how often the display is told the time.
TICK = 0.2


@dataclass(slots=True)
class Tick:
    """The capture clock reached ``now``; every event up to that time has been given."""

    now: float


class LiveRun:
    """One live capture: iterate :meth:`events`; :meth:`stop` (from a signal handler too) ends it
    after the current batch, with the end-of-capture events (conversations finished at stop)."""

    def __init__(self, analyzer: Analyzer, source: PacketSource, *, tee: PcapngTee | None = None,
                 duration: float | None = None, tick: float = TICK) -> None:
        self.analyzer = analyzer
        self.source = source
        self.tee = tee
        self.duration = duration
        self.tick = tick
        #: Why the capture stopped: "interrupted", "duration", "count", or None while it runs.
        self.reason: str | None = None
        self.started: float | None = None  # the capture clock at the start
        self.stopped: float | None = None
        #: Conversations still open when the capture stopped (finished then, as at a file's end).
        self.open_at_stop = 0

    def stop(self, reason: str = "interrupted") -> None:
        if self.reason is None:
            self.reason = reason

    def events(self) -> Iterator[Event | Tick]:
        analyzer, source, tee = self.analyzer, self.source, self.tee
        self.started = start = source.now()
        end = start + self.duration if self.duration is not None else None
        try:
            while self.reason is None:
                now = source.now()
                if end is not None and now >= end:
                    self.stop("duration")
                    break
                # Wake in time for the earliest due wake-up and the end of --duration (clock
                # seconds: for a sped-up replay that only makes the waits shorter).
                timeout = self.tick
                wake = analyzer.next_wakeup()
                if wake is not None:
                    timeout = min(timeout, max(0.0, wake - now))
                if end is not None:
                    timeout = min(timeout, max(0.0, end - now))
                batch = source.read(timeout)
                if batch:
                    if tee is not None:
                        tee.write(batch)  # on disk before it is decoded: an interrupted run keeps it
                    yield from analyzer.feed(batch)
                now = source.now()
                yield from analyzer.advance(now)
                yield Tick(now)
            self._stopping()
            # The capture's end, as at the end of a file: open conversations are finished,
            # requests still unanswered are reported.
            yield from analyzer.advance(self.stopped)  # type: ignore[arg-type]
            yield from analyzer.finish()
            yield Tick(self.stopped)  # type: ignore[arg-type]
        finally:
            self._stopping()  # also when the reader stopped early (-c)

    def _stopping(self) -> None:
        if self.stopped is None:
            self.stopped = self.source.now()
            self.open_at_stop = self.analyzer.live
