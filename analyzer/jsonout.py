"""The JSON Lines contract (see README): one object per frame or per free-standing finding."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from analyzer.api import Field, Finding, Frame


def plain(value: Any) -> Any:
    """A JSON-friendly value: bytes as text when printable UTF-8, else as hex."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.hex()
        if text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text):
            return text
        return raw.hex()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


_SCALARS = (int, str, bool, float)


def fields_json(fields: Sequence[Field]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    repeated: set[str] | None = None
    for f in fields:
        ch = f.children
        if ch is None:
            value = f.value
            if value is not None and type(value) not in _SCALARS:
                value = plain(value)
        elif f.is_list:
            value = None if f.value is None and not ch else [field_json(c) for c in ch]
        else:
            value = fields_json(ch)
        name = f.name
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


def field_json(f: Field) -> Any:
    if f.children is None:
        value = f.value
        return value if value is None or type(value) in _SCALARS else plain(value)
    if f.is_list:
        if f.value is None and not f.children:
            return None
        return [field_json(c) for c in f.children]
    return fields_json(f.children)


def frame_json(frame: Frame) -> dict[str, Any]:
    packets = frame.packets
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
        "dialect": frame.dialect,
        "command": frame.command,
        "code": frame.code,
        "size": frame.size,
        "info": frame.info,
        "fields": fields_json(frame.fields),
        "findings": [f.to_json() for f in frame.findings] if frame.findings else [],
    }
    if frame.file is not None:  # several files read as one capture: packet numbers are per file
        return {"type": "frame", "file": frame.file, **out}
    return out


def finding_json(f: Finding) -> dict[str, Any]:
    if f.file is not None:
        return {"type": "finding", "file": f.file, "flow": f.flow, "community_id": f.community_id,
                "frame": f.frame, **f.to_json()}
    return {"type": "finding", "flow": f.flow, "community_id": f.community_id, "frame": f.frame, **f.to_json()}


# One encoder for every line: json.dumps with options builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def dumps(obj: dict[str, Any]) -> str:
    return _ENCODE(obj)
