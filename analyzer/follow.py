"""`streamproto follow`: one conversation's reassembled bytes, decoded or not (tshark's
``-z follow,tcp,ascii,N``).

The engine hands bytes only to dissectors, so following runs it with stand-ins: every dissector is
replaced by a :class:`Recorder` that keeps the real one's name, ports and heuristics (so protocol
choice, and with it client and server roles and flow numbers, are exactly those of `inspect` and
`flows`) but turns each piece of in-order bytes into a bare frame; and the engine's ``fallback``
is a recorder too, so the conversations no dissector claims are followed the same way. The
recorders decode nothing, which makes following cheaper than inspecting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from analyzer.api import Connection, Direction, Dissector, Event, Frame, Sniff

#: Commands of the frames a recorder makes.
DATA, GAP = "data", "gap"


class _RecorderConnection(Connection):
    __slots__ = ("offsets",)

    def __init__(self) -> None:
        self.offsets = {Direction.C2S: 0, Direction.S2C: 0}

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        at = self.offsets[direction]
        self.offsets[direction] = at + len(data)
        return [Frame(direction, at, len(data), DATA, None, "", [], data=bytes(data))]

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        at = self.offsets[direction]
        self.offsets[direction] = at + length
        return [Frame(direction, at, 0, GAP, length, f"{length} bytes missing")]


class Recorder(Dissector):
    """Stands in for ``inner`` (or, without one, for "no dissector"): its ports and heuristics, no
    decoding."""

    def __init__(self, inner: Dissector | None = None) -> None:
        self.inner = inner
        self.name = inner.name if inner is not None else "undecoded"  # type: ignore[misc]
        self.title = "recorder"  # type: ignore[misc]
        self.default_ports = inner.default_ports if inner is not None else ()  # type: ignore[misc]

    def sniff(self, data: bytes) -> Sniff:
        return self.inner.sniff(data) if self.inner is not None else Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        return _RecorderConnection()


def recorders(dissectors: dict[str, Dissector]) -> dict[str, Dissector]:
    return {name: Recorder(d) for name, d in dissectors.items()}


def chunks(events: Iterable[Any], flow: int) -> Iterator[Frame]:
    """The recorded pieces of one conversation, in capture order."""
    for ev in events:
        if isinstance(ev, Frame) and ev.flow == flow:
            yield ev


def ascii_text(data: bytes) -> str:
    """Printable ASCII as it is, newlines kept, everything else as ``.`` (as tshark's ascii mode)."""
    return "".join(chr(b) if 32 <= b < 127 or b in (10,) else "." for b in data)
