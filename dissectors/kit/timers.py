"""Time-driven checks: a side that falls silent for longer than its heartbeat allows.

Driven by capture time only (``seen`` with each frame's time, ``due`` from ``Connection.tick``),
so the same check fires at the right moment in a file, a live capture and a resumed snapshot.
"""

from __future__ import annotations

from analyzer.api import Direction, Finding, FrameRef, Rule
from dissectors.kit.state import plain_state


@plain_state
class Silence:
    """Heartbeat silence per direction: reported once per silent spell longer than
    ``factor`` × the negotiated interval, when it becomes true."""

    __slots__ = ("interval", "factor", "last", "ref", "reported", "stopped")

    def __init__(self, factor: float = 2.0) -> None:
        self.interval = 0.0  # seconds; 0 = heartbeats off
        self.factor = factor
        self.last: dict[str, float | None] = {"c2s": None, "s2c": None}
        self.ref: dict[str, FrameRef | None] = {"c2s": None, "s2c": None}
        self.reported = {"c2s": False, "s2c": False}
        self.stopped = False  # the conversation is closing: silence is expected

    def start(self, interval: float, ts: float) -> None:
        """Heartbeats were negotiated at ``ts``: both sides are expected to speak from now on."""
        self.interval = float(interval)
        for d in ("c2s", "s2c"):
            if self.last[d] is None or self.last[d] < ts:  # type: ignore[operator]
                self.last[d] = ts

    def seen(self, direction: Direction, ts: float, ref: FrameRef | None = None) -> None:
        d = str(direction)
        self.last[d] = ts
        self.reported[d] = False
        if ref is not None:
            self.ref[d] = ref

    def limit(self) -> float:
        return self.interval * self.factor

    def deadline(self) -> float | None:
        if self.interval <= 0 or self.stopped:
            return None
        # Called after every delivery of a connection with heartbeats: no list, no min().
        last, reported = self.last, self.reported
        a = last["c2s"] if not reported["c2s"] else None
        b = last["s2c"] if not reported["s2c"] else None
        if a is None:
            return None if b is None else b + self.interval * self.factor
        if b is not None and b < a:
            a = b
        return a + self.interval * self.factor

    def due(self, ts: float, rule: Rule) -> list[Finding]:
        """Findings for every side silent for longer than the limit at ``ts``."""
        out: list[Finding] = []
        if self.interval <= 0 or self.stopped:
            return out
        for d in ("c2s", "s2c"):
            last = self.last[d]
            if last is None or self.reported[d] or ts - last <= self.limit():
                continue
            self.reported[d] = True
            side = "client" if d == "c2s" else "server"
            out.append(rule(f"the {side} sent nothing for {ts - last:.1f} s (heartbeat {self.interval:g} s)",
                            related=self.ref[d]))
        return out
