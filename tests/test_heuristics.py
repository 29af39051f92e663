"""Protocol heuristics need evidence (issue 16): traffic of other protocols on their usual ports, and
random data, is claimed by no dissector; the bundled captures, moved to ports no dissector owns,
are still recognised by content and decode as they do on their own ports."""

from __future__ import annotations

import random
import struct
from collections import Counter
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.engine import Analyzer
from analyzer.packets import LinkDecoder
from analyzer.pcapwrite import CaptureWriter, Segment, TcpConversation, ip_packet
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
ETH = CaptureWriter.__new__(CaptureWriter)
ETH.link = "ethernet"


def packets_of(conversations: list[TcpConversation]) -> list[RawPacket]:
    segs = sorted((s for c in conversations for s in c.segments), key=lambda s: s.ts)
    out = []
    for i, s in enumerate(segs):
        raw = ETH._link_header(":" in s.src[0]) + ip_packet(s)
        out.append(RawPacket(i + 1, s.ts, 1, raw, len(raw)))
    return out


def exchange(port: int, steps: list[tuple[str, bytes]], n: int = 0, mss: int = 1448) -> TcpConversation:
    conv = TcpConversation(client=(f"10.1.{n // 250}.{n % 250 + 1}", 40000 + n), server=("10.9.9.9", port),
                           ts=1_700_000_000.0 + n)
    conv.handshake()
    for direction, data in steps:
        conv.send(direction, data, mss)
    conv.close()
    return conv


def claims(conversations: list[TcpConversation]) -> tuple[Counter[str | None], list[Frame]]:
    a = Analyzer(load_dissectors())
    events = list(a.run(packets_of(conversations)))
    assert not [e for e in events if isinstance(e, Finding) and e.id == "engine.dissector_error"]
    return Counter(f.protocol for f in a.flows), [e for e in events if isinstance(e, Frame)]


def assert_unclaimed(conversations: list[TcpConversation]) -> None:
    protocols, frames = claims(conversations)
    assert protocols == Counter({None: len(conversations)}), protocols
    assert frames == []


# ------------------------------------------------------------------------------ Kafka
def kstr(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s)) + s.encode()


def kcompact(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def kafka_request(key: int, version: int, corr: int, body: bytes, client: str | None = "adminclient-1",
                  flexible: bool = False) -> bytes:
    head = struct.pack(">hhi", key, version, corr) + kstr(client) + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(head) + len(body)) + head + body


def kafka_response(corr: int, body: bytes) -> bytes:
    return struct.pack(">ii", len(body) + 4, corr) + body


def api_versions_response(corr: int) -> bytes:
    keys = [(k, 0, 9) for k in range(0, 60)]
    body = struct.pack(">hi", 0, len(keys)) + b"".join(struct.pack(">hhh", *k) for k in keys) + struct.pack(">i", 0)
    return kafka_response(corr, body)


def kafka_conversations() -> list[TcpConversation]:
    """Clients of several kinds: admin, producer, consumer; every ApiVersions version (v3 is the
    flexible one Java clients send first), then what each client does next."""
    topics = struct.pack(">i", 2) + kstr("orders") + kstr("payments")
    metadata = [kafka_request(3, v, 2, topics + (b"\x01" if v >= 4 else b"")) for v in (1, 4, 8)]
    produce = kafka_request(0, 7, 3, kstr(None) + struct.pack(">hii", -1, 30000, 1) + kstr("orders")
                            + struct.pack(">iii", 1, 0, 61) + bytes(61), client="producer-1")
    fetch = kafka_request(1, 11, 4, struct.pack(">iiiibii", -1, 500, 1, 52428800, 0, 0, -1) + struct.pack(">i", 1)
                          + kstr("orders") + struct.pack(">iiiqqi", 1, 0, -1, 0, -1, 1048576) + struct.pack(">i", 0)
                          + kstr(""), client="consumer-1")
    find_coord = kafka_request(10, 2, 5, kstr("group-1") + b"\x00", client="consumer-1")
    join = kafka_request(11, 5, 6, kstr("group-1") + struct.pack(">ii", 45000, 300000) + kstr("") + kstr(None)
                         + kstr("consumer") + struct.pack(">i", 1) + kstr("range") + struct.pack(">i", 0),
                         client="consumer-1")
    heartbeat = kafka_request(12, 3, 7, kstr("group-1") + struct.pack(">i", 1) + kstr("member-1") + kstr(None),
                              client="consumer-1")
    sasl = [kafka_request(17, v, 1, kstr("PLAIN")) for v in (0, 1)]
    steps: list[list[tuple[str, bytes]]] = []
    for v in range(4):
        flexible = v == 3
        body = (kcompact("apache-kafka-java") + kcompact("3.6.1") + b"\x00") if flexible else b""
        first = kafka_request(18, v, 1, body, client="adminclient-1", flexible=flexible)
        steps.append([("c2s", first), ("s2c", api_versions_response(1)), ("c2s", metadata[v % 3]),
                      ("s2c", kafka_response(2, struct.pack(">i", 1) + struct.pack(">i", 1) + kstr("broker")
                                             + struct.pack(">i", 9092) + kstr(None)))])
    for extra in (produce, fetch, find_coord, join, heartbeat, *sasl, *metadata):
        steps.append([("c2s", kafka_request(18, 2, 0, b"")), ("s2c", api_versions_response(0)), ("c2s", extra)])
    # Pipelined requests in one segment, and a client that only sends.
    steps.append([("c2s", metadata[0] + metadata[1] + produce)])
    steps.append([("c2s", kafka_request(18, 1, 0, b""))])
    return [exchange(9092, s, n) for n, s in enumerate(steps)]


def test_kafka_on_its_port_is_claimed_by_nobody() -> None:
    convs = kafka_conversations()
    assert len(convs) >= 14
    assert_unclaimed(convs)


# ------------------------------------------------------------------------------ others
def test_http_is_claimed_by_nobody() -> None:
    get = b"GET /api/v1/queues HTTP/1.1\r\nHost: broker:15672\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n"
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
    post = b"POST /x HTTP/1.1\r\nContent-Length: 12\r\n\r\n" + struct.pack(">IHHI", 8, 0x11, 1, 1)
    assert_unclaimed([exchange(80, [("c2s", get), ("s2c", ok)]), exchange(8080, [("c2s", post), ("s2c", ok)], 1)])


def tls_record(kind: int, body: bytes) -> bytes:
    return struct.pack(">BHH", kind, 0x0303, len(body)) + body


def test_tls_is_claimed_by_nobody() -> None:
    hello = tls_record(22, b"\x01" + (508).to_bytes(3, "big") + b"\x03\x03" + bytes(range(32)) + b"\x20"
                       + bytes(32) + struct.pack(">H", 2) + b"\x13\x01" + b"\x01\x00" + bytes(403))
    server = tls_record(22, b"\x02" + (70).to_bytes(3, "big") + bytes(70)) + tls_record(20, b"\x01") \
        + tls_record(23, random.Random(1).randbytes(900))
    amqps = exchange(5671, [("c2s", hello), ("s2c", server), ("c2s", tls_record(23, bytes(40)))])
    assert_unclaimed([amqps, exchange(443, [("c2s", hello), ("s2c", server)], 1)])


def resp(*parts: bytes) -> bytes:
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def test_redis_is_claimed_by_nobody() -> None:
    steps = [("c2s", resp(b"HELLO", b"3")), ("s2c", b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
             ("c2s", resp(b"SET", b"k", b"v" * 300)), ("s2c", b"+OK\r\n"), ("c2s", resp(b"XADD", b"s", b"*", b"f", b"1")),
             ("s2c", b"$15\r\n1700000000000-0\r\n")]
    assert_unclaimed([exchange(6379, steps)])


def pg_message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack(">I", len(body) + 4) + body


def test_postgresql_like_framing_is_claimed_by_nobody() -> None:
    startup_body = struct.pack(">I", 196608) + b"user\x00app\x00database\x00orders\x00\x00"
    startup = struct.pack(">I", len(startup_body) + 4) + startup_body
    ssl = struct.pack(">II", 8, 80877103)
    auth = pg_message(b"R", struct.pack(">I", 0)) + pg_message(b"S", b"server_version\x0016.1\x00") \
        + pg_message(b"Z", b"I")
    query = pg_message(b"Q", b"SELECT * FROM orders WHERE id = 1\x00")
    result = pg_message(b"T", struct.pack(">H", 1) + b"id\x00" + bytes(18)) + pg_message(b"D", struct.pack(">HI", 1, 1)
                                                                                         + b"1") \
        + pg_message(b"C", b"SELECT 1\x00") + pg_message(b"Z", b"I")
    convs = [exchange(5432, [("c2s", startup), ("s2c", auth), ("c2s", query), ("s2c", result)]),
             exchange(5432, [("c2s", ssl), ("s2c", b"N"), ("c2s", startup), ("s2c", auth)], 1)]
    assert_unclaimed(convs)


@pytest.mark.parametrize("seed", range(4))
def test_random_data_is_claimed_by_nobody(seed: int) -> None:
    rng = random.Random(seed)
    convs = []
    for n in range(50):
        steps = [(rng.choice(("c2s", "s2c")), rng.randbytes(rng.randrange(1, 3000))) for _ in range(rng.randrange(1, 6))]
        convs.append(exchange(rng.randrange(1024, 60000), steps, n))
    assert_unclaimed(convs)


# ------------------------------------------------------------------------------ the bundled captures
def moved(path: Path, ports: dict[int, int]) -> list[RawPacket]:
    """The capture's TCP segments with their ports changed, as Ethernet/IPv4 packets."""
    dec = LinkDecoder()
    out = []
    for pkt in read_packets(str(path)):
        seg = dec.decode(pkt)
        if seg is None:
            continue
        s = Segment(pkt.ts, (seg.src, ports.get(seg.sport, seg.sport)), (seg.dst, ports.get(seg.dport, seg.dport)),
                    seg.seq, seg.ack, seg.flags, seg.payload)
        raw = ETH._link_header(":" in seg.src) + ip_packet(s)
        out.append(RawPacket(pkt.number, pkt.ts, 1, raw, len(raw) + pkt.orig_len - len(pkt.data)))
    return out


def decoded(packets: list[RawPacket]) -> list[tuple[int, str, str]]:
    return [(f.flow, f.protocol, f.command) for f in Analyzer(load_dissectors()).run(packets) if isinstance(f, Frame)]


CAPTURES = sorted(p for folder in ("rabbitmq_stream", "amqp091") for p in (ROOT / "captures" / folder).iterdir()
                  if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_bundled_captures_are_recognised_on_other_ports(path: Path) -> None:
    on_own_port = decoded(moved(path, {}))
    elsewhere = decoded(moved(path, {5552: 15552, 5672: 15672}))
    assert on_own_port and elsewhere == on_own_port


# ------------------------------------------------------------------------------ the verdicts themselves
def test_rabbitmq_stream_verdicts_follow_the_evidence() -> None:
    from dissectors.rabbitmq_stream import RabbitMQStreamDissector
    from dissectors.rabbitmq_stream.encode import handshake, request

    d = RabbitMQStreamDissector()
    peer = handshake()[0][1]
    assert d.sniff(peer).confidence >= 0.9
    assert d.sniff(peer[:30]).confidence >= 0.8  # cut by the capture: its start is enough
    # Kafka's SaslHandshake v1 has PeerProperties' header; its client id is no property count.
    assert d.sniff(kafka_request(17, 1, 1, kstr("PLAIN"))).confidence == 0.0
    # ApiVersions v1/v2 read as SaslHandshake: the client id is left over after the correlation id.
    assert d.sniff(kafka_request(18, 2, 0, b"")).confidence == 0.0
    assert d.sniff(kafka_request(18, 1, 0, b"", client=None)).confidence == 0.0
    meta = request("Metadata", correlation_id=1, streams=["s"])
    assert d.sniff(meta).confidence >= 0.5
    assert d.sniff(meta + meta).confidence >= 0.9
    assert d.sniff(meta + b"\xff" * 12).confidence == 0.0  # what follows is no frame


def test_amqp091_verdicts_follow_the_evidence() -> None:
    from dissectors.amqp091 import Amqp091Dissector
    from dissectors.amqp091 import encode as E

    d = Amqp091Dissector()
    body = E.frame(3, 1, b"x" * 20)
    assert d.sniff(body).confidence >= 0.5
    assert d.sniff(body + b"\x47ET / HTTP/1.1").confidence == 0.0  # what follows is no frame
    assert d.sniff(E.frame(3, 0, b"x" * 20)).confidence == 0.0  # content never goes on channel 0
    header = E.frame(2, 1, struct.pack(">HHQH", 60, 0, 5, 0))
    assert d.sniff(header).confidence >= 0.5
    assert d.sniff(E.frame(2, 1, struct.pack(">HHQH", 61, 0, 5, 0))).confidence == 0.0
