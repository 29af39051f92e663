"""Request/response linking through the bounded delay line: order kept, requests learn their
response while held, bounds release them, and the views show both ends."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.api import Direction, Frame, FrameRef
from analyzer.linking import Linker

ROOT = Path(__file__).parent.parent


def frame(packet: int, ts: float, anchor: bool = False, answers: Frame | None = None) -> Frame:
    f = Frame(Direction.C2S if answers is None else Direction.S2C, packet * 10, 10, f"cmd{packet}")
    f.packets, f.ts = (packet, packet), ts
    if anchor:  # a request: its response may follow
        ref = f.request_anchor()
        ref[2] = packet
    if answers is not None:
        f.request = answers.ref
        f.latency = ts - answers.ts
    return f


def through(linker: Linker, frames: list[Frame]) -> list[tuple[int, int | None, int | None]]:
    out = [*linker.link(frames), *linker.flush()]
    return [(ev.packets[1], links and links.request_frame, links and links.response_frame) for ev, links in out]


def test_request_learns_its_response_and_order_is_kept():
    req = frame(1, 0.0, anchor=True)
    other = frame(2, 0.1)
    resp = frame(3, 0.5, answers=req)
    assert through(Linker(lambda p: (None, p)), [req, other, resp]) == [(1, None, 3), (2, None, None), (3, 1, None)]


def test_bounds_release_a_request_without_its_response():
    req = frame(1, 0.0, anchor=True)
    fillers = [frame(n, 0.001 * n) for n in range(2, 8)]
    resp = frame(8, 0.01, answers=req)
    # A window of 3 events: the request goes out unanswered; its response still names it.
    got = through(Linker(lambda p: (None, p), window=3), [req, *fillers, resp])
    assert got[0] == (1, None, None) and got[-1] == (8, 1, None)
    # A horizon of 5 ms of capture time: the same.
    got = through(Linker(lambda p: (None, p), horizon=0.005), [req, *fillers, resp])
    assert got[0] == (1, None, None) and got[-1] == (8, 1, None)
    # Within both bounds it is linked.
    assert through(Linker(lambda p: (None, p)), [req, *fillers, resp])[0] == (1, None, 8)


def test_a_frame_anchored_only_for_findings_is_not_held():
    """A frame a later finding may point at (anchor, not request_anchor) awaits no response: the
    events behind it are not held back (a content-bearing method anchored for its content's
    findings held up to the window's 2,000 events, megabyte bodies among them)."""
    content = Frame(Direction.C2S, 0, 10, "publish")
    content.packets, content.ts = (1, 1), 0.0
    content.anchor()
    linker = Linker(lambda p: (None, p))
    gen = linker.link(iter([content, frame(2, 0.1)]))
    assert next(gen)[0] is content  # given back before the next event is read


def test_nothing_held_streams_straight_through():
    linker = Linker(lambda p: (None, p))
    gen = linker.link(iter([frame(1, 0.0), frame(2, 0.1)]))
    assert next(gen)[0].packets == (1, 1)  # given back before the next event is read
    assert isinstance(FrameRef.of("c2s", 0), list)


def test_tree_and_summary_show_both_ends():
    path = str(ROOT / "captures/rabbitmq_stream/rstream_errors.pcap")
    tree = CliRunner().invoke(cli.app, ["inspect", path, "-Y", "frame in {25 26}"]).stdout
    assert "    [response in #26 (0.460 ms)]" in tree and "    [request in #25 (0.460 ms earlier)]" in tree
    assert tree.index("#25 ") < tree.index("#26 ")


def test_a_late_response_is_not_linked_whatever_came_between():
    """The bounds are the request's own conversation's business: a response beyond them is not
    linked even when nothing else came in between to let the request go (a --jobs worker sees
    only some conversations; one process would have seen the others' frames pass the bound)."""
    req = frame(1, 0.0, anchor=True)
    late = frame(8, 0.01, answers=req)
    assert through(Linker(lambda p: (None, p), window=3), [req, late]) == [(1, None, None), (8, 1, None)]
    assert through(Linker(lambda p: (None, p), horizon=0.005), [req, late]) == [(1, None, None), (8, 1, None)]
    assert through(Linker(lambda p: (None, p)), [req, late]) == [(1, None, 8), (8, 1, None)]
    # The position is the capture's (packets read so far), when the linker is told it.
    req = frame(1, 0.0, anchor=True)
    answer = frame(2, 0.01, answers=req)
    assert through(Linker(lambda p: (None, p), window=3, position=iter([1, 9]).__next__),
                   [req, answer])[0] == (1, None, None)
    assert through(Linker(lambda p: (None, p), window=3, position=iter([1, 4]).__next__),
                   [req, answer])[0] == (1, None, 2)
