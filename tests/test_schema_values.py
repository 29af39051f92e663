"""Struct.read_values is a second path for read_fields (values without a Field per value): on every
layout the dissectors declare, both must give the same values and end, or both raise DecodeError.
And the AMQP/Fast decoder, which checks commands from read_values and builds their trees later,
must give exactly the output of its general path on every bundled capture."""

from __future__ import annotations

import gc
import importlib
import itertools
import pkgutil
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
import dissectors
from dissectors.amqp_fast.commands import BY_CODE, browse_without_tag, head_layout, layout
from dissectors.amqp_fast.wire import Encoding
from dissectors.schema import DecodeError, Struct, _values_reader, field_values

ROOT = Path(__file__).resolve().parent.parent


def _layouts() -> list[Struct]:
    for mod in pkgutil.walk_packages(dissectors.__path__, "dissectors."):
        importlib.import_module(mod.name)
    for bits, longstr, table in itertools.product(("lsb", "msb"), (2, 4), (2, 4)):
        enc = Encoding(bits, longstr, table)
        for code in BY_CODE:
            layout(code, enc)
        head_layout(enc)
        browse_without_tag(enc)
    found = {id(o): o for o in gc.get_objects() if isinstance(o, Struct)}
    return sorted(found.values(), key=lambda s: (s.doc, [f.name for f in s.fields], s.msb_first))


LAYOUTS = _layouts()
# Small numbers and 0xff make length prefixes and counts that fit: most inputs then decode whole.
_ALPHABET = bytes([0, 0, 0, 1, 2, 3, 4, 0xFF, 0x80, 0x41, 0x53, 0xC3, 0xA9])


_COMPILED: dict[int, object] = {}


def _typed(result: tuple) -> tuple:
    """A result with each value's type beside it (True == 1, yet a bit is no integer)."""
    return result if result[0] == "error" else ("ok", [(k, type(v), v) for k, v in result[1].items()], result[2])


def _both(layout: Struct, data: bytes, start: int, end: int) -> tuple:
    """read_fields' values, and read_values' (its walk and its written-out code, which must agree)."""
    try:
        fields, stop = layout.read_fields(memoryview(data), start, end)
        tree = ("ok", field_values(fields), stop)
    except DecodeError:
        tree = ("error",)
    compiled = _COMPILED.get(id(layout))
    if compiled is None:
        compiled = _COMPILED[id(layout)] = _values_reader(layout)
    flats = []
    for read in (layout.read_values, layout._walk, compiled):
        try:
            values, stop = read(data, start, end)  # type: ignore[operator]
            flats.append(("ok", values, stop))
        except DecodeError:
            flats.append(("error",))
    assert _typed(flats[1]) == _typed(flats[2]) == _typed(flats[0]), (layout.doc, data.hex())
    if tree[0] == "ok":
        assert _typed(tree) == _typed(flats[0]), (layout.doc, data.hex())
    return tree, flats[0]


def test_the_layouts_are_found():
    assert len(LAYOUTS) > 100  # amqp091 methods, AMQP/Fast commands per encoding, Iggy, Stream


def test_read_values_is_read_fields_on_every_layout():
    rng = random.Random(20261126)
    whole = 0
    for lay in LAYOUTS:
        for _ in range(150):
            n = rng.choice((0, 1, 2, 3, 5, 8, 12, 16, 24, 40, 64, 200))
            if rng.random() < 0.5:
                data = bytes(rng.choice(_ALPHABET) for _ in range(n))
            else:
                data = rng.randbytes(n)
            start = rng.choice((0, 0, 0, 1, 3))
            tree, flat = _both(lay, data, min(start, n), n)
            assert tree == flat, (lay.doc, [f.name for f in lay.fields], data.hex())
            whole += tree[0] == "ok"
    assert whole > len(LAYOUTS) * 20  # the comparison saw decoded values, not only errors


def test_read_values_reads_bits_in_either_order_and_stops_at_optional_fields():
    from dissectors.schema import Bit, F, Int

    u8, u16 = Int("u8", ">B"), Int("u16", "<H")
    lay = Struct(F("a", u8), F("b", Bit()), F("c", Bit()), F("d", u16), F("e", u16, optional=True),
                 F("f", Bit(), optional=True), F("g", u8), msb_first=True)
    for data in (b"\x01\x80\x02\x00", b"\x01\x40\x02\x00\x03\x00", b"\x01\xc0\x02\x00\x03\x00\x01\x07", b"\x01"):
        tree, flat = _both(lay, data, 0, len(data))
        assert tree == flat
    assert flat == ("error",)
    assert _both(lay, b"\x01\x40\x02\x00", 0, 4)[1] == ("ok", {"a": 1, "b": False, "c": True, "d": 2}, 4)


AMQP_FAST = sorted((ROOT / "captures" / "amqp_fast").rglob("*.pcap"))


@pytest.mark.parametrize("capture", AMQP_FAST, ids=lambda p: p.name)
def test_amqp_fast_checked_from_values_is_its_general_path(capture: Path, monkeypatch: pytest.MonkeyPatch):
    runner = CliRunner()
    args = ["inspect", "-j", "1", "-T", "jsonl", str(capture)]
    lazy = runner.invoke(cli.app, args, catch_exceptions=False)
    assert lazy.stdout

    monkeypatch.setattr(Struct, "read_values", _refuse)
    general = runner.invoke(cli.app, args, catch_exceptions=False)
    assert (lazy.exit_code, lazy.stdout, lazy.stderr) == (general.exit_code, general.stdout, general.stderr)
    assert b"engine.dissector_error" not in lazy.stdout_bytes


# AMQP 0-9-1: a method whose arguments are integers, bits and strings only is checked from
# read_values and made a lazy frame; with read_values refused, the general path decodes it. Both
# must give the same frames, fields, Info lines and findings (tests.replay.normal), on every
# bundled capture, mutated variants of them, and the busy session.
AMQP091 = sorted(p.name for p in (ROOT / "captures" / "amqp091").glob("*.pcap*"))


def _amqp091_both(recs: Sequence, monkeypatch: pytest.MonkeyPatch) -> None:
    from dissectors.amqp091 import Amqp091Dissector, decode
    from tests.replay import replay

    for hot in (True, False):
        dissector = Amqp091Dissector(hot=hot)
        for rec in recs:
            lazy = replay(dissector, rec)
            with monkeypatch.context() as m:
                m.setattr(Struct, "read_values", _refuse)
                # Nor the values the lazy run left in decode.method's memory of frame bytes (held to
                # the general path by tests/test_amqp091_method_memory.py).
                m.setattr(decode, "_METHOD_KEY_MAX", -1)
                general = replay(dissector, rec)
            assert lazy == general


def _refuse(self: Struct, buf: object, off: int, end: int) -> tuple:
    raise DecodeError("the general path, please", off)


@pytest.mark.parametrize("name", AMQP091)
def test_amqp091_methods_checked_from_values_are_the_general_path(name: str, monkeypatch: pytest.MonkeyPatch):
    from tests.test_amqp091_hotpath import mutate, recordings

    recs = recordings(name)
    rng = random.Random(name)
    _amqp091_both([*recs, *(mutate(rec, rng, 8) for rec in recs)], monkeypatch)


def test_amqp091_busy_session_checked_from_values_is_the_general_path(monkeypatch: pytest.MonkeyPatch):
    from tests.test_amqp091_hotpath import busy_session

    _amqp091_both([busy_session()], monkeypatch)


def _sample(layout: Struct) -> dict:
    from dissectors.schema import Bit, Int

    return {f.name: (False if isinstance(f.type, Bit) else 7 if isinstance(f.type, Int) else "x") for f in layout.fields}


def test_every_amqp091_method_checked_from_values_fits_exactly(monkeypatch: pytest.MonkeyPatch):
    """Each such method, well formed, with bytes after its arguments, and cut short: the first a
    lazy frame equal to the general path's, the others the general path's findings."""
    import struct

    from analyzer.jsonout import fields_json
    from dissectors.amqp091 import decode
    from dissectors.amqp091 import rules as R
    from dissectors.amqp091.methods import METHODS

    def frame_of(code: int, args: bytes) -> bytes:
        payload = struct.pack(">HH", code >> 16, code & 0xFFFF) + args
        return struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce"

    plain = [m for code, m in METHODS.items() if decode._PLAIN[code]]
    assert len(plain) > 40
    for meth in plain:
        args = meth.layout.write(_sample(meth.layout))
        data = frame_of(meth.code, args)
        lazy, _, values = decode.method("c2s", data, 1, len(data) - 8, 0, [])
        assert type(lazy).__name__ == "LazyFrame" and lazy.findings == [], meth.name
        with monkeypatch.context() as m:
            m.setattr(Struct, "read_values", _refuse)
            general, _, general_values = decode.method("c2s", data, 1, len(data) - 8, 0, [])
        assert values == general_values, meth.name
        assert (lazy.info, fields_json(lazy.fields)) == (general.info, fields_json(general.fields)), meth.name
        data = frame_of(meth.code, args + b"\x00\x01")
        trailing, _, _ = decode.method("c2s", data, 1, len(data) - 8, 0, [])
        assert [f.id for f in trailing.findings] == [R.FRAMING_TRAILING.id], meth.name
        if args:
            data = frame_of(meth.code, args[:-1])
            cut, _, _ = decode.method("c2s", data, 1, len(data) - 8, 0, [])
            assert R.FRAMING_TRUNCATED.id in [f.id for f in cut.findings], meth.name
