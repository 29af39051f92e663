"""When open conversations wake up, in capture time: a heap of (wake time, conversation id,
sequence, conversation).

A conversation wakes at the earlier of its dissector's :meth:`Connection.deadline` and its idle
expiry (no packet for ``idle_timeout`` seconds of capture time). Entries are invalidated lazily (a
conversation knows the sequence number of its one valid entry) and the heap is compacted when stale
entries outnumber valid ones, so it holds at most about two entries per open conversation. Pushing
and popping cost O(log n) in the open conversations; nothing scans all of them. Conversations due at
the same instant wake in id order, whatever order they were scheduled in: an analyzer that sees
only some of the conversations (one shard of ``--jobs``) wakes its own in the order one analyzer
of all of them would.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from analyzer.flows import Conversation

#: Stale heap entries tolerated before the heap is compacted (and at most as many as valid ones).
_STALE_SLACK = 64


class Wakeups:
    """The heap and its bookkeeping. ``heap`` stays the same list object for the analyzer's life:
    the packet loop holds it in a local to test the earliest entry without a call."""

    __slots__ = ("heap", "seq", "stale", "woke_at")

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, Conversation]] = []
        self.seq = 0
        self.stale = 0
        #: The wake time of the entry :meth:`due` gave back last.
        self.woke_at = 0.0

    def schedule(self, conv: Conversation, idle: float | None) -> None:
        """Make sure the conversation wakes at the earlier of its deadline and its idle expiry."""
        when = conv.info.last_ts + idle if idle is not None else None
        dl = conv.deadline
        if dl is not None and (when is None or dl < when):
            when = dl
        if when is None:
            return
        wake = conv.wake
        if wake is not None:
            if wake[0] <= when:
                return  # the entry already there fires first and schedules again
            self.stale += 1
        self.seq += 1
        conv.wake = entry = (when, conv.info.id, self.seq, conv)
        heap = self.heap
        heapq.heappush(heap, entry)
        if self.stale > _STALE_SLACK and 2 * self.stale > len(heap):
            # In place: the packet loop holds the list.
            heap[:] = [e for e in heap if not e[3].closed and e[3].wake is e]
            heapq.heapify(heap)
            self.stale = 0

    def cancel(self, conv: Conversation) -> None:
        """The conversation is finished: its entry, if any, is dead now."""
        if conv.wake is not None:
            self.stale += 1
            conv.wake = None

    def due(self, now: float) -> Iterator[Conversation]:
        """Each conversation whose valid entry is due, popped one at a time (the caller may schedule
        again, even at ``now``, between two)."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            conv = entry[3]
            if conv.closed or conv.wake is not entry:
                self.stale -= 1
                continue
            conv.wake = None
            self.woke_at = entry[0]
            yield conv

    def restore(self, convs: Iterable[Conversation], seq: int) -> None:
        """Entries again for restored conversations (their ``wake`` entries already set)."""
        self.heap.extend(c.wake for c in convs if c.wake is not None)
        heapq.heapify(self.heap)
        self.seq = seq
