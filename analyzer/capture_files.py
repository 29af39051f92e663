"""Several capture files read as one capture: where each file starts among the engine's packet
ordinals, so an ordinal can be named again as (file, packet number within that file)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

from analyzer.api import Event, Frame
from analyzer.capture import RawPacket, read_packets


class CaptureFiles:
    """The files read so far, in reading order, each with the packets read before its first one."""

    __slots__ = ("files", "starts")

    def __init__(self) -> None:
        self.files: list[tuple[int, str]] = []
        self.starts: list[int] = []

    def __len__(self) -> int:
        return len(self.files)

    def packets(self, paths: list[str], read: Callable[[], int]) -> Iterator[RawPacket]:
        """Every packet of the files in turn; ``read()`` is how many packets the engine has read
        when the first one is asked for (not when this is called: the readers are lazy)."""
        # The readers are chained in C: a generator of ours in between would be resumed for every
        # packet.
        return chain.from_iterable(self._readers(paths, read))

    def _readers(self, paths: list[str], read: Callable[[], int]) -> Iterator[Iterator[RawPacket]]:
        # Counted here rather than read from the engine: the engine keeps its count in a local.
        # Each file's reader gives its count at the end, before the next file is asked for.
        counts: list[int] = []
        n = read()
        for path in paths:
            self.files.append((n, path))
            self.starts.append(n)
            yield read_packets(path, counts, plain=True)  # the engine only unpacks them
            n += counts[-1]

    def locate(self, packet: int) -> tuple[str | None, int]:
        """(file, packet number within it) of a packet ordinal; file None when not reading files."""
        i = bisect_left(self.starts, packet) - 1
        if i < 0:
            return None, packet
        start, path = self.files[i]
        return path, packet - start

    def localise(self, events: Iterator[Event], current: Callable[[], int]) -> Iterator[Event]:
        """Packet ordinals back to (file, packet number within the file) for the consumer;
        ``current()`` is the ordinal of the packet being read (for events about no packet)."""
        locate = self.locate
        for ev in events:
            if isinstance(ev, Frame):
                first, last = ev.packets
                file, last_local = locate(last)
                ev.packets = (locate(first)[1], last_local)
                ev.file = file
                for f in ev.findings:
                    f.file, f.frame = file, last_local
            elif ev.frame is not None:
                ev.file, ev.frame = locate(ev.frame)
            else:  # about no packet: the file being read when it was made
                ev.file = locate(current())[0]
            yield ev

    def to_plain(self) -> list[list[Any]]:
        return [[n, p] for n, p in self.files]

    def load(self, plain: list[list[Any]]) -> None:
        self.files = [(n, p) for n, p in plain]
        self.starts = [n for n, _ in self.files]
