"""Packet sources for live capture: what the loop reads, and a capture file replayed in real time.

A source hands over raw link-layer packets (:class:`~analyzer.capture.RawPacket`: bytes, link
type, timestamp), never dissected packets: the engine does all decoding, as for files. It also
keeps the capture clock (:meth:`PacketSource.now`), which drives time-driven findings when no
packet arrives, and counts what it received and what the kernel (or capture program) dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from analyzer.capture import CaptureError, RawPacket, read_packets

#: Most packets handed over by one read: the loop fires due wake-ups and flushes output between
#: batches, so a flood cannot hold them back for long.
BATCH = 512


class CaptureFailed(Exception):
    """The capture cannot start or cannot go on (no permission, unknown interface, bad filter,
    missing backend, the capture program died): its text is the one line the user sees."""


@dataclass(slots=True)
class CaptureStats:
    received: int = 0  # packets handed over
    dropped: int | None = None  # packets the kernel or capture program dropped; None: not known


class PacketSource(Protocol):
    #: What is captured, for messages and the summary ("lo (scapy)").
    name: str
    #: The link type of the packets, when known before the first one (for the pcapng copy).
    linktype: int | None

    def read(self, timeout: float) -> list[RawPacket]:
        """The packets that arrived (at most :data:`BATCH`), waiting up to ``timeout`` seconds of
        the capture clock for the first one; an empty list when none came."""
        ...

    def now(self) -> float:
        """The capture clock: the time a packet arriving now would carry."""
        ...

    def stats(self) -> CaptureStats: ...

    def close(self) -> None: ...


class ReplaySource:
    """A capture file played back in real time (or ``speed`` times faster): each packet is handed
    over when the clock reaches its timestamp, with its own timestamp and bytes, so the live path
    decodes exactly what `inspect` decodes from the file. After the last packet the clock goes on,
    as on an interface that fell silent, until the loop stops."""

    def __init__(self, path: str, speed: float = 1.0, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not speed > 0:
            raise CaptureFailed(f"--speed must be a positive number, not {speed}")
        self.name = f"{path} (replay)"
        self.speed = speed
        self._clock = clock
        self._sleep = sleep
        self._packets: Iterator[RawPacket] = read_packets(path)
        self._next = self._pull()
        self.linktype = self._next.linktype if self._next is not None else None
        self._t0 = self._next.ts if self._next is not None else time.time()
        self._start = clock()
        self._received = 0

    def _pull(self) -> RawPacket | None:
        try:
            return next(self._packets, None)
        except CaptureError as exc:
            raise CaptureFailed(str(exc)) from None

    def now(self) -> float:
        return self._t0 + (self._clock() - self._start) * self.speed

    def read(self, timeout: float) -> list[RawPacket]:
        nxt = self._next
        if nxt is None:
            self._sleep(timeout / self.speed)
            return []
        wait = nxt.ts - self.now()
        if wait > 0:
            self._sleep(min(wait, timeout) / self.speed)
        now = self.now()
        out: list[RawPacket] = []
        while nxt is not None and nxt.ts <= now and len(out) < BATCH:
            out.append(nxt)
            nxt = self._pull()
        self._next = nxt
        self._received += len(out)
        return out

    def stats(self) -> CaptureStats:
        return CaptureStats(self._received, 0)

    def close(self) -> None:
        close = getattr(self._packets, "close", None)
        if close is not None:
            close()
