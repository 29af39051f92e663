"""``inspect --jobs N`` (issue 15): conversations decoded by N worker processes, the output byte for
byte that of one process, in every format.

The capture here interleaves real recordings of all four protocols, several copies of each under
other addresses, so that many conversations run at once: heartbeats and unanswered requests that
fire on other conversations' packets, truncated packets (the capture's own findings), idle expiry,
and requests linked to their responses across other conversations' frames."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analyzer import capture_sample, job_count, jobs
from analyzer.api import Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.job_count import auto_jobs, jobs_for
from analyzer.packets import LinkDecoder, flow_key, reverse_key
from analyzer.pcapwrite import CaptureWriter, Segment, TcpConversation, ip_packet, write_capture

ROOT = Path(__file__).parent.parent
RECORDINGS = ["captures/amqp091/pika_heartbeat.pcap", "captures/amqp091/pika_channel_error.pcap",
              "captures/rabbitmq_stream/rstream_publish_confirm_snaplen96.pcap",
              "captures/rabbitmq_stream/rstream_errors.pcap", "captures/iggy/apache_iggy_0.9.0.pcap",
              "captures/iggy/iggy_py_0.4.0.pcap", "captures/amqp_fast/amqp_fast_session.pcap"]
COPIES = 3
ETH = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"


def interleave(path: Path) -> Path:
    """Every recording COPIES times, each copy under addresses of its own, merged by time into one
    capture: the first two copies at the same instants (their deadlines fall together), the
    third a few milliseconds later and cut at 60 % of its packets (open at the end of the
    capture, requests unanswered)."""
    packets: list[tuple[float, bytes, int]] = []
    for j, rec in enumerate(RECORDINGS):
        raw = list(read_packets(str(ROOT / rec)))
        t0 = raw[0].ts
        for i in range(COPIES):
            addresses: dict[str, str] = {}
            dec = LinkDecoder()
            for pkt in raw if i < 2 else raw[:len(raw) * 6 // 10]:
                seg = dec.decode(pkt)
                if seg is None:
                    continue
                src = addresses.setdefault(seg.src, f"10.{j}.{i}.{len(addresses) + 1}")
                dst = addresses.setdefault(seg.dst, f"10.{j}.{i}.{len(addresses) + 1}")
                ts = 1_000.0 + (pkt.ts - t0) + (i // 2) * 0.003 + j * 0.001
                cut = pkt.orig_len - len(pkt.data)  # bytes the snap length cut off: cut here as well
                frame = ETH + ip_packet(Segment(ts, (src, seg.sport), (dst, seg.dport), seg.seq, seg.ack, seg.flags,
                                                seg.payload + bytes(cut)))
                packets.append((ts, frame[:len(frame) - cut], len(frame)))
    packets.sort(key=lambda p: p[0])
    with open(path, "wb") as f:
        w = CaptureWriter(f)
        for ts, frame, orig in packets:
            w.write_raw(ts, frame, orig)
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return interleave(tmp_path_factory.mktemp("jobs") / "interleaved.pcap")


def inspect(*args: str) -> tuple[int, bytes, bytes]:
    proc = subprocess.run([sys.executable, "-m", "analyzer", "inspect", *args], cwd=ROOT, capture_output=True,
                          env={**os.environ, "STREAMPROTO_NO_PROGRESS": "1", "NO_COLOR": "1"}, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def _event(ev: Frame | Finding) -> tuple[Any, ...]:
    if isinstance(ev, Frame):
        return ("frame", ev.flow, ev.packets, ev.ts, ev.direction, ev.offset, ev.size, ev.protocol, ev.dialect,
                ev.info, tuple((f.id, f.frame, f.message) for f in ev.findings))
    return ("finding", ev.id, ev.flow, ev.frame, ev.severity, ev.message)


def test_the_capture_is_a_crowd(capture: Path) -> None:
    a = Analyzer()
    frames = sum(isinstance(ev, Frame) for ev in a.run_files([str(capture)]))
    assert a.conversations >= COPIES * len(RECORDINGS) and frames > 500
    assert a.truncated_packets > 0 and {f.protocol for f in a.flows} >= {"amqp091", "rabbitmq_stream", "iggy",
                                                                         "amqp_fast"}


def _key(c: Any) -> bytes:
    """The 4-tuple a placement names a conversation by (a TcpConversation's or a FlowInfo's)."""
    key = flow_key(c.client, c.server)
    return min(key, reverse_key(key))


@pytest.mark.parametrize("shards", [2, 3, 5])
@pytest.mark.parametrize("idle", [None, 0.05])
@pytest.mark.parametrize("placing", [False, True])
def test_shards_merged_by_order_key_are_one_analyzer(capture: Path, shards: int, idle: float | None,
                                                     placing: bool) -> None:
    """The mechanism under --jobs, in one process: each shard's events in increasing keys, and the
    shards' events merged by key are one analyzer's, every row and total included. The idle
    timeout of 50 ms expires conversations between packets (wake-ups firing on other shards'
    packets). ``placing``: some of the conversations placed beforehand by their 4-tuple (as
    --jobs places the ones its samples see), each on another shard than its turn would give."""
    kw: dict[str, Any] = {} if idle is None else {"idle_timeout": idle}
    one = Analyzer(**kw)
    reference = [_event(ev) for ev in one.run_files([str(capture)])]
    placed: dict[bytes, int] = {}
    if placing:
        rng = random.Random(shards)
        for f in one.flows:
            if rng.random() < 0.4:
                other = rng.randrange(shards - 1)  # any shard but the one its turn gives
                placed[_key(f)] = other + (other >= f.id % shards)
    merged: list[tuple[tuple, tuple]] = []
    states = []
    for k in range(shards):
        a = Analyzer(**kw)
        a.set_shard(k, shards, placed)
        keyed = []
        for n, ev in enumerate(a.run_files([str(capture)])):
            keyed.append(((*a.order_key(ev), n), _event(ev)))
        assert [key for key, _ in keyed] == sorted(key for key, _ in keyed)
        assert keyed, f"shard {k} decoded nothing"
        merged += keyed
        states.append(a.shard_state())
        # Each shard decoded the conversations placed on it, and the others' in turn.
        own = {f.id for f in one.flows if placed.get(_key(f), f.id % shards) == k}
        assert {row[0] for row in states[-1]["rows"]} == own
        assert {ev[1] for _, ev in keyed if ev[0] == "frame"} <= own
    assert [ev for _, ev in sorted(merged, key=lambda x: x[0])] == reference
    adopted = Analyzer()
    adopted.adopt_shards(states)
    assert [f.to_plain() for f in adopted.flows] == [f.to_plain() for f in one.flows]
    assert adopted.findings_per_severity() == one.findings_per_severity()
    assert (adopted.packets, adopted.conversations) == (one.packets, one.conversations)


@pytest.mark.parametrize("fmt", ["summary", "jsonl", "json", "tree"])
def test_jobs_write_what_one_process_writes(capture: Path, fmt: str) -> None:
    one = inspect(str(capture), "-T", fmt, "--jobs", "1")
    assert one[0] == 0 and one[1].count(b"\n") > 500
    for n in (2, 3):
        assert inspect(str(capture), "-T", fmt, "--jobs", str(n)) == one, f"--jobs {n}"


@pytest.mark.parametrize("args", [
    ["--only-findings", "-T", "jsonl"],
    ["-Y", "amqp091 or iggy.ping", "-T", "summary"],
    ["--flow", "3", "--flow", "7", "-T", "json"],
    ["--protocol", "rabbitmq_stream", "-T", "tree", "-x"],
    ["--idle-timeout", "0.05", "-T", "summary"],
    ["-q"],
])
def test_jobs_with_the_display_options(capture: Path, args: list[str]) -> None:
    one = inspect(str(capture), *args, "--jobs", "1")
    assert one[0] == 0
    assert inspect(str(capture), *args, "--jobs", "2") == one


def test_jobs_over_several_files_as_one_capture() -> None:
    files = [str(ROOT / r) for r in RECORDINGS[:4]]
    one = inspect(*files, "-T", "jsonl", "--jobs", "1")
    assert one[0] == 0 and one[1]
    assert inspect(*files, "-T", "jsonl", "--jobs", "2") == one


def test_a_reading_error_is_the_same_one_line(tmp_path: Path, capture: Path) -> None:
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(capture.read_bytes()[:-7])  # the last packet's record is cut short
    one = inspect(str(cut), "-T", "summary", "--jobs", "1")
    assert one[0] == 2 and one[2].count(b"\n") == 1
    assert inspect(str(cut), "-T", "summary", "--jobs", "2") == one


def test_jobs_must_be_positive(capture: Path) -> None:
    rc, _, err = inspect(str(capture), "--jobs", "0")
    assert rc == 2 and b"--jobs must be 1 or more" in err


def test_default_jobs_are_the_cores_for_a_big_capture_of_several_conversations(
        tmp_path: Path, capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cores = os.cpu_count() or 1
    assert auto_jobs([str(capture)]).jobs == 1  # 4 MB at least: below, one process
    monkeypatch.setattr(job_count, "AUTO_MIN_BYTES", 1000)
    assert auto_jobs([str(capture)]).jobs == cores
    # One conversation: the other workers would only skip its packets.
    assert auto_jobs([str(ROOT / "captures/amqp091/pika_large.pcap")]).jobs == 1
    # Two conversations, one of them carrying nearly every packet: one process as well.
    busy, idle = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 5672)), TcpConversation(("10.0.0.3", 40001),
                                                                                               ("10.0.0.2", 5672))
    for c, n in ((busy, 400), (idle, 20)):
        c.handshake()
        for _ in range(n):
            c.send("c2s", b"x" * 100)
    write_capture(str(tmp_path / "dominant.pcap"), [busy, idle])
    assert auto_jobs([str(tmp_path / "dominant.pcap")]).jobs == 1
    # Three conversations on two cores: the busiest one gets a worker of its own, the other two
    # share the other (the shape of bench's amqp091_routed_mixed, which dealt out in turn, id % 2,
    # gave the busiest one and the third to one worker, over 80 % of the work, and ran slower
    # with two processes than with one). Two processes unless the busiest one alone is more than
    # DOMINANT of the work.
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for (first, second, third), want in (((300, 60, 60), 2), ((300, 150, 10), 2), ((400, 60, 60), 1)):
        convs = [TcpConversation((f"10.0.1.{i}", 40000 + i), ("10.0.0.2", 5672)) for i in range(3)]
        for c, n in zip(convs, (first, second, third), strict=True):
            c.handshake()
            for _ in range(n):
                c.send("c2s", b"x" * 100)
        write_capture(str(tmp_path / "three.pcap"), convs)
        plan = auto_jobs([str(tmp_path / "three.pcap")])
        assert plan.jobs == want, (first, second, third)
        if want == 2:
            assert plan.placed == {_key(convs[0]): 0, _key(convs[1]): 1, _key(convs[2]): 1}
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(bytes(5000))
    assert auto_jobs([str(junk)]).jobs == 1  # not a capture: one process reports it
    assert auto_jobs([str(tmp_path / "missing.pcap")]).jobs == 1


def test_jobs_n_is_an_upper_bound(tmp_path: Path, capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--jobs N takes N processes when the conversations spread over them and one when they do
    not (one conversation's capture, the shape of bench's iggy_send_poll, where --jobs 2 took 1.53 s
    against 1.23 s), whatever the capture's size; several files are looked at in capture order."""
    assert jobs_for([str(capture)], 2).jobs == 2 and jobs_for([str(capture)], 3).jobs == 3
    assert jobs_for([str(capture)], 1).jobs == 1
    one_conversation = str(ROOT / "captures/amqp091/pika_large.pcap")
    assert jobs_for([one_conversation], 2).jobs == 1
    monkeypatch.setattr(job_count, "AUTO_MIN_BYTES", 0)
    assert jobs_for([one_conversation], None).jobs == 1
    assert jobs_for([str(capture)], None).jobs == (os.cpu_count() or 1)
    # Two files of one conversation each, the later one given first: together they spread.
    for i in range(2):
        c = TcpConversation((f"10.0.2.{i}", 40000 + i), ("10.0.0.2", 5672), ts=1_000.0 + 100 * i)
        c.handshake()
        for _ in range(50):
            c.send("c2s", b"x" * 100)
        write_capture(str(tmp_path / f"{i}.pcap"), [c])
    assert jobs_for([str(tmp_path / "1.pcap")], 2).jobs == 1
    assert jobs_for([str(tmp_path / "1.pcap"), str(tmp_path / "0.pcap")], 2).jobs == 2
    # Conversations one after another (the shape of bench's amqp091_confirms): the work is told
    # from samples across the file, not its start (PEEK packets, all of the first conversation's).
    convs = []
    for i in range(2):
        c = TcpConversation((f"10.0.3.{i}", 40000 + i), ("10.0.0.2", 5672), ts=1_000.0 + 100 * i)
        c.handshake()
        c.send("c2s", bytes(1448 * 1300))
        convs.append(c)
    write_capture(str(tmp_path / "after.pcap"), convs)
    monkeypatch.setattr(job_count, "PEEK", 1000)
    assert sum(1 for _ in read_packets(str(tmp_path / "after.pcap"))) > 2 * job_count.PEEK
    assert jobs_for([str(tmp_path / "after.pcap")], 2).jobs == 2
    # Bytes, not packets: a conversation of few large packets beside one of many small ones
    # (bench's amqp091_ack_multiple: 99 % of the packets, 61 % of the bytes).
    small, large = (TcpConversation((f"10.0.4.{i}", 40000 + i), ("10.0.0.2", 5672)) for i in range(2))
    for c in (small, large):
        c.handshake()
    for _ in range(300):
        small.send("c2s", b"a" * 40)
        small.send("s2c", b"b" * 40)
    large.send("s2c", bytes(1448 * 40))  # 40 packets against 600
    write_capture(str(tmp_path / "sizes.pcap"), [small, large])
    assert jobs_for([str(tmp_path / "sizes.pcap")], 2).jobs == 2
    # Sampled across a larger file, each block stands for its share of the file: a conversation
    # of a few large packets after one of many small ones (the shape of ack_multiple, whose
    # consumer comes last) gets its share of the file, not one whole large packet per block.
    small, large = (TcpConversation((f"10.0.5.{i}", 40000 + i), ("10.0.0.2", 5672), ts=1_000.0 + 100 * i)
                    for i in range(2))
    for c in (small, large):
        c.handshake()
    for _ in range(6000):
        small.send("c2s", b"a" * 100)
    large.send("s2c", bytes(60_000 * 10), mss=60_000)
    write_capture(str(tmp_path / "last.pcap"), [small, large])
    assert os.path.getsize(tmp_path / "last.pcap") > 2 * capture_sample.WINDOWS * capture_sample.SPAN
    assert jobs_for([str(tmp_path / "last.pcap")], 2).jobs == 2
    assert jobs_for([str(tmp_path / "missing.pcap")], 2).jobs == 1


def test_placed_conversations_are_forgotten_with_their_rows(tmp_path: Path) -> None:
    """With a bound on finished rows (live capture), what a shard remembers of conversations placed
    off their turn goes with their rows: memory stays flat however many there are."""
    convs = []
    for i in range(40):  # one 4-tuple used again and again, placed on the shard its ids do not give
        c = TcpConversation(("10.0.7.1", 40000), ("10.0.0.2", 5672), ts=1_000.0 + i, isn_client=1000 + 10_000 * i)
        c.handshake()
        c.send("c2s", b"AMQP\x00\x00\x09\x01")
        c.close()
        convs.append(c)
    write_capture(str(tmp_path / "reused.pcap"), convs)
    a = Analyzer(max_finished_rows=3)
    a.set_shard(0, 2, {_key(convs[0]): 1})
    list(a.run_files([str(tmp_path / "reused.pcap")]))
    assert a.conversations == 40
    assert len(a._owner) <= 3
    assert not any(a.owns(f.id) for f in a.flows)  # every one of them placed on the other shard


def test_a_placement_outside_the_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        Analyzer().set_shard(0, 2, {bytes(12): 2})


def test_busy_conversations_get_workers_of_their_own(tmp_path: Path) -> None:
    """Two busy conversations whose numbers would deal them to one worker (2 and 4 of four: the
    shape of bench's rabbitmq_stream_subbatch, a publisher and a consumer each opened after a
    short locator connection) go to two workers; the small ones fill up after them."""
    convs = [TcpConversation((f"10.0.6.{i}", 40000 + i), ("10.0.0.2", 5552), ts=1_000.0 + i) for i in range(4)]
    for c, n in zip(convs, (3, 200, 3, 180), strict=True):
        c.handshake()
        for _ in range(n):
            c.send("c2s", b"x" * 100)
    write_capture(str(tmp_path / "stream.pcap"), convs)
    plan = jobs_for([str(tmp_path / "stream.pcap")], 2)
    assert plan.jobs == 2
    assert plan.placed[_key(convs[1])] != plan.placed[_key(convs[3])]
    # The small ones join the less busy of the two.
    assert plan.placed[_key(convs[0])] == plan.placed[_key(convs[2])] == plan.placed[_key(convs[3])]
    # Three workers: each busy one alone, the small ones together on the third.
    placed = job_count.placement([str(tmp_path / "stream.pcap")], 3)
    assert placed is not None
    assert len({placed[_key(convs[1])], placed[_key(convs[3])], placed[_key(convs[0])]}) == 3
    assert placed[_key(convs[0])] == placed[_key(convs[2])]


def test_jobs_2_on_one_conversation_runs_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from analyzer import cli

    started: list[int] = []
    monkeypatch.setattr(jobs, "run", lambda n, *args, **kw: started.append(n))
    one_conversation = str(ROOT / "captures/amqp091/pika_large.pcap")
    result = CliRunner().invoke(cli.app, ["inspect", one_conversation, "-T", "summary", "--jobs", "2"])
    assert result.exit_code == 0 and result.stdout.count("\n") > 10
    assert started == []


def test_the_progress_line_follows_the_workers(capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a file, stderr a terminal: the progress line is there with --jobs too, and says
    where the workers are (the slowest one's packets and conversations)."""
    from typer.testing import CliRunner

    from analyzer import cli

    monkeypatch.delenv("STREAMPROTO_NO_PROGRESS", raising=False)
    monkeypatch.setattr(cli, "_isatty", lambda stream: stream is sys.stderr)
    calls: list[tuple[int, int]] = []
    made = cli.progress_line

    def spy(paths: list[str], counts: Any) -> Any:
        def counted() -> tuple[int, int]:
            calls.append(counts())
            return calls[-1]
        return made(paths, counted)

    monkeypatch.setattr(cli, "progress_line", spy)
    result = CliRunner().invoke(cli.app, ["inspect", str(capture), "-T", "jsonl", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "packets" in result.stderr and "conversations" in result.stderr
    total = sum(1 for _ in read_packets(str(capture)))
    assert calls and all(0 <= p <= total for p, _ in calls)
