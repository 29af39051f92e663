"""A line-based toy protocol to exercise the engine without a real dissector.

A ``PING`` line (either direction) expects a ``PONG`` from the other side within
:data:`PING_TIMEOUT` seconds of capture time: the connection has a deadline, and the engine's
tick reports an unanswered ping with a reference to the PING frame. The connection's state is
plain data (``snapshot``/``resume``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from analyzer.api import (
    Category,
    Connection,
    Direction,
    Dissector,
    Event,
    Field,
    Frame,
    Rule,
    Severity,
    Sniff,
)
from dissectors.kit import state
from dissectors.kit.framing import ByteQueue

BAD_LINE = Rule("toy.line.bad", Severity.WARNING, Category.VALUE, "A line starting with BAD")
GAPPED = Rule("toy.stream.gap", Severity.NOTE, Category.CAPTURE, "The toy stream lost bytes")
PING_UNANSWERED = Rule("toy.ping.unanswered", Severity.WARNING, Category.CORRELATION,
                       "A PING was not answered by a PONG in time")
PING_TIMEOUT = 5.0


def _measure(buf: memoryview, pos: int) -> int:
    end = bytes(buf[pos:]).find(b"\n")
    return 0 if end < 0 else end + 1


def _resync(buf: memoryview, pos: int) -> tuple[int, bool]:
    end = bytes(buf[pos:]).find(b"\n")
    return (len(buf), False) if end < 0 else (pos + end + 1, True)


@state.plain_state
class ToyConnection(Connection):
    def __init__(self, midstream: bool) -> None:
        self.queues = {Direction.C2S: ByteQueue(), Direction.S2C: ByteQueue()}
        self.raw: dict[Direction, bytearray] = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
        self.gaps: list[tuple[Direction, int]] = []
        self.ended = False
        # Unanswered pings, oldest first: [direction, capture time, reference to the PING frame].
        self.pings: list[list[Any]] = []

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        self.raw[direction] += data
        q = self.queues[direction]
        q.append(data)
        for piece in q.cut(_measure, _resync):
            if piece.junk:
                continue
            word = piece.data.split(b" ", 1)[0].strip().decode("ascii", "replace")
            fr = Frame(direction, piece.offset, len(piece.data), word or "EMPTY", None, piece.data.strip().decode(
                "ascii", "replace"), [Field("line", piece.data.rstrip(b"\n"), 0, len(piece.data) - 1)],
                data=piece.data)
            if word == "BAD":
                fr.findings.append(BAD_LINE("bad line", command=word))
            elif word == "PING":
                self.pings.append([direction, ts, fr.anchor()])
            elif word == "PONG":
                for i, (d, _, _) in enumerate(self.pings):
                    if d != direction:
                        del self.pings[i]
                        break
            yield fr

    def deadline(self) -> float | None:
        return self.pings[0][1] + PING_TIMEOUT if self.pings else None

    def tick(self, ts: float) -> Iterable[Event]:
        out = []
        while self.pings and self.pings[0][1] + PING_TIMEOUT <= ts:
            _, sent, ref = self.pings.pop(0)
            out.append(PING_UNANSWERED(f"PING at {sent} unanswered after {ts - sent:.1f}s", related=ref,
                                       command="PING"))
        return out

    def snapshot(self) -> dict[str, Any]:
        return state.snapshot(self)

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        self.gaps.append((direction, length))
        self.queues[direction].lost(length)
        yield GAPPED(f"{length} bytes lost")

    def end(self, ts: float) -> Iterable[Event]:
        self.ended = True
        return ()


class ToyDissector(Dissector):
    name = "toy"
    title = "Toy line protocol"
    default_ports = (7777,)

    def __init__(self) -> None:
        self.connections: list[ToyConnection] = []

    def sniff(self, data: bytes) -> Sniff:
        if data.startswith(b"HELLO"):
            return Sniff(0.9, True)
        if data.startswith(b"WELCOME"):
            return Sniff(0.9, False)
        return Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        c = ToyConnection(midstream)
        self.connections.append(c)
        return c

    def resume(self, snap: dict[str, Any]) -> Connection:
        c = state.resume(snap)
        self.connections.append(c)
        return c  # type: ignore[no-any-return]

    def rules(self) -> list[Rule]:
        return [BAD_LINE, GAPPED, PING_UNANSWERED]


@pytest.fixture
def toy_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line sees the toy dissector only (CLI tests: ``pytest.mark.usefixtures("toy_only")``)."""
    import analyzer.cli as cli  # here: importing the toy need not import the command line

    monkeypatch.setattr(cli, "load_dissectors", lambda: {"toy": ToyDissector()})
