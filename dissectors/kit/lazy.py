"""Frames whose field tree and Info line are built on first access.

The hot frames of a busy connection (AMQP 0-9-1 publish, deliver, ack, content header and body;
RabbitMQ Stream Publish, Deliver, PublishConfirm, Credit) are checked eagerly with a few struct
reads: every rule runs on every frame. Building their Field trees is most of the cost, and a
consumer that only wants findings or counts never looks at them, so those are built from the
frame's bytes when ``fields`` or ``info`` is first read (the renderers and JSON output read both,
so nothing is lost for them). A dissector that already knows the Info line passes it as ``info``:
then only ``fields`` builds anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyzer.api import Direction, Field, Finding, Frame
from analyzer.jsonout import fields_json

_FIELDS = Frame.__dict__["fields"]  # the slot descriptors of the base dataclasses
_INFO = Frame.__dict__["info"]
BASE_CHILDREN = Field.__dict__["children"]

#: builder(frame, ctx) -> (fields, info)
Builder = Callable[["LazyFrame", Any], tuple[list[Field], str]]
#: The Info line a builder gives, without its tree (None: only the tree can tell). Registered per
#: builder by the decoder; a view that prints Info lines alone (the summary) never builds trees.
#: For amqp091, tests/test_amqp091_quick_info.py proves both give the same line on every frame.
QUICK_INFO: dict[Builder, Callable[[LazyFrame, Any], str | None]] = {}
#: What analyzer.jsonout.fields_json makes of the fields a builder gives, without its tree, as a new
#: dict each time (None: only the tree can tell; the computed fields added later are
#: LazyFrame.json_fields' business, added to that dict). Registered per builder by the decoder; the
#: JSON views then never build those frames' trees. tests/test_amqp091_json.py and
#: tests/test_amqp_fast_json.py prove both ways alike on every frame of their captures.
QUICK_JSON: dict[Builder, Callable[[LazyFrame, Any], dict[str, Any] | None]] = {}


class LazyFrame(Frame):
    __slots__ = ("_build", "_ctx", "_extra", "_info_extra", "_info_done")

    def __init__(self, direction: Direction, offset: int, size: int, command: str, code: int | None,
                 findings: list[Finding], data: bytes, build: Builder, ctx: Any, info: str | None = None) -> None:
        # Set the slots directly: the dataclass __init__ would build a default field list first.
        self.direction = direction
        self.offset = offset
        self.size = size
        self.command = command
        self.code = code
        self.findings = findings
        self.dialect = None
        self.data = data
        self.ref = None
        self.request = None
        self.latency = None
        self.awaits = False
        self.flow = 0
        self.packets = (0, 0)
        self.ts = 0.0
        self.src = ""
        self.dst = ""
        self.protocol = ""
        self.community_id = None
        self.file = None
        self._build = build
        self._ctx = ctx
        # Computed fields added before the tree is built: Fields, or (name, value, display) for
        # wire-less fields whose Field object is only made if the tree is ever built.
        self._extra: list[Field | tuple[str, Any, str]] | None = None
        self._info_extra = ""
        self._info_done = info is not None
        if info is not None:
            _INFO.__set__(self, info)

    def _materialize(self) -> None:
        build = self._build
        self._build = None
        fields, info = build(self, self._ctx)
        if self._extra:
            fields.extend(f if type(f) is not tuple else Field(f[0], f[1], -1, 0, f[2]) for f in self._extra)
        _FIELDS.__set__(self, fields)
        if not self._info_done:
            _INFO.__set__(self, info + self._info_extra)
        self._ctx = None

    @property  # type: ignore[override]
    def fields(self) -> list[Field]:
        if self._build is not None:
            self._materialize()
        return _FIELDS.__get__(self)

    @fields.setter
    def fields(self, value: list[Field]) -> None:
        _FIELDS.__set__(self, value)

    def json_fields(self) -> dict[str, Any] | None:
        build = self._build
        if build is None:  # the tree is built: convert it
            return None
        quick = QUICK_JSON.get(build)
        out = quick(self, self._ctx) if quick is not None else None
        extra = self._extra
        if out is None or not extra:
            return out
        more = fields_json([f if type(f) is not tuple else Field(f[0], f[1], -1, 0, f[2]) for f in extra])
        for name in more:
            if name in out:  # a name the builder's fields have too: the tree's rule for repeats
                return None
        out.update(more)
        return out

    @property  # type: ignore[override]
    def info(self) -> str:
        if self._build is not None and not self._info_done:
            quick = QUICK_INFO.get(self._build)
            text = quick(self, self._ctx) if quick is not None else None
            if text is None:
                self._materialize()
            else:
                text += self._info_extra
                _INFO.__set__(self, text)
                self._info_done = True
                return text
        return _INFO.__get__(self)

    @info.setter
    def info(self, value: str) -> None:
        _INFO.__set__(self, value)


def add_field(frame: Frame, f: Field) -> None:
    """Append a computed field, without forcing a lazy frame to build its tree."""
    if isinstance(frame, LazyFrame) and frame._build is not None:
        if frame._extra is None:
            frame._extra = [f]
        else:
            frame._extra.append(f)
    else:
        frame.fields.append(f)


def add_computed(frame: Frame, name: str, value: Any, display: str) -> None:
    """Append a wire-less field (offset -1, size 0); a lazy frame makes the Field only with its tree."""
    if isinstance(frame, LazyFrame) and frame._build is not None:
        spec = (name, value, display)
        if frame._extra is None:
            frame._extra = [spec]
        else:
            frame._extra.append(spec)
    else:
        frame.fields.append(Field(name, value, -1, 0, display))


def add_info(frame: Frame, text: str) -> None:
    if not text:
        return
    if isinstance(frame, LazyFrame) and frame._build is not None and not frame._info_done:
        frame._info_extra += text
    else:
        frame.info += text


class LazyChildren(Field):
    """A Field whose children are built by ``_build()`` on first access: a frame of thousands of
    entries (stream records, Iggy index entries) costs one object until a view looks inside."""

    __slots__ = ()

    def _build(self) -> list[Field]:
        raise NotImplementedError

    @property  # type: ignore[override]
    def children(self) -> list[Field] | None:
        kids = BASE_CHILDREN.__get__(self)
        if kids is None:
            kids = self._build()
            BASE_CHILDREN.__set__(self, kids)
        return kids

    @children.setter
    def children(self, value: list[Field] | None) -> None:
        BASE_CHILDREN.__set__(self, value)


class LazyField(LazyChildren):
    """A node whose children come from ``build()`` on first access; ``json()``, when given, is
    the node's JSON value (what analyzer.jsonout.field_json makes of it) without them."""

    __slots__ = ("_build_children", "_json")

    def __init__(self, name: str, value: Any, offset: int, size: int, build: Callable[[], list[Field]],
                 is_list: bool = True, display: str | None = None, json: Callable[[], Any] | None = None) -> None:
        self.name = name
        self.value = value
        self.offset = offset
        self.size = size
        self.display = display
        self.is_list = is_list
        BASE_CHILDREN.__set__(self, None)
        self._build_children = build
        self._json = json

    def _build(self) -> list[Field]:
        return self._build_children()

    def json_value(self) -> Any:
        """See analyzer.jsonout.field_json; None: convert the children (built already, or no ``json``)."""
        if self._json is None or BASE_CHILDREN.__get__(self) is not None:
            return None
        return self._json()
