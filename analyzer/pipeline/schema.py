"""The pipeline's tables as Arrow schemas, and the frame fields flattened into catalogue columns.

``frames`` has the same leading columns for every protocol, then one column per field of that
protocol's field catalogue (``streamproto fields PROTOCOL``), named by its dotted name and typed
from the catalogue type; a repeated field is a list holding every occurrence in wire order (nested
lists flattened, as ``tshark -T fields`` joins occurrences). The frames of one protocol are stored
under ``frames/protocol=NAME/``, so each protocol's files carry only its own columns.

Types are chosen so that Spark reads and writes them unchanged (it has no unsigned integers):
uint8/uint16/int8/int16/int32 are int32, uint32/int64 int64, uint64 decimal(20,0), tables (string
keyed maps whose keys are data) JSON text, structs only their leaves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from analyzer.api import Dissector, Field
from analyzer.jsonout import field_json, plain

# The leading columns of each table, in order. `protocol` and `date` are the partition columns:
# they name the directories, not columns inside the files.
FRAME_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("capture", pa.string()),  # the file of the frame's last packet
    ("chain", pa.string()),  # the files read as one capture (one host's rotation): their directory
    ("packet_first", pa.int64()),  # as in the JSON Lines contract: first and last packet of the frame
    ("packet_last", pa.int64()),
    ("ts", pa.float64()),  # capture time of the last packet, epoch seconds
    ("community_id", pa.string()),
    ("conversation_id", pa.string()),  # joins with conversations.conversation_id
    ("src", pa.string()),
    ("dst", pa.string()),
    ("direction", pa.string()),
    ("dialect", pa.string()),
    ("command", pa.string()),
    ("code", pa.int64()),
    ("size", pa.int64()),
    ("info", pa.string()),
    ("correlation_id", pa.int64()),  # the frame's top-level correlation_id field, where it has one
    ("response_code", pa.int64()),  # its top-level response_code or reply_code field
    ("stream_offset", pa.int64()),  # of the frame's first byte in its direction's byte stream
    ("request_capture", pa.string()),  # on a response: where the request it answers is
    ("request_packet", pa.int64()),
    # On a response: the request's stream_offset (in the other direction), to join the two rows.
    ("request_offset", pa.int64()),
    ("latency", pa.float64()),  # on a response: seconds from the request to it
    ("finding_ids", pa.list_(pa.string())),
    ("extra_fields", pa.string()),  # JSON of fields the catalogue does not name (normally null)
)
FINDING_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("rule_id", pa.string()),
    ("severity", pa.string()),
    ("category", pa.string()),
    ("message", pa.string()),
    ("fingerprint", pa.string()),
    ("capture", pa.string()),
    ("chain", pa.string()),
    ("packet", pa.int64()),  # null for a finding about a whole conversation
    ("ts", pa.float64()),  # capture time when it was reported
    ("community_id", pa.string()),
    ("conversation_id", pa.string()),
    ("command", pa.string()),
    ("field", pa.string()),
)
CONVERSATION_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("conversation_id", pa.string()),
    ("chain", pa.string()),
    ("community_id", pa.string()),
    ("client", pa.string()),
    ("server", pa.string()),
    ("dialect", pa.string()),
    ("packets", pa.int64()),
    ("frames", pa.int64()),
    ("bytes_c2s", pa.int64()),
    ("bytes_s2c", pa.int64()),
    ("errors", pa.int64()),
    ("warnings", pa.int64()),
    ("notes", pa.int64()),
    ("first_ts", pa.float64()),
    ("last_ts", pa.float64()),
    ("complete", pa.bool_()),
    ("files", pa.list_(pa.string())),
)
FILE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("capture", pa.string()),
    ("chain", pa.string()),
    ("position", pa.int32()),  # place in its chain, by first packet time
    ("bytes", pa.int64()),
    ("packets", pa.int64()),
    ("first_ts", pa.float64()),
    ("last_ts", pa.float64()),
    ("status", pa.string()),  # ok | error
    ("error", pa.string()),
)
PARTITION = (("protocol", pa.string()), ("date", pa.string()))
#: Partition value for findings and conversations of no protocol (capture-level, undecoded).
NO_PROTOCOL = "none"

_ARROW = {
    "uint8": pa.int32(), "uint16": pa.int32(), "int8": pa.int32(), "int16": pa.int32(), "int32": pa.int32(),
    "uint32": pa.int64(), "int64": pa.int64(), "uint64": pa.decimal128(20, 0), "bool": pa.bool_(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"), "table": pa.string(),
}


def arrow_type(catalogue_type: str, repeated: bool) -> pa.DataType | None:
    """The column type of a catalogue field; None for containers (their leaves are columns)."""
    t = _ARROW.get(catalogue_type)
    if t is None:
        return None
    return pa.list_(t) if repeated else t


def schema(columns: Iterable[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=True) for n, t in columns])


def frames_schema(dissector: Dissector) -> pa.Schema:
    """One protocol's frames: the leading columns, its catalogue fields, then the date partition."""
    cols = list(FRAME_COLUMNS)
    for d in dissector.fields():
        t = arrow_type(d.type, d.repeated)
        if t is not None:
            cols.append((d.name, t))
    return schema([*cols, ("date", pa.string())])


FINDINGS = schema([*FINDING_COLUMNS, *PARTITION])
CONVERSATIONS = schema([*CONVERSATION_COLUMNS, *PARTITION])
FILES = schema(FILE_COLUMNS)


def date_of(ts: float | None) -> str:
    """The date partition of a capture time (UTC)."""
    if ts is None:
        return "unknown"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


# ------------------------------------------------------------------ flattening
_INT32 = {"uint8", "uint16", "int8", "int16", "int32"}
_INTS = {*_INT32, "uint32", "int64"}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_MISSING = object()


def _coerce(kind: str, value: Any) -> Any:
    """The value as its column stores it, or _MISSING when it does not fit the catalogue type
    (then it goes to extra_fields, never into a wrong column)."""
    if value is None:
        return None
    if kind in _INTS:
        # A value wider than its catalogue type (a dissector's mistake, or a lenient decode) must
        # not fail the whole batch: it goes to extra_fields.
        if type(value) is not int:
            return _MISSING
        if kind in _INT32:
            return value if -(1 << 31) <= value < 1 << 31 else _MISSING
        return value if INT64_MIN <= value <= INT64_MAX else _MISSING
    if kind == "uint64":
        return Decimal(value) if type(value) is int and 0 <= value < 1 << 64 else _MISSING
    if kind == "bool":
        return value if type(value) is bool else _MISSING
    if kind in ("double", "float"):
        return float(value) if type(value) in (float, int) else _MISSING
    if kind == "string":
        return value if type(value) is str else plain(value) if isinstance(value, (bytes, bytearray, memoryview)) \
            else _MISSING
    if kind == "bytes":
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        return value.encode("utf-8", "surrogatepass") if type(value) is str else _MISSING
    if kind == "timestamp":
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if type(value) is int:
            # Wire timestamps are seconds (AMQP 0-9-1) or milliseconds (Osiris chunks): a value
            # past 1e11 would be after the year 5000 in seconds, so it is milliseconds.
            try:
                return datetime.fromtimestamp(value if abs(value) < 10**11 else value / 1000, UTC)
            except (OverflowError, OSError, ValueError):
                return _MISSING
        return _MISSING
    return _MISSING


def _squash(text: str) -> str:
    """A command or name path without case and separators: ``Basic.Publish``, ``basic.publish``,
    ``CONNECTION TUNE``, ``connection.tune`` and ``DeclarePublisherResponse`` all compare equal to
    how their catalogue spells them."""
    return "".join(c for c in text.lower() if c.isalnum())


class Flattener:
    """A frame's field tree to {catalogue name: value}, for one protocol.

    A field at path P of a frame of command C is the catalogue field ``<protocol>.<X>.<P>`` whose
    X spells C (compared without case and separators, so every dissector's way of naming its
    commands in the catalogue is understood), else ``<protocol>.<P>`` (fields every frame of the
    protocol can carry). List elements add nothing to the path, as in JSON."""

    def __init__(self, dissector: Dissector) -> None:
        self.protocol = dissector.name
        # (squashed command, dotted path) -> definition, for every way of cutting each name into a
        # command part and a field path; the first registered wins.
        self.index: dict[tuple[str, str], Any] = {}
        for d in dissector.fields():
            parts = d.name.split(".")[1:]
            for k in range(len(parts)):
                self.index.setdefault((_squash(".".join(parts[:k])), ".".join(parts[k:])), d)
        self._resolved: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._commands: dict[str, str] = {}

    def _lookup(self, command: str, path: tuple[str, ...]) -> Any:
        key = (command, path)
        d = self._resolved.get(key, _MISSING)
        if d is _MISSING:
            cmd = self._commands.get(command)
            if cmd is None:
                cmd = self._commands[command] = _squash(command)
            dotted = ".".join(path)
            d = self.index.get((cmd, dotted)) or self.index.get(("", dotted))
            self._resolved[key] = d
        return d

    def flatten(self, command: str, fields: list[Field]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        out: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        self._walk(command, fields, (), False, out, extra)
        return out, extra or None

    def _walk(self, command: str, fields: list[Field], path: tuple[str, ...], elements: bool,
              out: dict[str, Any], extra: dict[str, Any]) -> None:
        for f in fields:
            p = path if elements else (*path, f.name)
            d = self._lookup(command, p)
            if d is None:
                extra.setdefault(".".join(p), []).append(field_json(f))
                continue
            if d.type == "table":
                value: Any = json.dumps(field_json(f), ensure_ascii=False, default=str)
            elif f.children is not None:
                self._walk(command, f.children, p, f.is_list, out, extra)
                continue
            elif d.type in ("struct", "none"):
                continue  # a container without children: nothing to store
            else:
                value = _coerce(d.type, f.value)
                if value is _MISSING:
                    extra.setdefault(".".join(p), []).append(field_json(f))
                    continue
            if d.repeated:
                got = out.get(d.name)
                if got is None:
                    out[d.name] = [value]
                else:
                    got.append(value)
            elif d.name in out:  # the catalogue says once, the frame has it twice: keep both
                extra.setdefault(".".join(p), []).append(field_json(f))
            else:
                out[d.name] = value
