"""`streamproto pipeline`, local engine: the tables hold what `inspect` decodes, frame for frame and
finding for finding, also when the captures are one host's rotated files (conversations and frames
cut at file boundaries); unreadable files are recorded and the job goes on."""

from __future__ import annotations

import collections
import glob
import json
import os
import random
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from analyzer.api import Finding, Frame
from analyzer.capture import RawPacket, read_packets
from analyzer.cli import app
from analyzer.engine import Analyzer
from analyzer.pcapwrite import write_packets
from analyzer.pipeline import Settings
from analyzer.pipeline import run as pipeline_run
from analyzer.pipeline.inputs import chains, expand
from analyzer.pipeline.schema import Flattener, frames_schema
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
CAPTURE_DIRS = sorted(str(p) for p in (ROOT / "captures").iterdir() if p.is_dir())
LINKS = {1: "ethernet", 113: "sll", 276: "sll2", 0: "null", 101: "raw"}
runner = CliRunner()


# ---------------------------------------------------------------- reading back
def rows(out: str, table: str) -> list[dict[str, Any]]:
    """Every row of a table, with its partition values as columns."""
    result = []
    for path in sorted(glob.glob(os.path.join(out, table, "**", "*.parquet"), recursive=True)):
        parts = dict(p.split("=", 1) for p in Path(path).relative_to(Path(out) / table).parts[:-1])
        for r in pq.read_table(path).to_pylist():
            result.append({**r, **parts})
    return result


def frame_key(capture: str, first: int, last: int, ts: float, cid: str | None, src: str, dst: str, direction: str,
              protocol: str, command: str, code: int | None, size: int, info: str, findings: list[str]) -> tuple:
    return (capture, first, last, ts, cid, src, dst, direction, protocol, command, code, size, info, tuple(findings))


def table_frames(out: str) -> collections.Counter:
    return collections.Counter(
        frame_key(r["capture"], r["packet_first"], r["packet_last"], r["ts"], r["community_id"], r["src"], r["dst"],
                  r["direction"], r["protocol"], r["command"], r["code"], r["size"], r["info"], r["finding_ids"])
        for r in rows(out, "frames"))


def table_findings(out: str) -> collections.Counter:
    return collections.Counter((r["capture"], r["packet"], r["ts"], r["rule_id"], r["severity"], r["message"],
                                r["fingerprint"], r["community_id"]) for r in rows(out, "findings"))


def inspect_chains(inputs: list[str], idle_timeout: float = 300.0) -> tuple[collections.Counter, collections.Counter, collections.Counter,
                                                list[tuple[str, Frame]]]:
    """What `streamproto inspect` decodes, each directory's files read as one capture."""
    files, _ = expand(inputs)
    frames: collections.Counter = collections.Counter()
    findings: collections.Counter = collections.Counter()
    convs: collections.Counter = collections.Counter()
    every: list[tuple[str, Frame]] = []

    def add_finding(f: Finding, default: str, ts: float) -> None:
        findings[(f.file or default, f.frame, ts, f.id, str(f.severity), f.message, f.fingerprint,
                  f.community_id)] += 1

    for chain in chains(files):
        an = Analyzer(idle_timeout=idle_timeout)
        for ev in an.run_files(list(chain.files)):
            if isinstance(ev, Frame):
                every.append((ev.file or chain.files[0], ev))
                frames[frame_key(ev.file or chain.files[0], *ev.packets, ev.ts, ev.community_id, ev.src, ev.dst,
                                 str(ev.direction), ev.protocol, ev.command, ev.code, ev.size, ev.info,
                                 [f.id for f in ev.findings])] += 1
                for f in ev.findings:
                    add_finding(f, chain.files[0], ev.ts)
            else:  # reported when capture time reached an.last_ts (the packet just read)
                add_finding(ev, chain.files[0], an.last_ts)
        for f in an.flows:
            convs[(f.community_id, f.first_ts, f.last_ts, f.packets, f.frames, f.bytes_c2s, f.bytes_s2c, f.errors,
                   f.warnings, f.notes, f.protocol or "none", f.complete)] += 1
    return frames, findings, convs, every


def table_conversations(out: str) -> collections.Counter:
    return collections.Counter(
        (r["community_id"], r["first_ts"], r["last_ts"], r["packets"], r["frames"], r["bytes_c2s"], r["bytes_s2c"],
         r["errors"], r["warnings"], r["notes"], r["protocol"], r["complete"]) for r in rows(out, "conversations"))


def split(capture: str, cuts: list[int], directory: Path) -> list[str]:
    packets: list[RawPacket] = list(read_packets(capture))
    directory.mkdir(parents=True)
    bounds = [0, *cuts, len(packets)]
    paths = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        path = directory / f"rot.pcap{i}" if i else directory / "rot.pcap"  # as tcpdump -C names them
        write_packets(str(path), packets[a:b], LINKS[packets[0].linktype])
        paths.append(str(path))
    return paths


def norm(value: Any) -> str:
    """A value as text, instants by their time (pyarrow gives them back with another tzinfo class)."""
    if isinstance(value, list):
        return "[" + ", ".join(norm(v) for v in value) + "]"
    if isinstance(value, datetime):
        return f"instant {value.timestamp()!r}"
    return repr(value)


# ---------------------------------------------------------------------- tests
def test_frames_schema_comes_from_the_field_catalogue() -> None:
    known = load_dissectors()
    amqp = frames_schema(known["amqp091"])
    assert amqp.field("amqp091.basic.publish.routing_key").type == pa.string()
    assert amqp.field("amqp091.connection.tune.frame_max").type == pa.int64()  # uint32
    assert amqp.field("amqp091.connection.tune.channel_max").type == pa.int32()  # uint16
    assert amqp.field("amqp091.content_body.message.body_size").type == pa.decimal128(20, 0)  # uint64
    stream = frames_schema(known["rabbitmq_stream"])
    assert stream.field("rabbitmq_stream.publish.messages.publishing_id").type == pa.list_(pa.decimal128(20, 0))
    assert stream.field("rabbitmq_stream.response_time").type == pa.float64()
    for d in known.values():
        names = set(frames_schema(d).names)
        leaves = {f.name for f in d.fields() if f.type not in ("struct", "none")}
        assert leaves <= names, sorted(leaves - names)[:5]
        assert {"capture", "packet_first", "packet_last", "ts", "community_id", "command", "latency",
                "date"} <= names


def test_tables_hold_what_inspect_decodes(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    outcome = pipeline_run(CAPTURE_DIRS, out, Settings(), jobs=2)
    assert not outcome.failed and outcome.files >= 20
    frames, findings, convs, every = inspect_chains(CAPTURE_DIRS)
    assert sum(frames.values()) > 1000
    assert table_frames(out) == frames
    assert table_findings(out) == findings
    assert table_conversations(out) == convs
    # Every field of every frame is in its catalogue column, typed; what the catalogue does not
    # name (or names with a type its value does not fit) is kept in extra_fields, never dropped.
    flatteners = {name: Flattener(d) for name, d in load_dissectors().items()}
    expected: collections.defaultdict = collections.defaultdict(list)
    for capture, ev in every:
        fields, extra = flatteners[ev.protocol].flatten(ev.command, ev.fields)
        key = (capture, *ev.packets, ev.ts, str(ev.direction), ev.command, ev.info)
        expected[key].append((sorted((k, norm(v)) for k, v in fields.items() if v is not None),
                              json.loads(json.dumps(extra, default=str)) if extra else None))
    got: collections.defaultdict = collections.defaultdict(list)
    typed = 0
    for r in rows(out, "frames"):
        key = (r["capture"], r["packet_first"], r["packet_last"], r["ts"], r["direction"], r["command"], r["info"])
        columns = sorted((k, norm(v)) for k, v in r.items() if k.startswith(r["protocol"] + ".") and v is not None)
        got[key].append((columns, json.loads(r["extra_fields"]) if r["extra_fields"] else None))
        typed += bool(columns)
    assert {k: sorted(v, key=repr) for k, v in got.items()} == {k: sorted(v, key=repr) for k, v in expected.items()}
    assert typed > 1000
    # The partitions: protocol and the UTC date of the frame.
    assert {r["protocol"] for r in rows(out, "frames")} >= {"amqp091", "rabbitmq_stream"}
    assert all(len(r["date"]) == 10 for r in rows(out, "frames"))


def test_one_conversation_over_three_rotated_files(tmp_path: Path) -> None:
    """pika_large is one AMQP connection; its frame in packets 43-44 is cut between two files."""
    capture = str(ROOT / "captures" / "amqp091" / "pika_large.pcap")
    paths = split(capture, [30, 43], tmp_path / "host1")
    out = str(tmp_path / "out")
    pipeline_run([str(tmp_path / "host1")], out, Settings(), jobs=2)
    frames, findings, convs, _ = inspect_chains([str(tmp_path / "host1")])
    got = table_frames(out)
    assert got == frames and sum(got.values()) == 91
    assert table_findings(out) == findings
    conversations = rows(out, "conversations")
    assert len(conversations) == 1
    assert conversations[0]["files"] == paths and conversations[0]["packets"] == 62
    # The frame split across the boundary: first packet 13 of the second file, last packet 1 of the third.
    (split_frame,) = [r for r in rows(out, "frames") if r["packet_first"] == 13 and r["packet_last"] == 1]
    assert split_frame["capture"] == paths[2] and split_frame["command"] == "ContentBody"
    assert {r["conversation_id"] for r in rows(out, "frames")} == {conversations[0]["conversation_id"]}


@pytest.mark.parametrize(("parts", "idle_timeout"), [(3, 300.0), (10, 300.0), (10, 0.02)])
def test_every_capture_cut_into_rotated_files_gives_the_whole_capture(tmp_path: Path, parts: int,
                                                                      idle_timeout: float) -> None:
    """With a short --idle-timeout conversations expire at times only other conversations' packets
    (often in later files) mark: the replay must wake them at the very same packets."""
    hosts = tmp_path / "hosts"
    for capture in sorted(glob.glob(str(ROOT / "captures" / "*" / "*.pcap*"))):
        n = sum(1 for _ in read_packets(capture))
        rng = random.Random(f"{os.path.basename(capture)}/{parts}")
        split(capture, sorted(rng.sample(range(1, n), min(parts - 1, n - 1))),
              hosts / os.path.basename(capture).replace(".", "_"))
    out = str(tmp_path / "out")
    pipeline_run([str(hosts)], out, Settings(idle_timeout=idle_timeout), jobs=2)
    frames, findings, convs, _ = inspect_chains([str(hosts)], idle_timeout)
    assert table_frames(out) == frames
    assert table_findings(out) == findings
    assert table_conversations(out) == convs
    # Conversations really were cut: many span several files.
    assert sum(len(r["files"]) > 1 for r in rows(out, "conversations")) >= 20


def test_unreadable_files_are_recorded_and_the_job_goes_on(tmp_path: Path) -> None:
    good = tmp_path / "in" / "a"
    good.mkdir(parents=True)
    src = ROOT / "captures" / "rabbitmq_stream" / "rstream_consume.pcap"
    (good / "ok.pcap").write_bytes(src.read_bytes())
    data = src.read_bytes()
    (good / "cut.pcap").write_bytes(data[:len(data) * 2 // 3])  # truncated in the middle of a packet
    bad = tmp_path / "in" / "b"
    bad.mkdir()
    (bad / "notes.pcap").write_text("not a capture\n")
    out = str(tmp_path / "out")
    result = runner.invoke(app, ["pipeline", str(tmp_path / "in"), "--out", out, "--jobs", "2"])
    assert result.exit_code == 1, result.output
    assert "notes.pcap" in result.output and "cut.pcap" in result.output
    files = {os.path.basename(r["capture"]): r for r in rows(out, "files")}
    assert files["ok.pcap"]["status"] == "ok" and files["ok.pcap"]["error"] is None
    assert files["notes.pcap"]["status"] == "error" and "notes.pcap" in files["notes.pcap"]["error"]
    assert files["cut.pcap"]["status"] == "error" and files["cut.pcap"]["packets"] > 0
    # What was readable of the cut file is kept.
    assert any(r["capture"].endswith("cut.pcap") for r in rows(out, "frames"))
    assert files["ok.pcap"]["packets"] == 134


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pipeline", str(tmp_path / "nothing*"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == "streamproto: no capture files found"
    result = runner.invoke(app, ["pipeline", CAPTURE_DIRS[0], "--out", str(tmp_path / "o"), "--jobs", "0"])
    assert result.exit_code == 2 and result.output.strip() == "streamproto: --jobs must be at least 1, not 0"


def test_a_conversation_expires_at_another_conversations_packet_in_a_later_file(tmp_path: Path) -> None:
    """Conversation A asks and goes quiet in the first file; B's packets in the second file are the
    capture time at which A expires (idle timeout 1 s) and its unanswered request is reported."""
    from analyzer.pcapwrite import TcpConversation, write_capture
    from dissectors.rabbitmq_stream.encode import request

    t0 = 1_700_000_000.0
    a = TcpConversation(("10.0.0.1", 40000), ("10.0.0.9", 5552), ts=t0, step=0.01)
    a.handshake()
    a.send("c2s", request("Create", correlation_id=5, stream="s", arguments={}), ack=True)
    b = TcpConversation(("10.0.0.2", 40001), ("10.0.0.9", 5552), ts=t0 + 0.05, step=0.01)
    b.handshake()
    for i in range(12):  # a heartbeat every 0.3 s until t0 + 3.6
        b.ts = t0 + 0.3 * (i + 1)
        b.send("c2s", request("Heartbeat"), ack=True)
    host = tmp_path / "host"
    whole = tmp_path / "whole.pcap"
    write_capture(str(whole), [a, b])
    packets = list(read_packets(str(whole)))
    cut1 = next(i for i, p in enumerate(packets) if p.ts > t0 + 0.7)
    cut2 = next(i for i, p in enumerate(packets) if p.ts > t0 + 2.0)
    split(str(whole), [cut1, cut2], host)
    out = str(tmp_path / "out")
    pipeline_run([str(host)], out, Settings(idle_timeout=1.0), jobs=1)
    frames, findings, convs, _ = inspect_chains([str(host)], 1.0)
    assert table_frames(out) == frames
    assert table_findings(out) == findings
    assert table_conversations(out) == convs
    (unanswered,) = [r for r in rows(out, "findings") if r["rule_id"].endswith("unanswered")]
    # Reported at B's first packet past A's last one + 1 s: in the second file, not at the end.
    assert unanswered["ts"] == min(p.ts for p in packets if p.ts >= t0 + 0.04 + 1.0)
    assert unanswered["ts"] < t0 + 2.0


def test_inputs_named_by_uri_are_listed_and_copied_through_pyarrow_filesystems(tmp_path: Path) -> None:
    """hdfs:// and s3a:// go through pyarrow's filesystems (the Spark engine on a cluster); file://
    takes the same path here: a directory, a glob, names kept as given, equal to the plain paths."""
    paths = split(str(ROOT / "captures" / "amqp091" / "pika_large.pcap"), [30, 43], tmp_path / "host1")
    (tmp_path / "host1" / "notes.pcap").write_text("not a capture\n")
    plain, by_uri, by_glob = (str(tmp_path / n) for n in ("plain", "uri", "glob"))
    pipeline_run([str(tmp_path / "host1")], plain, Settings(), jobs=2)
    outcome = pipeline_run([f"file://{tmp_path}/host1"], by_uri, Settings(), jobs=2)
    assert outcome.files == 4 and [os.path.basename(p) for p, _ in outcome.failed] == ["notes.pcap"]
    assert outcome.failed[0][1].startswith(f"file://{tmp_path}/host1/notes.pcap")  # the name as given
    expected = collections.Counter({(f"file://{k[0]}", *k[1:]): v for k, v in table_frames(plain).items()})
    assert table_frames(by_uri) == expected and sum(expected.values()) == 91
    (conv,) = rows(by_uri, "conversations")
    assert conv["files"] == [f"file://{p}" for p in paths]
    pipeline_run([f"file://{tmp_path}/host*/rot.pcap[12]"], by_glob, Settings(), jobs=2)
    assert {r["capture"] for r in rows(by_glob, "files")} == {f"file://{p}" for p in paths[1:]}
