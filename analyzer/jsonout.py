"""The JSON contract (see README and ``analyzer/schemas/``): one object per frame or per
free-standing finding, as JSON Lines or inside one streamed document.

Always strict JSON in valid UTF-8, whatever the capture holds: NaN and the infinities (AMQP
doubles, AMQP 1.0 values) are written as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``; lone surrogates in text (undecodable wire bytes) become the text ``\\xNN``; and
one value's bytes are bounded (``max_value``: longer values are cut and the frame lists them under
``truncated``), so one huge field cannot make the encoder build gigabytes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from analyzer.api import Field, Finding, Frame
from analyzer.bytevalue import CUT, LIMIT, bytes_json, cut
from analyzer.bytevalue import MAX_VALUE as MAX_VALUE  # the default of --max-value-size, where it was
from analyzer.linking import Links
from analyzer.textsafe import json_text

_SPECIAL = {math.inf: "Infinity", -math.inf: "-Infinity"}


def strict_float(value: float) -> float | str:
    """A float JSON can carry: NaN and the infinities as strings (strict parsers reject the bare
    literals ``NaN``/``Infinity`` that Python's json module writes)."""
    if value != value:
        return "NaN"
    return _SPECIAL.get(value, value)


def set_max_value(limit: int) -> None:
    """Bytes of one value in JSON from now on (0: no limit)."""
    LIMIT[0] = limit


def max_value() -> int:
    """Bytes of one value written now (0: no limit); a value no longer than this is never cut."""
    return LIMIT[0]


def plain(value: Any, name: str = "") -> Any:
    """A JSON-friendly value: bytes as text when printable UTF-8, else as hex; floats strict."""
    if type(value) is bytes:
        return bytes_json(value, name)
    if isinstance(value, (bytearray, memoryview)):
        return bytes_json(bytes(value), name)
    if isinstance(value, float):
        return strict_float(value)
    if isinstance(value, str):  # inside tables and lists (a plain str field is written as it is)
        limit = LIMIT[0]
        if limit and len(value) > limit:
            cut(value.encode("utf-8", "surrogatepass"), name)  # recorded with its size in bytes
            return value[:limit]
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v, name) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v, name) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int)):
        return value
    return str(value)


# Written as they are. Floats go through plain() (NaN and the infinities need care), bytes too.
_SCALARS = (int, str, bool)


def fields_json(fields: Sequence[Field]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    repeated: set[str] | None = None
    for f in fields:
        name = f.name
        value = _direct_json(f) if type(f) is not Field else None
        if value is None:
            ch = f.children
            if ch is None:
                # _leaf inlined: this loop runs for every field of every frame.
                value = f.value
                if value is not None and type(value) not in _SCALARS:
                    value = plain(value, name)
            elif f.is_list:
                value = None if f.value is None and not ch else [field_json(c, name) for c in ch]
            else:
                value = fields_json(ch)
        if name not in out:
            out[name] = value
        elif repeated is not None and name in repeated:
            out[name].append(value)
        else:
            # Repeated names (e.g. several data sections) become a list, in wire order.
            out[name] = [out[name], value]
            repeated = repeated or set()
            repeated.add(name)
    return out


def _direct_json(f: Field) -> Any:
    """A Field subclass's JSON value made without building its children (a stream chunk's records,
    an Iggy poll's messages: thousands per frame), from its ``json_value``; None: the tree's way."""
    direct = getattr(f, "json_value", None)
    return direct() if direct is not None else None


def leaves_json(values: Iterable[tuple[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with what fields_json makes of leaf fields of these (name, value) pairs, in order (for
    decoders that give a frame's JSON from the values they checked, without its tree)."""
    for name, value in values:
        out[name] = value if value is None or type(value) in _SCALARS else plain(value, name)
    return out


def field_json(f: Field, name: str = "") -> Any:
    if type(f) is not Field:
        value = _direct_json(f)
        if value is not None:
            return value
    if f.children is None:
        value = f.value
        return value if value is None or type(value) in _SCALARS else plain(value, name or f.name)
    if f.is_list:
        if f.value is None and not f.children:
            return None
        return [field_json(c, name) for c in f.children]
    return fields_json(f.children)


def frame_json(frame: Frame, links: Links | None = None, code_parts: Mapping[str, Any] | None = None,
               dialect: str | None = None) -> dict[str, Any]:
    """One frame as the contract's object. ``links``: its request/response links (from
    :class:`analyzer.linking.Linker`); ``code_parts``: ``{protocol: ((key, shift, mask), ...)}``,
    for protocols whose code packs several numbers (AMQP's class and method ids)."""
    packets = frame.packets
    if CUT:  # left over from a frame whose conversion failed
        CUT.clear()
    fields = frame.json_fields()
    if fields is None:  # the tree's way, and only its cuts
        if CUT:
            CUT.clear()
        fields = fields_json(frame.fields)
    out = {
        "type": "frame",
        "frame": packets[1],
        "packets": packets,  # a tuple: encoded as a JSON array
        "ts": frame.ts,
        "flow": frame.flow,
        "community_id": frame.community_id,
        "src": frame.src,
        "dst": frame.dst,
        "direction": frame.direction,  # a str enum: encoded as its value
        "protocol": frame.protocol,
        "dialect": frame.dialect or dialect,
        "command": frame.command,
        "code": frame.code,
        "size": frame.size,
        "info": frame.info,
        "request_frame": None,
        "response_frame": None,
        "latency": None,
        "fields": fields,
        "findings": [f.to_json() for f in frame.findings] if frame.findings else [],
    }
    if links is not None:
        out["request_frame"] = links.request_frame
        out["response_frame"] = links.response_frame
        out["latency"] = links.latency
        if frame.file is not None:  # several files: the other end's file too
            out["request_file"] = links.request_file
            out["response_file"] = links.response_file
    if code_parts and frame.code is not None:
        parts = code_parts.get(frame.protocol)
        if parts:
            out["code_parts"] = {key: (frame.code >> shift) & mask for key, shift, mask in parts}
    if CUT:
        out["truncated"] = CUT[:]
        CUT.clear()
    if frame.file is not None:  # several files read as one capture: packet numbers are per file
        return {"type": "frame", "file": frame.file, **out}
    return out


def finding_json(f: Finding) -> dict[str, Any]:
    if f.file is not None:
        return {"type": "finding", "file": f.file, "flow": f.flow, "community_id": f.community_id,
                "frame": f.frame, **f.to_json()}
    return {"type": "finding", "flow": f.flow, "community_id": f.community_id, "frame": f.frame, **f.to_json()}


# One encoder for every line: json.dumps with options builds a new encoder per call. allow_nan is
# off: a special float that escaped plain() is a bug to see, not invalid JSON to write.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False,
                           allow_nan=False).encode

# Frames and findings (the bulk of every JSON output) are written by orjson where it is installed:
# the same compact UTF-8 JSON six to seven times faster than the standard library on Python 3.11
# (whose C encoder makes a string per token), about 7 of the 9 us a frame's object costs, a quarter
# of a JSON Lines run. orjson writes a NaN as null where the standard library raises, so it gets only
# the objects frame_json and finding_json make, whose floats are strict by construction (plain()
# or capture timestamps); everything else, and the objects orjson refuses (lone surrogates,
# integers beyond 64 bits), goes through dumps(). STREAMPROTO_JSON=stdlib, or no orjson wheel for
# the platform, leaves everything to the standard library: tests/test_json_encoders.py proves both
# give the same JSON values on every bundled capture. The texts differ only in how some floats are
# spelt (orjson writes 0.0000958 and 1e-7 where Python writes 9.58e-05 and 1e-07).
_orjson: Any = None
if os.environ.get("STREAMPROTO_JSON") != "stdlib":
    try:
        import orjson as _orjson
    except ImportError:
        pass
_FAST = None if _orjson is None else _orjson.dumps
_NEWLINE = 0 if _orjson is None else _orjson.OPT_APPEND_NEWLINE
_REFUSED = TypeError if _orjson is None else _orjson.JSONEncodeError
# orjson writes WideInt (below) as its digits where it has fragments of JSON text (orjson.Fragment,
# see _orjson_again). An orjson without them leaves such objects to the standard library.
_FRAGMENT = getattr(_orjson, "Fragment", None)
_PASSTHROUGH = 0 if _orjson is None else _orjson.OPT_PASSTHROUGH_SUBCLASS


class WideInt(int):
    """An integer beyond 64 bits in a frame's JSON object (u128 ids): an int to every reader.
    orjson refuses such integers, and a frame with one used to be written whole by the standard
    library; a decoder that knows its value may be that wide gives it as a WideInt, which orjson
    writes as its digits (the standard library writes any int subclass as its digits too)."""

    __slots__ = ()


#: The kinds of object (a frame's "command") that go straight to orjson's second try
#: (_orjson_again), since the last object of that kind had an int subclass (a WideInt) in it. A kind
#: that carries u128 values (Iggy's polled ids, V's checksums) has them in frame after frame, and a
#: first try refused is time lost (about 2 us of an Iggy V frame's 9 to 11); other kinds keep the
#: first try, faster where it succeeds (a second try is about 0.2 us slower on an object it need not
#: take). The same bytes either way: only which try runs first changes.
_AGAIN_FIRST: set[Any] = set()
#: Whether the second try running now has met an int subclass (set by _subclass).
_MET = [False]


def _subclass(obj: Any) -> Any:
    """What orjson is to write for an instance of a subclass of int, str, dict or list: the same
    JSON it writes for the base type's value (a bool is its own type and never comes here)."""
    if isinstance(obj, int):
        _MET[0] = True
        return _FRAGMENT(int.__repr__(obj).encode("ascii"))  # type: ignore[misc]
    if isinstance(obj, str):
        return str.__str__(obj)
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, list):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON")


def encoder() -> str:
    """What writes frames and findings: ``orjson`` or ``stdlib``."""
    return "stdlib" if _FAST is None else "orjson"


def dumps(obj: Any) -> str:
    """One compact JSON text; lone surrogates already made text (:func:`json_text`)."""
    try:
        text = _ENCODE(obj)
    except ValueError:  # a special float not made strict on the way: make the whole object strict
        text = _ENCODE(_strict(obj))
    return text


def dumps_event(obj: dict[str, Any]) -> str:
    """:func:`dumps` for what :func:`frame_json` and :func:`finding_json` make (faster)."""
    data = _orjson(obj, 0)
    return data.decode("utf-8") if data is not None else dumps(obj)


def _orjson(obj: dict[str, Any], option: int) -> bytes | None:
    """orjson's UTF-8 of an object (a second try when it refused one for a WideInt); None without
    orjson or when it refuses again: the standard library (:func:`dumps`) writes it then, or says
    what is wrong."""
    if _FAST is None:
        return None
    if _AGAIN_FIRST and obj.get("command") in _AGAIN_FIRST:
        return _orjson_again(obj, option)
    try:
        return _FAST(obj, option=option)
    except _REFUSED:
        return _orjson_again(obj, option)


def _orjson_again(obj: dict[str, Any], option: int) -> bytes | None:
    """orjson's text of an object it refused, when that was for a WideInt; None when it refuses
    again. Only a second try hands subclasses of int, str, dict and list to _subclass: orjson
    writes the others faster without (an Enum such as a frame's direction is one). Whether the next
    object of its kind goes straight to this try is decided here (_AGAIN_FIRST)."""
    if _FRAGMENT is None:
        return None
    _MET[0] = False
    try:
        data = _FAST(obj, default=_subclass, option=option | _PASSTHROUGH)  # type: ignore[misc]
    except _REFUSED:
        data = None
    kind = obj.get("command")
    if _MET[0]:
        if len(_AGAIN_FIRST) >= 64:  # kinds named by the wire: kept few
            _AGAIN_FIRST.clear()
        _AGAIN_FIRST.add(kind)
    else:
        _AGAIN_FIRST.discard(kind)
    return data


def _strict(obj: Any) -> Any:
    if isinstance(obj, float):
        return strict_float(obj)
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


class JsonWriter:
    """Writes JSON texts as UTF-8 bytes whatever the locale says (JSON is UTF-8, RFC 8259): to the
    binary buffer under a text stream when it has one."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        buffer = getattr(stream, "buffer", None)
        self.buffer = buffer
        if buffer is not None:
            stream.flush()  # anything written as text before goes first

    def write(self, text: str) -> None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from the wire: written as \\xNN text
            data = json_text(text).encode("utf-8")
        if self.buffer is not None:
            self.buffer.write(data)
        else:
            self.stream.write(data.decode("utf-8"))

    def line(self, obj: Any) -> None:
        self.write(dumps(obj) + "\n")

    def event(self, obj: dict[str, Any]) -> None:
        """:meth:`line` for what :func:`frame_json` and :func:`finding_json` make (faster)."""
        buffer = self.buffer
        if _FAST is None or buffer is None:
            self.write(dumps_event(obj) + "\n")
            return
        # _orjson written out here: a call less for every line of JSON Lines (0.4 % of a run).
        if not _AGAIN_FIRST or obj.get("command") not in _AGAIN_FIRST:
            try:
                buffer.write(_FAST(obj, option=_NEWLINE))  # UTF-8 already: no text in between
                return
            except _REFUSED:
                pass
        data = _orjson_again(obj, _NEWLINE)
        if data is not None:
            buffer.write(data)
        else:  # the standard library writes it, or says what is wrong
            self.write(dumps(obj) + "\n")

    def element(self, sep: str, obj: dict[str, Any]) -> None:
        """``sep``, then what :meth:`event` writes of ``obj`` without its newline: an element of a
        JSON array (the document's frames). As bytes from orjson to the buffer, where a round trip
        through text cost a decode and an encode of every frame's JSON."""
        buffer = self.buffer
        data = _orjson(obj, 0) if buffer is not None else None
        if data is not None:
            buffer.write(sep.encode() + data)  # type: ignore[union-attr]
        else:
            self.write(sep + dumps_event(obj))

    def flush(self) -> None:
        if self.buffer is not None:
            self.buffer.flush()
        else:
            self.stream.flush()
