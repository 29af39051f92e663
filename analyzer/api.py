"""The sans-IO contract between the engine and protocol dissectors.

A dissector never touches files, sockets or clocks: the engine feeds it ordered bytes per
direction of one TCP connection (with the capture timestamp of the segment they came from),
tells it about gaps and the end of the stream, and collects the frames and findings it returns.
Everything here is protocol-agnostic.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

try:  # the built-in module: hashlib would load OpenSSL first, a few % of every start (random.py does the same)
    from _blake2 import blake2b
except ImportError:  # a Python built without it
    from hashlib import blake2b


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
    # Set by a dissector for a finding about an earlier frame (e.g. a request never answered): a
    # reference to that frame, never the frame itself; the engine turns it into a packet number.
    related: FrameRef | None = None
    # What the finding is about, for its fingerprint: the command and the field (or None).
    command: str | None = None
    field: str | None = None
    # Set by the engine: the file the packet belongs to when several files are read (else None),
    # and the conversation's Community ID.
    file: str | None = None
    community_id: str | None = None
    # Set by the engine: the conversation's server endpoint ("ip:port"), which with the rule,
    # command and field identifies the behaviour across re-recordings (the client's port changes).
    service: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": str(self.severity),
            "category": str(self.category),
            "message": self.message,
            "fingerprint": self.fingerprint,
        }

    @property
    def fingerprint(self) -> str:
        """Stable across runs and re-recordings of the same behaviour: rule id, the server it
        happened with (not the client's ephemeral port, so a CI re-run keeps its alerts and
        baselines), command and field; never packet numbers, times or message text."""
        key = "\x1f".join((self.id, self.service or self.community_id or "", self.command or "",
                            self.field or ""))
        return blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class FrameRef(list):  # type: ignore[type-arg]
    """A reference to an earlier frame: ``[direction, stream offset, packet]``.

    Plain data (a JSON array), so dissector state that remembers a frame stays serialisable. The
    dissector creates it with the frame (:meth:`Frame.anchor`); the engine fills in the packet
    identity (an opaque integer it can map back to file and packet number) when it stamps the frame.
    """

    __slots__ = ()

    @classmethod
    def of(cls, direction: str, offset: int, packet: int | None = None) -> FrameRef:
        return cls((str(direction), offset, packet))


@dataclass(frozen=True, slots=True)
class Rule:
    """A conformance rule: a stable dotted id, its default severity and category."""

    id: str
    severity: Severity
    category: Category
    description: str

    def __call__(self, message: str, *, related: FrameRef | None = None, command: str | None = None,
                 field: str | None = None) -> Finding:
        # No severity override: where another severity is right, that is another rule.
        return Finding(self.id, self.severity, self.category, message, related=related, command=command,
                       field=field)


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
    #: Created on demand by :meth:`anchor`; the engine fills in its packet when it stamps the frame.
    ref: FrameRef | None = None
    #: On a response: the anchor of the request it answers (its packet says where the request is).
    request: FrameRef | None = field(default=None, compare=False, repr=False)
    #: On a response: capture time from the request's last byte to the response's, in seconds.
    latency: float | None = field(default=None, compare=False, repr=False)
    #: A request whose response may follow (:meth:`request_anchor`): the views hold it back until
    #: the response can be named beside it. Other anchored frames are shown at once.
    awaits: bool = field(default=False, compare=False, repr=False)
    # Filled in by the engine.
    flow: int = 0
    packets: tuple[int, int] = (0, 0)
    ts: float = 0.0
    src: str = ""
    dst: str = ""
    protocol: str = ""
    # Stamped on every frame by the engine, left out of comparisons and repr so that frame classes
    # which set their slots themselves (lazy frames) still compare before the engine saw them.
    #: The conversation's Community ID (v1).
    community_id: str | None = field(default=None, compare=False, repr=False)
    #: The file of the last packet when several files are read as one capture (else None).
    file: str | None = field(default=None, compare=False, repr=False)

    def anchor(self) -> FrameRef:
        """A plain-data reference to this frame that later findings can point at."""
        ref = self.ref
        if ref is None:
            ref = self.ref = FrameRef.of(self.direction, self.offset)
        return ref

    def request_anchor(self) -> FrameRef:
        """:meth:`anchor` for a request a later response will name (its :attr:`request`)."""
        self.awaits = True
        return self.anchor()

    def json_fields(self) -> dict[str, Any] | None:
        """What :func:`analyzer.jsonout.fields_json` makes of :attr:`fields`, when this frame can
        make it without its field tree (a lazy frame, see ``dissectors.kit.lazy``); None: the JSON
        views convert the tree. Values cut on the way count only when this gives the object."""
        return None

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
    """Per-connection dissector state. Subclass and implement ``feed`` (and ``gap``, ``end``,
    ``tick``, ``snapshot`` as the protocol needs).

    State must be plain data so that :meth:`snapshot` can return it and
    :meth:`Dissector.resume` can continue from it (see :mod:`dissectors.kit.state`).
    """

    # No instance dict here, so that a subclass declaring __slots__ is as small as it says (there can
    # be 100,000 open connections); subclasses without __slots__ get their dict as usual.
    __slots__ = ()

    #: The protocol variant seen so far (e.g. ``"2020-draft"``), or None when plain/unknown.
    dialect: str | None = None

    #: Frames decoded, checked and counted but not made (see :meth:`leave_out_plain_frames`),
    #: each counted in the call whose bytes end it; the engine adds them to the conversation's
    #: count after each call and sets this back to 0.
    frames_left_out: int = 0
    #: The same for frames of the other direction than the call's, which the call's bytes did
    #: not end (a frame that waited to see what its own direction sent next, settled because
    #: the other one went on): counted alike, but the engine does not take them as ending in
    #: the call's bytes. Set it only when it is not 0.
    other_frames_left_out: int = 0
    #: The anchors (:meth:`Frame.anchor`) of frames counted in :attr:`frames_left_out` that a later
    #: finding may name: each of those frames ends in the bytes of the call that left it out, so
    #: the engine gives its anchor the packet those bytes end in (the frame's last, as it would
    #: have given the frame's own anchor), and empties the list. Only after feeds; None for a
    #: connection that never leaves out an anchored frame.
    anchors_left_out: list[FrameRef] | None = None

    def leave_out_plain_frames(self) -> bool:
        """The run shows only findings (``inspect --only-findings``), so a frame that would carry
        nothing but its own decoding need not be made: no finding, no anchor for later findings
        (or one handed to the engine in :attr:`anchors_left_out`), not a request awaiting its
        response, not the response to a request given back with findings (the run gives that
        back too), and no dialect but the one the frames given back last carried (the engine
        learns the conversation's dialect from frames). The connection may count such frames in
        :attr:`frames_left_out` instead. Asked once, before the first call; True when the
        connection will (the default: it makes every frame)."""
        return False

    def read_for_info_lines(self) -> None:
        """The run's view prints a line per frame (``inspect -T summary``): a frame's fields are
        read only where a display filter names them. A connection may then make a frame whose
        decoding has nothing to say as a lazy one, its Info line from a few values and its fields
        on first read, which in a view that reads every tree would cost a second pass over its
        bytes. Told once, before the first call; only a hint (the default does nothing)."""

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        """Next in-order bytes of ``direction``; ``ts`` is the capture time of their segment."""
        raise NotImplementedError

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        """``length`` bytes of ``direction`` were lost; the next fed byte follows the hole."""
        return ()

    def end(self, ts: float) -> Iterable[Event]:
        """No more data will come in either direction (capture end, FIN/RST on both sides)."""
        return ()

    def tick(self, ts: float) -> Iterable[Event]:
        """Capture time has advanced to ``ts`` without bytes for this connection: time-driven
        checks (heartbeat silence, request timeouts) report here. Called at :meth:`deadline`."""
        return ()

    def deadline(self) -> float | None:
        """The capture time at which :meth:`tick` could report something, or None."""
        return None

    def snapshot(self) -> dict[str, Any]:
        """The connection's whole state as JSON-serialisable data (see :meth:`Dissector.resume`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be snapshotted")


@dataclass(frozen=True)
class Option:
    """A dissector preference the user can set (``-o PROTO.NAME=VALUE``, like Wireshark's ``-o``)."""

    name: str
    description: str
    default: str
    choices: tuple[str, ...] = ()  # empty: any text


class Dissector:
    """A protocol plugin. Registered through the ``streamproto.dissectors`` entry point group."""

    name: ClassVar[str]
    title: ClassVar[str]
    default_ports: ClassVar[tuple[int, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()

    def setting(self, name: str) -> str:
        """The value of one of :attr:`options`, as configured or its default."""
        chosen = self.__dict__.get("_settings", {})
        if name in chosen:
            return chosen[name]
        for option in self.options:
            if option.name == name:
                return option.default
        raise KeyError(f"{self.name} has no option {name!r}")

    def configured(self, values: Mapping[str, str]) -> Dissector:
        """A copy of this dissector with some :attr:`options` set; ValueError names what is wrong.

        Connections read settings when they are made (``connection``), so a dissector passes them
        into its connection state, which keeps them through snapshot and resume."""
        known = {o.name: o for o in self.options}
        for key, value in values.items():
            option = known.get(key)
            if option is None:
                names = ", ".join(sorted(known)) or "none"
                raise ValueError(f"{self.name} has no option {key!r} (its options: {names})")
            if option.choices and value not in option.choices:
                raise ValueError(f"{self.name}.{key} must be one of {', '.join(option.choices)}, not {value!r}")
        new = copy.copy(self)
        new.__dict__["_settings"] = {**self.__dict__.get("_settings", {}), **values}
        return new

    def sniff(self, data: bytes) -> Sniff:
        """Does the start of one direction's bytes look like this protocol?"""
        return Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        """New state for one TCP connection; ``midstream`` when the capture missed its start."""
        raise NotImplementedError

    def resume(self, state: dict[str, Any]) -> Connection:
        """A connection that continues exactly where the one that made ``state`` stopped."""
        raise NotImplementedError(f"{self.name} cannot resume a snapshot")

    def rules(self) -> Sequence[Rule]:
        return ()

    def commands(self) -> Sequence[CommandDoc]:
        return ()

    def machines(self) -> Sequence[Any]:
        """The protocol's state machines (kit ``Machine`` tables), for `streamproto protocols`."""
        return ()

    def fields(self) -> Sequence[Any]:
        """The protocol's field catalogue (``FieldDef`` entries), for `streamproto fields`."""
        return ()
