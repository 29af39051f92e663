"""The sans-IO contract between the engine and protocol dissectors.

A dissector never touches files, sockets or clocks: the engine feeds it ordered bytes per
direction of one TCP connection (with the capture timestamp of the segment they came from),
tells it about gaps and the end of the stream, and collects the frames and findings it returns.
Everything here is protocol-agnostic.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Direction(enum.StrEnum):
    C2S = "c2s"
    S2C = "s2c"

    @property
    def other(self) -> Direction:
        return _OTHER[self]


_OTHER = {Direction.C2S: Direction.S2C, Direction.S2C: Direction.C2S}


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.NOTE: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Category(enum.StrEnum):
    MALFORMED = "malformed"
    SIZE = "size"
    UNKNOWN = "unknown"
    HANDSHAKE = "handshake"
    SEQUENCE = "sequence"
    CORRELATION = "correlation"
    RESPONSE = "response"
    CHECKSUM = "checksum"
    VALUE = "value"
    TRUNCATED = "truncated"
    CAPTURE = "capture"


@dataclass(slots=True)
class Finding:
    id: str
    severity: Severity
    category: Category
    message: str
    # Set by the engine: the conversation and the packet number the finding points at.
    flow: int | None = None
    frame: int | None = None
    # Set by a dissector for a finding about an earlier frame (e.g. a request never answered);
    # the engine turns it into a packet number.
    related: Frame | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": str(self.severity),
            "category": str(self.category),
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Rule:
    """A conformance rule: a stable dotted id, its default severity and category."""

    id: str
    severity: Severity
    category: Category
    description: str

    def __call__(self, message: str, *, severity: Severity | None = None,
                 related: Frame | None = None) -> Finding:
        return Finding(self.id, severity or self.severity, self.category, message, related=related)


@dataclass(slots=True)
class Field:
    """One node of a frame's field tree.

    ``offset`` is relative to the first byte of the frame (-1 when the field has no wire span,
    e.g. a computed value); ``display`` is the human form (enum name, decoded flags).
    Children of a list-like node (``is_list``) are its elements.
    """

    name: str
    value: Any = None
    offset: int = -1
    size: int = 0
    display: str | None = None
    children: list[Field] | None = None
    is_list: bool = False

    def child(self, name: str) -> Field | None:
        for c in self.children or ():
            if c.name == name:
                return c
        return None


@dataclass(slots=True)
class Frame:
    """One protocol frame (PDU) decoded from one direction of a connection.

    Dissectors fill in the protocol part; the engine fills in where it came from.
    ``offset`` is the position of the frame's first byte in its direction's byte stream
    (gaps count with their length, so offsets stay comparable with TCP sequence space).
    """

    direction: Direction
    offset: int
    size: int
    command: str
    code: int | None = None
    info: str = ""
    fields: list[Field] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    dialect: str | None = None
    data: bytes | None = None
    # Filled in by the engine.
    flow: int = 0
    packets: tuple[int, int] = (0, 0)
    ts: float = 0.0
    src: str = ""
    dst: str = ""
    protocol: str = ""

    def get(self, name: str) -> Any:
        """Value of a top-level field by name (None when absent)."""
        for f in self.fields:
            if f.name == name:
                return f.value
        return None


@dataclass(frozen=True, slots=True)
class Sniff:
    """A heuristic verdict on the first bytes of one direction of a connection."""

    confidence: float  # 0.0 (not this protocol) .. 1.0 (certain)
    from_client: bool | None = None  # whether these bytes look like the client's side


@dataclass(frozen=True, slots=True)
class CommandDoc:
    """One command or method of a protocol, for `streamproto protocols`."""

    code: str
    name: str
    direction: str = ""  # "c2s", "s2c" or "both"
    versions: str = ""
    fields: str = ""


Event = Frame | Finding


class Connection:
    """Per-connection dissector state. Subclass and implement the three methods."""

    #: The protocol variant seen so far (e.g. ``"2020-draft"``), or None when plain/unknown.
    dialect: str | None = None

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        """Next in-order bytes of ``direction``; ``ts`` is the capture time of their segment."""
        raise NotImplementedError

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        """``length`` bytes of ``direction`` were lost; the next fed byte follows the hole."""
        return ()

    def end(self, ts: float) -> Iterable[Event]:
        """No more data will come in either direction (capture end, FIN/RST on both sides)."""
        return ()


class Dissector:
    """A protocol plugin. Registered through the ``streamproto.dissectors`` entry point group."""

    name: ClassVar[str]
    title: ClassVar[str]
    default_ports: ClassVar[tuple[int, ...]] = ()

    def sniff(self, data: bytes) -> Sniff:
        """Does the start of one direction's bytes look like this protocol?"""
        return Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        """New state for one TCP connection; ``midstream`` when the capture missed its start."""
        raise NotImplementedError

    def rules(self) -> Sequence[Rule]:
        return ()

    def commands(self) -> Sequence[CommandDoc]:
        return ()
