"""Which rules a check reports, and at what severity: --enable/--disable/--severity, applied to
findings after the dissectors made them (the dissectors always run every check)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field

from analyzer.api import Category, Finding, Rule, Severity

#: Stands in for the engine's note about a conversation that no dissector claimed while the engine
#: does not declare one itself (the same id, so fingerprints and baselines stay valid once it does).
UNDECODED = Rule("engine.undecoded", Severity.NOTE, Category.CAPTURE,
                 "No dissector decoded this conversation: its bytes were not checked (--decode-as PORT=PROTO "
                 "forces one)")


def catalogue() -> list[tuple[str, Rule]]:
    """Every rule that can be reported, with its owner ("engine" or the dissector's name)."""
    from analyzer.engine import ENGINE_RULES
    from analyzer.registry import load_dissectors

    rules = [("engine", r) for r in ENGINE_RULES]
    if not any(r.id == UNDECODED.id for r in ENGINE_RULES):
        rules.append(("engine", UNDECODED))
    for d in load_dissectors().values():
        rules += [(d.name, r) for r in d.rules()]
    return rules


@dataclass
class RulePolicy:
    """The user's rule selection. ``enabled`` None: every rule; else only rules in it."""

    enabled: set[str] | None = None
    disabled: set[str] = field(default_factory=set)
    severity: dict[str, Severity] = field(default_factory=dict)

    @classmethod
    def parse(cls, known: Sequence[str], enable: Sequence[str], disable: Sequence[str],
              severity: Sequence[str]) -> RulePolicy:
        """From the options (rule ids or shell patterns such as ``amqp091.handshake.*``); a
        pattern that names no known rule, or a bad level, is a ValueError naming it."""

        def ids(pattern: str, option: str) -> set[str]:
            found = set(fnmatch.filter(known, pattern))
            if not found:
                raise ValueError(f"{option} {pattern}: no such rule (`streamproto rules` lists them)")
            return found

        enabled = None
        if enable:
            enabled = set()
            for p in enable:
                enabled |= ids(p, "--enable")
        disabled: set[str] = set()
        for p in disable:
            disabled |= ids(p, "--disable")
        levels: dict[str, Severity] = {}
        for item in severity:
            pattern, sep, level = item.partition("=")
            if not sep or level not in Severity.__members__.values():
                raise ValueError(f"--severity {item}: expected RULE=LEVEL with LEVEL one of error, warning, note")
            for rid in ids(pattern, "--severity"):
                levels[rid] = Severity(level)
        return cls(enabled, disabled, levels)

    def active(self, rule_id: str) -> bool:
        return (self.enabled is None or rule_id in self.enabled) and rule_id not in self.disabled

    def apply(self, f: Finding) -> Finding | None:
        """The finding as reported (its severity overridden), or None when its rule is off."""
        rid = f.id
        if rid in self.disabled or self.enabled is not None and rid not in self.enabled:
            return None
        level = self.severity.get(rid)
        if level is not None:
            f.severity = level
        return f

    @property
    def changes(self) -> bool:
        return self.enabled is not None or bool(self.disabled) or bool(self.severity)
