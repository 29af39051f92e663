"""Iggy dialect V's 256-byte consensus header (spec 9.1) as data: the prefix every command shares,
then each command's part, field by field. From the table come the header's fields a view reads
(:func:`header_leaves`) and their JSON (:func:`header_json`: one unpack of the header for each
command, written out as code, where a call per field made it a tenth of a V JSON Lines run)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dissectors.iggy.commands import (
    COMMANDS,
    EVICTION_REASONS,
    LOGINS,
    NON_REPLICATED,
    OPERATIONS,
    REGISTER,
    V_COMMANDS,
    V_EVICTION,
    V_REPLY,
    V_REQUEST,
)
from dissectors.iggy.dialects import unpack_version
from dissectors.iggy.status import status_name
from dissectors.iggy.types import u128_display, wide

HEADER_SIZE = 256


def version_text(v: int) -> str:
    """A packed protocol version (server_protocol_version) as major.minor.patch."""
    major, minor, patch = unpack_version(v)
    return f"{major}.{minor}.{patch}"


def request_has_code(op: int, at196: int) -> bool:
    """Whether a V request of operation ``op`` carries a command code at 196 (``at196``)."""
    return op == NON_REPLICATED or (op == REGISTER and at196 in LOGINS)


def _command_name(v: int) -> str:
    return COMMANDS[v].name if v in COMMANDS else "unknown"


def _operation_name(v: int) -> str:
    return OPERATIONS.get(v, ("unknown", None))[0]


#: A header field: (name, wire type, offset, display of its value or None).
Spec = tuple[str, str, int, Callable[[int], str | None] | None]

_FORMAT = {"u8": "B", "u32": "I", "u64": "Q", "u128": "QQ"}
_SIZE = {"u8": 1, "u32": 4, "u64": 8, "u128": 16}

#: What every command's header starts with.
COMMON: tuple[Spec, ...] = (
    ("checksum", "u128", 0, u128_display), ("checksum_body", "u128", 16, u128_display),
    ("cluster", "u128", 32, u128_display), ("size", "u32", 48, None), ("view", "u32", 52, None),
    ("release", "u32", 56, None), ("command", "u8", 60, lambda v: V_COMMANDS.get(v, "unknown")),
    ("replica", "u8", 61, None))

#: Each command's part after the prefix (a command not here has none).
PARTS: dict[int, tuple[Spec, ...]] = {
    V_REQUEST: (
        ("client", "u128", 128, u128_display), ("request_checksum", "u128", 144, u128_display),
        ("timestamp", "u64", 160, None), ("request", "u64", 168, None),
        ("operation", "u8", 176, _operation_name),
        ("session", "u64", 184, None), ("user_id", "u32", 192, None), ("code", "u32", 196, _command_name)),
    V_REPLY: (
        ("request_checksum", "u128", 128, u128_display), ("context", "u128", 144, u128_display),
        ("client", "u128", 160, u128_display), ("op", "u64", 176, None), ("commit", "u64", 184, None),
        ("timestamp", "u64", 192, None), ("request", "u64", 200, None),
        ("operation", "u8", 208, _operation_name),
        ("status", "u32", 216, status_name)),
    V_EVICTION: (
        ("client", "u128", 128, u128_display), ("server_protocol_version", "u32", 144, version_text),
        ("server_protocol_version_min", "u32", 148, version_text),
        ("reason", "u8", 255, lambda v: EVICTION_REASONS.get(v, "UNKNOWN"))),
}

#: A field a command's header has only when its values say so: (command, field name) -> the test,
#: given the header's values with the field's among them.
WHEN: dict[tuple[int, str], Callable[[dict[str, Any]], bool]] = {
    (V_REQUEST, "code"): lambda values: request_has_code(values["operation"], values["code"]),
}


def _reader(command: int | None) -> Callable[[bytes], dict[str, Any]]:
    """The values of a header of ``command`` (None: a command without a part), in the table's
    order, from one little-endian unpack (u128s as two halves made one, as the schema's U128
    reads them); a conditional field left out when its test says so."""
    specs = COMMON + PARTS.get(command, ()) if command is not None else COMMON
    fmt, at, items = "<", 0, []
    index = 0
    for name, kind, offset, _ in specs:
        assert offset >= at, name  # the table is in wire order
        fmt += "x" * (offset - at) + _FORMAT[kind]
        at = offset + _SIZE[kind]
        items.append((name, f"_wide(v[{index}] | v[{index + 1}] << 64)" if kind == "u128" else f"v[{index}]"))
        index += 2 if kind == "u128" else 1
    fmt += "x" * (HEADER_SIZE - at)
    kept = [f"{name!r}: {value}" for name, value in items if (command, name) not in WHEN]
    code = (f"def read(data, _unpack=_unpack, _wide=_wide, _when=_when):\n    v = _unpack(data, 0)\n"
            f"    out = {{{', '.join(kept)}}}\n")
    when = {}
    for name, value in items:
        test = WHEN.get((command, name))  # type: ignore[arg-type]
        if test is not None:
            when[name] = test
            code += (f"    out[{name!r}] = {value}\n    if not _when[{name!r}](out):\n"
                     f"        del out[{name!r}]\n")
    code += "    return out\n"
    scope: dict[str, Any] = {"_unpack": struct.Struct(fmt).unpack_from, "_wide": wide, "_when": when}
    exec(code, scope)  # noqa: S102 - names and indexes from our own table
    return scope["read"]


#: Command byte -> its header's reader, made when a header of it is first read (a findings-only run
#: reads none: making them at import cost it 0.4 %); the commands without a part share one (None).
_READERS: dict[int | None, Callable[[bytes], dict[str, Any]]] = {}
#: Command -> the header's fields by name: (offset, size, display).
_WHERE = {command: {name: (offset, _SIZE[kind], display)
                    for name, kind, offset, display in COMMON + PARTS.get(command, ())}  # type: ignore[arg-type]
          for command in (*PARTS, None)}


def header_json(data: bytes) -> dict[str, Any]:
    """The header's JSON: the values of its fields by name, in wire order (the JSON its fields make)."""
    command = data[60]
    read = _READERS.get(command)
    if read is None:
        key = command if command in PARTS else None
        read = _READERS[command] = _READERS.get(key) or _reader(key)
        _READERS[key] = read
    return read(data)


#: A header field as (name, value, offset, size, display): what its Field is made of.
Leaf = tuple[str, Any, int, int, str | None]


def header_leaves(data: bytes) -> list[Leaf]:
    """The header's fields as (name, value, offset, size, display)."""
    where = _WHERE.get(data[60], _WHERE[None])
    out: list[Leaf] = []
    for name, value in header_json(data).items():
        offset, size, display = where[name]
        out.append((name, value, offset, size, display(value) if display is not None else None))
    return out
