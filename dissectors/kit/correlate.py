"""Pairing requests with responses: by id (RabbitMQ Stream's correlation ids) or strictly in order
(Iggy; AMQP 0-9-1 synchronous methods per channel).

State is plain data: per requesting direction (None while nothing is outstanding), a map from key to the outstanding request (by id)
or to a queue of them (in order: a list whose first element is the index of the oldest entry, so
that taking the oldest is O(1) without a deque, which JSON has no form for), each
``[name, ref, ts, extra]`` where ``ref`` is a :class:`~analyzer.api.FrameRef` (never the frame) and
``extra`` whatever small plain value the dissector needs back with the response. The number of
outstanding requests is bounded: past ``limit`` the oldest (roughly: see ``_forget_oldest``) are forgotten (reported once through
``limit_rule``) and the "unanswered" check is skipped for the direction, which can no longer tell.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from analyzer.api import Finding, FrameRef, Rule
from dissectors.kit.state import plain_state

#: Outstanding requests remembered per direction before the oldest are forgotten.
DEFAULT_LIMIT = 100_000

Pending = list  # [name, ref, ts, extra]


class Correlator:
    """``Correlator.by_id()`` or ``Correlator.in_order()``; one per connection."""

    # Per requesting direction, ``[table, count, overflowed]`` or None: most connections have
    # nothing outstanding most of the time (100,000 idle connections are a hostile case), so a
    # direction with no request outstanding that never overflowed holds no table at all.
    __slots__ = ("ordered", "limit", "c2s", "s2c")

    def __init__(self, ordered: bool = False, limit: int = DEFAULT_LIMIT) -> None:
        # (``ordered`` has a default because kit.state makes a compiled class's object through
        # its constructor, with no arguments, before it sets the attributes it resumes.)
        self.ordered = ordered
        self.limit = limit
        # table: key -> Pending (by id) or list[Pending] (in order)
        self.c2s: list | None = None
        self.s2c: list | None = None

    @classmethod
    def by_id(cls, limit: int = DEFAULT_LIMIT) -> Correlator:
        return cls(False, limit)

    @classmethod
    def in_order(cls, limit: int = DEFAULT_LIMIT) -> Correlator:
        return cls(True, limit)

    # Views of the compact state, for readers (tests, diagnostics): built on each call.
    @property
    def out(self) -> dict[str, dict[Hashable, Any]]:
        return {d: (rec[0] if rec else {}) for d, rec in (("c2s", self.c2s), ("s2c", self.s2c))}

    @property
    def count(self) -> dict[str, int]:
        return {d: (rec[1] if rec else 0) for d, rec in (("c2s", self.c2s), ("s2c", self.s2c))}

    @property
    def overflowed(self) -> dict[str, bool]:
        return {d: (rec[2] if rec else False) for d, rec in (("c2s", self.c2s), ("s2c", self.s2c))}

    def request(self, direction: str, key: Hashable, name: str, ref: FrameRef | None, ts: float,
                extra: Any = None, *, duplicate: Rule | None = None, limit_rule: Rule | None = None) -> Finding | None:
        """A request sent by ``direction``. By id, a key already outstanding is replaced and, with
        ``duplicate``, reported."""
        c2s = direction == "c2s"
        rec = self.c2s if c2s else self.s2c
        if rec is None:
            rec = [{}, 0, False]
            if c2s:
                self.c2s = rec
            else:
                self.s2c = rec
        table = rec[0]
        if len(rec) > 3:
            del rec[3]  # what :meth:`retain` left is no longer all there is
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
                rec[1] -= 1
                if duplicate is not None:
                    finding = duplicate(f"{name} reuses id {key} of an unanswered {old[0]}", command=name)
            table[key] = entry
        rec[1] += 1
        if rec[1] > self.limit:
            self._forget_oldest(rec)
            if not rec[2] and limit_rule is not None:
                d = "c2s" if c2s else "s2c"
                finding = limit_rule(f"more than {self.limit} outstanding {d} requests; the oldest are forgotten "
                                     f"and unanswered requests of this direction are no longer reported")
            rec[2] = True
        return finding

    def response(self, direction: str, key: Hashable) -> Pending | None:
        """A response sent by ``direction``: the request of the other direction it answers (removed),
        or None. In order, the oldest outstanding request under ``key``."""
        rec = self.s2c if direction == "c2s" else self.c2s
        if rec is None:
            return None
        table = rec[0]
        entry: Pending | None
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
        rec[1] -= 1
        if not rec[1]:
            self._release("s2c" if direction == "c2s" else "c2s")
        return entry

    def peek(self, direction: str, key: Hashable) -> Pending | None:
        """The request of the other direction a response from ``direction`` would answer, kept."""
        rec = self.s2c if direction == "c2s" else self.c2s
        if rec is None:
            return None
        got = rec[0].get(key)
        if self.ordered:
            return got[got[0] + 1] if got else None
        return got

    def outstanding(self, direction: str) -> int:
        rec = self.c2s if direction == "c2s" else self.s2c
        return rec[1] if rec else 0

    def forgot(self, direction: str) -> bool:
        """Whether ``direction`` overflowed: its oldest requests were forgotten, so a response from
        the other side that answers none of the remembered ones proves nothing."""
        rec = self.c2s if direction == "c2s" else self.s2c
        return rec[2] if rec else False

    def forget(self, direction: str, key: Hashable) -> None:
        """Forget every request ``direction`` has outstanding under ``key`` (a channel closed, ...)."""
        rec = self.c2s if direction == "c2s" else self.s2c
        if rec is None:
            return
        got = rec[0].pop(key, None)
        if got is not None:
            rec[1] -= len(got) - 1 - got[0] if self.ordered else 1
            if not rec[1]:
                self._release(direction)

    def drop(self, direction: str, keep: Callable[[Hashable, Pending], bool]) -> None:
        """Forget the requests of ``direction`` for which ``keep`` is false. Visits every request,
        so it is for events that happen once (a connection closing), never for every frame: for
        one key, :meth:`forget` is O(1); for a repeatable event, :meth:`retain`."""
        rec = self.c2s if direction == "c2s" else self.s2c
        if rec is None:
            return
        table = rec[0]
        for key in list(table):
            if self.ordered:
                old = _entries(table[key])
                queue = [e for e in old if keep(key, e)]
                rec[1] -= len(old) - len(queue)
                if queue:
                    table[key] = [0, *queue]
                else:
                    del table[key]
            elif not keep(key, table[key]):
                del table[key]
                rec[1] -= 1
        if not rec[1]:
            self._release(direction)

    def retain(self, direction: str, key: Hashable, name: str) -> None:
        """Forget every request of ``direction`` but those named ``name`` under ``key`` (what stays
        outstanding once a connection is closing). Calling it again before ``direction`` makes a
        new request costs nothing: a peer repeating the event that calls it (40,000 close-oks
        against 40,000 closes) must not make each call visit every request again."""
        rec = self.c2s if direction == "c2s" else self.s2c
        if rec is None or (len(rec) > 3 and rec[3] == [key, name]):
            return
        self.drop(direction, lambda k, e: k == key and e[0] == name)
        rec = self.c2s if direction == "c2s" else self.s2c
        if rec is not None:
            del rec[3:]
            rec.append([key, name])

    def clear(self) -> None:
        for d in ("c2s", "s2c"):
            rec = self.c2s if d == "c2s" else self.s2c
            if rec is not None:
                rec[0] = {}
                rec[1] = 0
                self._release(d)

    def unanswered(self, rule: Rule, describe: Callable[[str, Hashable, Pending], str | None]) -> list[Finding]:
        """At the end of a conversation: one finding per request never answered, pointing at it.
        ``describe(direction, key, pending)`` gives the message, or None to say nothing of it."""
        out: list[Finding] = []
        for d in ("c2s", "s2c"):
            rec = self.c2s if d == "c2s" else self.s2c
            if rec is None or rec[2]:
                continue
            items: list[tuple[Hashable, Pending]] = []
            for key, value in rec[0].items():
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

    def _release(self, direction: str) -> None:
        """``direction`` has nothing outstanding: drop its record unless it must remember that it
        overflowed (then only its table goes, a used-then-emptied dict keeps its allocation)."""
        rec = self.c2s if direction == "c2s" else self.s2c
        if rec is None:
            return
        if rec[2]:
            rec[0] = {}
        elif direction == "c2s":
            self.c2s = None
        else:
            self.s2c = None

    def _forget_oldest(self, rec: list) -> None:
        table = rec[0]
        if self.ordered:
            # The head of the key that has been outstanding longest (dicts keep insertion order,
            # and a key leaves the table when its queue empties). Not always the single oldest
            # request: that would need a scan of every key per request past the limit (quadratic
            # for a flood over many channels), and past the limit the direction is no longer
            # judged for unanswered requests, so nothing depends on which one goes.
            key = next(iter(table))
            queue = table[key]
            _pop_oldest(queue)
            if len(queue) == 1:
                del table[key]
        else:
            key = next(iter(table))  # dicts keep insertion order: the oldest request
            del table[key]
        rec[1] -= 1


plain_state(Correlator)  # not as a decorator: a decorated class is no native class for mypyc


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
