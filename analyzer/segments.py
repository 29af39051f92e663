"""The older delivered segments of one direction (:class:`analyzer.flows.Side`): a list that
carries how many of its first entries are consumed.

A module of its own, not compiled: a list subclass cannot be a compiled (native) class, and
analyzer/flows.py is compiled."""

from __future__ import annotations

from collections.abc import Iterable


class Older(list[tuple[int, int, float]]):
    """(end offset, packet number, ts) of the data delivered before a side's newest segment and
    not yet consumed, oldest first from ``head``, so that the side needs no slot for it while it
    has no list."""

    __slots__ = ("head",)

    def __init__(self, entries: Iterable[tuple[int, int, float]] = ()) -> None:
        super().__init__(entries)
        self.head = 0


def consumed(older: Older) -> None:
    """Drop the consumed entries once they are at least half the list: amortised O(1) per
    entry, and an idle side keeps at most as many dead entries as live ones."""
    h = older.head
    if h and 2 * h >= len(older):
        del older[:h]
        older.head = 0
