"""State machines as data, in the style of h11's ``_state.py``.

A :class:`Machine` is one transition table, ``(state, direction, event) -> next state``; every
transition the table lacks is illegal and reported under the machine's rule. The table is the
whole machine: the checks, ``streamproto protocols`` and the docs all read it. An instance's
state is a plain string kept by the dissector (per connection, per channel, per handle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from analyzer.api import Finding, Rule

ANY = "*"  # a row for every state


@dataclass(frozen=True)
class Machine:
    name: str
    start: str
    rows: Mapping[tuple[str, str, str], str]
    rule: Rule
    #: Events the machine does not judge (they neither move it nor break it), e.g. heartbeats.
    ignore: frozenset[str] = frozenset()
    #: States in which ending the conversation is normal; ending elsewhere is ``incomplete``.
    final: frozenset[str] = frozenset()
    incomplete: Rule | None = None
    #: Human names of states for messages (defaults to the state itself).
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        events = {(s, d, e) for s, d, e in self.rows}
        for state, direction, _ in events:
            if direction not in ("c2s", "s2c"):
                raise ValueError(f"{self.name}: direction {direction!r} in {state!r}")

    def step(self, state: str, direction: str, event: str) -> tuple[str, Finding | None]:
        """Next state, and a finding when the table has no such transition (the state is kept)."""
        if event in self.ignore:
            return state, None
        nxt = self.rows.get((state, direction, event))
        if nxt is None:
            nxt = self.rows.get((ANY, direction, event))
        if nxt is not None:
            return nxt, None
        who = "client" if direction == "c2s" else "server"
        return state, self.rule(f"{event} from the {who} in state {self.labels.get(state, state)} "
                                f"(expected {self.expected(state) or 'nothing'})", command=event)

    def allowed(self, state: str, direction: str, event: str) -> bool:
        return event in self.ignore or (state, direction, event) in self.rows or (ANY, direction, event) in self.rows

    def expected(self, state: str) -> str:
        nexts = [f"{e} ({'client' if d == 'c2s' else 'server'})" for s, d, e in self.rows if s == state]
        return ", ".join(nexts)

    def at_end(self, state: str, what: str = "") -> Finding | None:
        if self.incomplete is None or not self.final or state in self.final:
            return None
        return self.incomplete(f"{what or self.name} ended in state {self.labels.get(state, state)} "
                               f"(expected {self.expected(state) or 'nothing'})")

    def describe(self) -> Iterable[str]:
        """The table as text, one transition per line, for `streamproto protocols`."""
        yield f"{self.name} (start: {self.start}; illegal transitions: {self.rule.id})"
        width = max((len(s) for s, _, _ in self.rows), default=5)
        for (state, direction, event), nxt in self.rows.items():
            yield f"  {state:<{width}}  {direction}  {event:<28} -> {nxt}"
