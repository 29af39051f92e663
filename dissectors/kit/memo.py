"""Bounded memories of answers that are functions of their key alone (a frame's bytes, a record
length): a busy connection sends the same bytes again and again, so the answer is looked up
instead of worked out. Each memory is a plain dict, read with ``dict.get`` where it is used (a
per-frame lookup through a method of our own would cost more than many answers save); storing
goes through :func:`remember`, which empties a full memory first, so that memory stays bounded
whatever the capture holds. Per process: each ``--jobs`` worker and Spark executor has its own,
and no conversation state lives in them (checkpoints are unaffected)."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, limit: int) -> V:
    """Store ``value`` under ``key`` in ``memo`` (emptied first when it holds ``limit`` answers)
    and give it back."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value


class OctetMemo(dict):  # type: ignore[type-arg]
    """A memory keyed by byte strings and bounded by their octets (each entry counted with
    ``overhead`` more, for what the dict and the key object cost), for answers whose keys vary
    in size: emptied when the next key would take it past ``limit``. Read with ``dict.get`` or
    ``in`` like the plain memories; stored through :meth:`remember`."""

    def __init__(self, limit: int, overhead: int = 100) -> None:
        super().__init__()
        self.limit = limit
        self.overhead = overhead
        self.octets = 0

    def remember(self, key: bytes, value: V) -> V:
        n = len(key) + self.overhead
        if self.octets + n > self.limit:
            self.clear()
            self.octets = 0
        self[key] = value
        self.octets += n
        return value
