"""AMQP/Fast wire types (RFC 006 §3.1.1) as schema WireTypes, and the encodings the RFC leaves open.

Fixed by the RFC: octets, short integers (2 octets) and long integers (4 octets) in network byte
order; short strings with a 1-octet length. Left open, and chosen per connection by the dissector's
options (see the package docstring): the order of bits packed into an octet, and the size of the
length prefix of long strings and of field tables.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from typing import Any, NamedTuple

from analyzer.api import Field
from dissectors.schema import DecodeError, F, Int, Prefixed, WireType

OCTET = Int("octet", ">B")
SHORT = Int("short", ">H")
LONG = Int("long", ">I")
SHORTSTR = Prefixed("shortstr", ">B", text=True)

_U32 = struct.Struct(">I")


class Date(WireType):
    """A long integer holding a Unix time_t (UTC, 1-second resolution), shown as a date."""

    doc = "date"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + 4 > end:
            raise DecodeError(f"{name}: needs 4 bytes, {max(end - off, 0)} left", off)
        seconds = _U32.unpack_from(buf, off)[0]
        when = datetime.fromtimestamp(seconds, UTC)
        display = "none (0)" if seconds == 0 else when.strftime("%Y-%m-%dT%H:%M:%SZ")
        return Field(name, when, off, 4, display), off + 4

    def write(self, value: Any) -> bytes:
        if isinstance(value, datetime):
            value = int(value.timestamp())
        return _U32.pack(int(value))


DATE = Date()


class Encoding(NamedTuple):
    """The choices the RFC leaves open, as one value (what the options set). A named tuple: every
    command's layout is looked up by (code, encoding), and a dataclass hashed and compared there
    in Python."""

    bit_order: str = "lsb"  # "lsb": the first bit field in the lowest bit (as AMQP 0-8/0-9-1); "msb"
    long_string_length: int = 2  # octets of a long string's length prefix (the ABNF: short-integer)
    field_table_length: int = 2  # octets of a field table's length prefix

    @property
    def msb_first(self) -> bool:
        return self.bit_order == "msb"

    @property
    def name(self) -> str:
        return f"bits={self.bit_order},longstr={self.long_string_length},table={self.field_table_length}"


_PREFIX = {2: ">H", 4: ">I"}
_TYPES: dict[tuple[str, int], WireType] = {}


def long_string(octets: int) -> WireType:
    """A long string (binary-safe) with a length prefix of ``octets`` octets."""
    key = ("longstr", octets)
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = Prefixed(f"longstr{octets * 8}", _PREFIX[octets], text=False)
    return t


def field_table(octets: int) -> WireType:
    """A field table: its inner syntax is 'to be defined later' in RFC 006, so it is shown as the
    octets it holds (text when printable), behind a length prefix of ``octets`` octets."""
    key = ("table", octets)
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = Prefixed(f"table{octets * 8}", _PREFIX[octets], text=False)
    return t


def is_long(t: WireType) -> bool:
    return isinstance(t, Prefixed) and t is not SHORTSTR
