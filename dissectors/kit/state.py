"""Dissector state as plain data: what ``Connection.snapshot()`` returns and ``resume`` reads.

A connection's state is made of JSON types plus a few containers JSON lacks (bytes, sets,
tuples, dicts with non-string keys, directions) and objects of classes registered with
:func:`plain_state`. :func:`encode` turns all of it into JSON-serialisable data with small
tagged objects; :func:`decode` is its inverse. Anything else (a closure, a ``struct.Struct``, a
``Frame``) is refused, so state that cannot be resumed is found by the round-trip tests rather
than in production.
"""

from __future__ import annotations

import base64
from typing import Any, TypeVar

from analyzer.api import Direction, FrameRef

T = TypeVar("T")
_REGISTRY: dict[str, type] = {}
_NAMES: dict[type, str] = {}


class StateError(TypeError):
    """A value in a connection's state has no plain-data form."""


def plain_state(cls: type[T]) -> type[T]:
    """Register a class whose instances are encoded as their attributes.

    Attributes named in the class's ``TRANSIENT`` tuple are left out and rebuilt by its
    ``_rebuild()`` method after decoding (caches, bound methods, precompiled structs). A class
    compiled by mypyc is registered by calling this after its definition: a decorated class would
    not be compiled as a native class."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    _REGISTRY[name] = cls
    _NAMES[cls] = name
    return cls


def is_plain(obj: object) -> bool:
    """Whether ``obj`` is an instance of a class registered with :func:`plain_state`."""
    return type(obj) in _NAMES


def attribute_names(cls: type) -> list[str]:
    """The attributes an instance of ``cls`` may hold: its classes' ``__slots__``, or what mypyc
    declares for a compiled class (which has no ``__slots__``)."""
    names: list[str] = []
    for klass in cls.__mro__:
        names.extend(getattr(klass, "__slots__", ()))
        names.extend(a for a in getattr(klass, "__mypyc_attrs__", ()) if a not in names)
    return names


def _attrs(obj: Any) -> dict[str, Any]:
    out = {n: getattr(obj, n) for n in attribute_names(type(obj)) if hasattr(obj, n)}
    if hasattr(obj, "__dict__"):
        out.update(vars(obj))
    skip = getattr(obj, "TRANSIENT", ())
    return {k: v for k, v in out.items() if k not in skip and k != "__weakref__"}


def encode(value: Any) -> Any:
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return {"$f": repr(value)}
        return value
    if t is Direction:
        return {"$d": value.value}
    if t is list or t is FrameRef:  # a FrameRef comes back as a plain list: the engine reads it by index
        return [encode(v) for v in value]
    if t is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$m": [[encode(k), encode(v)] for k, v in value.items()]}
    if t is tuple:
        return {"$t": [encode(v) for v in value]}
    if t is set or t is frozenset:
        return {"$s": [encode(v) for v in sorted(value, key=_order)], "frozen": t is frozenset}
    if t is bytes or t is bytearray or t is memoryview:
        return {"$b": base64.b64encode(bytes(value)).decode("ascii"), "mutable": t is bytearray}
    name = _NAMES.get(t)
    if name is not None:
        return {"$o": name, "a": {k: encode(v) for k, v in _attrs(value).items()}}
    if isinstance(value, int) and not isinstance(value, bool):  # IntEnum and friends: their number
        return int(value)
    if isinstance(value, str):  # StrEnum and friends: their text
        return str(value)
    raise StateError(f"{t.__qualname__} is not plain state")


def _order(v: Any) -> tuple[str, Any]:
    return (type(v).__name__, v if isinstance(v, (int, str, float)) else repr(v))


def decode(data: Any) -> Any:
    t = type(data)
    if t is list:
        return [decode(v) for v in data]
    if t is not dict:
        return data
    if "$m" in data:
        return {_key(decode(k)): decode(v) for k, v in data["$m"]}
    if "$t" in data:
        return tuple(decode(v) for v in data["$t"])
    if "$s" in data:
        items = (_key(decode(v)) for v in data["$s"])
        return frozenset(items) if data.get("frozen") else set(items)
    if "$b" in data:
        raw = base64.b64decode(data["$b"])
        return bytearray(raw) if data.get("mutable") else raw
    if "$d" in data:
        return Direction(data["$d"])
    if "$f" in data:
        return float(data["$f"])
    if "$o" in data:
        cls = _REGISTRY.get(data["$o"])
        if cls is None:
            raise StateError(f"unknown state class {data['$o']!r}")
        obj = cls.__new__(cls)
        for k, v in data["a"].items():
            setattr(obj, k, decode(v))
        rebuild = getattr(obj, "_rebuild", None)
        if rebuild is not None:
            rebuild()
        return obj
    return {k: decode(v) for k, v in data.items()}


def _key(v: Any) -> Any:
    """Keys must be hashable: lists decoded from tuples-as-lists become tuples again."""
    return tuple(_key(x) for x in v) if type(v) is list else v


def snapshot(obj: Any) -> dict[str, Any]:
    """A registered object's state as plain data (``Connection.snapshot`` for kit connections)."""
    out = encode(obj)
    if not isinstance(out, dict) or "$o" not in out:
        raise StateError(f"{type(obj).__qualname__} is not registered with @plain_state")
    return out


def resume(state: dict[str, Any], kind: type | None = None) -> Any:
    """The object ``state`` was made from; with ``kind``, a TypeError unless it is one of those
    (a dissector resuming only its own connections)."""
    out = decode(state)
    if kind is not None and not isinstance(out, kind):
        raise TypeError(f"not a {kind.__name__} state: {type(out).__name__}")
    return out
