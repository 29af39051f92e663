"""The JSON contract as JSON Schemas (draft 2020-12): a frame line and a finding line of
``inspect --format jsonl`` (the same objects are the elements of ``--format json``'s ``frames``
and ``findings``). ``streamproto schema frame|finding`` prints them; the tests validate every line
of the bundled captures against them. Closed objects (no other keys): a new key is a change of
the contract, made here and in the README together.
"""

from __future__ import annotations

from typing import Any

_SEVERITY = {"enum": ["error", "warning", "note"]}
_CATEGORY = {"enum": ["malformed", "size", "unknown", "handshake", "sequence", "correlation", "response", "checksum",
                      "value", "truncated", "capture"]}
_FINDING_CORE: dict[str, Any] = {
    "id": {"type": "string", "pattern": r"^[a-z0-9_]+(\.[a-z0-9_]+)+$",
           "description": "Stable dotted rule id (`streamproto rules`)"},
    "severity": _SEVERITY,
    "category": _CATEGORY,
    "message": {"type": "string"},
    "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{16}$",
                    "description": "Hash of rule id, Community ID, command and field: stable across runs"},
}
_INT_OR_NULL = {"type": ["integer", "null"], "minimum": 1}
_STR_OR_NULL = {"type": ["string", "null"]}
_COMMUNITY_ID = {"type": ["string", "null"], "pattern": "^1:[A-Za-z0-9+/]{27}=$"}
#: A float the contract may carry: a number, or NaN/Infinity/-Infinity as strings (strict JSON).
SPECIAL_FLOATS = ["NaN", "Infinity", "-Infinity"]

FINDING_IN_FRAME: dict[str, Any] = {
    "type": "object",
    "required": list(_FINDING_CORE),
    "additionalProperties": False,
    "properties": _FINDING_CORE,
}

FRAME: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://streamproto.invalid/schema/frame.json",
    "title": "streamproto frame line",
    "type": "object",
    "required": ["type", "frame", "packets", "ts", "flow", "community_id", "src", "dst", "direction", "protocol",
                 "dialect", "command", "code", "size", "info", "request_frame", "response_frame", "latency",
                 "fields", "findings"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "frame"},
        "file": {"type": "string", "description": "Only when several files are read as one capture"},
        "frame": {"type": "integer", "minimum": 1, "description": "Packet carrying the frame's last byte"},
        "packets": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "minItems": 2,
                    "maxItems": 2},
        "ts": {"type": "number"},
        "flow": {"type": "integer", "minimum": 1},
        "community_id": _COMMUNITY_ID,
        "src": {"type": "string"},
        "dst": {"type": "string"},
        "direction": {"enum": ["c2s", "s2c"]},
        "protocol": {"type": "string"},
        "dialect": _STR_OR_NULL,
        "command": {"type": "string"},
        "code": {"type": ["integer", "null"]},
        "code_parts": {"type": "object", "additionalProperties": {"type": "integer"},
                       "description": "A code that packs several numbers, unpacked (AMQP: class_id, method_id)"},
        "size": {"type": "integer", "minimum": 0},
        "info": {"type": "string"},
        "request_frame": {**_INT_OR_NULL, "description": "On a response: the packet of its request"},
        "response_frame": {**_INT_OR_NULL, "description": "On a request: the packet of its response"},
        "request_file": _STR_OR_NULL,
        "response_file": _STR_OR_NULL,
        "latency": {"type": ["number", "null"], "minimum": 0,
                    "description": "Seconds from request to response, on both"},
        "fields": {"type": "object", "propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"},
                   "description": "Decoded values by snake_case field name (`streamproto fields`)"},
        "findings": {"type": "array", "items": FINDING_IN_FRAME},
        "truncated": {"type": "array", "items": {
            "type": "object", "required": ["field", "size", "kept"], "additionalProperties": False,
            "properties": {"field": {"type": "string"}, "size": {"type": "integer"}, "kept": {"type": "integer"}}}},
    },
}

FINDING: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://streamproto.invalid/schema/finding.json",
    "title": "streamproto finding line (a finding not part of a frame)",
    "type": "object",
    "required": ["type", "flow", "community_id", "frame", *_FINDING_CORE],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "finding"},
        "file": _STR_OR_NULL,
        "flow": _INT_OR_NULL,
        "community_id": _COMMUNITY_ID,
        "frame": _INT_OR_NULL,
        **_FINDING_CORE,
    },
}

SCHEMAS = {"frame": FRAME, "finding": FINDING}
