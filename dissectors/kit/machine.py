"""State machines as data, in the style of h11's ``_state.py``.

A :class:`Machine` is a transition table, ``(state, direction, event) -> next state``, with what a
protocol needs around it, all declared in the machine:

- ``rows``: the legal transitions. Every transition the machine does not list as legal is illegal.
- ``illegal``: illegal transitions that have a rule of their own (a frame on a channel never
  opened is not the same mistake as a second close), with the state to continue in.
- ``recover``: for the other illegal transitions, reported under the machine's ``rule``, where the
  conversation continues (absent: it stays where it was), so one mistake is one finding.
- ``noted``: legal transitions that still deserve a finding under another rule.

The machine is the whole machine: the checks, ``streamproto protocols`` and the docs all read it.
It is static configuration shared by every conversation; an instance's state is a plain string
kept by the dissector (per connection, per channel, per handle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from analyzer.api import Finding, Rule

ANY = "*"  # a row for every state

Key = tuple[str, str, str]  # (state, direction, event)


@dataclass(frozen=True)
class Machine:
    name: str
    start: str
    rows: Mapping[Key, str]
    rule: Rule
    #: Events the machine does not judge (they neither move it nor break it), e.g. heartbeats.
    ignore: frozenset[str] = frozenset()
    #: States in which ending the conversation is normal; ending elsewhere is ``incomplete``.
    final: frozenset[str] = frozenset()
    incomplete: Rule | None = None
    #: Human names of states for messages (defaults to the state itself).
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Illegal transitions with their own rule: key -> (rule, state to continue in).
    illegal: Mapping[Key, tuple[Rule, str]] = field(default_factory=dict)
    #: Illegal transitions reported under ``rule``: key -> state to continue in (absent: stay).
    recover: Mapping[Key, str] = field(default_factory=dict)
    #: Legal transitions that still get a finding: key -> its rule.
    noted: Mapping[Key, Rule] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for table in (self.rows, self.illegal, self.recover, self.noted):
            for state, direction, _ in table:
                if direction not in ("c2s", "s2c"):
                    raise ValueError(f"{self.name}: direction {direction!r} in {state!r}")
        # An entry the machine can never reach is a mistake in the table, not a harmless extra:
        # refuse it here rather than let a reader believe it decides something.
        for key in (*self.illegal, *self.recover):
            if self._row(key) is not None or key[2] in self.ignore:
                raise ValueError(f"{self.name}: {key} is legal or ignored, it cannot be illegal")
        for key in set(self.illegal) & set(self.recover):
            raise ValueError(f"{self.name}: {key} has its own rule, recover for it is never used")
        for key in self.noted:
            # Keyed by the row itself, so that the note is printed on the row it belongs to.
            if key not in self.rows or key[2] in self.ignore:
                raise ValueError(f"{self.name}: {key} is noted but not a row of the table")

    def _row(self, key: Key) -> Key | None:
        """The row that decides ``key``: its own, else the one for every state (None: illegal)."""
        if key in self.rows:
            return key
        any_state = (ANY, key[1], key[2])
        return any_state if any_state in self.rows else None

    def judge(self, state: str, direction: str, event: str) -> tuple[str, Rule | None]:
        """The state to continue in, and the rule of the finding this transition deserves (None:
        none). For dissectors that phrase their own messages; :meth:`step` phrases the default."""
        if event in self.ignore:
            return state, None
        # Once per frame on a busy connection: plain lookups, the legal row first.
        key = (state, direction, event)
        nxt = self.rows.get(key)
        if nxt is not None:
            return nxt, self.noted.get(key)
        any_state = (ANY, direction, event)
        nxt = self.rows.get(any_state)
        if nxt is not None:
            return nxt, self.noted.get(any_state)
        # As in ``rows``, an entry for the state itself wins over one for every state.
        own = self.illegal.get(key)
        if own is None:
            own = self.illegal.get(any_state)
        if own is not None:
            return own[1], own[0]
        nxt = self.recover.get(key)
        if nxt is None:
            nxt = self.recover.get(any_state, state)
        return nxt, self.rule

    def quiet_loops(self) -> frozenset[Key]:
        """Every (state, direction, event) that :meth:`judge` answers with the same state and no
        rule: a hot path may take such an event without stepping the machine. (Rows for every
        state are left out: their keys name no state.)"""
        return frozenset(k for k, nxt in self.rows.items()
                         if k[0] != ANY and nxt == k[0] and k not in self.noted and k[2] not in self.ignore)

    def message(self, state: str, direction: str, event: str) -> str:
        """The default text of a finding about ``event`` in ``state``."""
        who = "client" if direction == "c2s" else "server"
        text = f"{event} from the {who} in state {self.labels.get(state, state)}"
        if self._row((state, direction, event)) is not None:
            return text  # a noted transition: nothing else was expected
        return f"{text} (expected {self.expected(state) or 'nothing'})"

    def step(self, state: str, direction: str, event: str) -> tuple[str, Finding | None]:
        """Next state, and a finding (with the default message) when the transition deserves one."""
        nxt, rule = self.judge(state, direction, event)
        if rule is None:
            return nxt, None
        return nxt, rule(self.message(state, direction, event), command=event)

    def allowed(self, state: str, direction: str, event: str) -> bool:
        return event in self.ignore or self._row((state, direction, event)) is not None

    def expected(self, state: str) -> str:
        nexts = [f"{e} ({'client' if d == 'c2s' else 'server'})" for s, d, e in self.rows if s == state]
        return ", ".join(nexts)

    def at_end(self, state: str, what: str = "") -> Finding | None:
        if self.incomplete is None or not self.final or state in self.final:
            return None
        return self.incomplete(f"{what or self.name} ended in state {self.labels.get(state, state)} "
                               f"(expected {self.expected(state) or 'nothing'})")

    def describe(self) -> Iterable[str]:
        """The machine as text, one transition per line, for `streamproto protocols`: the legal
        transitions (a noted one with its rule), then the illegal ones that do not simply stay
        where they were, each with the rule it is reported under."""
        yield f"{self.name} (start: {self.start}; illegal transitions: {self.rule.id})"
        keys = (*self.rows, *self.illegal, *self.recover)
        width = max((len(s) for s, _, _ in keys), default=5)
        for key, nxt in self.rows.items():
            noted = self.noted.get(key)
            yield _line(width, key, "->", nxt, "" if noted is None else f"  (noted: {noted.id})")
        if self.illegal or self.recover:
            yield "  illegal, and where the machine continues:"
        for key, (rule, nxt) in self.illegal.items():
            yield _line(width, key, "!>", nxt, f"  ({rule.id})")
        for key, nxt in self.recover.items():
            yield _line(width, key, "!>", nxt, f"  ({self.rule.id})")


def _line(width: int, key: Key, arrow: str, nxt: str, tail: str) -> str:
    state, direction, event = key
    return f"  {state:<{width}}  {direction}  {event:<28} {arrow} {nxt}{tail}"
