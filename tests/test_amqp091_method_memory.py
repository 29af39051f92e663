"""decode.method remembers the (method, values) of lazy method frames by their bytes
(_METHODS_SEEN): the frames a connection gives with that memory are the frames it gives without it
(the same commands, Info lines, field trees and findings, and the same values for the checks), on
every bundled capture, mutated variants of them and a busy session, hot path on and off."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.api import Finding, Frame
from analyzer.jsonout import dumps, fields_json
from dissectors.amqp091 import Amqp091Dissector, decode
from tests.replay import Recorded, events
from tests.test_amqp091_hotpath import ALL, busy_session, busy_variants, variants

DISSECTORS = (Amqp091Dissector(), Amqp091Dissector(hot=False))


def outcome(rec: Recorded) -> list[Any]:
    out: list[Any] = []
    for ev in (ev for dissector in DISSECTORS for ev in events(dissector, rec)):
        if isinstance(ev, Frame):
            out.append((ev.command, ev.code, ev.offset, ev.size, ev.info, dumps(fields_json(ev.fields)),
                        [(f.id, f.message) for f in ev.findings]))
        else:
            assert isinstance(ev, Finding)
            out.append((ev.id, ev.message))
    return out


def check(rec: Recorded, monkeypatch: pytest.MonkeyPatch) -> int:
    """Both ways; returns how many frames the memory answered."""
    seen: dict[bytes, Any] = {}
    hits = [0]
    real_get = seen.get

    class Counting(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            got = real_get(key, default)
            hits[0] += got is not None
            return got

        def __setitem__(self, key: Any, value: Any) -> None:
            seen[key] = value

        def __len__(self) -> int:
            return len(seen)

        def clear(self) -> None:
            seen.clear()

    monkeypatch.setattr(decode, "_METHODS_SEEN", Counting())
    with_memory = outcome(rec)
    monkeypatch.setattr(decode, "_METHOD_KEY_MAX", -1)
    without = outcome(rec)
    monkeypatch.undo()
    assert with_memory == without
    return hits[0]


@pytest.mark.parametrize("name", ALL)
def test_the_method_memory_changes_nothing_on_every_capture(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for rec in variants(name, f"memory-{name}", mutated=10):
        check(rec, monkeypatch)


def test_the_method_memory_answers_a_busy_session(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check(busy_session(), monkeypatch) > 50
    for variant in busy_variants("memory-busy", 50):
        check(variant, monkeypatch)
