"""Decoding: the bytes of one frame into a :class:`Frame` (or a lazily built one), its argument
values, and the findings the bytes alone justify (overruns, trailing bytes, field-table tags).

Nothing here knows the connection: state machines, correlation and tracking read what this returns.
Field names are snake_case, as the field catalogue (:mod:`.catalog`) registers them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from analyzer.api import Direction, Field, Finding, Frame
from analyzer.bytevalue import printable
from analyzer.jsonout import fields_json, leaves_json, max_value
from analyzer.jsonout import plain as json_plain
from dissectors.amqp091 import rules as R
from dissectors.amqp091.clean_tables import entries_are_clean
from dissectors.amqp091.codes import (
    FRAME_MIN_SIZE,
    FRAME_TYPES,
    PROTOCOL_HEADERS,
    RABBITMQ_41_FRAME_MIN_SIZE,
    REPLY_CODES,
)
from dissectors.amqp091.fast import FAST, INFO_ARGS
from dissectors.amqp091.methods import CLASSES, LEGACY_CLASSES, METHODS, Method
from dissectors.amqp091.properties import decode_properties, scan_properties
from dissectors.amqp091.wire import TABLE, TableNotes, table_string_entries
from dissectors.kit.lazy import QUICK_INFO, QUICK_JSON, LazyFrame
from dissectors.kit.memo import remember
from dissectors.schema import Bit, DecodeError, Int, Prefixed, Struct, leaves_only

HDR = struct.Struct(">BHI")
IDS = struct.Struct(">HH")
_U32 = struct.Struct(">I").unpack_from
CH_HEAD = struct.Struct(">HHQ")

#: Bytes of a body frame's payload kept in its "payload" field.
PAYLOAD_KEEP = 1024
#: How many bytes of one message body are kept for display; every byte is still counted.
BODY_KEEP = 64 * 1024
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript",
               "application/x-www-form-urlencoded")


def head_fields(ftype: int, ch: int, size: int) -> list[Field]:
    # "frame_type", not "type": exchange.declare and the content properties have a "type".
    return [Field("frame_type", ftype, 0, 1, FRAME_TYPES.get(ftype, "unknown")), Field("channel", ch, 1, 2),
            Field("size", size, 3, 4)]


def _info_template(meth: Method) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(format, argument names, their defaults) of a method's Info arguments: one printf-style
    format for ``label=value ...`` (str() of each value, which is what an f-string gives for
    every value type the schema decodes)."""
    labels = " ".join(f"{label.replace('%', '%%')}=%s" for label, _arg in meth.info)
    return labels, tuple(arg for _label, arg in meth.info), ("",) * len(meth.info)


#: Method code -> (format of the Info arguments, their names, their defaults), for methods with some.
INFO_TEMPLATES = {code: _info_template(meth) for code, meth in METHODS.items() if meth.info}


def method_info(meth: Method, values: dict[str, Any]) -> str:
    if "reply_code" in values:
        rc = values["reply_code"]
        text = values.get("reply_text") or ""
        name = REPLY_CODES.get(rc, (f"UNKNOWN_{rc}", False))[0] if isinstance(rc, int) else "?"
        info = f"{meth.name} {rc} " + (text if isinstance(text, str) and text.startswith(name) else
                                       f"{name} {text}".rstrip())
        return info + " " + _info_args(meth, values) if meth.info else info
    if not meth.info:
        return meth.name
    return meth.name + " " + _info_args(meth, values)


def _info_args(meth: Method, values: dict[str, Any]) -> str:
    """``label=value ...`` of a method's Info arguments, by its template."""
    fmt, args, blanks = INFO_TEMPLATES[meth.code]
    return fmt % tuple(map(values.get, args, blanks))


# ------------------------------------------------------------------------------ protocol header
def protocol_header(d: Direction, data: bytes, offset: int) -> tuple[Frame, str | None, str, bool]:
    """The 8-byte ``AMQP....`` header: (frame, dialect or None, description, known)."""
    tail = data[4:8]
    known = PROTOCOL_HEADERS.get(tail)
    pid, a, b, c = tail
    if known is not None:
        dialect, desc = known
    else:
        dialect, desc = None, f"unknown AMQP protocol id {pid} version {a}.{b}.{c}"
    fields = [Field("protocol", "AMQP", 0, 4), Field("protocol_id", pid, 4, 1), Field("major", a, 5, 1),
              Field("minor", b, 6, 1), Field("revision", c, 7, 1),
              Field("version", dialect or "unknown", -1, 0, desc)]
    frame = Frame(d, offset, 8, "ProtocolHeader", None, f"ProtocolHeader {desc}", fields, [], dialect=dialect,
                  data=data)
    return frame, dialect, desc, known is not None


# ------------------------------------------------------------------------------ other frame types
def heartbeat(d: Direction, data: bytes, ch: int, size: int, offset: int, findings: list[Finding]) -> Frame:
    if ch != 0:
        findings.append(R.HEARTBEAT_CHANNEL(f"heartbeat on channel {ch}"))
    if size:
        findings.append(R.HEARTBEAT_PAYLOAD(f"heartbeat carries {size} payload bytes"))
    fields = head_fields(8, ch, size)
    if size:
        fields.append(Field("payload", bytes(data[7:7 + size]), 7, size))
    return Frame(d, offset, len(data), "Heartbeat", 8, "Heartbeat", fields, findings)


def unknown_type(d: Direction, data: bytes, ftype: int, ch: int, size: int, offset: int,
                 findings: list[Finding]) -> Frame:
    name = FRAME_TYPES.get(ftype, "unknown")
    findings.append(R.FRAME_TYPE(f"frame type {ftype} ({name}) is not an AMQP 0-9-1 frame type"))
    return Frame(d, offset, len(data), f"Unknown({ftype})", ftype, f"Unknown frame type {ftype} ch={ch} len={size}",
                 [*head_fields(ftype, ch, size), Field("payload", bytes(data[7:7 + size]), 7, size)], findings)


# ------------------------------------------------------------------------------ methods
def build_method(frame: LazyFrame, meth: Method) -> tuple[list[Field], str]:
    """Field tree of a method frame that already passed its fast layout check."""
    data = frame.data
    assert data is not None
    _ftype, ch, size = HDR.unpack_from(data, 0)
    fields = head_fields(1, ch, size)
    fields.append(Field("class", meth.class_id, 7, 2, CLASSES[meth.class_id]))
    fields.append(Field("method", meth.method_id, 9, 2, meth.name.partition(".")[2]))
    args, _stop = meth.layout.read_fields(memoryview(data), 11, 7 + size)
    fields.extend(args)
    return fields, method_info(meth, {f.name: f.value for f in args})


#: Methods whose arguments are all integers, bits and strings: checked from their values alone
#: (Struct.read_values; those with field tables too when the tables are clean, see _TABLED;
#: method()'s general path decodes whatever does not fit).
_PLAIN = {code: all(type(f.type) in (Int, Prefixed, Bit) for f in meth.layout.fields)
          for code, meth in METHODS.items()}


#: Quick Info lines by frame bytes, for the methods whose frames repeat byte for byte: a
#: publisher's Basic.Publish to one exchange and key, Basic.Return, a connection's handshake and
#: closes (short connections repeat them by the thousand). Not for the methods whose Info names a
#: delivery tag, which differs from frame to frame. Short frames only; emptied when full.
_INFO_SEEN: dict[bytes, str] = {}
_INFO_KEY_MAX = 1024
_INFO_SEEN_MAX = 512


def _remembering(quick: Callable[[bytes], str]) -> Callable[[bytes], str]:
    """``quick`` with its lines remembered in _INFO_SEEN (a function of the frame bytes alone)."""
    def remembered(data: bytes) -> str:
        if type(data) is not bytes or len(data) > _INFO_KEY_MAX:
            return quick(data)
        text = _INFO_SEEN.get(data)
        if text is None:
            text = remember(_INFO_SEEN, data, quick(data), _INFO_SEEN_MAX)
        return text
    return remembered


def _quick_for(meth: Method) -> Callable[[bytes], str]:
    """The function quick_method uses for ``meth``'s frames: the data's Info line, by the cheapest
    reader that gives build_method's values, remembered by the bytes unless its Info names a
    delivery tag."""
    name = meth.name
    has_reply_code = any(f.name == "reply_code" for f in meth.layout.fields)
    if not meth.info and not has_reply_code:  # the name alone: no decoding
        return lambda data: name
    quick = _quick_reader(meth, has_reply_code)
    return quick if any(arg == "delivery_tag" for _label, arg in meth.info) else _remembering(quick)


def _quick_reader(meth: Method, has_reply_code: bool) -> Callable[[bytes], str]:
    """The reader behind _quick_for's function."""
    name = meth.name
    quick = INFO_ARGS.get(meth.code)
    if quick is not None and not has_reply_code:
        # Lazy method frames of these passed their fast layout check. method_info's own format,
        # with the name put in front once, filled by a reader of just those arguments.
        names, read = quick
        fmt, args, _blanks = INFO_TEMPLATES[meth.code]
        if names != args:
            raise ValueError(f"{name}: INFO_ARGS reads {names}, the Info template wants {args}")
        head = f"{name.replace('%', '%%')} {fmt}"
        return lambda data: head % read(data)
    if _PLAIN[meth.code]:  # and these read_values' (method() made them lazy only then)
        layout = meth.layout
        return lambda data: method_info(meth, layout.read_values(data, 11, 7 + HDR.unpack_from(data, 0)[2])[0])
    parts = _TABLED.get(meth.code)
    if parts is not None:  # lazy only when its tables were clean: the same reader gives the values
        return lambda data: method_info(meth, _clean_values(parts, data, 7 + HDR.unpack_from(data, 0)[2]) or {})

    def general(data: bytes) -> str:
        args, _stop = meth.layout.read_fields(memoryview(data), 11, 7 + HDR.unpack_from(data, 0)[2])
        return method_info(meth, {f.name: f.value for f in args})
    return general


#: Method code -> its quick Info function, made on first use.
_QUICK: dict[int, Callable[[bytes], str]] = {}


def quick_method(frame: LazyFrame, meth: Method) -> str:
    """The Info line build_method gives, without the frame's field tree."""
    quick = _QUICK.get(meth.code)
    if quick is None:
        quick = _QUICK[meth.code] = _quick_for(meth)
    data = frame.data
    assert data is not None
    return quick(data)


def _filling_values(meth: Method, data: bytes, end: int) -> dict[str, Any] | None:
    """The arguments of a method without field tables or timestamps when they fill the frame
    exactly (the schema's values reader; the tree is built when asked); None otherwise."""
    try:
        values, stop = meth.layout.read_values(data, 11, end)
    except DecodeError:
        return None
    return values if stop == end else None


#: Methods with field tables, and otherwise only integers, bits and strings (Connection.Start and
#: StartOk, the declares, binds and Basic.Consume): their arguments as runs of plain ones (a Struct,
#: read by read_values) and the tables' names. See _clean_values.
_TABLED: dict[int, tuple[Struct | str, ...]] = {}
for _code, _meth in METHODS.items():
    if _PLAIN[_code] or not all(type(f.type) in (Int, Prefixed, Bit) or f.type is TABLE for f in _meth.layout.fields):
        continue
    _parts: list[Struct | str] = []
    _run: list = []
    for _f in _meth.layout.fields:
        if _f.type is TABLE:
            if _run:
                _parts.append(Struct(*_run, doc="arguments"))
                _run = []
            _parts.append(_f.name)
        else:
            _run.append(_f)
    if _run:
        _parts.append(Struct(*_run, doc="arguments"))
    _TABLED[_code] = tuple(_parts)
del _code, _meth, _parts, _run, _f


def _clean_values(parts: tuple[Struct | str, ...], data: bytes, end: int) -> dict[str, Any] | None:
    """The argument values of a method with field tables (a table's value is None, as in its
    tree) when they fill the frame exactly and every table is clean: nothing in it that the tree
    reader would note (clean_tables.entries_are_clean). None otherwise: the tree reader then says what
    is wrong. Values the checks read (none of them is inside a table) come without the tables'
    Field trees: a connection's handshake and declarations stay lazy like the other methods."""
    values: dict[str, Any] = {}
    off = 11
    try:
        for part in parts:
            if type(part) is str:
                if off + 4 > end:
                    return None
                stop = off + 4 + _U32(data, off)[0]
                if stop > end or not entries_are_clean(data, off + 4, stop, 0, True):
                    return None
                values[part] = None
                off = stop
            else:
                got, off = part.read_values(data, off, end)  # type: ignore[union-attr]
                values.update(got)
    except DecodeError:
        return None
    return values if off == end else None


#: method()'s (method, values) of the lazy method frames by their bytes: a client opens every
#: connection and channel with the same frames, and the broker answers alike (Connection.Start
#: with its whole server properties, Tune, Open, Channel.Open, their replies, the closes). The
#: values are only read once made. Short frames only (the channel number is in the bytes); emptied
#: when full.
_METHODS_SEEN: dict[bytes, tuple[Method, dict[str, Any]]] = {}
_METHOD_KEY_MAX = 1024
_METHODS_SEEN_MAX = 512


def _lazy_values(meth: Method, data: bytes, end: int) -> dict[str, Any] | None:
    """The argument values of a method frame that can be lazy (its layout fits exactly and its
    tables are clean), read without its tree; None: its tree must say what is wrong."""
    code = meth.code
    fast = FAST.get(code)
    values = fast(data, end) if fast is not None else None
    if values is None:
        if _PLAIN[code]:
            values = _filling_values(meth, data, end)
        else:
            parts = _TABLED.get(code)
            if parts is not None:
                values = _clean_values(parts, data, end)
    return values


def lazy_values(meth: Method, data: bytes, end: int) -> dict[str, Any] | None:
    """What method() reads of a frame ``data`` of ``meth`` (bytes, ``end`` where its payload
    ends) when it makes it lazy, remembered alike: the hot path's reader of the methods that have
    no fast validator of their own (synchronous requests and replies)."""
    key = data if type(data) is bytes and len(data) <= _METHOD_KEY_MAX else None
    known = _METHODS_SEEN.get(key) if key is not None else None
    if known is not None:
        return known[1]
    values = _lazy_values(meth, data, end)
    if values is not None and key is not None:
        remember(_METHODS_SEEN, key, (meth, values), _METHODS_SEEN_MAX)
    return values


def method(d: Direction, data: bytes, ch: int, size: int, offset: int,
           findings: list[Finding]) -> tuple[Frame, Method | None, dict[str, Any] | None]:
    """A method frame: (frame, its method or None when unknown/truncated, its argument values).

    A method whose fast layout check passes gets a lazy frame (tree and Info built on demand) and
    only the values the state machines read; any other gets its whole tree now."""
    end = 7 + size
    key = data if type(data) is bytes and len(data) <= _METHOD_KEY_MAX else None
    known = _METHODS_SEEN.get(key) if key is not None else None
    if known is not None:
        meth, values = known
        return LazyFrame(d, offset, len(data), meth.name, meth.code, findings, data, build_method, meth), meth, values
    if size >= 4:
        cid, mid = IDS.unpack_from(data, 7)
        code = cid << 16 | mid
        meth = METHODS.get(code)
        if meth is not None:
            values = lazy_values(meth, data, end)
            if values is not None:
                return LazyFrame(d, offset, len(data), meth.name, code, findings, data, build_method, meth), meth, \
                    values
    fields = head_fields(1, ch, size)
    if size < 4:
        findings.append(R.FRAMING_TRUNCATED(f"a method frame needs 4 bytes of class and method id, has {size}"))
        fields.append(Field("payload", bytes(data[7:end]), 7, size))
        return Frame(d, offset, len(data), "Method", None, "Method (truncated)", fields, findings), None, None
    meth = METHODS.get(code)
    cls_name = CLASSES.get(cid)
    # "class"/"method", not "class_id"/"method_id": close methods have arguments of those names.
    fields.append(Field("class", cid, 7, 2, cls_name or LEGACY_CLASSES.get(cid, "unknown")))
    if meth is None:
        if cls_name is None:
            legacy = LEGACY_CLASSES.get(cid)
            findings.append(R.METHOD_UNKNOWN_CLASS(
                f"class {cid}" + (f" ({legacy}, an AMQP 0-8/0-9 class removed in 0-9-1)" if legacy else
                                  " is not an AMQP 0-9-1 class")))
            command = f"{legacy or f'Class{cid}'}.Unknown({mid})"
        else:
            findings.append(R.METHOD_UNKNOWN(f"class {cls_name} has no method {mid}"))
            command = f"{cls_name}.Unknown({mid})"
        fields.append(Field("method", mid, 9, 2, "unknown"))
        if size > 4:
            fields.append(Field("arguments", bytes(data[11:end]), 11, size - 4))
        return Frame(d, offset, len(data), command, code, command, fields, findings), None, None
    fields.append(Field("method", mid, 9, 2, meth.name.partition(".")[2]))
    TableNotes.reset()
    try:
        args, stop = meth.layout.read_fields(memoryview(data), 11, end)
    except DecodeError as exc:
        findings.append(R.FRAMING_TRUNCATED(f"{meth.name}: {exc}"))
        args, stop = [], end
        fields.append(Field("undecoded", bytes(data[11:end]), 11, size - 4, f"undecodable: {exc}"))
    if stop < end:
        findings.append(R.FRAMING_TRAILING(f"{meth.name}: {end - stop} bytes after the last argument"))
    table_notes(meth.name, findings)
    fields.extend(args)
    values = {f.name: f.value for f in args}
    frame = Frame(d, offset, len(data), meth.name, code, method_info(meth, values), fields, findings)
    return frame, meth, values


def table_notes(what: str, findings: list[Finding]) -> None:
    if TableNotes.unknown:
        findings.append(R.TABLE_UNKNOWN_TAG(f"{what}: " + "; ".join(TableNotes.unknown[:5])))
    if TableNotes.spec_only:
        findings.append(R.TABLE_SPEC_TAG(f"{what}: " + "; ".join(TableNotes.spec_only[:5])))


#: Where a Connection.Start's server-properties table starts: after version-major and -minor.
_START_PROPERTIES = 13


#: server_product's answers for lazy frames by their bytes: a broker sends every connection the
#: same Connection.Start. Short frames only; emptied when full.
_PRODUCTS_SEEN: dict[bytes, tuple[Any, Any]] = {}
_PRODUCTS_SEEN_MAX = 64


def server_product(frame: Frame) -> tuple[Any, Any]:
    """The values of the ``product`` and ``version`` entries of a Connection.Start's server
    properties (None for one that is absent). A lazy frame's table is clean (see method()): its
    string entries are read from the bytes without its tree; any other goes by the tree."""
    if type(frame) is LazyFrame:
        data = frame.data
        assert data is not None
        key = data if type(data) is bytes and len(data) <= _METHOD_KEY_MAX else None
        found = _PRODUCTS_SEEN.get(key) if key is not None else None
        if found is not None:
            return found
        found = table_string_entries(data, _START_PROPERTIES, ("product", "version"))
        if found is not None:
            if key is not None:
                remember(_PRODUCTS_SEEN, key, found, _PRODUCTS_SEEN_MAX)
            return found
    props: Field | None = next((f for f in frame.fields if f.name == "server_properties"), None)
    if props is None:
        return None, None
    product, version = props.child("product"), props.child("version")
    return (None if product is None else product.value), (None if version is None else version.value)


def broker_frame_min(product: Any, version: Any) -> int:
    """frame-min-size for this broker (its server properties' product and version; None when
    absent): RabbitMQ 4.1 raised it from the spec's 4096 to 8192."""
    if product != "RabbitMQ" or version is None:
        return FRAME_MIN_SIZE
    parts = str(version).split(".")
    try:
        if (int(parts[0]), int(parts[1])) >= (4, 1):
            return RABBITMQ_41_FRAME_MIN_SIZE
    except (ValueError, IndexError):
        pass
    return FRAME_MIN_SIZE


# ------------------------------------------------------------------------------ content
def content_header(d: Direction, data: bytes, ch: int, size: int, offset: int, findings: list[Finding]
                   ) -> tuple[Frame, tuple[int, int, int, str, list[str]] | None]:
    """A content header: (frame, (class id, weight, body size, content type, property problems)),
    the second None when the frame is too short for its fixed part."""
    end = 7 + size
    if size < 14:
        fields = head_fields(2, ch, size)
        findings.append(R.FRAMING_TRUNCATED(f"a content header needs at least 14 bytes, has {size}"))
        fields.append(Field("payload", bytes(data[7:end]), 7, size))
        return Frame(d, offset, len(data), "ContentHeader", 2, "ContentHeader (truncated)", fields, findings), None
    class_id, weight, body_size = CH_HEAD.unpack_from(data, 7)
    TableNotes.reset()
    build = build_header
    try:
        content_type, problems, stop = scan_properties(data, 19, end)
        if stop < end:
            findings.append(R.FRAMING_TRAILING(f"content header: {end - stop} bytes after the last property"))
    except DecodeError as exc:
        findings.append(R.FRAMING_TRUNCATED(f"content header properties: {exc}"))
        content_type, problems = "", []
        build = build_header_undecodable
    table_notes("headers", findings)
    frame = LazyFrame(d, offset, len(data), "ContentHeader", 2, findings, data, build, None)
    return frame, (class_id, weight, body_size, content_type, problems)


def content_body(d: Direction, data: bytes, offset: int, findings: list[Finding]) -> LazyFrame:
    return LazyFrame(d, offset, len(data), "ContentBody", 3, findings, data, build_body, None)


def complete(frame: LazyFrame, method: str, received: int, frames: int, raw: bytes, content_type: str) -> None:
    """The message is whole: ``frame`` (its last frame) shows it, built on demand."""
    frame._ctx = (method, received, frames, raw, content_type)


def build_header(frame: LazyFrame, msg: tuple | None) -> tuple[list[Field], str]:
    data = frame.data
    assert data is not None
    _t, ch, size = HDR.unpack_from(data, 0)
    end = 7 + size
    class_id, weight, body_size = CH_HEAD.unpack_from(data, 7)
    fields = head_fields(2, ch, size)
    fields += [Field("class_id", class_id, 7, 2, CLASSES.get(class_id, "unknown")), Field("weight", weight, 9, 2),
               Field("body_size", body_size, 11, 8)]
    try:
        props, content_type, _key = _properties(data, end)
        fields.extend(props)
    except DecodeError as exc:
        content_type = ""
        fields.append(Field("properties", bytes(data[19:end]), 19, end - 19, f"undecodable: {exc}"))
    info = header_info(body_size, content_type)
    if msg is not None:
        info += _message(fields, msg)
    return fields, info


def _properties(data: bytes, end: int) -> tuple[Sequence[Field], str, bytes | None]:
    """A content header's property fields, its content type, and its property bytes when the
    fields are remembered by them (_PROPS_SEEN; else None). Raises DecodeError."""
    key = bytes(data[19:end]) if end - 19 <= _PROPS_KEY_MAX else None
    known = _PROPS_SEEN.get(key) if key is not None else None
    if known is not None:
        return known[0], known[1], key
    content_type = ""
    notes = len(TableNotes.unknown) + len(TableNotes.spec_only)
    props, problems, _stop = decode_properties(memoryview(data), 19, end)
    for f in props:
        if f.name == "content_type" and isinstance(f.value, str):
            content_type = f.value
    if key is not None and not problems and notes == len(TableNotes.unknown) + len(TableNotes.spec_only):
        remember(_PROPS_SEEN, key, (tuple(props), content_type), _PROPS_SEEN_MAX)
        return props, content_type, key
    return props, content_type, None


#: build_header's property fields by property bytes: a publisher sends the same properties message
#: after message, and a delivery carries the bytes its publish had. The fields are shared by the
#: trees of the headers that carry those bytes (nothing changes a Field once its tree is built; the
#: offsets are frame-relative, and properties always start at offset 19). Kept only for property
#: lists that decode without a word (no problem, no table note), short ones only; emptied when full.
_PROPS_SEEN: dict[bytes, tuple[tuple[Field, ...], str]] = {}
_PROPS_KEY_MAX = 512
_PROPS_SEEN_MAX = 256


def header_info(body_size: int, content_type: str) -> str:
    """A content header's Info line, before the message's part (when it is the message's last frame)."""
    return f"ContentHeader size={body_size}" + (f" type={content_type}" if content_type else "")


def quick_header(frame: LazyFrame, msg: tuple | None) -> str | None:
    """The Info line build_header gives, without the field tree; None where only the tree's
    decoding can tell (continued property flags). Only for headers whose properties decode
    (every lazy header but those made by ``build_header_undecodable``)."""
    data = frame.data
    assert data is not None
    _t, _ch, size = HDR.unpack_from(data, 0)
    end = 7 + size
    body_size = CH_HEAD.unpack_from(data, 7)[2]
    flags = data[19] << 8 | data[20]
    if flags & 1:
        return None
    content_type = ""
    if flags & 0x8000:
        stop = 22 + data[21]
        if stop > end:
            return None
        try:
            content_type = str(data[22:stop], "utf-8")
        except UnicodeDecodeError:  # the tree keeps such a value as bytes: no type shown
            content_type = ""
    info = header_info(body_size, content_type)
    if msg is not None:
        info += message_info(msg)
    return info


def build_header_undecodable(frame: LazyFrame, msg: tuple | None) -> tuple[list[Field], str]:
    """build_header for a header whose properties do not decode: no quick Info for it."""
    return build_header(frame, msg)


def build_body(frame: LazyFrame, msg: tuple | None) -> tuple[list[Field], str]:
    data = frame.data
    assert data is not None
    _t, ch, size = HDR.unpack_from(data, 0)
    if size <= PAYLOAD_KEEP:
        pf = Field("payload", data[7:7 + size], 7, size)
    else:
        pf = Field("payload", data[7:7 + PAYLOAD_KEEP], 7, size, f"{size} bytes (first {PAYLOAD_KEEP} kept)")
    fields = [Field("frame_type", 3, 0, 1, "ContentBody"), Field("channel", ch, 1, 2), Field("size", size, 3, 4), pf]
    info = f"ContentBody len={size}"
    if msg is not None:
        info += _message(fields, msg)
    return fields, info


def quick_body(frame: LazyFrame, msg: tuple | None) -> str:
    """The Info line build_body gives, without the field tree."""
    data = frame.data
    assert data is not None
    info = f"ContentBody len={HDR.unpack_from(data, 0)[2]}"
    return info if msg is None else info + message_info(msg)


#: content type -> whether it names text; asked for every message shown (a few types in a capture).
_TEXTUAL: dict[str, bool] = {}


def _textual(content_type: str) -> bool:
    textual = _TEXTUAL.get(content_type)
    if textual is None:
        ct = content_type.lower()
        # A capture of ever new types: the memory stays small.
        textual = remember(_TEXTUAL, content_type, ct.startswith(_TEXT_TYPES) or ct.endswith(("+json", "+xml")), 256)
    return textual


def _is_text(content_type: str, raw: bytes) -> str | None:
    textual = _textual(content_type)
    if not textual and content_type:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if not textual:
            return None
        # A cut in the middle of a multi-byte character at the display cap.
        text = raw.decode("utf-8", errors="replace")
    if not textual and not printable(text[:256]):
        return None
    return text


def _message_parts(msg: tuple) -> tuple[list[tuple[str, Any]], list[str | None], str | None]:
    """The whole message's children as (name, value) pairs and their displays, and its body as
    text (None: binary)."""
    name, total, frames, raw, content_type = msg
    truncated = total > len(raw)
    text = _is_text(content_type, raw)
    pairs: list[tuple[str, Any]] = [("method", name), ("body_size", total), ("body_frames", frames)]
    displays: list[str | None] = [None, None, None]
    if text is not None:
        pairs.append(("body", text))
        displays.append(f"first {len(raw)} of {total} bytes" if truncated else None)
    else:
        pairs.append(("body", raw[:64]))
        displays.append(f"{total} bytes of binary data")
    if truncated:
        pairs.append(("body_truncated", True))
        displays.append(f"only the first {len(raw)} bytes are kept")
    return pairs, displays, text


def _message(fields: list[Field], msg: tuple) -> str:
    """Append the whole message's field to ``fields``; returns the Info text for it."""
    name, total, frames = msg[0], msg[1], msg[2]
    pairs, displays, text = _message_parts(msg)
    fields.append(Field("message", None, -1, 0, f"{name} message, {total} bytes in {frames} body frame(s)",
                        [Field(n, v, -1, 0, display) for (n, v), display in zip(pairs, displays, strict=True)]))
    return _message_info(name, total, text)


def message_info(msg: tuple) -> str:
    """The Info text _message gives, without the field."""
    name, total, _frames, raw, content_type = msg
    return _message_info(name, total, _is_text(content_type, raw))


def _message_info(name: str, total: int, text: str | None) -> str:
    if text is None:
        return f" [{name} message {total} bytes (binary)]"
    if not total:
        return f" [{name} message 0 bytes]"
    # A text body's first 40 characters
    return f" [{name} message {total} bytes: {text if len(text) <= 40 else text[:40] + '…'!r}]"


QUICK_INFO.update({build_method: quick_method, build_header: quick_header, build_body: quick_body})


# ------------------------------------------------------------------------------ JSON without trees
#: The names build_method puts before a method's arguments.
_METHOD_HEAD = frozenset(("frame_type", "channel", "size", "class", "method"))
#: Methods whose tree's JSON is their argument values (Struct.read_values) after the head.
_JSON_PLAIN = {code: leaves_only(meth.layout, _METHOD_HEAD) for code, meth in METHODS.items()}


def json_method(frame: LazyFrame, meth: Method) -> dict[str, Any] | None:
    """What fields_json makes of build_method's fields, from the argument values."""
    if not _JSON_PLAIN[meth.code]:
        return None
    data = frame.data
    assert data is not None
    _t, ch, size = HDR.unpack_from(data, 0)
    try:
        values, _stop = meth.layout.read_values(data, 11, 7 + size)
    except DecodeError:
        return None
    return leaves_json(values.items(), {"frame_type": 1, "channel": ch, "size": size, "class": meth.class_id,
                                "method": meth.method_id})


def json_header(frame: LazyFrame, msg: tuple | None) -> dict[str, Any] | None:
    """What fields_json makes of build_header's fields; the property fields' JSON remembered by
    their bytes as the fields are (_PROPS_JSON), when no value of them could be cut."""
    data = frame.data
    assert data is not None
    _t, ch, size = HDR.unpack_from(data, 0)
    end = 7 + size
    class_id, weight, body_size = CH_HEAD.unpack_from(data, 7)
    try:
        props, _content_type, key = _properties(data, end)
    except DecodeError:
        return None
    limit = max_value()
    if key is not None and (not limit or len(key) <= limit):
        got = _PROPS_JSON.get(key)
        if got is None:
            got = remember(_PROPS_JSON, key, fields_json(props), _PROPS_SEEN_MAX)
    else:
        got = fields_json(props)
    out: dict[str, Any] = {"frame_type": 2, "channel": ch, "size": size, "class_id": class_id, "weight": weight,
                           "body_size": body_size}
    for name in got:
        if name in out:  # the tree's rule for repeated names
            return None
    out.update(got)
    if msg is not None:
        out["message"] = _message_json(msg)
    return out


#: The JSON of property fields by their bytes (see json_header; a value no longer than the value
#: limit is never cut, so only property lists within it are remembered).
_PROPS_JSON: dict[bytes, dict[str, Any]] = {}


def json_body(frame: LazyFrame, msg: tuple | None) -> dict[str, Any]:
    """What fields_json makes of build_body's fields."""
    data = frame.data
    assert data is not None
    _t, ch, size = HDR.unpack_from(data, 0)
    out = {"frame_type": 3, "channel": ch, "size": size,
           "payload": json_plain(data[7:7 + min(size, PAYLOAD_KEEP)], "payload")}
    if msg is not None:
        out["message"] = _message_json(msg)
    return out


def _message_json(msg: tuple) -> dict[str, Any]:
    return leaves_json(_message_parts(msg)[0], {})


QUICK_JSON.update({build_method: json_method, build_header: json_header, build_body: json_body})
