"""The Iggy wire dialects' names, oldest first: a module of its own so that the dissector's
option can list them without importing the decoder."""

from __future__ import annotations

DIALECT_NAMES: tuple[str, ...] = ("L0", "L1", "Z1", "Z2", "C", "V")
