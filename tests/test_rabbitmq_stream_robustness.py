"""Random bytes and mutated real frames never make the RabbitMQ Stream dissector raise or hang, and
every lazily built part of the field tree (records, AMQP sections) decodes without raising too."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Direction, Field, Frame
from analyzer.engine import analyze_file
from analyzer.jsonout import frame_json
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream.amqp import decode_value, message_fields
from dissectors.rabbitmq_stream.connection import StreamConnection

CAPTURES = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def real_streams() -> tuple[tuple[bytes, bytes], ...]:
    """(client bytes, server bytes) of every recorded connection, rebuilt from the decoded frames."""
    out = []
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        flows: dict[int, dict[Direction, list[bytes]]] = {}
        for e in analyze_file(str(pcap)):
            if isinstance(e, Frame) and e.data is not None:
                flows.setdefault(e.flow, {Direction.C2S: [], Direction.S2C: []})[e.direction].append(e.data)
        for sides in flows.values():
            out.append((b"".join(sides[Direction.C2S]), b"".join(sides[Direction.S2C])))
    return tuple(out)


def walk(fields: list[Field] | None) -> int:
    n = 0
    for f in fields or ():
        n += 1 + walk(f.children)  # touching .children builds the lazy record trees
    return n


def feed_all(c2s: bytes, s2c: bytes, cuts: list[int], midstream: bool) -> None:
    conn = StreamConnection(midstream)
    events = []
    ts = 0.0
    pos = {Direction.C2S: 0, Direction.S2C: 0}
    data = {Direction.C2S: c2s, Direction.S2C: s2c}
    i = 0
    # interleave the two directions in pieces of the chosen sizes
    while pos[Direction.C2S] < len(c2s) or pos[Direction.S2C] < len(s2c):
        d = Direction.C2S if i % 2 == 0 else Direction.S2C
        n = cuts[i % len(cuts)] if cuts else 64
        i += 1
        piece = data[d][pos[d]:pos[d] + n]
        pos[d] += len(piece)
        ts += 0.5
        if piece:
            events.extend(conn.feed(d, piece, ts))
    events.extend(conn.gap(Direction.S2C, 10, ts))
    events.extend(conn.feed(Direction.S2C, s2c[:50], ts))
    events.extend(conn.end(ts + 1000.0))
    for e in events:
        if isinstance(e, Frame):
            walk(e.fields)
            frame_json(e)


@SETTINGS
@given(st.binary(max_size=3000), st.binary(max_size=3000), st.lists(st.integers(1, 700), max_size=8),
       st.booleans())
def test_random_bytes(c2s: bytes, s2c: bytes, cuts: list[int], midstream: bool) -> None:
    feed_all(c2s, s2c, cuts, midstream)


@SETTINGS
@given(st.data(), st.booleans())
def test_mutated_real_frames(data: st.DataObject, midstream: bool) -> None:
    streams = real_streams()
    c2s, s2c = streams[data.draw(st.integers(0, len(streams) - 1))]
    which = data.draw(st.booleans())
    raw = bytearray(c2s if which else s2c)
    for _ in range(data.draw(st.integers(1, 6))):
        if not raw:
            break
        at = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert", "set"]))
        if op == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "delete":
            del raw[at:at + data.draw(st.integers(1, 16))]
        elif op == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
        else:
            raw[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    cuts = data.draw(st.lists(st.integers(1, 2000), max_size=4))
    if which:
        feed_all(bytes(raw), s2c, cuts, midstream)
    else:
        feed_all(c2s, bytes(raw), cuts, midstream)


@SETTINGS
@given(st.binary(max_size=600))
def test_amqp_decoder_never_raises_unexpectedly(raw: bytes) -> None:
    fields = message_fields(raw, 0, len(raw), 0)
    if fields is not None:
        walk(fields)
    try:
        decode_value(raw, 0, len(raw))
    except Exception as exc:  # only the decoder's own error type is allowed out
        assert type(exc).__name__ == "AmqpError"


@SETTINGS
@given(st.binary(max_size=64))
def test_sniff_never_raises(raw: bytes) -> None:
    v = RabbitMQStreamDissector().sniff(raw)
    assert 0.0 <= v.confidence <= 1.0


def test_real_streams_were_found() -> None:
    assert len(real_streams()) >= 8


def test_huge_claimed_sizes_do_not_allocate_or_hang() -> None:
    conn = StreamConnection(False)
    # Size 0x7fffffff, then a flood of small garbage: must finish quickly and report the leftovers.
    events = list(conn.feed(Direction.C2S, b"\x7f\xff\xff\xff\x00\x11\x00\x01" + b"\x00" * 100_000, 0.0))
    events += list(conn.end(1.0))
    assert events  # resync findings and/or the incomplete tail
