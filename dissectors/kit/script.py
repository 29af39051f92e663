"""Driving a sans-IO connection with a script of ``(direction, bytes, ts)`` steps, for encoders and tests.

    events = play(conn, script.items, split=3)
    list(frames(events)), all_findings(events)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from analyzer.api import Direction, Event, Finding, Frame

Step = tuple[Direction, bytes, float]


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
