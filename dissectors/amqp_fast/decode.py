"""Bytes to frames: the initiation, one command, the message head; and Info lines.

Everything here is a function of the bytes and the encoding: what they mean for the conversation
(machines, confirmations, messages) is the connection's business.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from functools import cache
from typing import Any, Final

from analyzer.api import Direction, Field, Finding, Frame
from analyzer.jsonout import leaves_json
from dissectors.amqp_fast import codes
from dissectors.amqp_fast import rules as R
from dissectors.amqp_fast.commands import (
    BY_CODE,
    COMMAND_END,
    LONG_SIZE,
    PROTOCOL_ID,
    PROTOCOL_VERSION,
    Command,
    browse_without_tag,
    head_layout,
    layout,
)
from dissectors.amqp_fast.framing import header
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit.lazy import QUICK_INFO, QUICK_JSON, LazyFrame
from dissectors.kit.memo import remember
from dissectors.schema import DecodeError, field_values, leaves_only

INITIATION: Final = "INITIATION"


def initiation(d: Direction, data: bytes, offset: int) -> tuple[Frame, bool]:
    """The client's two octets; (frame, whether they name AMQP/Fast at all)."""
    pid, version = data[0], data[1]
    if pid == PROTOCOL_ID:
        what = "AMQP/Fast"
    elif 129 <= pid <= 160:
        what = "reserved"
    elif pid > 160:
        what = "a test protocol"
    else:
        what = "AMQP/HTTP"
    fields = [Field("protocol_id", pid, 0, 1, what), Field("protocol_version", version, 1, 1)]
    frame = Frame(d, offset, 2, INITIATION, None, f"{INITIATION} {pid} {version}", fields)
    if pid != PROTOCOL_ID or version != PROTOCOL_VERSION:
        frame.findings.append(R.INITIATION_OTHER(f"the initiation {pid} {version} names {what} version {version}, "
                                                 f"not AMQP/Fast (128) version 1", command=INITIATION))
    frame.data = data
    return frame, pid >= PROTOCOL_ID


def command(d: Direction, data: bytes, offset: int, enc: Encoding) -> tuple[Frame, Command | None, dict[str, Any]]:
    """One whole command (size header to command-end): its frame, its table entry (None: unknown
    type) and its decoded field values.

    A known command whose fields fill it exactly is checked from its values alone; its field tree
    (the general path's, the same fields) is made when a view asks for it."""
    hs, size = header(data, 0)
    code = data[hs]
    cmd = BY_CODE.get(code)
    end = len(data) - 1
    if cmd is not None and (code != 37 or end - hs - 1 != 6):
        try:
            values, used = layout(code, enc).read_values(data, hs + 1, end)
        except DecodeError:
            used = -1
        if used == end:
            findings: list[Finding] = []
            if hs == 6 and size < LONG_SIZE:
                findings.append(_long_size_short(size, cmd.name))
            _check_values(cmd, values, findings)
            if data[end] != COMMAND_END:
                findings.append(_end_missing(data[end], cmd.name))
            return values_frame(d, data, offset, enc, cmd, values, findings), cmd, values
    return _command_tree(d, data, offset, enc, hs, size, code, cmd)


def values_frame(d: Direction, data: bytes, offset: int, enc: Encoding, cmd: Command, values: dict[str, Any],
                 findings: list[Finding]) -> LazyFrame:
    """The frame of a known command checked from its values: its tree is made when a view asks."""
    return LazyFrame(d, offset, len(data), cmd.name, cmd.code, findings, data, _tree_later, (enc, cmd.name, cmd, values))


def _tree_later(frame: LazyFrame, ctx: tuple[Encoding, str, Command, dict[str, Any]]) -> tuple[list[Field], str]:
    enc, name, cmd, values = ctx
    data = frame.data
    assert data is not None
    hs, size = header(data, 0)
    fields = _fields(data, hs, size, cmd, enc, [])
    _finish(fields, values, data)
    return fields, info(name, cmd, values)


def _command_tree(d: Direction, data: bytes, offset: int, enc: Encoding, hs: int, size: int, code: int,
                  cmd: Command | None) -> tuple[Frame, Command | None, dict[str, Any]]:
    """The general path: the field tree now, with whatever of the command decodes."""
    name = cmd.name if cmd is not None else f"UNKNOWN({code})"
    findings: list[Finding] = []
    end = len(data) - 1
    if hs == 6 and size < LONG_SIZE:
        findings.append(_long_size_short(size, name))
    values: dict[str, Any] = {}
    if cmd is None:
        fields = _head(hs, size, code, name)
        findings.append(R.UNKNOWN_COMMAND(f"command type {code} is not defined", command=name))
        if end > hs + 1:
            fields.append(Field("payload", data[hs + 1:end], hs + 1, end - hs - 1))
    else:
        fields = _fields(data, hs, size, cmd, enc, findings)
        values = field_values([f for f in fields[2:] if f.name not in ("trailing", "undecoded")])
        _check_values(cmd, values, findings)
    if data[end] != COMMAND_END:
        findings.append(_end_missing(data[end], name))
    _finish(fields, values, data)
    # The checks above needed the fields; the Info line waits until a view asks for it.
    frame = LazyFrame(d, offset, len(data), name, code, findings, data, _built, (fields, name, cmd, values))
    return frame, cmd, values


def _head(hs: int, size: int, code: int, name: str) -> list[Field]:
    return [Field("size", size, 0, hs, "long size" if hs == 6 else None), Field("type", code, hs, 1, name)]


def _fields(data: bytes, hs: int, size: int, cmd: Command, enc: Encoding, findings: list[Finding]) -> list[Field]:
    """A known command's size, type and whatever of its fields decodes; the problems in ``findings``."""
    name, code = cmd.name, cmd.code
    fields = _head(hs, size, code, name)
    end = len(data) - 1
    shape = layout(code, enc)
    if code == 37 and end - hs - 1 == 6:  # the ABNF's BROWSE, without confirm-tag
        shape = browse_without_tag(enc)
        findings.append(R.BROWSE_ABNF("HANDLE BROWSE without confirm-tag (6 octets of fields)", command=name))
    view = memoryview(data)
    try:
        got, used = shape.read_fields(view, hs + 1, end)
        fields.extend(got)
        if used < end:
            findings.append(R.FRAMING_TRAILING(f"{end - used} octets after the last field", command=name))
            fields.append(Field("trailing", data[used:end], used, end - used))
    except DecodeError as e:
        # What decodes is shown; the rest of the command stays as octets.
        partial, _ = _prefix(shape, view, hs + 1, e.offset)
        fields.extend(partial)
        findings.append(R.FRAMING_TRUNCATED(f"{e} (command size {size})", command=name))
        fields.append(Field("undecoded", data[e.offset:end], e.offset, end - e.offset))
    finally:
        view.release()
    return fields


def _finish(fields: list[Field], values: dict[str, Any], data: bytes) -> None:
    """The reply code explained where the tree shows it; the command-end octet."""
    rc = values.get("reply_code")
    if isinstance(rc, int):
        for f in fields:
            if f.name == "reply_code":
                f.display = codes.explain(rc)
    end = len(data) - 1
    fields.append(Field("command_end", data[end], end, 1, "ok" if data[end] == COMMAND_END else "missing"))


def _long_size_short(size: int, name: str) -> Finding:
    return R.LONG_SIZE_SHORT(f"size {size} escaped with 0xFFFF: the 2-octet form holds it", command=name)


def _end_missing(octet: int, name: str) -> Finding:
    return R.END_MISSING(f"the octet the size counts last is {octet:#04x}, not the command-end 0xce", command=name)


def _built(frame: LazyFrame, ctx: tuple[list[Field], str, Command | None, dict[str, Any]]) -> tuple[list[Field], str]:
    return ctx[0], _quick_info(frame, ctx)


def _quick_info(frame: LazyFrame, ctx: tuple[Any, str, Command | None, dict[str, Any]]) -> str:
    """The Info line of either lazy command frame: both contexts end in (name, command, values)."""
    _, name, cmd, values = ctx
    return info(name, cmd, values)


#: (encoding, command bytes) -> _tree_later's Info line: a sender's HANDLE SEND repeats fragment
#: after fragment, a HANDLE NOTIFY for every fragment of its message. Bounded: commands of up to
#: _INFO_KEY_MAX octets, _INFO_SEEN_MAX of them (see memo.remember).
_INFO_SEEN: dict[tuple[Encoding, bytes], str] = {}
_INFO_SEEN_MAX = 512
_INFO_KEY_MAX: Final = 256


def _tree_later_info(frame: LazyFrame, ctx: tuple[Encoding, str, Command, dict[str, Any]]) -> str:
    """_quick_info of a command checked from its values, remembered by its bytes (the values and
    so the line are a function of them and the encoding)."""
    data = frame.data
    assert data is not None
    _, name, cmd, values = ctx
    if len(data) > _INFO_KEY_MAX:
        return info(name, cmd, values)
    key = (ctx[0], data)
    text = _INFO_SEEN.get(key)
    if text is None:
        text = remember(_INFO_SEEN, key, info(name, cmd, values), _INFO_SEEN_MAX)
    return text


QUICK_INFO[_built] = _quick_info
QUICK_INFO[_tree_later] = _tree_later_info


@cache
def _leaves_only(code: int, enc: Encoding) -> bool:
    """Whether command ``code``'s fields under ``enc`` are leaves whose tree value is the value
    read_values gives (integers, bits, strings), named apart from each other and from the frame's
    own size, type and command_end: then the tree's JSON is the values'."""
    return leaves_only(layout(code, enc), ("size", "type", "command_end"))


def _tree_json(frame: LazyFrame, ctx: tuple[Encoding, str, Command, dict[str, Any]]) -> dict[str, Any] | None:
    """What fields_json makes of _tree_later's fields, from the values the command was checked with."""
    enc, _name, cmd, values = ctx
    if not _leaves_only(cmd.code, enc):
        return None
    data = frame.data
    assert data is not None
    out = leaves_json(values.items(), {"size": header(data, 0)[1], "type": cmd.code})
    out["command_end"] = data[-1]
    return out


QUICK_JSON[_tree_later] = _tree_json


def _prefix(shape: Any, view: memoryview, start: int, stop: int) -> tuple[list[Field], int]:
    """The fields of ``shape`` that decode whole before ``stop``."""
    out: list[Field] = []
    for n in range(len(shape.fields), 0, -1):
        sub = type(shape)(*shape.fields[:n], msb_first=shape.msb_first)
        try:
            got, used = sub.read_fields(view, start, stop)
        except DecodeError:
            continue
        return got, used
    return out, start


#: Per command: the names of its short-string fields (the zero-octet check reads only those).
_SHORTSTRS: Final = {c.code: tuple(n for n, t in c.fields if t == "shortstr") for c in BY_CODE.values()}


def nul_fields(code: int, values: dict[str, Any]) -> list[str]:
    """The short-string fields of command ``code`` that hold a zero octet."""
    out = []
    for n in _SHORTSTRS[code]:
        v = values.get(n)
        if isinstance(v, (str, bytes)) and ("\0" in v if isinstance(v, str) else b"\0" in v):
            out.append(n)
    return out


def _check_values(cmd: Command, values: dict[str, Any], findings: list[Finding]) -> None:
    for n in nul_fields(cmd.code, values):
        findings.append(R.SHORT_STRING_NUL(f"{n} holds a zero octet", command=cmd.name, field=n))
    rc = values.get("reply_code")
    if isinstance(rc, int):
        sev = codes.severity(rc)
        if sev == 0:
            findings.append(R.REPLY_UNKNOWN(f"{cmd.name}: reply code {rc}: {codes.explain(rc)}", command=cmd.name))
        elif sev >= 4:
            findings.append(R.REPLY_ERROR(f"{cmd.name} {rc} '{_text(values.get('reply_text', ''))}': "
                                          f"{codes.explain(rc)}", command=cmd.name))


def _text(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        raw = bytes(v)
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.hex()
        return s if s.isprintable() else raw.hex()
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def info(name: str, cmd: Command | None, values: dict[str, Any]) -> str:
    """The Info line: the command's name and its info pieces (the RFC's example dialogue's style)."""
    if cmd is None:
        return name
    parts = [name]
    for key, before, after, fmt, keys, optional in _INFO[cmd.code]:
        if key is not None:  # one field: its text between the piece's words
            v = values.get(key, _ABSENT)
            if v is _ABSENT or (optional and not v):
                continue
            # An integer's digits are never long enough to cut; a bool is no int here (0/1); text
            # is cut as _short cuts it. _text and _short say the same of these; anything else: theirs.
            kind = type(v)
            if kind is int:
                parts.append(f"{before}{v}{after}")
            elif kind is bool:
                parts.append(before + ("1" if v else "0") + after)
            elif kind is str:
                parts.append(before + (v if len(v) <= _SHORT else v[:_SHORT - 1] + "…") + after)
            else:
                parts.append(before + _short(_text(v)) + after)
            continue
        if any(k not in values for k in keys):
            continue
        if optional and not any(values[k] for k in keys):
            continue
        parts.append(fmt.format(**{k: _short(_text(values[k])) for k in keys}))
    return " ".join(parts)


_ABSENT: Final = object()


def _piece(fmt: str, optional: bool) -> tuple[str | None, str, str, str, list[str], bool]:
    """An Info piece worked out once: (its one field or None, the words before and after it, the
    format, every field it names, optional)."""
    keys = [k.split("}")[0] for k in fmt.split("{")[1:]]
    if len(keys) == 1 and "}}" not in fmt and "{{" not in fmt:
        before, _, rest = fmt.partition("{" + keys[0] + "}")
        if "{" not in rest and "}" not in rest:
            return keys[0], before, rest, fmt, keys, optional
    return None, "", "", fmt, keys, optional


#: Per command: its Info pieces, worked out once.
_INFO: Final = {c.code: [_piece(fmt, optional) for fmt, optional in c.info] for c in BY_CODE.values()}


_SHORT: Final = 64  # characters of a value in the Info line


def _short(text: str, limit: int = _SHORT) -> str:
    """A value as the Info line shows it: long ones cut (the field tree has them whole)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


#: Per encoding, the last message heads read: (their length, their octets after the body-size,
#: values). A producer's messages have the same head but for their size, so a head is looked up
#: by what follows its size (a head whose octets after the size are those reads the same values
#: to the same end: the size is read apart from the rest) and copied with its own size. Never
#: changed once made; at most HEADS_KEPT per encoding.
_HEADS: dict[Encoding, list[tuple[int, bytes, dict[str, Any]]]] = {}
HEADS_KEPT: Final = 4


def message_head_values(buf: bytes, enc: Encoding) -> tuple[dict[str, Any], int] | None:
    """The values of the message head at the start of ``buf`` and its octets, or None when ``buf``
    ends inside it (message_head's fields, without them: made when a view shows the frame). The
    tree reader has the last word where the values reader refuses."""
    lead = _head_lead(enc)
    heads = _HEADS.get(enc)
    if heads is not None and lead is not None:
        names, st = lead
        n = len(buf)
        for used, rest, values in heads:
            if used <= n and buf[st.size:used] == rest:
                out = values.copy()
                out.update(zip(names, st.unpack_from(buf, 0), strict=True))
                return out, used
    try:
        got = head_layout(enc).read_values(buf, 0, len(buf))
    except DecodeError:
        head = message_head(buf, enc)
        if head is None:
            return None
        return {f.name: f.value for f in head[0]}, head[1]
    if lead is not None:
        values, used = got
        kept = _HEADS.setdefault(enc, [])
        kept.insert(0, (used, bytes(buf[lead[1].size:used]), values.copy()))  # the caller's stays its own
        del kept[HEADS_KEPT:]
    return got


@cache
def _head_lead(enc: Encoding) -> tuple[tuple[str, ...], Any] | None:
    """The head's leading integers (Struct.leading_ints); None when a field may be absent (where
    the octets end would then decide what is read)."""
    layout = head_layout(enc)
    return None if any(f.optional for f in layout.fields) else layout.leading_ints()


def message_head(buf: bytes, enc: Encoding) -> tuple[list[Field], int] | None:
    """The message head at the start of ``buf``: (fields, octets) or None when ``buf`` ends inside it."""
    view = memoryview(buf)
    try:
        return head_layout(enc).read_fields(view, 0, len(buf))
    except DecodeError:
        return None
    finally:
        view.release()
