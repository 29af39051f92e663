"""Properties of the Iggy dissector on any input:

- random and mutated frames (every dialect, fed whole or cut anywhere) never raise, never hang and
  never give ``engine.dissector_error``; every finding is one of the dissector's rules;
- a wire length never decides an allocation;
- snapshot round-trip (tests/replay.py): every Iggy capture, replayed call by call, gives the same
  output straight and when cut by snapshot -> JSON -> resume, at call boundaries and inside frames;
- split-file equivalence: every Iggy capture cut into several files gives the whole file's output.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Direction, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.jsonout import finding_json, frame_json
from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.iggy import IggyDissector
from dissectors.iggy import rules as R
from dissectors.iggy.connection import IggyConnection
from dissectors.iggy.encode import ANOMALIES, all_findings, session
from tests.replay import Recorded, cut_points, recordings, replay, split_feeds
from tests.split_files import split
from tests.state_walk import containers

D = IggyDissector()
HERE = Path(__file__).resolve().parent.parent / "captures" / "iggy"
CAPTURES = sorted([*HERE.glob("*.pcap"), *(HERE / "synthetic").glob("*.pcap")])
RULE_IDS = {r.id for r in R.RULES}
DIALECTS = ("L0", "L1", "Z1", "Z2", "C", "V")
SESSIONS = {d: session(d).items for d in DIALECTS}
FAST = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def feed_all(conn: IggyConnection, items: list[tuple[Direction, bytes, float]], cuts: list[int]) -> list:
    out: list = []
    ts = 0.0
    for i, (d, data, ts) in enumerate(items):
        at = cuts[i % len(cuts)] % (len(data) + 1) if cuts else len(data)
        out += conn.feed(d, data[:at], ts)
        out += conn.feed(d, data[at:], ts)
        json.dumps(conn.snapshot())  # plain data after every call
    return out + list(conn.end(ts + 1))


def check(events: list) -> None:
    ids = {f.id for f in all_findings(events)}
    assert ids <= RULE_IDS, ids - RULE_IDS


# ---------------------------------------------------------------------- random and mutated input
@FAST
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=600)), max_size=12),
       st.sampled_from([None, *DIALECTS]), st.booleans())
def test_random_bytes_never_raise(chunks: list[tuple[bool, bytes]], dialect: str | None, midstream: bool) -> None:
    conn = IggyConnection(midstream, dialect)
    out: list = []
    for i, (c2s, data) in enumerate(chunks):
        out += conn.feed(Direction.C2S if c2s else Direction.S2C, data, float(i))
    out += conn.end(99.0)
    check(out)


@FAST
@given(st.sampled_from(DIALECTS), st.data())
def test_mutated_frames_never_raise(dialect: str, data: st.DataObject) -> None:
    items = list(SESSIONS[dialect])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(items) - 1))
        d, raw, ts = items[i]
        raw = bytearray(raw)
        op = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete", "length"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set" and raw:
            raw[at] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[at:]
        elif op == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and raw:
            del raw[at:at + data.draw(st.integers(1, 16))]
        elif op == "length" and len(raw) >= 4:
            off = 48 if dialect == "V" and len(raw) >= 52 else (4 if d is Direction.S2C else 0)
            raw[off:off + 4] = data.draw(st.integers(0, 0xFFFFFFFF)).to_bytes(4, "little")
        items[i] = (d, bytes(raw), ts)
    cuts = data.draw(st.lists(st.integers(0, 400), max_size=5))
    check(feed_all(IggyConnection(False), items, cuts))


@pytest.mark.parametrize("rule_id", sorted(ANOMALIES))
def test_anomalies_cut_at_every_byte_never_raise(rule_id: str) -> None:
    items = ANOMALIES[rule_id]().items
    raw = [(d, b, t) for d, b, t in items]
    longest = max(len(b) for _, b, _ in raw)
    for cut in range(0, min(longest, 300), 7):
        check(feed_all(IggyConnection(False), raw, [cut]))


def test_through_the_engine_garbage_on_the_iggy_port_is_never_a_dissector_error(tmp_path: Path) -> None:
    rng = random.Random(5)
    convs = []
    for i in range(40):
        conv = TcpConversation(("10.0.0.1", 41000 + i), ("10.0.0.2", 8090))
        conv.handshake()
        for d, data, _ in SESSIONS[DIALECTS[i % 6]][:6]:
            raw = bytearray(data)
            for _ in range(rng.randrange(0, 4)):
                if raw:
                    raw[rng.randrange(len(raw))] = rng.randrange(256)
            conv.send(str(d), bytes(raw) if i % 3 else rng.randbytes(rng.randrange(1, 400)))
        conv.close()
        convs.append(conv)
    path = tmp_path / "garbage.pcap"
    write_capture(str(path), convs)
    events = list(Analyzer().run(read_packets(str(path))))
    assert events
    ids = {f.id for f in all_findings(events)}
    assert "engine.dissector_error" not in ids
    assert {i for i in ids if i.startswith("iggy.")} <= RULE_IDS


def test_a_wire_length_never_decides_an_allocation() -> None:
    conn = IggyConnection(False, "C")
    conn.feed(Direction.C2S, (60 << 20).to_bytes(4, "little") + (101).to_bytes(4, "little") + b"x" * 100, 0.0)
    assert sum(len(c) for _, c in containers(conn) if isinstance(c, bytearray)) <= 108
    conn = IggyConnection(False, "V")
    head = bytearray(256)
    head[48:52] = (60 << 20).to_bytes(4, "little")
    head[60] = 5
    conn.feed(Direction.C2S, bytes(head), 0.0)
    assert sum(len(c) for _, c in containers(conn) if isinstance(c, bytearray)) <= 256


def test_a_long_run_of_garbage_is_bounded_work() -> None:
    import time

    conn = IggyConnection(False, "C")
    junk = bytes([0xEE]) * (4 << 20)
    t = time.perf_counter()
    out = conn.feed(Direction.S2C, junk, 0.0) + list(conn.end(1.0))
    assert time.perf_counter() - t < 20
    check(out)


# ---------------------------------------------------------------------- snapshot round trip
def conversations(path: Path) -> tuple[Recorded, ...]:
    return recordings(str(path), "iggy")


def test_there_are_iggy_captures() -> None:
    assert len(CAPTURES) >= 30
    assert all(conversations(p) for p in CAPTURES)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_snapshot_round_trip(path: Path) -> None:
    rng = random.Random(path.name)
    for rec in conversations(path):
        straight = replay(D, rec)
        assert straight
        for k in cut_points(len(rec.calls), rng):
            assert replay(D, rec, cut_at=k) == straight, f"cut at call {k} of {len(rec.calls)}"
        split, cuts = split_feeds(rec, rng, 6)
        inside = replay(D, split)
        for k in cuts:
            assert replay(D, split, cut_at=k) == inside, f"cut inside a feed at call {k}"


def test_a_resumed_connection_keeps_its_dialect_and_pairing() -> None:
    conn = IggyConnection(False)
    items = SESSIONS["Z2"]
    for d, data, ts in items[:5]:  # up to the CREATE_STREAM request
        conn.feed(d, data, ts)
    back = D.resume(json.loads(json.dumps(conn.snapshot())))
    assert isinstance(back, IggyConnection)
    assert back.cands == conn.cands and back.dialect == "Z2" and back.login == "authenticated"
    fr = [e for d, data, ts in items[5:6] for e in back.feed(d, data, ts) if isinstance(e, Frame)]
    assert fr[0].command == "CREATE_STREAM_RESPONSE" and fr[0].request is not None


# ---------------------------------------------------------------------- split-file equivalence
def normal(events: list) -> list[str]:
    return [json.dumps(frame_json(e) if isinstance(e, Frame) else finding_json(e), sort_keys=True, default=str)
            for e in events]


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_split_files_give_the_whole_capture(tmp_path: Path, path: Path) -> None:
    packets = list(read_packets(str(path)))
    whole = normal(list(Analyzer().run(read_packets(str(path)))))
    rng = random.Random(path.name)
    parts = min(4, len(packets))
    files = split(packets, sorted(rng.sample(range(1, len(packets)), parts - 1)), tmp_path)
    assert normal(list(Analyzer().run_files(files[::-1], per_file=False))) == whole
