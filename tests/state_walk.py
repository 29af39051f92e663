"""Walking a dissector connection's state for the bounds tests: every mutable container it holds."""

from __future__ import annotations

from dissectors.kit.state import attribute_names, is_plain


def containers(obj: object, path: str = "conn") -> list[tuple[str, object]]:
    """Every mutable container reachable from a connection's state (slots of its objects), by path."""
    found: list[tuple[str, object]] = []
    if isinstance(obj, (dict, list, set, bytearray)):
        found.append((path, obj))
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
        for k, v in items:
            found += containers(v, f"{path}[{k!r}]")
    elif isinstance(obj, tuple):
        for i, v in enumerate(obj):
            found += containers(v, f"{path}[{i}]")
    elif is_plain(obj):
        for name in attribute_names(type(obj)):
            if hasattr(obj, name):
                found += containers(getattr(obj, name), f"{path}.{name}")
    return found
