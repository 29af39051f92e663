"""The AMQP 0-9-1 field catalogue covers every field the dissector emits (issue 8 §2).

Every frame of every bundled capture is decoded (trees built), and every field path of every
frame must be registered, with the same repeated-ness (a list value or list node is repeated, a
single value is not) and a type its values fit. Field tables are one ``table`` field: their keys
are data.
"""

from __future__ import annotations

import random
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Field, Frame
from analyzer.engine import analyze_file
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091.catalog import CATALOG, field_name
from dissectors.kit.catalog import FieldDef

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp091"
ALL = sorted(p.name for p in CAPS.glob("*.pcap*"))
INTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


@cache
def frames(name: str) -> list[Frame]:
    return [e for e in analyze_file(str(CAPS / name)) if isinstance(e, Frame) and e.protocol == "amqp091"]


def fits(d: FieldDef, value: Any) -> bool:
    if d.type in INTS:
        return type(value) is int and 0 <= value < 1 << INTS[d.type]
    return {"bool": lambda v: type(v) is bool, "double": lambda v: type(v) is float,
            "string": lambda v: isinstance(v, (str, bytes)),  # not UTF-8: kept as bytes
            "bytes": lambda v: isinstance(v, (bytes, str)),  # a body: text when it is printable UTF-8
            "timestamp": lambda v: isinstance(v, (datetime, int)), "table": lambda v: v is None,
            "struct": lambda v: v is None}[d.type](value)


def walk(command: str, fields: list[Field], prefix: str = "") -> list[tuple[str, Field, bool]]:
    """(catalogue name, field, repeated) of every field, nested ones included, tables not entered."""
    out = []
    names = [f.name for f in fields]
    for f in fields:
        path = prefix + f.name
        name = field_name(command, path)
        repeated = f.is_list or isinstance(f.value, list) or names.count(f.name) > 1
        out.append((name, f, repeated))
        d = CATALOG.get(name)
        if f.children and d is not None and d.type == "struct":
            out += walk(command, f.children, path + ".")
    return out


@pytest.mark.parametrize("name", ALL)
def test_every_field_of_every_frame_is_in_the_catalogue(name: str) -> None:
    seen = 0
    for fr in frames(name):
        for path, f, repeated in walk(fr.command, fr.fields):
            d = CATALOG.get(path)
            assert d is not None, (fr.command, path)
            assert d.repeated == repeated, (path, f.value)
            values = f.value if isinstance(f.value, list) and not f.is_list else [f.value]
            if not f.is_list:
                assert all(fits(d, v) for v in values), (path, d.type, f.value)
            seen += 1
    assert seen > 0


@pytest.mark.parametrize("name", ALL)
def test_every_field_of_mutated_captures_is_in_the_catalogue(name: str) -> None:
    """Broken frames too (overruns, truncated headers, unknown methods and frame types, junk)."""
    from tests.test_amqp091_hotpath import mutate, recordings

    rng = random.Random(f"catalogue-{name}")
    d = Amqp091Dissector()
    for rec in recordings(name):
        for i in range(25):
            m = mutate(rec, rng, 1 + i % 5)
            conn = d.connection(m.midstream)
            for call, args in m.calls:
                for fr in getattr(conn, call)(*args) or ():
                    if not isinstance(fr, Frame):
                        continue
                    for path, f, repeated in walk(fr.command, fr.fields):
                        fd = CATALOG.get(path)
                        assert fd is not None and fd.repeated == repeated, (fr.command, path)
                        if not f.is_list:
                            values = f.value if isinstance(f.value, list) else [f.value]
                            assert all(fits(fd, v) for v in values), (path, fd.type, f.value)


def test_catalogue_names_and_types() -> None:
    cat = {d.name: d for d in Amqp091Dissector().fields()}
    assert cat["amqp091.basic.publish.routing_key"].type == "string"
    assert cat["amqp091.basic.deliver.delivery_tag"].type == "uint64"
    assert cat["amqp091.queue.declare.arguments"].type == "table"
    assert cat["amqp091.content_header.content_type"].type == "string"
    assert cat["amqp091.content_header.delivery_mode"].type == "uint8"
    assert cat["amqp091.content_header.timestamp"].type == "timestamp"
    assert cat["amqp091.basic.qos_ok.response_time"].type == "double"
    assert cat["amqp091.basic.ack.confirms"].repeated and not cat["amqp091.basic.ack.delivery_tag"].repeated
    assert cat["amqp091.connection.tune_ok.frame_max"].type == "uint32"
    assert cat["amqp091.content_body.message.body_size"].type == "uint64"
    assert all(d.name.startswith("amqp091.") and "-" not in d.name for d in cat.values())
    # Every argument of every method and every content property is registered.
    from dissectors.amqp091.methods import METHODS
    from dissectors.amqp091.properties import PROPERTIES

    for meth in METHODS.values():
        for f in meth.layout.fields:
            assert field_name(meth.name, f.name) in cat
    assert {f"amqp091.content_header.{spec.name}" for _, spec in PROPERTIES} <= set(cat)


def test_decoded_names_are_snake_case() -> None:
    bad = {f.name for n in ALL for fr in frames(n) for path, f, _ in walk(fr.command, fr.fields) if "-" in f.name}
    assert bad == set()
