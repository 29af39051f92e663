"""The field catalogue: every field of a protocol registered once, as Wireshark registers its
``hf_`` fields: a dotted snake_case name, a type and a description.

``<protocol>.<command>.<field>`` (nested fields continue the path: ``rabbitmq_stream.publish.
messages.publishing_id``). A field that can repeat is ``repeated``: in JSON it is always a list,
however many times a frame carries it. Display filters and the pipeline's Parquet schema are
built from this catalogue; ``streamproto fields`` prints it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Field types, as Wireshark names them (FT_UINT8 ...) in lower case, plus containers.
TYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "bool", "float", "double",
         "string", "bytes", "timestamp", "table", "struct", "none")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
_INT_TYPES = {"B": "uint8", "H": "uint16", "I": "uint32", "Q": "uint64", "b": "int8", "h": "int16", "i": "int32",
              "q": "int64", "?": "bool", "f": "float", "d": "double"}


@dataclass(frozen=True, slots=True)
class FieldDef:
    name: str  # dotted, snake_case, starting with the protocol name
    type: str
    description: str = ""
    repeated: bool = False

    def __post_init__(self) -> None:
        if not _SNAKE.match(self.name):
            raise ValueError(f"field name {self.name!r} is not dotted snake_case")
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: unknown field type {self.type!r}")


def snake(name: str) -> str:
    """``delivery-tag`` / ``DeclarePublisher`` / ``[0]`` -> ``delivery_tag`` / ``declare_publisher``."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def int_type(fmt: str) -> str:
    """The catalogue type of a ``struct`` format of one integer (``>H`` -> ``uint16``)."""
    code = fmt.lstrip("<>!=@")
    if len(code) != 1 or code not in _INT_TYPES:
        raise ValueError(f"not one integer: {fmt!r}")
    struct.calcsize(fmt)
    return _INT_TYPES[code]


class Catalog:
    """A protocol's fields, in registration order, each name once."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self._defs: dict[str, FieldDef] = {}

    def add(self, path: str, type: str, description: str = "", repeated: bool = False) -> FieldDef:
        name = f"{self.protocol}.{path}"
        old = self._defs.get(name)
        if old is not None:
            if old.type != type or old.repeated != repeated:
                raise ValueError(f"field {name} registered twice with different types "
                                 f"({old.type}{'[]' if old.repeated else ''} vs {type}{'[]' if repeated else ''})")
            return old
        d = FieldDef(name, type, description, repeated)
        self._defs[name] = d
        return d

    def get(self, name: str) -> FieldDef | None:
        return self._defs.get(name)

    def __iter__(self) -> Iterator[FieldDef]:
        return iter(self._defs.values())

    def __len__(self) -> int:
        return len(self._defs)

    def extend(self, defs: Iterable[FieldDef]) -> None:
        for d in defs:
            self._defs.setdefault(d.name, d)
