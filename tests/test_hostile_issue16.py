"""The issue 16 cases of bench/hostile.py at a small scale: each capture decodes as intended (bombs
are findings and skipped records, floods stay one conversation or one finding each). Time and
memory are measured by the benchmark, never asserted here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.registry import load_dissectors
from tests.test_hostile_inputs import H

SCALE = 0.05


def run(name: str, tmp_path: Path, scale: float = SCALE) -> tuple[Analyzer, list[Frame], Counter[str], int]:
    case = H.CASES[name]
    path = str(tmp_path / case.filename)
    packets = case.generate(path, scale)
    a = Analyzer(load_dissectors())
    events = list(a.run(read_packets(path)))
    frames = [e for e in events if isinstance(e, Frame)]
    found = [f for e in events for f in (e.findings if isinstance(e, Frame) else [e])]
    assert a.packets == packets
    assert not [f for f in found if f.id == "engine.dissector_error"]
    return a, frames, Counter(f.id for f in found), packets


def messages(frames: list[Frame], rule: str) -> list[str]:
    return [f.message for fr in frames for f in fr.findings if f.id == rule]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_sub_batch_bombs_are_findings_and_honest_ones_decode(codec: str, tmp_path: Path) -> None:
    _a, frames, ids, _n = run(f"stream-{codec}-bombs", tmp_path)
    delivers = [f for f in frames if f.command == "Deliver"]
    n = H.n_of(5 if codec == "snappy" else 20, SCALE)
    assert len(delivers) == n
    # Per frame: 4 declaring more than the limit (not expanded), 4 lying (stopped past their 1 KiB),
    # 4 honest ones that together fill the budget (all but the last decoded: the lies spent a little).
    limits = messages(frames, "rabbitmq_stream.limit.exceeded")
    lies = messages(frames, "rabbitmq_stream.chunk.malformed")
    assert sum("declares 67108864 bytes" in m for m in limits) == 4 * n
    assert sum("expands past its declared 1024 bytes" in m for m in lies) == 4 * n
    for d in delivers:  # the honest sub-batches: expanded and their record checked
        entries = d.fields[-1].child("entries")
        assert entries is not None
        decoded = [sb for sb in entries.children or () if any(r.name == "record" for r in
                                                              sb.child("records").children or ())]  # type: ignore[union-attr]
        assert decoded, "an honest sub-batch within the budget decodes"


def test_publish_bombs_are_findings(tmp_path: Path) -> None:
    _a, frames, ids, _n = run("stream-publish-gzip-bombs", tmp_path, 0.1)
    publishes = [f for f in frames if f.command == "Publish"]
    assert len(publishes) == H.n_of(20, 0.1)
    assert all(any("expands past its declared 1024 bytes" in f.message for f in p.findings) for p in publishes)


def test_one_byte_segments_give_the_hole_up_once(tmp_path: Path) -> None:
    _a, frames, ids, _n = run("reverse-1m-one-byte-segments", tmp_path, 0.2)
    assert ids["tcp.buffer_overflow"] == 1 and ids["tcp.gap"] == 1  # 200,000 segments: over the 131,072


def test_syn_flood_is_one_conversation(tmp_path: Path) -> None:
    a, frames, ids, packets = run("syn-flood-200k-one-4-tuple", tmp_path)
    assert len(a.flows) == 1 and a.flows[0].packets == packets == H.n_of(200_000, SCALE)


def test_close_ok_flood(tmp_path: Path) -> None:
    _a, frames, ids, _n = run("amqp-40k-close-ok-vs-40k-close", tmp_path)
    n = H.n_of(40_000, SCALE)
    assert Counter(f.command for f in frames)["Connection.CloseOk"] == n
    assert ids["amqp091.correlation.unanswered"] == n


def test_unexpected_replies(tmp_path: Path) -> None:
    _a, frames, ids, _n = run("amqp-40k-unexpected-replies", tmp_path)
    n = H.n_of(40_000, SCALE)
    assert ids["amqp091.correlation.unknown_response"] == n and ids["amqp091.correlation.unanswered"] == n
    assert isinstance(frames[0], Frame) and Finding
