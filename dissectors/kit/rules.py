"""Rule families: one concept, one suffix, one severity, in every protocol.

A dissector builds its rules from the families it uses (``<protocol>.framing.resync``,
``<protocol>.correlation.unanswered``, ...), so the same concept is reported under the same
id suffix, severity and category whichever protocol shows it. A rule has one severity: where a
different severity is right, that is a different family or a protocol's own rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.api import Category, Rule, Severity

E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE


@dataclass(frozen=True, slots=True)
class Family:
    suffix: str
    severity: Severity
    category: Category
    description: str

    def rule(self, protocol: str, description: str | None = None) -> Rule:
        return Rule(f"{protocol}.{self.suffix}", self.severity, self.category, description or self.description)


# framing
FRAMING_RESYNC = Family("framing.resync", W, Category.MALFORMED,
                        "Bytes that do not form a frame were skipped to find the next frame start")
FRAMING_INCOMPLETE = Family("framing.incomplete", W, Category.TRUNCATED, "The capture ends inside a frame")
FRAMING_TRUNCATED = Family("framing.truncated", E, Category.MALFORMED,
                           "The frame is too short for the fields its command needs")
FRAMING_TRAILING = Family("framing.trailing", W, Category.SIZE,
                          "Bytes left in the frame after every field of its command")
# correlation
CORRELATION_UNANSWERED = Family("correlation.unanswered", W, Category.CORRELATION,
                                "A request was never answered before the conversation ended")
CORRELATION_UNKNOWN_RESPONSE = Family("correlation.unknown_response", W, Category.CORRELATION,
                                      "A response that answers no outstanding request")
CORRELATION_DUPLICATE = Family("correlation.duplicate", W, Category.CORRELATION,
                               "A request reuses the id of a request still waiting for its response")
CORRELATION_MISMATCH = Family("correlation.mismatch", E, Category.CORRELATION,
                              "A response of another kind than the request it answers")
# time
HEARTBEAT_SILENCE = Family("heartbeat.silence", W, Category.SEQUENCE,
                           "A side sent nothing for longer than twice the negotiated heartbeat interval")
# state machines
HANDSHAKE_ORDER = Family("handshake.order", E, Category.HANDSHAKE,
                         "A handshake step out of order")
HANDSHAKE_INCOMPLETE = Family("handshake.incomplete", W, Category.HANDSHAKE,
                              "The conversation ended before its handshake completed")
# content split over several frames
CONTENT_UNEXPECTED = Family("content.unexpected", E, Category.SEQUENCE,
                            "A content frame where none was expected")
CONTENT_INCOMPLETE = Family("content.incomplete", W, Category.SEQUENCE,
                            "A message's content frames stopped before its announced size")
# bounds
LIMIT_EXCEEDED = Family("limit.exceeded", W, Category.CAPTURE,
                        "A per-connection table reached its configured limit; the oldest entries were "
                        "forgotten and checks that need them are skipped")


class RuleSet:
    """A protocol's rules: built from families or declared as its own, each id once."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self._rules: dict[str, Rule] = {}

    def family(self, family: Family, description: str | None = None) -> Rule:
        return self._add(family.rule(self.protocol, description))

    def own(self, suffix: str, severity: Severity, category: Category, description: str) -> Rule:
        return self._add(Rule(f"{self.protocol}.{suffix}", severity, category, description))

    def _add(self, rule: Rule) -> Rule:
        if rule.id in self._rules:
            raise ValueError(f"rule {rule.id} declared twice")
        self._rules[rule.id] = rule
        return rule

    def all(self) -> tuple[Rule, ...]:
        return tuple(self._rules.values())
