"""Dialects as objects: a protocol variant's command table, codes and quirks in one value.

A dissector picks one :class:`Dialect` per connection (from the bytes, or forced by an option) and
asks it, instead of carrying booleans through its code: ``dialect.commands[key]``,
``dialect.codes[code]``, ``dialect.has("response-bit")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Dialect:
    name: str
    title: str
    commands: Mapping[int, Any] = field(default_factory=dict)
    codes: Mapping[int, str] = field(default_factory=dict)
    quirks: frozenset[str] = frozenset()
    #: Dialect-specific constants (ok code, versions, ...).
    values: Mapping[str, Any] = field(default_factory=dict)

    def has(self, quirk: str) -> bool:
        return quirk in self.quirks

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def code_name(self, code: int) -> str:
        return self.codes.get(code, f"UNKNOWN({code:#x})")

