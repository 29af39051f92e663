"""The summary view's line, "%7d %11.6f%s%7d %s" of (packet, time, endpoints and protocol, size,
Info), is put together from parts the renderer keeps for the next lines (issue 15): the parts
must never leak from one line into another whose packet, time, start time or size differ."""

from __future__ import annotations

import io
import math

from analyzer.api import Direction, Frame
from analyzer.render import Clock, Output, SummaryRenderer


def frame(packet: int, ts: float, size: int, info: str, direction: Direction = Direction.C2S) -> Frame:
    fr = Frame(direction, 0, size, "Cmd", None, info, [], [])
    fr.packets, fr.ts, fr.flow = (packet, packet), ts, 1
    fr.src, fr.dst = ("127.0.0.1:5000", "127.0.0.1:5672") if direction is Direction.C2S else \
        ("127.0.0.1:5672", "127.0.0.1:5000")
    fr.protocol = "amqp091"
    return fr


def test_every_line_is_its_own_frames() -> None:
    stream = io.StringIO()
    clock = Clock("r", 100.0)
    r = SummaryRenderer(Output(stream, color=False), 100.0, clock)
    frames = [frame(7, 101.5, 95, "a"), frame(7, 101.5, 95, "b"),  # one packet's two frames
              frame(7, 102.25, 95, "c"),  # the same number in another file: another time
              frame(8, 102.25, 40, "d", Direction.S2C), frame(9, math.nan, 40, "e"), frame(9, math.nan, 41, "f")]
    for fr in frames[:3]:
        r.frame(fr)
    clock.t0 = 101.0  # the start moved (as the first shown frame sets it)
    expected_t0 = [100.0] * 3 + [101.0] * 3
    r.frame(frame(7, 102.25, 95, "g"))  # the last line's packet and time, a new start time
    expected_t0.insert(3, 101.0)
    for fr in frames[3:]:
        r.frame(fr)
    frames.insert(3, frame(7, 102.25, 95, "g"))
    arrows = {Direction.C2S: "→", Direction.S2C: "←"}
    want = []
    for fr, t0 in zip(frames, expected_t0, strict=True):
        mid = f" 127.0.0.1:5000 {arrows[fr.direction]} 127.0.0.1:5672 {fr.protocol:<16}"
        want.append("%7d %11.6f%s%7d %s\n" % (fr.packets[1], fr.ts - t0, mid, fr.size, fr.info))  # noqa: UP031
    assert stream.getvalue() == "".join(want)
