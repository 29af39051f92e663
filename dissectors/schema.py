"""Describe wire layouts once, as data; decode them to field trees and encode them for tests.

Each protocol builds its own primitive types from these pieces (integers, length-prefixed
strings and bytes, counted arrays, packed bits, nested structs) and lists its commands as
``Struct`` values. The same description drives the decoder, the test encoder and the
``streamproto protocols`` documentation. Irregular parts of a format plug in as a ``WireType``
subclass with their own ``read``/``write``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analyzer.api import Field


class DecodeError(Exception):
    """The bytes do not fit the layout. ``offset`` is where decoding stopped (frame-relative)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class WireType:
    """A wire type: ``read`` decodes one value into a Field, ``write`` encodes one value."""

    doc: str = "?"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        raise NotImplementedError

    def write(self, value: Any) -> bytes:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class F:
    """A field of a layout: name, type, and how to show it."""

    name: str
    type: WireType
    enum: Mapping[int, str] | None = None
    flags: Mapping[int, str] | None = None  # bit mask -> name
    optional: bool = False  # may be absent when the frame ends before it (and everything after)
    doc: str = ""


def show(value: Any, spec: F | None) -> str | None:
    if spec is None or not isinstance(value, int):
        return None
    if spec.enum is not None:
        return spec.enum.get(value, f"unknown ({value:#x})")
    if spec.flags is not None:
        names = [n for bit, n in spec.flags.items() if value & bit]
        return ", ".join(names) if names else "none"
    return None


class Int(WireType):
    __slots__ = ("doc", "_st", "size")

    def __init__(self, doc: str, fmt: str) -> None:
        self.doc = doc
        self._st = struct.Struct(fmt)
        self.size = self._st.size

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + self.size > end:
            raise DecodeError(f"{name}: needs {self.size} bytes, {max(end - off, 0)} left", off)
        (v,) = self._st.unpack_from(buf, off)
        return Field(name, v, off, self.size, show(v, spec)), off + self.size

    def write(self, value: Any) -> bytes:
        return self._st.pack(value)


class Prefixed(WireType):
    """A length prefix, then that many bytes; ``null`` is the length value meaning 'absent'."""

    __slots__ = ("doc", "_st", "null", "text")

    def __init__(self, doc: str, length_fmt: str, *, text: bool, null: int | None = None) -> None:
        self.doc = doc
        self._st = struct.Struct(length_fmt)
        self.null = null
        self.text = text

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        value, stop = self.value(name, buf, off, end)
        return Field(name, value, off, stop - off, "null" if value is None else None), stop

    def value(self, name: str, buf: memoryview | bytes, off: int, end: int) -> tuple[Any, int]:
        """The value alone (None: the null length) and where it ends; what :meth:`read` wraps."""
        hs = self._st.size
        if off + hs > end:
            raise _no_prefix(name, hs, off, end)
        (n,) = self._st.unpack_from(buf, off)
        if self.null is not None and n == self.null:
            return None, off + hs
        if n < 0:
            raise DecodeError(f"{name}: negative length {n}", off)
        if off + hs + n > end:
            raise _overrun(name, n, off + hs + n - end, off)
        raw = bytes(buf[off + hs:off + hs + n])
        if self.text:
            try:
                return raw.decode("utf-8"), off + hs + n
            except UnicodeDecodeError:
                pass
        return raw, off + hs + n

    def write(self, value: Any) -> bytes:
        if value is None:
            if self.null is None:
                raise ValueError("this type has no null value")
            return self._st.pack(self.null)
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return self._st.pack(len(raw)) + raw


class Struct(WireType):
    """Fields back to back. Consecutive ``Bit`` fields share octets, low bit first (AMQP rule), or
    high bit first with ``msb_first`` (for protocols whose spec leaves the order open)."""

    __slots__ = ("doc", "fields", "msb_first", "_plan", "_reader", "_uses")

    def __init__(self, *fields: F, doc: str = "struct", msb_first: bool = False) -> None:
        self.doc = doc
        self.fields: tuple[F, ...] = fields
        self.msb_first = msb_first
        self._plan: list[tuple[int, bool, Any, Any, int]] | None = None
        self._reader: Callable[[memoryview | bytes, int, int], tuple[dict[str, Any], int]] | None = None
        self._uses = 0

    def read_values(self, buf: memoryview | bytes, off: int, end: int) -> tuple[dict[str, Any], int]:
        """What ``field_values(read_fields(...)[0])`` gives, and the same end, without a Field per
        value: for decoders that check values now and build the tree only when a view asks for it.
        Raises DecodeError where read_fields does (its message may differ: callers that report it
        decode again with read_fields). tests/test_schema_values.py holds the two to each other.

        A layout's first uses walk its plan (:meth:`_walk`); once it is used often, its plan is
        written out as code (:func:`_values_reader`), which costs a compilation (about 90 µs, some
        tens of walks) and then reads without the walk's per-step work. Most layouts of a capture
        are used a few times (handshakes, rare commands); a few carry the traffic."""
        reader = self._reader
        if reader is not None:
            return reader(buf, off, end)
        self._uses += 1
        if self._uses >= COMPILE_AFTER:
            self._reader = _values_reader(self)
        return self._walk(buf, off, end)

    def _walk(self, buf: memoryview | bytes, off: int, end: int) -> tuple[dict[str, Any], int]:
        """read_values by walking the plan, step by step."""
        out: dict[str, Any] = {}
        for kind, optional, a, b, size in self._steps():
            if optional and off >= end:
                break
            if kind == _INTS:  # a run of plain integers: one unpack
                if off + size > end:
                    raise _needs(a[0] + "..", size, off, end)
                if len(a) == 1:
                    out[a[0]] = b.unpack_from(buf, off)[0]
                else:
                    out.update(zip(a, b.unpack_from(buf, off), strict=True))
                off += size
            elif kind == _BITS:  # the bits of one octet
                if off >= end:
                    raise _needs(a[0][0], 1, off, end)
                octet = buf[off]
                off += 1
                for name, shift in a:
                    out[name] = bool(octet >> shift & 1)
            elif kind == _PREFIXED:
                out[a], off = b.value(a, buf, off, end)
            else:  # the type's own reader, which may want the memoryview read_fields gives it
                f, off = b.type.read(a, buf, off, end, b) if type(buf) is memoryview else \
                    b.type.read(a, memoryview(buf), off, end, b)
                out[a] = _plain(f)
        return out, off

    def leading_ints(self) -> tuple[tuple[str, ...], struct.Struct] | None:
        """The plain integers the layout starts with, side by side, and the struct that unpacks
        them as one (as read_values reads them), when it starts so and they are not optional;
        else None. The values of bytes that differ only there differ only in those integers:
        what a decoder that remembers values by the bytes after them needs to put them back."""
        steps = self._steps()
        if steps and steps[0][0] == _INTS and not steps[0][1]:
            return steps[0][2], steps[0][3]
        return None

    def _steps(self) -> list[tuple[int, bool, Any, Any, int]]:
        """read_values' plan (see _values_plan), worked out on first use."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _values_plan(self)
        return plan

    def read_fields(self, buf: memoryview, off: int, end: int) -> tuple[list[Field], int]:
        out: list[Field] = []
        bit = 8
        octet = 0
        octet_at = off
        for spec in self.fields:
            t = spec.type
            if isinstance(t, Bit):
                if bit == 8:
                    if off >= end:
                        if spec.optional:
                            break
                        raise DecodeError(f"{spec.name}: needs 1 byte, 0 left", off)
                    octet, octet_at, bit = buf[off], off, 0
                    off += 1
                v = bool(octet >> (7 - bit if self.msb_first else bit) & 1)
                out.append(Field(spec.name, v, octet_at, 1, None))
                bit += 1
                continue
            bit = 8
            if spec.optional and off >= end:
                break
            f, off = t.read(spec.name, buf, off, end, spec)
            out.append(f)
        return out, off

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        start = off
        children, off = self.read_fields(buf, off, end)
        return Field(name, None, start, off - start, None, children), off

    def write(self, value: Mapping[str, Any]) -> bytes:
        parts: list[bytes] = []
        bit = 8
        octet = 0
        for spec in self.fields:
            if isinstance(spec.type, Bit):
                if bit == 8:
                    octet, bit = 0, 0
                    parts.append(b"\x00")
                if value.get(spec.name):
                    octet |= 1 << (7 - bit if self.msb_first else bit)
                parts[-1] = bytes([octet])
                bit += 1
                continue
            bit = 8
            if spec.name not in value:
                if spec.optional:
                    break
                raise KeyError(f"missing value for field {spec.name!r}")
            parts.append(spec.type.write(value[spec.name]))
        return b"".join(parts)

    def describe(self) -> str:
        return ", ".join(f"{f.name}:{f.type.doc}{'?' if f.optional else ''}" for f in self.fields)


class Bit(WireType):
    """One bit; only meaningful inside a Struct, which packs consecutive bits."""

    doc = "bit"

    def write(self, value: Any) -> bytes:  # pragma: no cover - Struct packs bits itself
        raise TypeError("bits are packed by their Struct")


class Array(WireType):
    """A count, then that many elements."""

    __slots__ = ("doc", "_st", "element", "null")

    def __init__(self, count_fmt: str, element: WireType, *, null: int | None = None) -> None:
        self._st = struct.Struct(count_fmt)
        self.element = element
        self.null = null
        self.doc = f"[{element.doc}]"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        hs = self._st.size
        start = off
        if off + hs > end:
            raise DecodeError(f"{name}: count needs {hs} bytes, {max(end - off, 0)} left", off)
        (n,) = self._st.unpack_from(buf, off)
        off += hs
        if self.null is not None and n == self.null:
            return Field(name, None, start, hs, "null", [], True), off
        if n < 0:
            raise DecodeError(f"{name}: negative count {n}", start)
        items: list[Field] = []
        elem_spec = F(name, self.element, spec.enum, spec.flags) if spec is not None else None
        for i in range(n):
            if off >= end and n - i > 0:
                raise DecodeError(f"{name}: count {n} but the frame ends after {i} elements", off)
            f, off = self.element.read(f"[{i}]", buf, off, end, elem_spec)
            items.append(f)
        return Field(name, n, start, off - start, None, items, True), off

    def write(self, value: Sequence[Any] | None) -> bytes:
        if value is None:
            if self.null is None:
                raise ValueError("this array has no null value")
            return self._st.pack(self.null)
        return self._st.pack(len(value)) + b"".join(self.element.write(v) for v in value)


class Fixed(WireType):
    """A fixed number of raw bytes."""

    __slots__ = ("doc", "size")

    def __init__(self, size: int, doc: str | None = None) -> None:
        self.size = size
        self.doc = doc or f"bytes[{size}]"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        if off + self.size > end:
            raise DecodeError(f"{name}: needs {self.size} bytes, {max(end - off, 0)} left", off)
        return Field(name, bytes(buf[off:off + self.size]), off, self.size), off + self.size

    def write(self, value: Any) -> bytes:
        raw = bytes(value)
        if len(raw) != self.size:
            raise ValueError(f"expected {self.size} bytes")
        return raw


class Rest(WireType):
    """Every byte up to the end of the frame."""

    doc = "bytes*"

    def read(self, name: str, buf: memoryview, off: int, end: int, spec: F | None = None) -> tuple[Field, int]:
        return Field(name, bytes(buf[off:end]), off, end - off), end

    def write(self, value: Any) -> bytes:
        return bytes(value)


_INTS, _BITS, _PREFIXED, _OTHER = range(4)
#: Uses of a layout's read_values after which its plan is written out as code.
COMPILE_AFTER = 32


def _values_plan(layout: Struct) -> list[tuple[int, bool, Any, Any, int]]:
    """Struct.read_values' steps, worked out once from the layout: (kind, optional, names or name,
    the reader, octets). Consecutive plain integers share one struct; a field that may be absent
    starts a step of its own (the frame may end before it)."""
    plan: list[tuple[int, bool, Any, Any, int]] = []
    fields = layout.fields
    i = 0
    while i < len(fields):
        spec = fields[i]
        t = spec.type
        if isinstance(t, Bit):
            # The read_fields rule: a new octet at the first bit and after every eighth; a frame
            # ending there ends an optional layout.
            group = []
            while i < len(fields) and isinstance(fields[i].type, Bit) and len(group) < 8:
                n = len(group)
                group.append((fields[i].name, 7 - n if layout.msb_first else n))
                i += 1
            plan.append((_BITS, spec.optional, tuple(group), None, 1))
            continue
        if type(t) is Int:
            names = [spec.name]
            fmt = t._st.format
            st = t._st
            j = i + 1
            if fmt[0] in "<>!=":  # explicit byte order, no padding: integers side by side unpack as one
                while (j < len(fields) and not fields[j].optional and type(fields[j].type) is Int
                       and fields[j].type._st.format[0] == fmt[0]):  # type: ignore[attr-defined]
                    names.append(fields[j].name)
                    fmt += fields[j].type._st.format[1:]  # type: ignore[attr-defined]
                    j += 1
                st = struct.Struct(fmt)
            plan.append((_INTS, spec.optional, tuple(names), st, st.size))
            i = j
            continue
        if type(t) is Prefixed:
            plan.append((_PREFIXED, spec.optional, spec.name, t, 0))
        else:
            plan.append((_OTHER, spec.optional, spec.name, spec, 0))
        i += 1
    return plan


def leaves_only(layout: Struct, taken: Collection[str] = (), leaf_types: tuple[type, ...] = ()) -> bool:
    """Whether ``layout``'s tree is its read_values values as leaves: integers, bits and strings
    only (and ``leaf_types``: a dissector's own types whose fields have no children), each named
    apart from the others and from ``taken`` (names the frame's tree puts beside them). Then the
    tree's JSON is the values' (analyzer.jsonout.leaves_json)."""
    names = [f.name for f in layout.fields]
    kinds = (Int, Prefixed, Bit, *leaf_types)
    return (all(type(f.type) in kinds for f in layout.fields) and len(set(names)) == len(names)
            and not set(taken) & set(names))


def field_values(fields: Sequence[Field]) -> dict[str, Any]:
    """Plain values of a field list: what the encoder takes back (round trips)."""
    out: dict[str, Any] = {}
    for f in fields:
        out[f.name] = _plain(f)
    return out


def _values_reader(layout: Struct) -> Callable[[memoryview | bytes, int, int], tuple[dict[str, Any], int]]:
    """Struct.read_values for ``layout``: its plan's steps written out once as straight-line code,
    so that reading a command's values runs no loop over steps, unpacks no step tuples and compares
    no kinds. Gives what Struct._walk gives (tests/test_schema_values.py)."""
    ns: dict[str, Any] = {"_needs": _needs, "_no_prefix": _no_prefix, "_overrun": _overrun, "_plain": _plain,
                          "memoryview": memoryview}
    code = ["def read_values(buf, off, end):", "    out = {}"]
    for i, (kind, optional, a, b, size) in enumerate(layout._steps()):
        if optional:
            code.append("    if off >= end:")
            code.append("        return out, off")
        if kind == _INTS:  # a run of plain integers: one unpack
            ns[f"u{i}"] = b.unpack_from
            code.append(f"    if off + {size} > end:")
            code.append(f"        raise _needs({a[0] + '..'!r}, {size}, off, end)")
            targets = ", ".join(f"out[{name!r}]" for name in a)
            code.append(f"    {targets}{',' if len(a) == 1 else ''} = u{i}(buf, off)")
            code.append(f"    off += {size}")
        elif kind == _BITS:  # the bits of one octet
            code.append("    if off >= end:")
            code.append(f"        raise _needs({a[0][0]!r}, 1, off, end)")
            code.append("    octet = buf[off]")
            code.append("    off += 1")
            code += [f"    out[{name!r}] = (octet & {1 << shift}) != 0" for name, shift in a]
        elif kind == _PREFIXED and b.null is None and b._st.format in (">B", "B", "<B", "!B"):
            # An octet's length, no null: Prefixed.value's steps for it, written out.
            code.append("    if off >= end:")
            code.append(f"        raise _no_prefix({a!r}, 1, off, end)")
            code.append("    stop = off + 1 + buf[off]")
            code.append("    if stop > end:")
            code.append(f"        raise _overrun({a!r}, stop - off - 1, stop - end, off)")
            code.append("    raw = bytes(buf[off + 1:stop])")
            if b.text:
                code.append("    try:")
                code.append(f"        out[{a!r}] = raw.decode('utf-8')")
                code.append("    except UnicodeDecodeError:")
                code.append(f"        out[{a!r}] = raw")
            else:
                code.append(f"    out[{a!r}] = raw")
            code.append("    off = stop")
        elif kind == _PREFIXED:
            ns[f"p{i}"] = b.value
            code.append(f"    out[{a!r}], off = p{i}({a!r}, buf, off, end)")
        else:  # the type's own reader, which may want the memoryview read_fields gives it
            ns[f"r{i}"], ns[f"s{i}"] = b.type.read, b
            code.append(f"    f, off = r{i}({a!r}, buf if type(buf) is memoryview else memoryview(buf), off, end, s{i})")
            code.append(f"    out[{a!r}] = _plain(f)")
    code.append("    return out, off")
    exec("\n".join(code), ns)  # noqa: S102 - source made above from the layout's own names and sizes
    return ns["read_values"]


def _no_prefix(name: str, size: int, off: int, end: int) -> DecodeError:
    return DecodeError(f"{name}: length prefix needs {size} bytes, {max(end - off, 0)} left", off)


def _overrun(name: str, n: int, by: int, off: int) -> DecodeError:
    return DecodeError(f"{name}: length {n} overruns the frame by {by} bytes", off)


def _needs(what: str, size: int, off: int, end: int) -> DecodeError:
    return DecodeError(f"{what}: needs {size} byte{'s' if size != 1 else ''}, {max(end - off, 0)} left", off)


def _plain(f: Field) -> Any:
    if f.children is None:
        return f.value
    if f.is_list:
        if f.value is None and not f.children:
            return None
        return [_plain(c) for c in f.children]
    return field_values(f.children)
