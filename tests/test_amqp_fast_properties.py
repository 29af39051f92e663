"""Hostile input for the AMQP/Fast dissector: random octets, random commands with random fields,
and the clean conversation mutated (bits flipped, octets cut or inserted, sizes and fragment-sizes
changed), fed in random pieces with gaps. Never an exception, never a hang, never an
``engine.dissector_error`` through the engine; and whatever is fed, the output does not depend on
how the octets were cut into pieces."""

from __future__ import annotations

import importlib.util
import random
import struct
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Direction, Finding, Frame
from analyzer.engine import DISSECTOR_ERROR, analyze_file
from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp_fast import AmqpFastDissector
from dissectors.amqp_fast import encode as E
from dissectors.amqp_fast.commands import BY_CODE, COMMAND_END
from tests.replay import normal

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("amqp_fast_make_captures_p", ROOT / "captures/amqp_fast/make_captures.py")
assert _spec is not None and _spec.loader is not None
MK = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MK)
SESSION = [(d, data) for d, data, _ in MK.session().steps if len(data) < 5000]  # without the 64 KB index
DISSECTORS = [AmqpFastDissector(), AmqpFastDissector().configured({"bit_order": "msb", "long_string_length": "4"})]
C2S, S2C = Direction.C2S, Direction.S2C


def run(steps: list[tuple[Direction, bytes]], piece: int, seed: int, midstream: bool = False,
        dissector: AmqpFastDissector | None = None, gaps: bool = False) -> list:
    """Feed the steps cut into pieces of at most ``piece`` octets (random sizes from ``seed``),
    with a few capture gaps when asked; the normalised output."""
    rng = random.Random(seed)
    conn = (dissector or DISSECTORS[0]).connection(midstream)
    out = []
    started = time.monotonic()
    for i, (d, data) in enumerate(steps):
        pos = 0
        while pos < len(data):
            n = rng.randint(1, piece)
            out += normal(conn.feed(d, data[pos:pos + n], float(i)) or ())
            pos += n
            if gaps and rng.random() < 0.05:
                out += normal(conn.gap(d, rng.randint(1, 200), float(i)) or ())
    out += normal(conn.end(float(len(steps))) or ())
    assert time.monotonic() - started < 20, "hang"
    return out


def ids(out: list) -> list[str]:
    found = []
    for item in out:
        if item[0] == "frame":
            found += [f[1] for f in item[9]]
        else:
            found.append(item[1])
    return found


octets = st.binary(min_size=0, max_size=600)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.booleans(), octets), max_size=8), st.integers(1, 64), st.integers(0, 1 << 30),
       st.booleans(), st.sampled_from([0, 1]))
def test_random_octets(chunks: list[tuple[bool, bytes]], piece: int, seed: int, midstream: bool, which: int) -> None:
    steps = [(C2S if c else S2C, data) for c, data in chunks]
    if not midstream:
        steps.insert(0, (C2S, E.initiation()))
    run(steps, piece, seed, midstream, DISSECTORS[which], gaps=True)


def random_command(rng: random.Random) -> bytes:
    code = rng.choice([*BY_CODE, rng.randrange(256)])
    payload = rng.randbytes(rng.randrange(0, 40))
    size = len(payload) + 2 if rng.random() < 0.8 else rng.randrange(0, 70000)
    head = struct.pack(">H", size) if size < 0xFFFF and rng.random() < 0.9 else struct.pack(">HI", 0xFFFF, size)
    end = COMMAND_END if rng.random() < 0.9 else rng.randrange(256)
    return head + bytes([code]) + payload + bytes([end])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 1 << 30), st.integers(1, 40), st.sampled_from([0, 1]))
def test_random_commands_with_random_fields(seed: int, piece: int, which: int) -> None:
    rng = random.Random(seed)
    steps: list[tuple[Direction, bytes]] = [(C2S, E.initiation())]
    for _ in range(rng.randrange(1, 30)):
        d = rng.choice([C2S, S2C])
        data = random_command(rng)
        if rng.random() < 0.2:
            data += rng.randbytes(rng.randrange(0, 300))  # message data, or junk
        steps.append((d, data))
    whole = run(steps, 1 << 20, seed, dissector=DISSECTORS[which])
    # However the octets are cut, the same frames and findings.
    assert run(steps, piece, seed + 1, dissector=DISSECTORS[which]) == whole


def mutate(steps: list[tuple[Direction, bytes]], rng: random.Random, n: int) -> list[tuple[Direction, bytes]]:
    out = [(d, bytearray(data)) for d, data in steps]
    for _ in range(n):
        i = rng.randrange(len(out))
        buf = out[i][1]
        if not buf:
            continue
        at = rng.randrange(len(buf))
        kind = rng.choice(["flip", "flip", "zero", "cut", "insert", "size", "dup"])
        if kind == "flip":
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == "zero":
            buf[at] = 0
        elif kind == "cut":
            del buf[at:at + rng.randint(1, 20)]
        elif kind == "insert":
            buf[at:at] = rng.randbytes(rng.randint(1, 20))
        elif kind == "size" and len(buf) >= 2:
            buf[0:2] = struct.pack(">H", rng.choice([0, 1, 2, 0xFFFF, 0xFFFE, rng.randrange(1 << 16)]))
        elif kind == "dup":
            out.insert(i, (out[i][0], bytearray(buf)))
    return [(d, bytes(b)) for d, b in out]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 1 << 30), st.integers(1, 8), st.integers(1, 200), st.booleans())
def test_mutated_session(seed: int, edits: int, piece: int, midstream: bool) -> None:
    rng = random.Random(seed)
    steps = mutate(SESSION, rng, edits)
    if midstream:
        steps = steps[rng.randrange(len(steps)):]
    whole = run(steps, 1 << 20, seed, midstream)
    assert run(steps, piece, seed + 7, midstream) == whole
    assert "engine.dissector_error" not in ids(whole)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 1 << 30), st.integers(1, 6))
def test_mutated_session_through_the_engine(tmp_path_factory, seed: int, edits: int) -> None:
    rng = random.Random(seed)
    steps = mutate(SESSION, rng, edits)
    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 3018))
    conv.handshake()
    for d, data in steps:
        conv.send(str(d), data, mss=rng.choice([1, 7, 536, 1448]) if len(data) < 200 else 1448)
    conv.close()
    path = tmp_path_factory.mktemp("mut") / "m.pcap"
    write_capture(str(path), [conv])
    events = list(analyze_file(str(path)))
    findings = [f for e in events for f in (e.findings if isinstance(e, Frame) else [e]) if isinstance(f, Finding)]
    assert DISSECTOR_ERROR.id not in {f.id for f in findings}
    assert any(isinstance(e, Frame) and e.protocol == "amqp_fast" for e in events)


def test_a_claimed_huge_fragment_is_not_buffered() -> None:
    """fragment-size 4 GB: the octets that come are handed over as they arrive, none kept beyond
    the display prefix."""
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    s.cc("HANDLE SEND", handle_id=1, fragment_size=0xFFFFFFF0)
    conn = DISSECTORS[0].connection(False)
    for d, data, ts in s.steps:
        list(conn.feed(d, data, ts))
    for _ in range(200):
        list(conn.feed(C2S, bytes(65536), 1.0))
    assert len(conn.side_c2s.queue) == 0 and conn.side_c2s.due == 0xFFFFFFF0 - 200 * 65536
    out = list(conn.end(2.0))
    assert [e.id for e in out if isinstance(e, Finding)] == ["amqp_fast.framing.incomplete"]
