"""The fuzz smoke run of CI (issue 16): every fuzz target (each dissector the registry loads, and the
capture reader) on its seed corpus, on a few thousand deterministic mutations of it, and on every
regression input in fuzz/regressions/. A crash or an ``engine.dissector_error`` fails the build;
the coverage-guided campaign itself is fuzz/run.py (fuzz/README.md)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from analyzer.api import Connection, Dissector
from analyzer.pcapwrite import Segment, ip_packet
from fuzz import harness, seeds

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "fuzz" / "regressions"
MUTATIONS = 3000
#: Seeds are cut to this for the mutations: the smoke run stays in seconds, and most decoding
#: paths are reached in the first frames of a conversation.
CUT = 2048
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)

TARGETS = harness.targets()


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    """One to four of the mutations libFuzzer starts with: bit flips, interesting integers over
    length fields, byte runs inserted, ranges erased or repeated, a splice with another seed."""
    b = bytearray(data or b"\x00")
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        i = rng.randrange(len(b)) if b else 0
        if op == 0 and b:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and len(b) >= 4:
            width = rng.choice((1, 2, 4))
            i = rng.randrange(len(b) - width + 1)
            b[i:i + width] = (rng.choice(INTERESTING) & ((1 << 8 * width) - 1)).to_bytes(width, "big")
        elif op == 2:
            b[i:i] = bytes([rng.choice((0, 0xFF, rng.randrange(256)))]) * rng.randint(1, 64)
        elif op == 3 and len(b) > 1:
            j = min(len(b), i + rng.randint(1, 64))
            del b[i:j]
        elif op == 4 and b:
            j = min(len(b), i + rng.randint(1, 128))
            b[i:i] = b[i:j] * rng.randint(1, 4)
        elif op == 5 and other:
            k = rng.randrange(len(other))
            b = b[:i] + bytearray(other[k:k + rng.randint(1, 512)])
        elif b:
            b[i] = rng.randrange(256)
    return bytes(b[:harness.MAX_INPUT])


def run(target: str, data: bytes, what: str) -> int:
    try:
        return harness.run(target, data)
    except Exception as exc:
        pytest.fail(f"{target}: {what} failed with {type(exc).__name__}: {exc}\ninput: {data[:256].hex()}"
                    f"{'...' if len(data) > 256 else ''} ({len(data)} bytes; save it under "
                    f"fuzz/regressions/{target}/ and run `python fuzz/run.py {target} FILE` to reproduce)")
    return 0


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[bytes]]:
    return {t: seeds.seeds(t) for t in TARGETS}


def test_every_dissector_is_a_target() -> None:
    from analyzer.registry import load_dissectors

    assert set(TARGETS) == set(load_dissectors()) | {"capture"}
    assert {"rabbitmq_stream", "amqp091"} <= set(TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus(target: str, corpus: dict[str, list[bytes]]) -> None:
    items = corpus[target]
    assert items, f"{target} has no seeds"
    events = 0
    for i, data in enumerate(items):
        events += run(target, data, f"seed {i}")
    assert events > len(items)  # the seeds decode to something: the harness is not testing nothing


@pytest.mark.parametrize("target", TARGETS)
def test_mutations(target: str, corpus: dict[str, list[bytes]]) -> None:
    rng = random.Random(f"smoke-{target}")
    items = [s[:CUT] for s in corpus[target]]
    for n in range(MUTATIONS):
        data = mutate(rng, rng.choice(items), rng.choice(items))
        run(target, data, f"mutation {n}")


def test_regression_inputs() -> None:
    """Every input a campaign found failing, kept under fuzz/regressions/TARGET/, runs clean now."""
    found = [p for p in sorted(REGRESSIONS.glob("*/*")) if p.is_file()]
    assert found, "fuzz/regressions/ holds the inputs campaigns found"
    for path in found:
        target = path.parent.name
        assert target in TARGETS, f"{path}: no fuzz target {target!r} (targets: {', '.join(TARGETS)})"
        run(target, path.read_bytes(), str(path.relative_to(ROOT)))


# ------------------------------------------------------------------------------ the harness itself
def test_conversation_packets_are_what_the_capture_writer_builds() -> None:
    data = harness.encode([("c2s", b"hello"), ("s2c", b"x" * 20_000), ("c2s", b"")], close=True)
    packets = harness.conversation(data)
    assert len(packets) == 3 + 1 + 2 + 3  # handshake, hello, 20,000 bytes in two records (none for b""), FIN FIN ACK
    seg = Segment(0.0, harness.CLIENT, harness.SERVER, 1001, 5001, 0x18, b"hello")
    assert packets[3].data == harness.ETHERNET + ip_packet(seg)


def test_dropped_records_leave_holes() -> None:
    data = bytes([1]) + struct.pack(">H", 3) + b"abc" + struct.pack(">H", 0x4000 | 2) + b"de" \
        + struct.pack(">H", 1) + b"f"
    packets = harness.conversation(data)
    assert [p.data[54:] for p in packets] == [b"abc", b"f"]  # mid-stream: no handshake; "de" lost


class Exploding(Dissector):
    name = "exploding"
    title = "raises on its first bytes"

    def connection(self, midstream: bool) -> Connection:
        class Conn(Connection):
            def feed(self, direction, data, ts):  # type: ignore[no-untyped-def]
                raise RuntimeError("boom")

        return Conn()


def test_a_dissector_exception_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "_DISSECTORS", {"exploding": Exploding()})
    with pytest.raises(harness.Failure, match="engine.dissector_error"):
        harness.run("exploding", harness.encode([("c2s", b"anything")]))


# ------------------------------------------------------------------------------ what campaigns found
def test_amqp10_section_with_a_list_or_map_descriptor_is_no_message() -> None:
    # fuzz/regressions/capture/crash-amqp10-list-descriptor.pcap: a RabbitMQ Stream record whose
    # AMQP 1.0 section descriptor was a list raised TypeError (unhashable) while its tree was built.
    from dissectors.rabbitmq_stream import amqp

    for descriptor in (b"\x45", b"\xc1\x01\x00", b"\xc0\x01\x00"):  # list0, map8 and list8, empty
        assert amqp.message_fields(b"\x00" + descriptor + b"\x40", 0, len(descriptor) + 2, 0) is None
    data_section = b"\x00\x53\x75\xa0\x01x"
    assert amqp.message_fields(data_section, 0, len(data_section), 0) is not None
