"""Content split over several frames: a message announced with its size, then fragments until the
size is reached (AMQP 0-9-1 header and body frames; AMQP/Fast message fragments).

State per key (a channel, a handle) is plain data: ``[what, expected, received, ref]``. Fragments
are counted, not kept: a dissector that wants the bytes keeps a bounded prefix itself.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from collections.abc import Hashable

from analyzer.api import Finding, FrameRef, Rule
from dissectors.kit.state import plain_state


class Sequencer:
    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open: dict[Hashable, list] = {}

    def start(self, key: Hashable, what: str, expected: int, ref: FrameRef | None,
              interrupted: Rule | None = None) -> Finding | None:
        """A new message on ``key`` announcing ``expected`` bytes; one still open there is cut short."""
        old = self.open.get(key)
        finding = None
        if old is not None and interrupted is not None:
            finding = interrupted(f"{old[0]} on {key} received {old[2]} of {old[1]} bytes before a new "
                                  f"message began", related=old[3])
        if expected <= 0:
            self.open.pop(key, None)
        else:
            self.open[key] = [what, expected, 0, ref]
        return finding

    def add(self, key: Hashable, size: int) -> tuple[list | None, bool]:
        """A fragment of ``size`` bytes on ``key``: (the open message or None when none is open,
        whether it is now complete). Completion closes it; more bytes than announced leave
        ``received > expected`` for the caller to judge."""
        entry = self.open.get(key)
        if entry is None:
            return None, False
        entry[2] += size
        if entry[2] >= entry[1]:
            del self.open[key]
            return entry, True
        return entry, False

    def expecting(self, key: Hashable) -> list | None:
        return self.open.get(key)

    def cancel(self, key: Hashable) -> list | None:
        return self.open.pop(key, None)

    def incomplete(self, rule: Rule) -> list[Finding]:
        out = []
        for key, (what, expected, received, ref) in self.open.items():
            out.append(rule(f"{what} on {key} ended after {received} of {expected} bytes", related=ref))
        return out


plain_state(Sequencer)  # not as a decorator: a decorated class is no native class for mypyc
