"""Request/response linking for the views: "response in #N (1.234 ms)" on a request, "request in
#N" on its response.

A response knows its request (:attr:`Frame.request`, set by the dissector that paired them), but a
request is decoded, and would be printed, before its response exists. The views therefore read the
events through a bounded delay line (:class:`Linker`) instead of a second pass over the capture
(a pre-pass would decode everything twice, and stdin cannot be read twice): a request a later
response can name (:attr:`Frame.awaits`, set by :meth:`Frame.request_anchor`) is held back until
its response arrives, and every event behind it waits too, so the output order stays the capture's.
Frames anchored only for later findings (which name their packet themselves) are not held.
The wait is bounded both ways: a request is linked to a response that comes at most ``window``
packets and ``horizon`` seconds of capture time after it, and is let go, unlinked, as soon as
either bound is passed (the response still names its request). Both bounds are the request's own
conversation's business, so a shard of ``--jobs`` that sees only some conversations links exactly
as one process does. Memory stays bounded by what ``window`` packets make, and in any case by
``MAX_HELD`` events (a request still waiting then goes unlinked: the one case where the link
depends on what other conversations did).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from analyzer.api import Event, Frame

#: Packets (of the whole capture) a request waits for its response at most.
WINDOW = 2000
#: Events held back at most, whatever the packets made.
MAX_HELD = 50_000
#: Seconds of capture time a request waits for its response at most.
HORIZON = 10.0


class Links:
    """A frame's links: the packet (and file, with several files) of the frame at the other end,
    and the time between request and response. Made only for frames that have a link."""

    __slots__ = ("request_frame", "request_file", "response_frame", "response_file", "latency")

    def __init__(self) -> None:
        self.request_frame: int | None = None
        self.request_file: str | None = None
        self.response_frame: int | None = None
        self.response_file: str | None = None
        self.latency: float | None = None


Linked = tuple[Event, Links | None]


class Linker:
    """Events in, (event, links) out, in the same order; see the module's docstring."""

    def __init__(self, locate: Callable[[int], tuple[str | None, int]], window: int = WINDOW,
                 horizon: float = HORIZON, position: Callable[[], int] | None = None) -> None:
        self.locate = locate
        self.window = window
        self.horizon = horizon
        #: The packet ordinal the capture has reached when an event comes in (the analyzer's
        #: count); None: the event's own last packet.
        self.position = position
        self._pos = 0
        # Held events, oldest first: [event, links, waiting, position] (waiting: a request not yet
        # answered; position: the capture's packet count when it came).
        self._queue: deque[list] = deque()
        # Anchors of the held requests, by identity (the response carries the same list object).
        self._waiting: dict[int, list] = {}

    def link(self, events: Iterable[Event]) -> Iterator[Linked]:
        """Every event of ``events`` with its links, delayed as little as the bounds allow."""
        queue = self._queue
        waiting = self._waiting
        position = self.position
        holds = self.window > 0
        for ev in events:
            links = None
            held = False
            request = None
            if isinstance(ev, Frame):
                request = ev.request
                held = holds and ev.awaits
            if not queue and not held and request is None:
                yield ev, None  # the usual frame: where the capture is does not matter
                continue
            if position is not None:
                pos = self._pos = position()
            else:
                pos = self._pos = max(self._pos, _last_packet(ev))
            if request is not None:
                links = self._answer(ev, request, pos)  # type: ignore[arg-type]
            if not queue and not held:
                yield ev, links
                continue
            entry = [ev, links, held, pos]
            queue.append(entry)
            if held:
                waiting[id(ev.ref)] = entry  # type: ignore[union-attr]
            yield from self._release(ev.ts if isinstance(ev, Frame) else None, pos)

    def flush(self) -> Iterator[Linked]:
        """The end of the events: everything still held, unanswered requests as they are."""
        self._waiting.clear()
        while self._queue:
            ev, links, _, _ = self._queue.popleft()
            yield ev, links

    def _answer(self, response: Frame, request: list, pos: int) -> Links:
        links = Links()
        packet = request[2]
        if packet is not None:
            links.request_file, links.request_frame = self.locate(packet)
        latency = getattr(response, "latency", None)
        links.latency = latency
        entry = self._waiting.pop(id(request), None)
        if entry is not None and (pos - entry[3] > self.window or response.ts - entry[0].ts > self.horizon):
            entry[2] = False  # too late: let go unlinked, as a bound would have
        elif entry is not None:  # the request is still held: it learns where its response is
            req_links = entry[1]
            if req_links is None:
                req_links = entry[1] = Links()
            req_links.response_frame = response.packets[1]
            req_links.response_file = response.file
            req_links.latency = latency
            entry[2] = False
        return links

    def _release(self, now: float | None, pos: int | None = None) -> Iterator[Linked]:
        queue = self._queue
        while queue:
            head = queue[0]
            if head[2]:  # a request waiting for its response: only a bound lets it go
                ev = head[0]
                if (len(queue) <= MAX_HELD and (pos is None or pos - head[3] <= self.window)
                        and (now is None or now - ev.ts <= self.horizon)):
                    return
                self._waiting.pop(id(ev.ref), None)
            queue.popleft()
            yield head[0], head[1]


def _last_packet(ev: Event) -> int:
    if isinstance(ev, Frame):
        return ev.packets[1] if ev.packets else 0
    return getattr(ev, "frame", None) or 0
