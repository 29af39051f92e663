"""Pairing requests with responses: by id (RabbitMQ Stream's correlation ids) or strictly in order
(Iggy; AMQP 0-9-1 synchronous methods per channel).

State is plain data: per requesting direction, a map from key to the outstanding request (by id)
or to a queue of them (in order: a list whose first element is the index of the oldest entry, so
that taking the oldest is O(1) without a deque, which JSON has no form for), each
``[name, ref, ts, extra]`` where ``ref`` is a :class:`~analyzer.api.FrameRef` (never the frame) and
``extra`` whatever small plain value the dissector needs back with the response. The number of
outstanding requests is bounded: past ``limit`` the oldest are forgotten (reported once through
``limit_rule``) and the "unanswered" check is skipped for the direction, which can no longer tell.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from analyzer.api import Finding, FrameRef, Rule
from dissectors.kit.state import plain_state

#: Outstanding requests remembered per direction before the oldest are forgotten.
DEFAULT_LIMIT = 100_000

Pending = list  # [name, ref, ts, extra]


@plain_state
class Correlator:
    """``Correlator.by_id()`` or ``Correlator.in_order()``; one per connection."""

    __slots__ = ("ordered", "limit", "out", "count", "overflowed")

    def __init__(self, ordered: bool, limit: int = DEFAULT_LIMIT) -> None:
        self.ordered = ordered
        self.limit = limit
        # requesting direction ("c2s"/"s2c") -> key -> Pending (by id) or list[Pending] (in order)
        self.out: dict[str, dict[Hashable, Any]] = {"c2s": {}, "s2c": {}}
        self.count = {"c2s": 0, "s2c": 0}
        self.overflowed = {"c2s": False, "s2c": False}

    @classmethod
    def by_id(cls, limit: int = DEFAULT_LIMIT) -> Correlator:
        return cls(False, limit)

    @classmethod
    def in_order(cls, limit: int = DEFAULT_LIMIT) -> Correlator:
        return cls(True, limit)

    def request(self, direction: str, key: Hashable, name: str, ref: FrameRef | None, ts: float,
                extra: Any = None, *, duplicate: Rule | None = None, limit_rule: Rule | None = None) -> Finding | None:
        """A request sent by ``direction``. By id, a key already outstanding is replaced and, with
        ``duplicate``, reported."""
        d = str(direction)
        table = self.out[d]
        finding = None
        entry = [name, ref, ts, extra]
        if self.ordered:
            queue = table.get(key)
            if queue is None:
                table[key] = [0, entry]
            else:
                queue.append(entry)
        else:
            old = table.get(key)
            if old is not None:
                self.count[d] -= 1
                if duplicate is not None:
                    finding = duplicate(f"{name} reuses id {key} of an unanswered {old[0]}", command=name)
            table[key] = entry
        self.count[d] += 1
        if self.count[d] > self.limit:
            self._forget_oldest(d)
            if not self.overflowed[d] and limit_rule is not None:
                finding = limit_rule(f"more than {self.limit} outstanding {d} requests; the oldest are forgotten "
                                     f"and unanswered requests of this direction are no longer reported")
            self.overflowed[d] = True
        return finding

    def response(self, direction: str, key: Hashable) -> Pending | None:
        """A response sent by ``direction``: the request of the other direction it answers (removed),
        or None. In order, the oldest outstanding request under ``key``."""
        d = "s2c" if direction == "c2s" else "c2s"
        table = self.out[d]
        if self.ordered:
            queue = table.get(key)
            if queue is None:
                return None
            entry = _pop_oldest(queue)
            if len(queue) == 1:
                del table[key]
        else:
            entry = table.pop(key, None)
            if entry is None:
                return None
        self.count[d] -= 1
        return entry

    def peek(self, direction: str, key: Hashable) -> Pending | None:
        """The request of the other direction a response from ``direction`` would answer, kept."""
        d = "s2c" if direction == "c2s" else "c2s"
        got = self.out[d].get(key)
        if self.ordered:
            return got[got[0] + 1] if got else None
        return got

    def outstanding(self, direction: str) -> int:
        return self.count[str(direction)]

    def forget(self, direction: str, key: Hashable) -> None:
        """Forget every request ``direction`` has outstanding under ``key`` (a channel closed, ...)."""
        d = str(direction)
        got = self.out[d].pop(key, None)
        if got is not None:
            self.count[d] -= len(got) - 1 - got[0] if self.ordered else 1

    def drop(self, direction: str, keep: Callable[[Hashable, Pending], bool]) -> None:
        """Forget the requests of ``direction`` for which ``keep`` is false. Visits every request:
        for one key, :meth:`forget` is O(1)."""
        d = str(direction)
        table = self.out[d]
        for key in list(table):
            if self.ordered:
                old = _entries(table[key])
                queue = [e for e in old if keep(key, e)]
                self.count[d] -= len(old) - len(queue)
                if queue:
                    table[key] = [0, *queue]
                else:
                    del table[key]
            elif not keep(key, table[key]):
                del table[key]
                self.count[d] -= 1

    def clear(self) -> None:
        for d in ("c2s", "s2c"):
            self.out[d].clear()
            self.count[d] = 0

    def unanswered(self, rule: Rule, describe: Callable[[str, Hashable, Pending], str | None]) -> list[Finding]:
        """At the end of a conversation: one finding per request never answered, pointing at it.
        ``describe(direction, key, pending)`` gives the message, or None to say nothing of it."""
        out: list[Finding] = []
        for d in ("c2s", "s2c"):
            if self.overflowed[d]:
                continue
            items: list[tuple[Hashable, Pending]] = []
            for key, value in self.out[d].items():
                if self.ordered:
                    items.extend((key, e) for e in _entries(value))
                else:
                    items.append((key, value))
            items.sort(key=lambda kv: (kv[1][1][1] if kv[1][1] else 0))
            for key, entry in items:
                text = describe(d, key, entry)
                if text is not None:
                    out.append(rule(text, related=entry[1], command=entry[0]))
        return out

    def _forget_oldest(self, d: str) -> None:
        table = self.out[d]
        if self.ordered:
            key = min(table, key=lambda k: table[k][table[k][0] + 1][2])
            queue = table[key]
            _pop_oldest(queue)
            if len(queue) == 1:
                del table[key]
        else:
            key = next(iter(table))  # dicts keep insertion order: the oldest request
            del table[key]
        self.count[d] -= 1


def _entries(queue: list) -> list:
    return queue[queue[0] + 1:]


def _pop_oldest(queue: list) -> Pending:
    """The oldest entry of an in-order queue; the consumed front is cut off once it is half the list."""
    head = queue[0]
    entry = queue[head + 1]
    queue[head + 1] = None
    head += 1
    if head * 2 >= len(queue):
        del queue[1:head + 1]
        head = 0
    queue[0] = head
    return entry
