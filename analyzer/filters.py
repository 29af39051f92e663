"""Display filters (tshark's ``-Y``) in Wireshark's syntax, for the common cases.

A filter is compiled once into nested closures and then asked of every frame (and every
free-standing finding) with :meth:`DisplayFilter.__call__`. What a filter can name:

- every field of the field catalogue (``streamproto fields``): ``amqp091.basic.publish.routing_key``,
  ``rabbitmq_stream.publish.messages.publishing_id``; a prefix of a catalogue name is a test for
  that command or structure (``amqp091.basic.publish``), a protocol's name a test for the protocol;
- the engine's own fields: ``frame``, ``flow``, ``direction`` (``c2s``/``s2c``), ``protocol``,
  ``dialect``, ``command``, ``code``, ``size``, ``info``, ``src``, ``dst``, ``file``, ``ts``,
  ``latency``, ``request_frame``, ``response_frame``, ``finding`` (the ids of a frame's findings),
  ``finding.id``, ``finding.severity``, ``finding.category``, ``finding.message``.

Tests: a field alone (it is present), ``==``/``eq``, ``!=``/``ne``, ``<``/``lt``, ``>``/``gt``,
``<=``/``le``, ``>=``/``ge``, ``contains``, ``matches``/``~`` (a regular expression, case
insensitive), ``in {a b c}`` (commas allowed), joined with ``and``/``&&``, ``or``/``||``,
``not``/``!`` and parentheses; ``and`` binds tighter than ``or``. As in Wireshark, a test on a
field a frame carries several times holds when one of them matches, except ``!=``, which holds
when none is equal. Values are numbers (``10``, ``0x0a``, ``1.5``), quoted strings with ``\\``
escapes, bare words, or bytes as ``aa:bb:cc``; an enum field also matches its name
(``rabbitmq_stream.create_response.response_code == STREAM_ALREADY_EXISTS``).

Only what a filter names is looked at: a filter on engine fields never builds a frame's field tree.
A free-standing finding (no frame) is tested with its engine fields (``flow``, ``frame``,
``protocol``, ``finding.*``); catalogue fields are absent from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from analyzer.api import Field, Finding, Frame
from analyzer.linking import Links

Getter = Callable[[Any, "Links | None"], list[Any]]
Test = Callable[[Any, "Links | None"], bool]


class FilterError(ValueError):
    """A filter that does not parse or names an unknown field; ``position`` is 0-based."""

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(f"{message} at column {position + 1} of the filter: {text}")
        self.position = position


_TOKEN = r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<unterminated>")
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!~(){},])
  | (?P<word>[A-Za-z0-9_.:\-+/\[\]*@]+)
"""


@cache
def _token_pattern() -> re.Pattern[str]:
    """Compiled when a filter is first given: most runs have none (it was a percent of every start)."""
    return re.compile(_TOKEN, re.VERBOSE)


_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "contains": "contains",
             "matches": "~", "in": "in", "and": "&&", "or": "||", "not": "!"}
_COMPARE = {"==", "!=", "<", ">", "<=", ">=", "contains", "~"}


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind, self.text, self.pos = kind, text, pos


def _tokens(text: str) -> list[_Tok]:
    out = []
    pos = 0
    match = _token_pattern().match
    while pos < len(text):
        m = match(text, pos)
        if m is None:
            raise FilterError(f"unexpected character {text[pos]!r}", text, pos)
        kind = m.lastgroup or ""
        tok = m.group()
        if kind == "unterminated":
            raise FilterError("unterminated string", text, pos)
        if kind == "word" and tok.lower() in _WORD_OPS:
            kind, tok = "op", _WORD_OPS[tok.lower()]
        if kind != "ws":
            out.append(_Tok(kind, tok, pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


class Literal:
    """A value in a filter, in every form it can be compared as."""

    __slots__ = ("text", "number", "raw", "quoted")

    def __init__(self, text: str, quoted: bool) -> None:
        self.text = text
        self.quoted = quoted
        self.number: int | float | None = None
        self.raw = text.encode("utf-8", "surrogateescape")
        if not quoted:
            self.number = _number(text)
            if re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+", text):
                self.raw = bytes.fromhex(text.replace(":", ""))
            elif text in ("true", "True"):
                self.number = 1
            elif text in ("false", "False"):
                self.number = 0


def _number(text: str) -> int | float | None:
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    return re.sub(r"\\(x[0-9a-fA-F]{2}|.)", _unescape, body)


def _unescape(m: re.Match[str]) -> str:
    s = m.group(1)
    if s.startswith("x") and len(s) == 3:
        return chr(int(s[1:], 16))
    return {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(s, s)


# ------------------------------------------------------------------ values of a subject
def _scalar(v: Any) -> tuple[Any, str | None]:
    if isinstance(v, Field):
        return v.value, v.display
    return v, None


def _eq(v: Any, lit: Literal) -> bool:
    value, display = _scalar(v)
    if isinstance(value, bool):
        return lit.number is not None and int(value) == lit.number
    if isinstance(value, (int, float)):
        if lit.number is not None and not lit.quoted:
            return value == lit.number
        return display is not None and (display == lit.text or lit.text in display.split())
    if isinstance(value, str):
        return value == lit.text
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value) == lit.raw
    if value is None:
        return display is not None and display == lit.text
    return str(value) == lit.text


def _order(v: Any, lit: Literal, op: str) -> bool:
    value, _ = _scalar(v)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and lit.number is not None:
        a: Any = value
        b: Any = lit.number
    elif isinstance(value, str):
        a, b = value, lit.text
    elif isinstance(value, (bytes, bytearray)):
        a, b = bytes(value), lit.raw
    else:
        return False
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op == "<=":
        return a <= b
    return a >= b


def _contains(v: Any, lit: Literal) -> bool:
    value, display = _scalar(v)
    if isinstance(value, str):
        return lit.text in value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return lit.raw in bytes(value)
    return display is not None and lit.text in display


def _matches(v: Any, rx: re.Pattern[str]) -> bool:
    value, display = _scalar(v)
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return rx.search(value) is not None
    if display is not None and rx.search(display) is not None:
        return True
    return value is not None and rx.search(str(value)) is not None


# ------------------------------------------------------------------ field getters
def _walk(fields: Iterable[Field], segs: Sequence[str]) -> Iterator[Any]:
    """The values at a dotted path in a field tree, as the JSON view nests them: list elements are
    passed through (their names are not part of a path), repeated names all count."""
    head = segs[0]
    rest = segs[1:]
    for f in fields:
        if f.name != head:
            continue
        if not rest:
            yield from _leaf_values(f)
        else:
            yield from _descend(f, rest)


def _leaf_values(f: Field) -> Iterator[Any]:
    if f.children is None:
        yield f
    elif f.is_list:
        for c in f.children:
            if c.children is None:
                yield c
            else:
                yield True  # a structure element: present
    else:
        yield True


def _descend(f: Field, rest: Sequence[str]) -> Iterator[Any]:
    if f.children is None:
        return
    if f.is_list:
        for c in f.children:
            if c.children is not None:
                if c.is_list:
                    yield from _descend(c, rest)
                else:
                    yield from _walk(c.children, rest)
    else:
        yield from _walk(f.children, rest)


_COMMAND_KEYS: dict[str, str] = {}


def command_key(command: str) -> str:
    """The catalogue's name of a command: ``Basic.Publish`` -> ``basic.publish``,
    ``DeclarePublisher response`` -> ``declare_publisher_response``."""
    key = _COMMAND_KEYS.get(command)
    if key is None:
        from dissectors.kit.catalog import snake

        key = ".".join(snake(part) for part in command.split("."))
        if len(_COMMAND_KEYS) < 4096:
            _COMMAND_KEYS[command] = key
    return key


def _catalogue_getter(protocol: str, rest: str, command: str | None) -> Getter:
    """``command``: the command key ``rest`` starts with (known at compile time), or None for a
    field every command of the protocol may carry (``rabbitmq_stream.size``)."""
    if command is not None:
        path = rest[len(command) + 1:].split(".") if rest != command else None

        def get_in_command(ev: Any, links: Links | None) -> list[Any]:
            if not isinstance(ev, Frame) or ev.protocol != protocol or command_key(ev.command) != command:
                return []
            return [True] if path is None else list(_walk(ev.fields, path))

        return get_in_command
    segs = rest.split(".")

    def get(ev: Any, links: Links | None) -> list[Any]:
        if not isinstance(ev, Frame) or ev.protocol != protocol:
            return []
        key = command_key(ev.command)
        if rest == key:
            return [True]
        if rest.startswith(key + "."):
            return list(_walk(ev.fields, rest[len(key) + 1:].split(".")))
        return list(_walk(ev.fields, segs))

    return get


def _protocol_of(ev: Any, flow_protocol: Callable[[int | None], str | None]) -> str | None:
    return ev.protocol if isinstance(ev, Frame) else flow_protocol(ev.flow)


def _findings(ev: Any) -> list[Finding]:
    return ev.findings if isinstance(ev, Frame) else [ev]


def _engine_getters(flow_protocol: Callable[[int | None], str | None]) -> dict[str, Getter]:
    def frame_attr(name: str) -> Getter:
        def get(ev: Any, links: Links | None) -> list[Any]:
            if not isinstance(ev, Frame):
                return []
            v = getattr(ev, name, None)
            return [] if v is None else [v]
        return get

    def link_attr(name: str) -> Getter:
        def get(ev: Any, links: Links | None) -> list[Any]:
            v = getattr(links, name) if links is not None else None
            return [] if v is None else [v]
        return get

    def finding_attr(name: str) -> Getter:
        return lambda ev, links: [str(getattr(f, name)) for f in _findings(ev)]

    def protocol(ev: Any, links: Links | None) -> list[Any]:
        p = _protocol_of(ev, flow_protocol)
        return [] if p is None else [p]

    return {
        "frame": lambda ev, links: ([ev.packets[1]] if isinstance(ev, Frame)
                                    else [] if ev.frame is None else [ev.frame]),
        "flow": lambda ev, links: [] if ev.flow is None else [ev.flow],
        "direction": lambda ev, links: [str(ev.direction)] if isinstance(ev, Frame) else [],
        "protocol": protocol,
        "dialect": frame_attr("dialect"),
        "command": frame_attr("command"),
        "code": frame_attr("code"),
        "size": frame_attr("size"),
        "info": frame_attr("info"),
        "src": frame_attr("src"),
        "dst": frame_attr("dst"),
        "ts": frame_attr("ts"),
        "file": lambda ev, links: [] if ev.file is None else [ev.file],
        "latency": link_attr("latency"),
        "request_frame": link_attr("request_frame"),
        "response_frame": link_attr("response_frame"),
        "finding": finding_attr("id"),
        "finding.id": finding_attr("id"),
        "finding.severity": finding_attr("severity"),
        "finding.category": finding_attr("category"),
        "finding.message": finding_attr("message"),
    }


# ------------------------------------------------------------------ parser
class _Parser:
    def __init__(self, text: str, resolve: Callable[[str, int], Getter]) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.resolve = resolve

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, message: str, tok: _Tok) -> FilterError:
        return FilterError(message, self.text, tok.pos)

    def parse(self) -> Test:
        if self.peek().kind == "end":
            raise self.error("empty filter", self.peek())
        test = self.or_()
        tok = self.peek()
        if tok.kind != "end":
            raise self.error(f"unexpected {tok.text!r}", tok)
        return test

    def or_(self) -> Test:
        parts = [self.and_()]
        while self.peek().kind == "op" and self.peek().text == "||":
            self.take()
            parts.append(self.and_())
        if len(parts) == 1:
            return parts[0]
        return lambda ev, links: any(p(ev, links) for p in parts)

    def and_(self) -> Test:
        parts = [self.not_()]
        while self.peek().kind == "op" and self.peek().text == "&&":
            self.take()
            parts.append(self.not_())
        if len(parts) == 1:
            return parts[0]
        return lambda ev, links: all(p(ev, links) for p in parts)

    def not_(self) -> Test:
        tok = self.peek()
        if tok.kind == "op" and tok.text == "!":
            self.take()
            inner = self.not_()
            return lambda ev, links: not inner(ev, links)
        return self.primary()

    def primary(self) -> Test:
        tok = self.take()
        if tok.kind == "op" and tok.text == "(":
            inner = self.or_()
            close = self.take()
            if close.text != ")":
                raise self.error("expected ')'", close)
            return inner
        if tok.kind != "word":
            raise self.error(f"expected a field name, not {tok.text or 'the end'!r}", tok)
        get = self.resolve(tok.text, tok.pos)
        op = self.peek()
        if op.kind != "op" or op.text not in _COMPARE and op.text != "in":
            return lambda ev, links: bool(get(ev, links))
        self.take()
        if op.text == "in":
            return self.in_set(get)
        lit = self.literal()
        return _comparison(get, op.text, lit, self, op)

    def literal(self) -> Literal:
        tok = self.take()
        if tok.kind == "string":
            return Literal(_unquote(tok.text), True)
        if tok.kind == "word":
            return Literal(tok.text, False)
        raise self.error(f"expected a value, not {tok.text or 'the end'!r}", tok)

    def in_set(self, get: Getter) -> Test:
        brace = self.take()
        if brace.text != "{":
            raise self.error("expected '{' after 'in'", brace)
        lits: list[Literal] = []
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text == "}":
                self.take()
                break
            if tok.kind == "op" and tok.text == ",":
                self.take()
                continue
            lits.append(self.literal())
        if not lits:
            raise self.error("empty set", brace)
        return lambda ev, links: any(_eq(v, lit) for v in get(ev, links) for lit in lits)


def _comparison(get: Getter, op: str, lit: Literal, parser: _Parser, at: _Tok) -> Test:
    if op == "==":
        return lambda ev, links: any(_eq(v, lit) for v in get(ev, links))
    if op == "!=":
        # Wireshark 4: "!=" holds when no occurrence is equal (and the field is there).
        def ne(ev: Any, links: Links | None) -> bool:
            values = get(ev, links)
            return bool(values) and not any(_eq(v, lit) for v in values)
        return ne
    if op == "contains":
        return lambda ev, links: any(_contains(v, lit) for v in get(ev, links))
    if op == "~":
        try:
            rx = re.compile(lit.text, re.IGNORECASE)
        except re.error as exc:
            raise parser.error(f"bad regular expression ({exc})", at) from None
        return lambda ev, links: any(_matches(v, rx) for v in get(ev, links))
    return lambda ev, links: any(_order(v, lit, op) for v in get(ev, links))


class DisplayFilter:
    """A compiled display filter. ``fields``: the catalogue's field names (every dissector's);
    ``protocols``: the protocol names; ``flow_protocol``: the protocol of a conversation, for
    findings that are not part of a frame."""

    def __init__(self, text: str, fields: Iterable[str], protocols: Iterable[str],
                 flow_protocol: Callable[[int | None], str | None] = lambda flow: None,
                 commands: Mapping[str, Iterable[str]] | None = None) -> None:
        self.text = text
        # Command keys per protocol (from each dissector's command list): a name that starts with
        # one is about that command only (rabbitmq_stream.heartbeat is the Heartbeat command, not
        # Tune's heartbeat field).
        keys = {p: {command_key(c) for c in names} for p, names in (commands or {}).items()}
        names = set(fields)
        prefixes = {name.rsplit(".", i)[0] for name in names for i in range(name.count("."))}
        engine = _engine_getters(flow_protocol)
        protos = set(protocols)

        def resolve(name: str, pos: int) -> Getter:
            getter = engine.get(name)
            if getter is not None:
                return getter
            if name in protos:
                return lambda ev, links: [True] if _protocol_of(ev, flow_protocol) == name else []
            protocol, _, rest = name.partition(".")
            known = keys.get(protocol, set())
            if name in names or name in prefixes or rest in known:
                segs = rest.split(".")
                command = next((k for k in (".".join(segs[:i]) for i in range(len(segs), 0, -1)) if k in known),
                               None)
                return _catalogue_getter(protocol, rest, command)
            raise FilterError(f"unknown field {name!r} (see `streamproto fields`)", text, pos)

        self._test = _Parser(text, resolve).parse()

    def __call__(self, ev: Frame | Finding, links: Links | None = None) -> bool:
        return self._test(ev, links)
