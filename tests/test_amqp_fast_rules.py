"""Every AMQP/Fast rule fires exactly where intended (on its own capture) and nowhere on the clean
conversations: fed whole, one byte at a time, in odd pieces, and through the engine from the
bundled capture files, also when those are cut into several files."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

import pytest

from analyzer.api import Direction, Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer, analyze_file
from dissectors.amqp_fast import AmqpFastDissector, connection
from dissectors.amqp_fast import encode as E
from dissectors.amqp_fast.rules import ALL_RULES
from dissectors.kit import play
from tests import split_files

ROOT = Path(__file__).resolve().parent.parent
CAPS = ROOT / "captures" / "amqp_fast"


def _load() -> ModuleType:
    # captures/ is a folder of scripts, not a package: load the generator from its file.
    spec = importlib.util.spec_from_file_location("amqp_fast_make_captures", CAPS / "make_captures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MK = _load()


def session_steps() -> list[tuple[Direction, bytes]]:
    return [(d, data) for d, data, _ in MK.session().steps]


Found = tuple[str, str | None]  # (rule id without the protocol, command of the frame carrying it)


def run(script: E.Script, split: int = 0, dissector: AmqpFastDissector | None = None) -> list[Found]:
    found: list[Found] = []
    for ev in play((dissector or AmqpFastDissector()).connection(False), script.steps, split=split,
                   end_ts=script.ts + 1):
        if isinstance(ev, Frame):
            found.extend((f.id.removeprefix("amqp_fast."), ev.command) for f in ev.findings)
        else:
            found.append((ev.id.removeprefix("amqp_fast."), None))
    return sorted(found, key=str)


@pytest.mark.parametrize("name", list(MK.RULES))
@pytest.mark.parametrize("split", [0, 1, 5])
def test_each_rule_fires_exactly_where_intended(name: str, split: int) -> None:
    make, expected = MK.RULES[name]
    assert run(make(), split) == sorted(expected, key=str)


@pytest.mark.parametrize("split", [0, 1, 3, 1448])
def test_clean_conversations_raise_nothing(split: int) -> None:
    assert run(MK.session(), split) == []
    assert run(MK.rfc_example(), split) == [("reply.error", "CONNECTION CLOSE")]


def test_every_rule_has_its_capture() -> None:
    covered = {rule for _make, expected in MK.RULES.values() for rule, _ in expected}
    ids = {r.id.removeprefix("amqp_fast.") for r in ALL_RULES}
    # The bound on the channel and handle tables has its own test below (65,536 channels).
    assert ids - covered == {"limit.exceeded"}
    assert covered <= ids


def test_bundled_captures_are_what_the_generator_builds(tmp_path: Path) -> None:
    for path in MK.build(tmp_path):
        rel = path.relative_to(tmp_path)
        assert (CAPS / rel).read_bytes() == path.read_bytes(), rel
    bundled = {p.relative_to(CAPS) for p in CAPS.rglob("*.pcap")}
    assert bundled == {p.relative_to(tmp_path) for p in tmp_path.rglob("*.pcap")}


def _engine_findings(paths: list[str]) -> list[Found]:
    events = list(Analyzer().run_files(paths, per_file=False)) if len(paths) > 1 else \
        list(analyze_file(paths[0]))
    out: list[Found] = []
    for ev in events:
        if isinstance(ev, Frame):
            assert ev.protocol == "amqp_fast"
            out.extend((f.id.removeprefix("amqp_fast."), ev.command) for f in ev.findings)
        else:
            out.append((ev.id.removeprefix("amqp_fast."), None))
    return sorted(out, key=str)


@pytest.mark.parametrize("name", list(MK.RULES))
def test_rule_captures_through_the_engine(name: str) -> None:
    assert _engine_findings([str(CAPS / "rules" / f"{name}.pcap")]) == sorted(MK.RULES[name][1], key=str)


def _split(path: Path, parts: int, tmp: Path, seed: str) -> list[str]:
    packets = list(read_packets(str(path)))
    rng = random.Random(seed)
    return split_files.split(packets, sorted(rng.sample(range(1, len(packets)), parts - 1)), tmp)


@pytest.mark.parametrize("name", ["amqp_fast_session", "rules/fragment_short", "rules/fragment_long",
                                  "rules/message_interleaved", "rules/framing_incomplete", "rules/content_incomplete"])
@pytest.mark.parametrize("parts", [2, 5])
def test_cut_into_several_files_gives_the_same_frames_and_findings(tmp_path: Path, name: str, parts: int) -> None:
    path = CAPS / f"{name}.pcap"
    whole = split_files.normal(list(Analyzer().run(read_packets(str(path)))))
    paths = _split(path, parts, tmp_path, f"{name}/{parts}")
    assert split_files.normal(list(Analyzer().run_files(paths, per_file=False))) == whole


def test_table_limit_forgets_closed_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "TABLE_LIMIT", 8)
    s = E.Script().negotiate()
    for ch in range(1, 13):
        s.open_channel(ch).cc("CHANNEL CLOSE", channel_id=ch, reply_code=200, reply_text="Ok")
        s.sc("CHANNEL CLOSE", channel_id=ch, reply_code=200, reply_text="Ok")
    assert run(s) == [("limit.exceeded", "CHANNEL OPEN")]
    conn = AmqpFastDissector().connection(False)
    for d, data, ts in s.steps:
        list(conn.feed(d, data, ts))
    assert len(conn.chans) <= 8


def test_gap_inside_message_data_keeps_the_stream_in_step() -> None:
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    s.c(E.message("HANDLE SEND", 1, b"q" * 3000))
    s.cc("CONNECTION PING", respond=True)
    conn = AmqpFastDissector().connection(False)
    frames: list[Frame] = []
    loose: list[Finding] = []
    for d, data, ts in s.steps:
        if len(data) > 3000:  # lose 1000 octets in the middle of the message data
            evs = [*conn.feed(d, data[:1500], ts), *conn.gap(d, 1000, ts), *conn.feed(d, data[2500:], ts)]
        else:
            evs = list(conn.feed(d, data, ts))
        for e in evs:
            (frames if isinstance(e, Frame) else loose).append(e)
    assert [f.command for f in frames][-3:] == ["HANDLE SEND", "MESSAGE FRAGMENT", "CONNECTION PING"]
    assert "(1000 octets lost)" in frames[-2].info
    assert not loose and not [f for fr in frames for f in fr.findings]


def test_confirmations_are_paired_with_their_reply() -> None:
    conn = AmqpFastDissector().connection(False)
    frames: list[Frame] = []
    for d, data, ts in MK.session().steps:
        frames += [e for e in conn.feed(d, data, ts) if isinstance(e, Frame)]
    replies = [f for f in frames if f.command.endswith("REPLY") or f.command in ("HANDLE INDEX", "HANDLE READY")]
    assert len(replies) == 9
    for r in replies:
        assert r.request is not None and r.latency is not None and r.latency > 0
        asked = next(f for f in frames if f.ref is r.request)
        if r.command.endswith("REPLY"):
            assert asked.get("confirm_tag") == r.get("confirm_tag")
            assert asked.command.split()[0] == r.command.split()[0]


def test_a_message_comes_before_the_answer_to_it() -> None:
    """The frame of a message's last fragment waits for what follows it on its side (to tell a
    fragment shorter or longer than its fragment-size), but no longer than until the peer speaks."""
    conn = AmqpFastDissector().connection(False)
    order: list[str] = []
    for d, data, ts in MK.session().steps:
        order += [e.info for e in conn.feed(d, data, ts) if isinstance(e, Frame)]
    last = next(i for i, x in enumerate(order) if x.startswith("MESSAGE FRAGMENT") and "339 octets" in x)
    assert order[last + 1] == "CHANNEL ACK channel=1 message=41"
    assert order[last - 1].startswith("HANDLE NOTIFY handle=1 message=41 fragment=39 partial=0")


def test_a_restarted_transfer_continues_from_where_the_peer_stopped() -> None:
    """HANDLE PREPARE carries the head only; the peer already holds 1000 body octets (HANDLE READY),
    so the HANDLE SEND with recovery carries the last 2000 and completes the message."""
    body = bytes(3000)
    s = E.Script().negotiate().open_channel(1, restartable=True).open_handle(1, 1)
    head = E.head(len(body), identifier="big.iso")
    s.cc("HANDLE PREPARE", handle_id=1, fragment_size=len(head), content_hash="")
    s.c(head)
    s.sc("HANDLE READY", handle_id=1, message_size=1000)
    s.cc("HANDLE SEND", handle_id=1, fragment_size=2000, recovery=True)
    s.c(body[1000:])
    s.close()
    assert run(s) == []
    conn = AmqpFastDissector().connection(False)
    frames = [e for d, data, ts in s.steps for e in conn.feed(d, data, ts) if isinstance(e, Frame)]
    done = [f for f in frames if "[message" in f.info]
    assert len(done) == 1 and f"[message {len(head) + 3000} octets in 2 fragments" in done[0].info


def test_a_missing_initiation_is_reported_even_when_the_server_spoke_first() -> None:
    s = E.Script()
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    assert run(s) == [("handshake.order", "CONNECTION CHALLENGE"), ("initiation.missing", "CONNECTION RESPONSE")]


def test_channel_ack_is_confirmed_by_either_reply() -> None:
    """§3.3.3 makes CHANNEL ACK a channel command; §3.3.9 has the server confirm it with HANDLE REPLY."""
    for reply in ("CHANNEL REPLY", "HANDLE REPLY"):
        s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
        s.cc("CHANNEL ACK", channel_id=1, confirm_tag=4, message_nbr=1)
        ids = {"channel_id": 1} if reply == "CHANNEL REPLY" else {"handle_id": 1}
        s.sc(reply, confirm_tag=4, reply_code=200, reply_text="OK", **ids)
        assert run(s.close()) == [], reply


def test_a_malformed_command_after_a_fragment_is_not_taken_for_fragment_octets() -> None:
    """Right after a fragment, a command of a known type and believable size whose command-end is
    wrong is still that command (command.end_missing), not octets of a fragment too long."""
    for split in (0, 1):
        s = _fragment_then(E.command("CONNECTION PING", end=0x00))
        assert run(s, split) == [("command.end_missing", "CONNECTION PING")]
        s = _fragment_then(E.frame(14, b"\x00\x01\x02"))  # PING with trailing octets
        assert run(s, split) == [("framing.trailing", "CONNECTION PING")]


def _fragment_then(data: bytes) -> E.Script:
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    s.c(E.message("HANDLE SEND", 1, b"z" * 30) + data)
    return s.close()
