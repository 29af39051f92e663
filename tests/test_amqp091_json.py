"""The JSON views' fields of an AMQP 0-9-1 frame come without its field tree where its builder has
a quick JSON function (kit.lazy.QUICK_JSON: methods of plain arguments, content headers, bodies),
and must be exactly the JSON of the tree, with the same values cut by --max-value-size in the same
order: on every frame of every bundled capture, mutated variants of them and a busy session, with
value limits that cut nothing, cut property values, and cut payloads."""

from __future__ import annotations

from typing import Any

import pytest

import analyzer.jsonout as jsonout
from analyzer.api import Frame
from analyzer.jsonout import fields_json, set_max_value
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091.decode import build_body, build_header, build_method
from dissectors.kit.lazy import LazyFrame
from tests.jsoncheck import with_cuts
from tests.replay import Recorded, events
from tests.test_amqp091_hotpath import ALL, busy_session, busy_variants, variants

DISSECTORS = (Amqp091Dissector(), Amqp091Dissector(hot=False))
LIMITS = (0, 10, 1 << 20)


def check(rec: Recorded) -> dict[Any, int]:
    """Both ways on every frame of ``rec``; how many frames each builder's quick way gave."""
    quick = {build_method: 0, build_header: 0, build_body: 0}
    for limit in LIMITS:
        set_max_value(limit)
        try:
            for ev in (ev for dissector in DISSECTORS for ev in events(dissector, rec)):
                if not isinstance(ev, Frame):
                    continue
                build = ev._build if isinstance(ev, LazyFrame) else None
                fast = with_cuts(ev.json_fields)
                if fast[0] == "null":
                    continue
                quick[build] += 1
                assert fast == with_cuts(lambda e=ev: fields_json(e.fields)), (ev.command, limit)
        finally:
            set_max_value(jsonout.MAX_VALUE)
    return quick


@pytest.mark.parametrize("name", [*ALL, "a busy session"])
def test_quick_json_is_the_tree_json(name: str) -> None:
    if name in ALL:
        for rec in variants(name, f"json-{name}", mutated=10):
            check(rec)
        return
    quick = check(busy_session())
    assert all(n > 100 for n in quick.values()), quick  # each quick way really ran
    for rec in busy_variants("json-busy", 50):
        check(rec)
