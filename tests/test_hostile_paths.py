"""Paths a hostile capture could make quadratic or unbounded (issue 16), checked by counting work and
state, never by timing: request matching, repeated connection closes, reordering by one-byte
segments, SYN floods on one 4-tuple."""

from __future__ import annotations

import io
from collections.abc import Callable, Hashable
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket
from analyzer.engine import Analyzer
from analyzer.packets import ACK, PSH, RST, SYN
from analyzer.pcapwrite import CaptureWriter, Segment, TcpConversation, ip_packet
from analyzer.reassembly import BUFFER_OVERFLOW, GAP, SEGMENT_BYTES, Data, Gap, Note, StreamReassembler
from analyzer.registry import load_dissectors
from dissectors.amqp091 import connection as amqp_connection
from dissectors.amqp091 import encode as amqp
from dissectors.kit import correlate
from dissectors.kit.correlate import Correlator


class Visits:
    """How many outstanding requests ``Correlator.drop`` looked at."""

    n = 0


class CountingVisits(Visits):
    """Visits, with the Correlator whose ``drop`` counts them (see drop_visits)."""

    correlator: type


@pytest.fixture
def drop_visits(monkeypatch: pytest.MonkeyPatch) -> CountingVisits:
    """A Correlator whose ``drop`` counts every request it visits, put in place of the AMQP 0-9-1
    connection's. It is the kit's source, loaded apart: the kit's module may run compiled, and a
    compiled class's methods cannot be replaced (tests/test_native.py holds both builds alike)."""
    spec = spec_from_file_location("correlate_source", Path(correlate.__file__).with_name("correlate.py"))
    assert spec is not None and spec.loader is not None
    source = module_from_spec(spec)
    spec.loader.exec_module(source)
    visits = CountingVisits()

    class Counting(source.Correlator):  # type: ignore[name-defined, misc]
        def drop(self, direction: str, keep: Callable[[Hashable, list], bool]) -> None:
            def counted(k: Hashable, e: list) -> bool:
                visits.n += 1
                return keep(k, e)
            super().drop(direction, counted)

    visits.correlator = Counting
    monkeypatch.setattr(amqp_connection, "Correlator", Counting)
    return visits


class CountedKey:
    """A request key that counts how often it is hashed: a scan over the outstanding keys hashes
    each of them, an O(1) lookup only the one it looks up."""

    hashes = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        CountedKey.hashes += 1
        return hash(self.n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountedKey) and other.n == self.n


def test_in_order_overflow_over_many_keys_forgets_without_a_scan() -> None:
    c = Correlator.in_order(limit=1000)
    keys = [CountedKey(i) for i in range(3000)]
    for i, k in enumerate(keys):
        c.request("c2s", k, "Queue.Declare", None, float(i))
    CountedKey.hashes = 0
    for i in range(3000, 5000):  # 2,000 requests past the limit, each forgetting one
        c.request("c2s", keys[i % 3000], "Queue.Declare", None, float(i))
    assert c.outstanding("c2s") == 1000 and c.forgot("c2s")
    assert CountedKey.hashes < 10 * 2000  # a min() over the 1,000 keys per request: 2,000,000


def test_answers_are_matched_in_constant_work() -> None:
    c = Correlator.by_id()
    keys = [CountedKey(i) for i in range(20_000)]
    for i, k in enumerate(keys):
        c.request("c2s", k, "Create", None, float(i))
    CountedKey.hashes = 0
    for k in reversed(keys):  # the newest first: a scan from the oldest would visit them all
        assert c.response("s2c", k) is not None
    unknown = [CountedKey(-i) for i in range(1, 20_001)]
    for k in unknown:
        assert c.response("s2c", k) is None
    assert CountedKey.hashes < 5 * 40_000


def test_retain_repeated_visits_the_requests_once(drop_visits: CountingVisits) -> None:
    c = drop_visits.correlator.in_order()
    for i in range(5000):
        c.request("s2c", 0, "Connection.Close", None, float(i))
    c.request("s2c", 3, "Channel.Close", None, 0.0)
    for _ in range(5000):
        c.retain("s2c", 0, "Connection.Close")
    assert c.outstanding("s2c") == 5000
    assert drop_visits.n == 5001  # once over every request, then nothing
    c.request("s2c", 4, "Channel.Close", None, 0.0)  # a new request: the next retain looks again
    c.retain("s2c", 0, "Connection.Close")
    assert c.outstanding("s2c") == 5000 and drop_visits.n == 5001 + 5001


def packets_of(conversations: list[TcpConversation]) -> list[RawPacket]:
    buf = io.BytesIO()
    w = CaptureWriter(buf)
    segs = sorted((s for c in conversations for s in c.segments), key=lambda s: s.ts)
    eth = w._link_header(False)
    return [RawPacket(i + 1, s.ts, 1, eth + ip_packet(s), 14 + len(ip_packet(s))) for i, s in enumerate(segs)]


def test_amqp_close_ok_flood_against_unanswered_closes_is_linear(drop_visits: CountingVisits) -> None:
    n = 3000
    conv = TcpConversation(server=("10.0.0.2", 5672))
    conv.handshake()
    for d, data, _ts in amqp.Script().handshake().steps:
        conv.send(str(d), data)
    conv.send("c2s", amqp.method("Connection.Close", 0, reply_code=200, reply_text="bye", class_id=0, method_id=0))
    closes = b"".join(amqp.method("Connection.Close", 0, reply_code=200, reply_text="", class_id=0, method_id=0)
                      for _ in range(n))
    oks = b"".join(amqp.method("Connection.CloseOk", 0) for _ in range(n))
    conv.send("s2c", closes + oks, mss=60_000)
    events = list(Analyzer(load_dissectors()).run(packets_of([conv])))
    findings = [e for e in events if isinstance(e, Finding)]
    assert sum(f.id == "amqp091.correlation.unanswered" for f in findings) == n
    assert not any(f.id == "engine.dissector_error" for f in findings)
    assert drop_visits.n < 5 * n  # each close-ok visited all 3,000 closes before: 9,000,000


def test_one_byte_segments_behind_a_hole_are_limited_in_number() -> None:
    r = StreamReassembler()  # 8 MiB: 131,072 segments
    limit = r.max_buffer // SEGMENT_BYTES
    r.syn(0)
    n = limit + 5000
    out: list[Data | Gap | Note] = []
    most = 0
    for i in reversed(range(1, n)):  # byte 0 never comes: everything waits behind the hole
        out += r.segment(1 + i, b"x", False, n - i, 0.0)
        most = max(most, len(r.order or ()))
    assert most == limit  # the segment past the limit gave the hole up
    notes = [e.finding for e in out if isinstance(e, Note)]
    assert [f.id for f in notes] == [BUFFER_OVERFLOW.id]
    assert f"limit {limit} segments" in notes[0].message
    assert [e for e in out if isinstance(e, Gap)][0].length > 0
    assert GAP.id == "tcp.gap"


def syn_flood(n: int, *, rst_every: int = 0) -> list[RawPacket]:
    conv = TcpConversation(server=("10.0.0.2", 5672))
    segs = []
    for i in range(n):
        segs.append(Segment(conv.ts + i * 0.001, conv.client, conv.server, (i * 2_654_435_761) % (1 << 32), 0, SYN))
    conv.segments = segs
    return packets_of([conv])


def test_syn_flood_on_one_four_tuple_is_one_conversation() -> None:
    a = Analyzer(load_dissectors())
    events = list(a.run(syn_flood(5000)))
    assert len(a.flows) == 1
    assert a.flows[0].packets == 5000
    assert not [e for e in events if isinstance(e, Finding) and e.id == "engine.dissector_error"]


def test_port_reuse_after_data_is_still_a_new_conversation() -> None:
    first = TcpConversation(server=("10.0.0.2", 5672), isn_client=1000)
    first.handshake()
    first.send("c2s", b"AMQP\x00\x00\x09\x01")
    second = TcpConversation(server=("10.0.0.2", 5672), isn_client=900_000, ts=first.ts + 1)
    second.handshake()
    second.send("c2s", b"AMQP\x00\x00\x09\x01")
    a = Analyzer(load_dissectors())
    frames = [e for e in a.run(packets_of([first, second])) if isinstance(e, Frame)]
    assert len(a.flows) == 2 and [f.flow for f in frames] == [1, 2]
    assert ACK and PSH and RST  # the flags the writer uses


def test_resync_over_a_long_junk_run_in_small_segments_is_linear() -> None:
    # Found by the fuzz campaign (fuzz/regressions/rabbitmq_stream/timeout-resync-rescans-junk): out
    # of sync, every segment made resync scan all unconfirmed bytes again.
    from dissectors.kit.framing import ByteQueue

    scanned = 0

    def resync(buf: memoryview, pos: int) -> tuple[int, bool]:
        nonlocal scanned
        scanned += len(buf) - pos  # a resync that never confirms looks at every byte it is given
        return pos, False

    q = ByteQueue(synced=False)
    total = 0
    for _ in range(2000):
        q.append(b"\x00" * 100)
        total += 100
        list(q.cut(lambda b, p: -1, resync))
    assert scanned < 10 * total  # every segment scanning all 200,000 bytes: 20,000,000


def test_amqp_close_ok_flood_over_many_confirming_channels_is_linear() -> None:
    """Each connection.close-ok forgets the unconfirmed publishes of every channel: repeated, it must
    not visit every channel again (2,000 channels x 2,000 close-oks = 4,000,000 clears before).
    The clears are counted as the lines of the connection that make them run (tracking.Ranges may
    be a compiled class, whose methods cannot be replaced)."""
    import sys

    from dissectors.amqp091 import connection

    clears = Visits()
    source = connection.__file__
    lines = {i for i, text in enumerate(Path(source).read_text(encoding="utf-8").splitlines(), 1)
             if "tr.unconfirmed.clear()" in text}
    assert len(lines) == 2

    def counting(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line" and frame.f_lineno in lines:
            clears.n += 1
        return counting

    def calls(frame, event, arg):  # type: ignore[no-untyped-def]
        return counting if frame.f_code.co_filename == source else None

    n = 2000
    conv = TcpConversation(server=("10.0.0.2", 5672))
    conv.handshake()
    s = amqp.Script().handshake()
    for ch in range(1, n + 1):
        s.open_channel(ch)
        s.c(amqp.method("Confirm.Select", ch)).s(amqp.method("Confirm.SelectOk", ch))
    s.c(amqp.message(1, b"never confirmed", {}, exchange="x", routing_key="r"))
    for d, data, _ts in s.steps:
        conv.send(str(d), data)
    conv.send("s2c", amqp.method("Connection.Close", 0, reply_code=200, reply_text="bye", class_id=0, method_id=0))
    conv.send("c2s", b"".join(amqp.method("Connection.CloseOk", 0) for _ in range(n)), mss=60_000)
    packets = packets_of([conv])
    sys.settrace(calls)
    try:
        events = list(Analyzer(load_dissectors()).run(packets))
    finally:
        sys.settrace(None)
    findings = [e for e in events if isinstance(e, Finding)]
    assert not any(f.id == "engine.dissector_error" for f in findings)
    assert not any(f.id == "amqp091.confirm.unconfirmed" for f in findings)  # cleared by the close-ok
    assert n <= clears.n < 3 * n


def syn_refused(n: int) -> list[RawPacket]:
    """``n`` connection attempts on one 4-tuple, each SYN refused by the server's RST."""
    conv = TcpConversation(server=("10.0.0.2", 5672))
    segs = []
    for i in range(n):
        isn = (i * 2_654_435_761) % (1 << 32)
        segs.append(Segment(conv.ts + i * 0.002, conv.client, conv.server, isn, 0, SYN))
        segs.append(Segment(conv.ts + i * 0.002 + 0.001, conv.server, conv.client, 0, isn + 1, RST | ACK))
    conv.segments = segs
    return packets_of([conv])


def test_syn_refused_again_and_again_on_one_four_tuple_is_one_conversation() -> None:
    a = Analyzer(load_dissectors())
    events = list(a.run(syn_refused(3000)))
    assert len(a.flows) == 1  # one per attempt before: 3,000 rows
    assert a.flows[0].packets == 6000
    assert not [e for e in events if isinstance(e, Finding) and e.id == "engine.dissector_error"]


def test_a_real_connection_after_refused_attempts_continues_their_row() -> None:
    refused = syn_refused(1)
    real = TcpConversation(server=("10.0.0.2", 5672), isn_client=900_000, ts=10.0)
    real.handshake()
    real.send("c2s", b"AMQP\x00\x00\x09\x01")
    a = Analyzer(load_dissectors())
    frames = [e for e in a.run([*refused, *packets_of([real])]) if isinstance(e, Frame)]
    # The real one continues the refused attempt's row only while that row carried nothing; a
    # third attempt after data would be a new conversation (test_port_reuse_after_data...).
    assert len(a.flows) == 1 and [f.flow for f in frames] == [1]
