"""Scripts of ``(direction, bytes, ts)`` steps and driving a sans-IO connection with them, for
encoders and tests.

    script = Script().c(request_bytes).s(response_bytes)
    events = play(conn, script.items, split=3)
    list(frames(events)), all_findings(events)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from analyzer.api import Direction, Event, Finding, Frame

Step = tuple[Direction, bytes, float]


class Script:
    """A conversation under construction: frames in order, each with a direction and a time.

    A frame is sent at ``ts``, which then moves on by ``step``; with a ``dt`` (given to ``c``/``s``,
    or ``default_dt`` of a subclass) the clock first moves on by ``dt`` and the frame is sent then.
    """

    #: When set: ``c``/``s`` without a ``dt`` move the clock on by this much before the frame.
    default_dt: float | None = None

    def __init__(self, ts: float = 1_700_000_000.0, step: float = 0.001) -> None:
        self.items: list[Step] = []
        self.ts = ts
        self.step = step

    @property
    def steps(self) -> list[Step]:
        """The frames so far (another name for ``items``)."""
        return self.items

    def add(self, direction: Direction, data: bytes, *, at: float | None = None) -> Script:
        if at is not None:
            self.ts = at
        self.items.append((direction, data, self.ts))
        self.ts += self.step
        return self

    def c(self, data: bytes, dt: float | None = None, **kw: Any) -> Script:
        return self.add(Direction.C2S, data, **self._when(dt, kw))

    def s(self, data: bytes, dt: float | None = None, **kw: Any) -> Script:
        return self.add(Direction.S2C, data, **self._when(dt, kw))

    def _when(self, dt: float | None, kw: dict[str, Any]) -> dict[str, Any]:
        dt = self.default_dt if dt is None else dt
        return kw if dt is None else {**kw, "at": self.ts + dt}

    def extend(self, pairs: Iterable[tuple[Direction, bytes]]) -> Script:
        for d, b in pairs:
            self.add(d, b)
        return self

    def bytes_of(self, direction: Direction) -> bytes:
        return b"".join(b for d, b, _ in self.items if d is direction)


def play(conn: Any, steps: Sequence[Step], *, split: int | None = None, end_ts: float | None = None,
         start_ts: float = 0.0) -> list[Event]:
    """Feed every step to ``conn`` (``split``: cut each into pieces of that size), then end it.

    The connection ends at ``end_ts``, by default at the last step's time (``start_ts`` with no steps).
    """
    out: list[Event] = []
    ts = start_ts
    for d, data, t in steps:
        if split:
            for i in range(0, len(data), split):
                out.extend(conn.feed(d, data[i:i + split], t))
        else:
            out.extend(conn.feed(d, data, t))
        ts = t
    out.extend(conn.end(ts if end_ts is None else end_ts))
    return out


def frames(events: Iterable[Event]) -> Iterator[Frame]:
    return (e for e in events if isinstance(e, Frame))


def all_findings(events: Iterable[Event]) -> list[Finding]:
    """Every finding: those inside frames and the free-standing ones."""
    out: list[Finding] = []
    for e in events:
        if isinstance(e, Frame):
            out.extend(e.findings)
        else:
            out.append(e)
    return out
