"""Helpers for the tests that hold a quick JSON way to the field tree's JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import analyzer.bytevalue as bytevalue
from analyzer.api import Field
from analyzer.jsonout import dumps

T = TypeVar("T", bound=Field)


def with_cuts(make: Callable[[], Any]) -> tuple[str, list[dict[str, Any]]]:
    """The JSON text of what ``make()`` gives and the values it cut, as frame_json records them."""
    bytevalue.CUT.clear()
    text = dumps(make())
    cut = bytevalue.CUT[:]
    bytevalue.CUT.clear()
    return text, cut


def nodes(fields: list[Field], kind: type[T]) -> list[T]:
    """Every node of type ``kind`` in a field tree (not looking inside them)."""
    out: list[T] = []
    for f in fields:
        if isinstance(f, kind):
            out.append(f)
        elif f.children:
            out.extend(nodes(f.children, kind))
    return out
