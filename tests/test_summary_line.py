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
    # (start time, frame), shown in this order.
    steps = [(100.0, frame(7, 101.5, 95, "a")), (100.0, frame(7, 101.5, 95, "b")),  # one packet's two frames
             (100.0, frame(7, 102.25, 95, "c")),  # the same number in another file: another time
             (101.0, frame(7, 102.25, 95, "g")),  # the last line's packet and time, the start moved
             (101.0, frame(8, 102.25, 40, "d", Direction.S2C)), (101.0, frame(9, math.nan, 40, "e")),
             (101.0, frame(9, math.nan, 41, "f"))]
    for t0, fr in steps:
        clock.t0 = t0  # as the first shown frame sets it
        r.frame(fr)
    arrows = {Direction.C2S: "→", Direction.S2C: "←"}
    want = []
    for t0, fr in steps:
        mid = f" 127.0.0.1:5000 {arrows[fr.direction]} 127.0.0.1:5672 {fr.protocol:<16}"
        want.append("%7d %11.6f%s%7d %s\n" % (fr.packets[1], fr.ts - t0, mid, fr.size, fr.info))  # noqa: UP031
    assert stream.getvalue() == "".join(want)


def test_a_links_suffix_is_its_link_texts() -> None:
    """link_suffix formats the usual link itself: it must give what link_texts' words give, for
    every mix of ends, files and times (nan and inf included)."""
    from analyzer.linking import Links
    from analyzer.render import link_suffix, link_texts
    from analyzer.textsafe import safe

    seen = set()
    for request, response in [(None, 12), (11, None), (11, 12), (0, None), (None, 10**9)]:
        for files in [(None, None), ("a.pcap", None), (None, "b\x1b.pcap"), ("a.pcap", "b.pcap")]:
            for latency in [None, 0.000176, 0.0, 12.5, 1e-9, math.nan, math.inf]:
                links = Links()
                links.request_frame, links.response_frame = request, response
                links.request_file, links.response_file = files
                links.latency = latency
                want = safe(f"  [{'; '.join(link_texts(links))}]")
                assert link_suffix(links) == want, (request, response, files, latency)
                seen.add(want)
    assert "  [response in #12 (0.176 ms)]" in seen and "  [request in #11 (0.176 ms earlier)]" in seen
