"""Long runs keep memory bounded (issue 12): with ``max_finished_rows`` the analyzer keeps the rows of
open conversations and of the latest N finished ones only, while the frames and findings it gives,
the live summary's totals and the flow ids are those of a run that keeps every row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.engine import Analyzer
from analyzer.live.sources import CaptureStats
from analyzer.live.summary import summary_lines
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.toy import ToyDissector

N_CONVERSATIONS = 5_000
BOUND = 100
IDLE = 20.0


def _capture(path: Path) -> list[RawPacket]:
    """Short conversations one after the other, of every kind a row can end with: closed by FIN,
    reset, left open (finished by idle expiry or at the end), with findings (a BAD line: a warning),
    and undecoded ones (no dissector on their port: an ``engine.undecoded`` note)."""
    convs = []
    for i in range(N_CONVERSATIONS):
        client = (f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}", 1024 + i % 50_000)
        server = ("192.168.0.1", 9999 if i % 7 == 3 else 7777)
        c = TcpConversation(client, server, ts=1_000.0 + i * 0.01, step=0.001)
        c.handshake()
        if server[1] == 9999:  # nothing the toy's heuristics recognise
            c.send("c2s", b"\x00\x01 opaque")
        else:
            c.send("c2s", b"HELLO\n" + (b"BAD line\n" if i % 3 == 0 else b""))
            c.send("s2c", b"WELCOME\n")
        kind = i % 5
        if kind in (0, 1, 2):
            c.close()
        elif kind == 3:
            c.rst("s2c")
        # kind 4: left open
        convs.append(c)
    write_capture(str(path), convs)
    return list(read_packets(str(path)))


def _key(ev: Frame | Finding) -> tuple[Any, ...]:
    if isinstance(ev, Frame):
        return ("frame", ev.flow, ev.packets, ev.ts, ev.direction, ev.offset, ev.size, ev.src, ev.dst, ev.protocol,
                ev.dialect, ev.community_id, tuple((f.id, f.frame, f.message) for f in ev.findings))
    return ("finding", ev.id, ev.flow, ev.frame, ev.severity, ev.message, ev.service, ev.community_id)


def _live_run(packets: list[RawPacket], bound: int | None) -> tuple[Analyzer, list[tuple[Any, ...]], int]:
    """Packets in batches as the live loop feeds them (advance between batches, finish at the end);
    the events, and the most rows beyond the open conversations' seen at any batch."""
    a = Analyzer({"toy": ToyDissector()}, idle_timeout=IDLE, max_finished_rows=bound)
    events: list[tuple[Any, ...]] = []
    excess = 0
    for start in range(0, len(packets), 50):
        batch = packets[start:start + 50]
        events += map(_key, a.feed(batch))
        events += map(_key, a.advance(batch[-1].ts))
        excess = max(excess, len(a.flows) - a.live)
    events += map(_key, a.finish())
    excess = max(excess, len(a.flows) - a.live)
    return a, events, excess


@pytest.fixture(scope="module")
def packets(tmp_path_factory: pytest.TempPathFactory) -> list[RawPacket]:
    return _capture(tmp_path_factory.mktemp("rows") / "many.pcap")


def test_bounded_rows_give_the_same_events_and_summary(packets: list[RawPacket]):
    full, full_events, _ = _live_run(packets, None)
    kept, kept_events, excess = _live_run(packets, BOUND)
    assert len(full.flows) == N_CONVERSATIONS
    # Every row kept beyond the open conversations' is a finished one, and at most BOUND of them.
    assert excess <= BOUND
    assert len(kept.flows) == BOUND and kept.live == 0
    # Frames and findings are those of the run that keeps every row, in the same order.
    assert kept_events == full_events
    assert sum(k[0] == "frame" for k in full_events) > N_CONVERSATIONS
    totals = full.findings_per_severity()
    assert totals["warning"] and totals["note"]  # BAD lines (in frames) and undecoded conversations
    assert {k[1] for k in full_events if k[0] == "finding"} == {"engine.undecoded"}
    assert full.frames_per_protocol().keys() == {"toy"}
    # The summary's totals are exact though most rows are gone.
    stats = CaptureStats(received=len(packets), dropped=0)
    assert (summary_lines(kept, "test", stats, 1.0, None, 0) == summary_lines(full, "test", stats, 1.0, None, 0))
    assert kept.conversations == full.conversations == N_CONVERSATIONS
    assert kept.frames_per_protocol() == full.frames_per_protocol()
    assert kept.findings_per_severity() == full.findings_per_severity()
    # The kept rows are the latest finished ones, equal to the full run's; dropped ids give None.
    kept_ids = [f.id for f in kept.flows]
    assert kept_ids == sorted(kept_ids)
    assert [f.to_plain() for f in kept.flows] == [full.flow(i).to_plain() for i in kept_ids]  # type: ignore[union-attr]
    assert kept.flow(1) is None and full.flow(1) is not None
    assert kept.flow(N_CONVERSATIONS + 1) is None


def test_open_rows_are_never_dropped_and_ids_are_not_reused(packets: list[RawPacket]):
    a = Analyzer({"toy": ToyDissector()}, idle_timeout=None, max_finished_rows=0)
    for _ in a.feed(packets):
        pass
    # Without idle expiry the conversations left open (one in five) are all still open: every row
    # kept is theirs, and each one's conversation can still be looked up.
    assert a.live == N_CONVERSATIONS // 5
    assert len(a.flows) == a.live
    assert all(a.flow(f.id) is f and f.id % 5 == 0 for f in a.flows)  # kind 4: ids 5, 10, ...
    assert a.conversations == N_CONVERSATIONS
    # A new conversation after all the dropped rows gets the next id, not a freed one.
    extra = TcpConversation(("10.200.0.1", 40000), ("192.168.0.1", 7777), ts=2_000.0)
    extra.handshake()
    extra.send("c2s", b"HELLO\n")
    frames = [ev for ev in a.feed(_packets_of(extra, len(packets))) if isinstance(ev, Frame)]
    assert [ev.flow for ev in frames] == [N_CONVERSATIONS + 1]
    list(a.finish())
    assert a.flows == [] and a.conversations == N_CONVERSATIONS + 1


def test_a_checkpoint_of_a_bounded_analyzer_restores(packets: list[RawPacket]):
    cut = len(packets) // 2
    straight = Analyzer({"toy": ToyDissector()}, idle_timeout=IDLE, max_finished_rows=BOUND)
    want = [_key(ev) for ev in straight.run(packets)]
    first = Analyzer({"toy": ToyDissector()}, idle_timeout=IDLE, max_finished_rows=BOUND)
    got = [_key(ev) for ev in first.run(packets[:cut], final=False)]
    second = Analyzer({"toy": ToyDissector()}, idle_timeout=IDLE, max_finished_rows=BOUND)
    second.restore(first.checkpoint())
    got += [_key(ev) for ev in second.run(packets[cut:])]
    assert got == want
    assert [f.to_plain() for f in second.flows] == [f.to_plain() for f in straight.flows]
    assert second.findings_per_severity() == straight.findings_per_severity()
    assert second.frames_per_protocol() == straight.frames_per_protocol()


def test_limit_needs_a_fresh_analyzer(packets: list[RawPacket]):
    a = Analyzer({"toy": ToyDissector()})
    list(a.feed(packets[:10]))
    with pytest.raises(ValueError):
        a.limit_finished_rows(10)
    with pytest.raises(ValueError):
        Analyzer({"toy": ToyDissector()}, max_finished_rows=-1)


def _packets_of(conv: TcpConversation, after: int) -> list[RawPacket]:
    from analyzer.pcapwrite import ip_packet

    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    out = []
    for n, s in enumerate(conv.segments, after + 1):
        data = eth + ip_packet(s)
        out.append(RawPacket(n, s.ts, 1, data, len(data)))
    return out

