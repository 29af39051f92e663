"""Time-driven checks: a side that falls silent for longer than its heartbeat allows.

Driven by capture time only (``seen`` with each frame's time, ``due`` from ``Connection.tick``),
so the same check fires at the right moment in a file, a live capture and a resumed snapshot.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import ClassVar

from analyzer.api import Direction, Finding, FrameRef, Rule
from dissectors.kit.state import plain_state


class Silence:
    """Heartbeat silence per direction: reported once per silent spell longer than
    ``factor`` × the negotiated interval, when it becomes true."""

    # Per direction as flat slots rather than {"c2s": .., "s2c": ..} dicts: every connection has a
    # Silence, most never negotiate heartbeats, and three small dicts cost ~550 bytes.
    __slots__ = ("interval", "factor", "last_c2s", "last_s2c", "ref_c2s", "ref_s2c", "reported_c2s",
                 "reported_s2c", "stopped", "at")
    TRANSIENT: ClassVar[tuple[str, ...]] = ("at",)

    def __init__(self, factor: float = 2.0) -> None:
        self.interval = 0.0  # seconds; 0 = heartbeats off
        self.factor = factor
        self.last_c2s: float | None = None  # capture time each side last sent something
        self.last_s2c: float | None = None
        self.ref_c2s: FrameRef | None = None  # its last frame, for the finding to point at
        self.ref_s2c: FrameRef | None = None
        self.reported_c2s = False  # the current silent spell was reported
        self.reported_s2c = False
        self.stopped = False  # the conversation is closing: silence is expected (see stop())
        #: What deadline() gives, kept by every change (start, seen, due, stop): the engine asks
        #: for it after every delivery of a connection with heartbeats.
        self.at: float | None = None

    def _rebuild(self) -> None:
        self.at = self._deadline()

    # Views of the per-direction slots, for readers.
    @property
    def last(self) -> dict[str, float | None]:
        return {"c2s": self.last_c2s, "s2c": self.last_s2c}

    @property
    def ref(self) -> dict[str, FrameRef | None]:
        return {"c2s": self.ref_c2s, "s2c": self.ref_s2c}

    @property
    def reported(self) -> dict[str, bool]:
        return {"c2s": self.reported_c2s, "s2c": self.reported_s2c}

    def start(self, interval: float, ts: float) -> None:
        """Heartbeats were negotiated at ``ts``: both sides are expected to speak from now on."""
        self.interval = float(interval)
        if self.last_c2s is None or self.last_c2s < ts:
            self.last_c2s = ts
        if self.last_s2c is None or self.last_s2c < ts:
            self.last_s2c = ts
        self.at = self._deadline()

    def stop(self) -> None:
        """The conversation is closing: silence is expected from now on."""
        self.stopped = True
        self.at = None

    def seen(self, direction: Direction, ts: float, ref: FrameRef | None = None,
             rule: Rule | None = None) -> list[Finding] | tuple[()]:
        """``direction`` sent something at ``ts`` (``ref``: its frame, for a finding to point at).
        With ``rule``, first what :meth:`due` gives at ``ts`` (when no tick came in time): a
        delivery asks both, and one call is cheaper on every delivery than two."""
        found: list[Finding] | tuple[()] = ()
        if rule is not None:
            at = self.at
            if at is not None and not ts < at:  # due's own test, NaN included
                found = self._due(ts, rule)
        # at as _deadline() gives it, from the one side that changed.
        timed = not self.interval <= 0 and not self.stopped  # _deadline's test, NaN included
        if direction == "c2s":
            self.last_c2s = ts
            self.reported_c2s = False
            if ref is not None:
                self.ref_c2s = ref
            if timed:
                b = self.last_s2c if not self.reported_s2c else None
                self.at = (b if b is not None and b < ts else ts) + self.interval * self.factor
        else:
            self.last_s2c = ts
            self.reported_s2c = False
            if ref is not None:
                self.ref_s2c = ref
            if timed:
                a = self.last_c2s if not self.reported_c2s else None
                self.at = (ts if a is None or ts < a else a) + self.interval * self.factor
        return found

    def deadline(self) -> float | None:
        return self.at

    def _deadline(self) -> float | None:
        if self.interval <= 0 or self.stopped:
            return None
        a = self.last_c2s if not self.reported_c2s else None
        b = self.last_s2c if not self.reported_s2c else None
        if a is None:
            return None if b is None else b + self.interval * self.factor
        if b is not None and b < a:
            a = b
        return a + self.interval * self.factor

    def due(self, ts: float, rule: Rule) -> list[Finding]:
        """Findings for every side silent for longer than the limit at ``ts``. Asked on every
        delivery of a connection with heartbeats, so the sides are looked at only once ``ts`` has
        reached the deadline (a side reported has ``ts - last > limit``, so ``ts >= last + limit``),
        or when either is NaN (a NaN last time makes the deadline NaN while the other side may be
        due)."""
        at = self.at
        if at is None or ts < at:
            return []
        return self._due(ts, rule)

    def _due(self, ts: float, rule: Rule) -> list[Finding]:
        """:meth:`due` without its look at the deadline (tests/test_kit.py proves both agree)."""
        out: list[Finding] = []
        if self.interval <= 0 or self.stopped:
            return out
        limit = self.interval * self.factor
        last = self.last_c2s
        if last is not None and ts - last > limit and not self.reported_c2s:
            self.reported_c2s = True
            out.append(self._finding(rule, "client", ts - last, self.ref_c2s))
        last = self.last_s2c
        if last is not None and ts - last > limit and not self.reported_s2c:
            self.reported_s2c = True
            out.append(self._finding(rule, "server", ts - last, self.ref_s2c))
        if out:
            self.at = self._deadline()
        return out

    def _finding(self, rule: Rule, side: str, silent: float, ref: FrameRef | None) -> Finding:
        return rule(f"the {side} sent nothing for {silent:.1f} s (heartbeat {self.interval:g} s)", related=ref)


plain_state(Silence)  # not as a decorator: a decorated class is no native class for mypyc
