"""The two JSON encoders of frames and findings (analyzer/jsonout.py): orjson where installed, the
standard library otherwise or with STREAMPROTO_JSON=stdlib. Both must write the same JSON values,
object by object, on every bundled capture; the objects orjson refuses take the standard library's
way and come out as they did before orjson was used."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import analyzer.jsonout as jsonout
from analyzer.api import Finding, Frame
from analyzer.engine import Analyzer
from analyzer.jsonout import dumps, dumps_event, finding_json, frame_json
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng", ".gz"))


def _same(a: object, b: object) -> bool:
    """Equal JSON values, floats bit for bit (a NaN never gets here: the contract spells it out)."""
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and math.copysign(1.0, a) == math.copysign(1.0, b) and a == b  # type: ignore[arg-type]
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_orjson_is_there():
    """It is a dependency: where it is missing the outputs are right but slower, so say so here."""
    assert jsonout.encoder() == "orjson"


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_both_encoders_write_the_same_values(capture: Path):
    analyzer = Analyzer(dissectors=load_dissectors())
    objects = 0
    for ev in analyzer.run_files([str(capture)]):
        if isinstance(ev, Frame):
            obj = frame_json(ev)
        elif isinstance(ev, Finding):
            obj = finding_json(ev)
        else:
            continue
        fast, slow = dumps_event(obj), dumps(obj)
        assert _same(json.loads(fast), json.loads(slow)), (capture, fast, slow)
        objects += 1
    assert objects


def test_refused_objects_take_the_standard_library():
    # A lone surrogate (undecodable wire bytes kept as text) and an integer beyond 64 bits.
    for obj in ({"type": "frame", "info": "bad \udcff byte"}, {"type": "frame", "code": 1 << 70},
                {"type": "frame", "code": -(1 << 70)}):
        assert dumps_event(obj) == dumps(obj)


def test_the_cli_with_either_encoder(tmp_path: Path):
    """End to end, both views that write frames: the same values, and with the standard library
    the texts are those of plain json.dumps."""
    capture = ROOT / "captures" / "amqp091" / "pika_consume.pcap"
    for fmt in ("jsonl", "json"):
        outs = {}
        for enc in ("orjson", "stdlib"):
            env = {**os.environ, "STREAMPROTO_JSON": enc}
            run = subprocess.run([sys.executable, "-m", "analyzer", "inspect", "-j", "1", "-T", fmt, str(capture)],
                                 capture_output=True, env=env, cwd=ROOT, check=True)
            outs[enc] = run.stdout
        if fmt == "jsonl":
            a = [json.loads(x) for x in outs["orjson"].splitlines()]
            b = [json.loads(x) for x in outs["stdlib"].splitlines()]
            assert len(a) == len(b) > 10
            assert all(_same(x, y) for x, y in zip(a, b, strict=True))
            for line in outs["stdlib"].splitlines():
                assert line.decode() == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
        else:
            assert _same(json.loads(outs["orjson"]), json.loads(outs["stdlib"]))


def test_wide_integers_are_written_by_orjson_as_their_digits(monkeypatch: pytest.MonkeyPatch):
    """A decoder's WideInt (an u128 id) is written by orjson, digit for digit as the standard library
    writes it; subclasses of int, str, dict and list as orjson writes their base types."""
    import enum

    class Kind(enum.StrEnum):
        A = "a"

    class Level(enum.IntEnum):
        HIGH = 3

    class Table(dict):  # type: ignore[type-arg]
        pass

    class Items(list):  # type: ignore[type-arg]
        pass

    fallback: list[object] = []
    monkeypatch.setattr(jsonout, "dumps", lambda obj: fallback.append(obj) or dumps(obj))
    wide = jsonout.WideInt((1 << 127) + 12345)
    obj = {"type": "frame", "id": wide, "ids": [jsonout.WideInt(1 << 64), 1 << 63], "kind": Kind.A,
           "level": Level.HIGH, "table": Table(a=1), "items": Items([1, "x"]), "flag": True}
    text = dumps_event(obj)
    assert not fallback
    assert text == dumps(obj)
    assert text == (f'{{"type":"frame","id":{(1 << 127) + 12345},"ids":[{1 << 64},{1 << 63}],"kind":"a","level":3,'
                    f'"table":{{"a":1}},"items":[1,"x"],"flag":true}}')
    buf = io.BytesIO()
    writer = jsonout.JsonWriter(io.TextIOWrapper(buf, encoding="utf-8"))
    writer.event(obj)
    writer.flush()
    assert not fallback and buf.getvalue() == (text + "\n").encode()


def test_iggy_polls_with_u128_ids_are_written_by_orjson(monkeypatch: pytest.MonkeyPatch):
    """Iggy's message ids, V header fields and 128-bit user header values are given as WideInt
    where they are wider than 64 bits, so no Iggy frame is left to the standard library for them
    (one wide id used to send a whole poll there)."""
    fallback: list[object] = []
    monkeypatch.setattr(jsonout, "dumps", lambda obj: fallback.append(obj) or dumps(obj))
    analyzer = Analyzer(dissectors=load_dissectors())
    wide = 0
    for capture in sorted((ROOT / "captures" / "iggy").rglob("*.pcap")):
        for ev in analyzer.run_files([str(capture)]):
            if isinstance(ev, Frame):
                wide += any(_wide(v) for v in _leaves(json.loads(dumps_event(frame_json(ev)))))
    assert wide > 50
    assert [o for o in fallback if any(_wide(v) for v in _leaves(o))] == []


def _wide(v: object) -> bool:
    return type(v) is not bool and isinstance(v, int) and not -(1 << 63) <= v < 1 << 64


def _leaves(obj: object) -> list[object]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _leaves(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _leaves(v)]
    return [obj]


def test_after_a_wide_integer_orjson_goes_straight_to_its_second_try(monkeypatch: pytest.MonkeyPatch):
    """Once an object of a kind (its command) had a WideInt in it, the next of that kind goes to
    orjson's second try first (a kind with u128 values has them in frame after frame, and a refused
    first try costs more than the second); one of that kind without a WideInt turns that off again,
    and other kinds keep the first try. Each object's bytes are those it has written alone,
    whatever came before it, by every writer, and the objects orjson refuses twice still take the
    standard library."""
    import enum
    import itertools

    class Kind(enum.StrEnum):
        A = "a"

    wide = {"type": "frame", "command": "POLL", "id": jsonout.WideInt((1 << 127) + 7), "kind": Kind.A}
    narrow = {"type": "frame", "command": "POLL", "id": 5, "kind": Kind.A, "info": "x"}
    other = {"type": "frame", "command": "SEND", "id": 6}
    surrogate = {"type": "frame", "command": "POLL", "id": jsonout.WideInt(1 << 64), "info": "bad \udcff byte"}
    beyond = {"type": "finding", "code": 1 << 70}
    objects = [wide, narrow, other, surrogate, beyond]

    def alone(obj: dict[str, object]) -> tuple[str, bytes, bytes]:
        jsonout._AGAIN_FIRST.clear()
        return written(obj)

    def written(obj: dict[str, object]) -> tuple[str, bytes, bytes]:
        out = []
        for write in ("event", "element"):
            buf = io.BytesIO()
            writer = jsonout.JsonWriter(io.TextIOWrapper(buf, encoding="utf-8"))
            writer.event(obj) if write == "event" else writer.element(",", obj)
            writer.flush()
            out.append(buf.getvalue())
        return dumps_event(obj), out[0], out[1]

    expected = [alone(obj) for obj in objects]
    for obj, (text, line, element) in zip(objects, expected, strict=True):
        assert text == dumps(obj)
        if obj is not surrogate:  # the writer escapes its lone surrogate
            assert line == (text + "\n").encode() and element == ("," + text).encode()
    for order in itertools.permutations(range(len(objects))):
        jsonout._AGAIN_FIRST.clear()
        for i in order * 2:
            assert written(objects[i]) == expected[i], (order, i)

    calls: list[bool] = []  # whether each call to orjson was a second try (it has a default)
    fast = jsonout._FAST
    monkeypatch.setattr(jsonout, "_FAST", lambda obj, **kw: calls.append("default" in kw) or fast(obj, **kw))
    jsonout._AGAIN_FIRST.clear()
    for obj in (wide, other, wide, narrow, narrow, other):
        dumps_event(obj)
    assert calls == [False, True, False, True, True, False, False]
    calls.clear()
    jsonout._AGAIN_FIRST.clear()
    for obj in (wide, other, wide, narrow):
        jsonout.JsonWriter(io.TextIOWrapper(io.BytesIO(), encoding="utf-8")).event(obj)
    assert calls == [False, True, False, True, True]
    calls.clear()
    jsonout._AGAIN_FIRST.clear()
    for i in range(100):  # kinds named by the wire are kept few
        dumps_event({**wide, "command": f"C{i}"})
        assert len(jsonout._AGAIN_FIRST) <= 64
    jsonout._AGAIN_FIRST.clear()
