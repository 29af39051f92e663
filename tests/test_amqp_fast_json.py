"""An AMQP/Fast frame's JSON made without its field tree (kit.lazy.QUICK_JSON: commands checked
from their values, fragments from their octets and message head's values) is the JSON of the tree: the same text, and
the same values cut by --max-value-size, in the same order. On every frame of every AMQP/Fast
capture (the recorded session, the RFC's example and one capture per rule), with and without
value cuts; and the JSON views' handling of what the quick way cannot make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import analyzer.bytevalue as bytevalue
import analyzer.jsonout as jsonout
from analyzer.api import Field, Frame
from analyzer.engine import Analyzer
from analyzer.jsonout import field_json, fields_json, frame_json, set_max_value
from analyzer.registry import load_dissectors
from dissectors.amqp_fast.decode import _tree_later
from dissectors.amqp_fast.messages import _fragment_tree
from dissectors.kit.lazy import QUICK_JSON, LazyField, LazyFrame, add_computed, add_field
from tests.jsoncheck import nodes, with_cuts

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures" / "amqp_fast").rglob("*.pcap*"))


@pytest.mark.parametrize("limit", [0, 3, 1 << 20])
def test_every_frame_of_every_capture(limit: int) -> None:
    assert len(CAPTURES) > 40
    quick: dict[Any, int] = {_tree_later: 0, _fragment_tree: 0, "head": 0}
    set_max_value(limit)
    try:
        for capture in CAPTURES:
            analyzer = Analyzer(dissectors=load_dissectors())
            for ev in analyzer.run_files([str(capture)]):
                if not isinstance(ev, Frame) or ev.protocol != "amqp_fast":
                    continue
                build = ev._build if isinstance(ev, LazyFrame) else None
                fast = with_cuts(ev.json_fields)
                if fast[0] == "null":
                    continue
                if build in quick:
                    quick[build] += 1
                    quick["head"] += build is _fragment_tree and '"head":' in fast[0]
                assert fast == with_cuts(lambda e=ev: fields_json(e.fields)), (capture.name, ev.command)
    finally:
        set_max_value(jsonout.MAX_VALUE)
    # Both quick ways ran, on commands with computed fields (response times) too, and on fragments
    # holding a message head.
    assert quick[_tree_later] > 100 and quick[_fragment_tree] >= 5 and quick["head"] >= 5, quick


@pytest.mark.parametrize("limit", [0, 3, 1 << 20])
def test_a_finished_message_node_converts_as_its_leaves(limit: int) -> None:
    """The summary node of a finished message (its leaves made when read) gives as JSON what its
    leaves give, with the same values cut."""
    seen = 0
    set_max_value(limit)
    try:
        for capture in CAPTURES:
            for ev in Analyzer(dissectors=load_dissectors()).run_files([str(capture)]):
                if not isinstance(ev, Frame) or ev.protocol != "amqp_fast":
                    continue
                for node in nodes(ev.fields, LazyField):
                    if node.name == "message":
                        fast = with_cuts(lambda n=node: field_json(n, "message"))  # before the leaves are made
                        assert fast == with_cuts(lambda n=node: fields_json(n.children)), capture.name
                        seen += 1
    finally:
        set_max_value(jsonout.MAX_VALUE)
    assert seen >= 10


def _lazy(extra: list[Any]) -> LazyFrame:
    def build(frame: LazyFrame, ctx: Any) -> tuple[list[Field], str]:
        return [Field("a", b"\x00" * 8, 0, 8), Field("b", 1, 8, 1)], "info"

    QUICK_JSON[build] = lambda frame, ctx: {"a": jsonout.plain(b"\x00" * 8, "a"), "b": 1}
    frame = LazyFrame("c2s", 0, 9, "X", 1, [], b"", build, None)  # type: ignore[arg-type]
    for f in extra:
        add_field(frame, f) if isinstance(f, Field) else add_computed(frame, *f)
    return frame


def test_computed_fields_follow_and_a_repeated_name_takes_the_trees_way() -> None:
    set_max_value(4)
    try:
        frame = _lazy([("t", 0.5, "0.5 s"), Field("t", b"\xff" * 6, -1, 0)])
        want = fields_json(_lazy([("t", 0.5, "0.5 s"), Field("t", b"\xff" * 6, -1, 0)]).fields)
        got = frame.json_fields()
        assert got == want == {"a": "00000000", "b": 1, "t": [0.5, "ffffffff"]}
        # "b" is the builder's too: no quick object, and frame_json keeps only the tree's cuts.
        frame = _lazy([("b", 2, "")])
        assert frame.json_fields() is None
        bytevalue.CUT.clear()
        out = frame_json(frame)
        assert out["fields"] == {"a": "00000000", "b": [1, 2]}
        assert out["truncated"] == [{"field": "a", "size": 8, "kept": 4}]
    finally:
        set_max_value(jsonout.MAX_VALUE)
