"""inspect --only-findings lets the analyzer keep back the frames it cannot show
(Analyzer.findings_only): the output must be exactly the full output's frames with findings and its
free-standing findings, links included, on every bundled capture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.api import Frame
from analyzer.engine import Analyzer
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng", ".gz"))


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_only_findings_is_the_full_output_filtered(capture: Path):
    runner = CliRunner()
    full = runner.invoke(cli.app, ["inspect", "-j", "1", "-T", "jsonl", str(capture)], catch_exceptions=False)
    only = runner.invoke(cli.app, ["inspect", "-j", "1", "--only-findings", "-T", "jsonl", str(capture)],
                         catch_exceptions=False)
    assert (only.exit_code, only.stderr) == (full.exit_code, full.stderr)
    lines = full.stdout_bytes.splitlines()
    want = [x for x in lines if json.loads(x)["type"] == "finding" or json.loads(x)["findings"]]
    assert only.stdout_bytes.splitlines() == want


def test_the_frames_kept_back_are_still_counted():
    capture = ROOT / "captures" / "amqp091" / "pika_consume.pcap"
    counts = []
    for only in (False, True):
        analyzer = Analyzer(dissectors=load_dissectors())
        analyzer.findings_only = only
        frames = [ev for ev in analyzer.run_files([str(capture)]) if isinstance(ev, Frame)]
        counts.append((len(frames), [(f.id, f.frames, f.errors, f.warnings, f.notes) for f in analyzer.flows]))
    (all_frames, rows), (kept, rows_kept) = counts
    assert rows == rows_kept and kept < all_frames // 2


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_every_frame_is_counted_on_every_capture(capture: Path):
    # Including the frames a connection left out instead of making them (leave_out_plain_frames).
    rows = []
    for only in (False, True):
        analyzer = Analyzer(dissectors=load_dissectors())
        analyzer.findings_only = only
        for _ in analyzer.run_files([str(capture)]):
            pass
        rows.append([(f.id, f.frames, f.errors, f.warnings, f.notes, f.dialect) for f in analyzer.flows])
    assert rows[0] == rows[1]


def _frames(capture: Path, only: bool) -> list[Frame]:
    analyzer = Analyzer(dissectors=load_dissectors())
    analyzer.findings_only = only
    return [ev for ev in analyzer.run_files([str(capture)]) if isinstance(ev, Frame)]


def _given_back_alike(conv: Any, path: Path) -> list[Frame]:
    """The frames with findings of a full run of ``conv`` (a TcpConversation, written to
    ``path``), asserted to come back from a findings-only run from the same packets, their
    findings naming the same packets."""
    from analyzer.pcapwrite import write_capture

    write_capture(str(path), [conv])
    full = [f for f in _frames(path, False) if f.findings]
    only = [f for f in _frames(path, True) if f.findings]
    assert [(f.command, f.packets, [x.frame for x in f.findings]) for f in only] == \
        [(f.command, f.packets, [x.frame for x in f.findings]) for f in full]
    return full


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_given_back_are_frames_with_findings_and_the_responses_to_those_requests(capture: Path):
    def key(f: Frame) -> tuple:
        return f.flow, f.direction, f.offset

    full = _frames(capture, False)
    shown_requests = {id(f.ref) for f in full if f.findings and f.awaits}
    want = [key(f) for f in full if f.findings or (f.request is not None and id(f.request) in shown_requests)]
    assert [key(f) for f in _frames(capture, True)] == want


def test_a_response_without_findings_comes_back_for_a_request_with_findings():
    # pika_channel_error: Queue.Declare requests the broker refuses (a finding on the request,
    # none on its response, which the summary names on the request).
    capture = ROOT / "captures" / "amqp091" / "pika_channel_error.pcap"
    only = _frames(capture, True)
    responses = [f for f in only if not f.findings]
    assert responses and all(f.request is not None for f in responses)
    # Requests without findings are not given back.
    assert not [f for f in only if f.awaits and not f.findings]
    assert len(only) < len([f for f in _frames(capture, False) if f.findings or f.awaits or f.request is not None])


def test_past_the_limit_every_response_comes_back():
    from analyzer import engine
    from analyzer.flows import SHOWN_REQUESTS_MAX, Conversation, FlowInfo

    conv = Conversation(FlowInfo(1, ("10.0.0.1", 1), ("10.0.0.2", 2), 0.0, 0.0), 1 << 20, False)
    refs = [[i] for i in range(SHOWN_REQUESTS_MAX + 1)]
    for ref in refs[:SHOWN_REQUESTS_MAX]:
        engine._shown_request(conv, ref)
    assert engine._answers_shown(conv, refs[0]) and not engine._answers_shown(conv, refs[0])  # once
    assert not engine._answers_shown(conv, [0])
    engine._shown_request(conv, refs[0])
    engine._shown_request(conv, refs[-1])  # one more than the limit: every response from now on
    assert engine._answers_shown(conv, [0]) and engine._answers_shown(conv, refs[1])


def test_a_frame_over_three_packets_after_frames_left_out_names_its_first_packet(tmp_path: Path):
    # A segment of plain messages (left out in a findings-only run) ending with the start of a
    # frame that carries a finding, whose middle and end come in two more packets: the frame is
    # given back from the packet where it starts, as in the full output. The engine forgets a
    # direction's earlier segments after a call that left frames out (they ended in its bytes, so
    # no later frame starts before them), not after one that only held bytes back.
    from analyzer.pcapwrite import TcpConversation
    from dissectors.amqp091 import encode as E

    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 5672))
    conv.handshake()
    for d, data, _ts in E.Script().handshake().open_channel(1).steps:
        conv.send(str(d), data)
    plain = b"".join(E.message(1, b"x" * 40, {"content-type": "text/plain"}, exchange="ex", routing_key="rk")
                     for _ in range(3))
    conv.send("c2s", plain, mss=10_000)  # a segment of frames left out, as they follow each other
    bad = E.frame(1, 1, E.method_payload("Basic.Qos", {}), end=0x55)  # a finding: a bad frame end
    third = len(bad) // 3
    first = conv.send("c2s", plain + bad[:third], mss=10_000)
    conv.send("c2s", bad[third:2 * third], mss=10_000)
    conv.send("c2s", bad[2 * third:], mss=10_000)
    conv.close()
    full = _given_back_alike(conv, tmp_path / "spanning.pcap")
    start = conv.segments.index(first[0]) + 1
    assert [(f.command, f.packets) for f in full] == [("Basic.Qos", (start, start + 2))]


def test_a_frame_settled_by_the_other_directions_bytes_leaves_this_directions_segments(tmp_path: Path):
    # AMQP/Fast: a fragment's frame waits for what its direction sends next; when the other
    # direction goes on first, that call settles it, and a findings-only run counts it as the
    # other direction's (other_frames_left_out). The call's own bytes then end no frame of their
    # own, so the engine must keep their direction's earlier segments: a client fragment with a
    # finding began in one of them, and is given back from the packet where it starts.
    from analyzer.pcapwrite import TcpConversation
    from dissectors.amqp_fast import encode as E

    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 3018))
    conv.handshake()
    s = E.Script().negotiate().open_channel(1)
    s.sc("CHANNEL REPLY", channel_id=1, confirm_tag=0, reply_code=200, reply_text="OK")
    s.open_handle(1, handle=1, dest="q1")
    s.cc("HANDLE CONSUME", handle_id=1, confirm_tag=0, prefetch=10, dest_name="")
    for d, data, _ts in s.steps:
        conv.send(str(d), data)
    body = bytes(range(90))
    fragment = E.head(len(body) + 5) + body  # the head announces 5 octets more: a finding
    sent = E.message("HANDLE SEND", 1, body, head_bytes=fragment[:-len(body)], dest_name="q1")
    command = sent[:-len(fragment)]
    first = conv.send("c2s", command + fragment[:30])
    conv.send("s2c", E.message("HANDLE NOTIFY", 1, b"ok", message_nbr=1, delivered=True, dest_name="q1"))
    conv.send("c2s", fragment[30:60])  # settles the server's fragment; ends no client frame
    conv.send("c2s", fragment[60:] + E.command("CHANNEL ACK", channel_id=1, message_nbr=1))
    conv.close()
    full = _given_back_alike(conv, tmp_path / "settled.pcap")
    start = conv.segments.index(first[0]) + 1
    fragments = [(f.command, f.packets) for f in full if f.command == "MESSAGE FRAGMENT"]
    assert fragments == [("MESSAGE FRAGMENT", (start, start + 3))]


def _free_findings(capture: Path, only: bool) -> list[tuple[str, int | None]]:
    analyzer = Analyzer(dissectors=load_dissectors())
    analyzer.findings_only = only
    return [(ev.id, ev.frame) for ev in analyzer.run_files([str(capture)]) if not isinstance(ev, Frame)]


def test_a_left_out_frame_named_by_a_later_finding_is_named_by_its_packet(tmp_path: Path):
    # AMQP 0-9-1: a publish whose content header is due in a later segment is left out of a
    # findings-only run, its anchor handed to the engine (anchors_left_out); when the header never
    # comes, the finding at the end names the publish's packet, as in the full run. The second
    # publish comes in two segments (the framer cuts it from its queue): its anchor is handed over
    # too, and names the packet that ended it.
    from analyzer.pcapwrite import TcpConversation, write_capture
    from dissectors.amqp091 import encode as E

    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 5672))
    conv.handshake()
    for d, data, _ts in E.Script().handshake().open_channel(1).open_channel(2).steps:
        conv.send(str(d), data)
    first = conv.send("c2s", E.method("Basic.Publish", 1, exchange="", routing_key="q"))
    publish = E.method("Basic.Publish", 2, exchange="", routing_key="q")
    conv.send("c2s", publish[:9])
    second = conv.send("c2s", publish[9:])
    conv.close()
    path = tmp_path / "headless.pcap"
    write_capture(str(path), [conv])
    full, only = _free_findings(path, False), _free_findings(path, True)
    packets = [conv.segments.index(first[0]) + 1, conv.segments.index(second[0]) + 1]
    assert sorted(f for f in full if f[0] == "amqp091.content.incomplete") == \
        [("amqp091.content.incomplete", p) for p in packets]
    assert only == full
    assert [f.command for f in _frames(path, True)] == []  # both publishes were left out
