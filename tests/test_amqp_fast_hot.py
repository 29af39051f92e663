"""AMQP/Fast's hot path is its general path, only faster: a differential test.

``AmqpFastDissector(hot=False)`` takes every piece through the kit's framer and the general path.
The hot path (dissectors/amqp_fast/hot.py) must give exactly the same frames, fields, Info lines
and findings (tests.replay.normal) on every bundled capture, on mutated variants of them (bytes
flipped, inserted, deleted, feeds cut in two), on captures joined mid-stream, and on a busy
session like the benchmark's, its segments cut at random places.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dissectors.amqp_fast import AmqpFastDissector
from dissectors.amqp_fast import encode as E
from tests import replay as R
from tests.replay import Recorded
from tests.test_amqp091_hotpath import midstream, mutants, mutate

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp_fast"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*.pcap"))
HOT, GENERAL = AmqpFastDissector(), AmqpFastDissector(hot=False)


def recordings(name: str) -> tuple[Recorded, ...]:
    return R.recordings(str(CAPS / name), "amqp_fast")


def same(rec: Recorded) -> list:
    return R.agree(HOT, GENERAL, rec)


def test_the_corpus() -> None:
    assert len(ALL) >= 50 and "amqp_fast_session.pcap" in ALL


@pytest.mark.parametrize("name", ALL)
def test_hot_and_general_paths_agree(name: str) -> None:
    rng = random.Random(f"fast-hot-{name}")
    for rec in recordings(name):
        assert same(rec)
        for i in range(16):
            same(mutate(rec, rng, 1 + i % 6))
        for i in range(6):
            cut = midstream(rec, rng)
            same(cut if i % 2 else mutate(cut, rng, 2))


def busy_session(seed: int) -> Recorded:
    """The benchmark's shape on two channels and handles: messages of 0-3 KB sent and delivered in
    fragments of at most 500 octets (some in one fragment, some with an empty body), acknowledged;
    each direction's stream then cut into segments of random sizes, so that commands, heads and
    fragments straddle segments anywhere."""
    rnd = random.Random(seed)
    s = E.Script().negotiate()
    for ch in (1, 2):
        s.open_channel(ch)
        s.sc("CHANNEL REPLY", channel_id=ch, confirm_tag=0, reply_code=200, reply_text="OK")
        s.open_handle(ch, handle=ch, dest=f"q{ch}")
        s.cc("HANDLE CONSUME", handle_id=ch, confirm_tag=0, prefetch=10, dest_name="")
    for k in range(1, 41):
        h = 1 + k % 2
        body = bytes((k + i) & 0xFF for i in range(rnd.choice((0, 7, 480, 1500, 3000))))
        fragment = rnd.choice((0, 500, 500, 64))
        s.c(E.message("HANDLE SEND", h, body, fragment=fragment, dest_name=f"q{h}"))
        s.s(E.message("HANDLE NOTIFY", h, body, fragment=fragment, message_nbr=k, delivered=True,
                      dest_name=f"q{h}"))
        s.cc("CHANNEL ACK", channel_id=h, message_nbr=k)
    s.close((1, 2))
    calls: list = []
    for d, data, ts in s.steps:
        pos = 0
        while pos < len(data):
            n = rnd.choice((len(data), len(data), 1, 3, 100, 537, 1460))
            calls.append(("feed", (d, data[pos:pos + n], ts)))
            pos += n
    calls.append(("end", (s.ts + 1,)))
    return Recorded("amqp_fast", False, calls)


@pytest.mark.parametrize("seed", range(6))
def test_busy_sessions_agree(seed: int) -> None:
    rec = busy_session(seed)
    events = same(rec)
    assert len(events) > 400
    for variant in mutants(rec, f"busy-{seed}", 30, 4):
        same(variant)


#: What may sit where a command should start, at a command boundary or right after a fragment: the
#: framer's every verdict (junk, wait, a command it doubts or takes as it is).
ODD = {
    "size_zero": b"\x00\x00",
    "size_one": b"\x00\x01\x1f",
    "long_size": E.command("CHANNEL ACK", channel_id=1, message_nbr=9, long_size=True),
    "unknown_type": E.frame(99, b"abc"),
    "unknown_type_no_end": E.frame(99, b"abc", end=0),
    "no_end": E.command("CHANNEL ACK", channel_id=1, message_nbr=9, end=0x00),
    "huge_size": b"\xff\xfe\x1f" + b"\x00" * 20,
    "junk": bytes(range(40)),
}


def odd_session(where: str, odd: bytes, cut: int) -> Recorded:
    """A session with ``odd`` octets right after a message's fragment (``where`` = "fragment",
    so the fragment seems longer than announced), after a command that starts three octets before
    the fragment's announced end ("short") or between two commands ("boundary"); fed in one piece
    or cut every ``cut`` octets."""
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    body = bytes(range(200))
    msg = E.message("HANDLE SEND", 1, body, fragment=90, dest_name="q")
    ack = E.command("CHANNEL ACK", channel_id=1, message_nbr=1)
    if where == "fragment":
        stream = msg + odd + ack
    elif where == "short":
        stream = msg[:-3] + ack + odd + ack
    else:
        stream = ack + odd + msg + ack
    s.c(stream + E.message("HANDLE SEND", 1, body, fragment=50, dest_name="q") + ack)
    s.close()
    calls: list = []
    for d, data, ts in s.steps:
        step = cut or len(data)
        calls += [("feed", (d, data[i:i + step], ts)) for i in range(0, len(data), step)]
    calls.append(("end", (s.ts + 1,)))
    return Recorded("amqp_fast", False, calls)


@pytest.mark.parametrize("odd", sorted(ODD))
@pytest.mark.parametrize("where", ["fragment", "short", "boundary"])
def test_odd_octets_agree(odd: str, where: str) -> None:
    for cut in (0, 1, 5, 64):
        events = same(odd_session(where, ODD[odd], cut))
        # Each says something (a finding of its own or on a frame), but a long size, which is allowed.
        said = any(e[0] == "finding" or (e[0] == "frame" and e[9]) for e in events)
        assert said or odd == "long_size"


def _send(h: int = 1, body: bytes = b"x" * 30, **values: object) -> bytes:
    return E.message("HANDLE SEND", h, body, fragment=20, **values)


def _notify(h: int = 1, nbr: int = 1, delivered: bool = True, **values: object) -> bytes:
    return E.message("HANDLE NOTIFY", h, b"y" * 30, fragment=20, message_nbr=nbr, delivered=delivered, **values)


def _scenario(steps: list[tuple[str, bytes]], frame_max: int = 131072, close: bool = True) -> E.Script:
    s = E.Script().negotiate(frame_max=frame_max).open_channel(1).open_handle(1, 1).open_handle(1, 2, dest="q2")
    for who, data in steps:
        s.c(data) if who == "c" else s.s(data)
    return s.close() if close else s


#: Each puts one condition of the hot command (HANDLE SEND or NOTIFY, CHANNEL ACK) in question on a
#: connection under way.
SCENARIOS = {
    "notify_unrequested": [("s", _notify())],
    "notify_browsed": [("c", E.command("HANDLE BROWSE", handle_id=1, confirm_tag=7, message_nbr=1)),
                       ("s", _notify(delivered=False))],
    "send_confirmed": [("c", _send(confirm_tag=5)), ("s", E.command("HANDLE REPLY", handle_id=1, confirm_tag=5,
                                                                     reply_code=200, reply_text="OK")),
                       ("c", _send(confirm_tag=6))],
    "interleaved": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=5, partial=True) + b"abcde"),
                    ("c", _send(h=2))],
    "interleaved_notify": [("c", E.command("HANDLE CONSUME", handle_id=1, prefetch=1)),
                           ("s", E.command("HANDLE NOTIFY", handle_id=1, message_nbr=1, fragment_size=5,
                                           partial=True, delivered=True) + b"abcde"),
                           ("s", _notify(nbr=2))],
    "stream_without_partial": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=5, streaming=True)
                                + b"abcde")],
    "stream_with_recovery": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=5, streaming=True,
                                             partial=True, recovery=True) + b"abcde")],
    "out_of_band": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=5, out_of_band=True))],
    "empty_fragment": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=0))],
    "nul_in_dest": [("c", _send(dest_name="a\0b"))],
    "trailing_octets": [("c", E.frame(31, E.fields("HANDLE SEND", {"handle_id": 1, "fragment_size": 5}) + b"zz")
                         + b"abcde")],
    "unknown_handle": [("c", _send(h=9))],
    "handle_closing": [("c", E.command("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="bye")),
                       ("c", _send())],
    "handle_closed": [("c", E.command("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="bye")),
                      ("s", E.command("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="bye")),
                      ("c", _send())],
    "channel_closing": [("c", E.command("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="bye")),
                        ("c", _send())],
    "connection_closing": [("c", E.command("CONNECTION CLOSE", reply_code=200, reply_text="bye")),
                           ("c", _send())],
    "server_sends": [("s", _send())],
    "ack_confirmed": [("c", E.command("CHANNEL ACK", channel_id=1, confirm_tag=3, message_nbr=1)),
                      ("s", E.command("CHANNEL REPLY", channel_id=1, confirm_tag=3, reply_code=200,
                                      reply_text="OK")),
                      ("c", E.command("CHANNEL ACK", channel_id=1, confirm_tag=4, message_nbr=2))],
    "ack_unknown_channel": [("c", E.command("CHANNEL ACK", channel_id=5, message_nbr=1))],
    "ack_channel_closing": [("c", E.command("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="bye")),
                            ("c", E.command("CHANNEL ACK", channel_id=1, message_nbr=1))],
    "ack_from_server": [("s", E.command("CHANNEL ACK", channel_id=1, message_nbr=1))],
    "ack_connection_closing": [("c", E.command("CONNECTION CLOSE", reply_code=200, reply_text="bye")),
                               ("c", E.command("CHANNEL ACK", channel_id=1, message_nbr=1))],
    "ack_above_frame_max": [("c", E.command("CHANNEL ACK", channel_id=1, message_nbr=1))],
    "fragment_above_frame_max": [("c", E.command("HANDLE SEND", handle_id=1, fragment_size=2000) + b"z" * 2000)],
    "command_above_frame_max": [("c", _send(dest_name="d" * 200))],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_condition_of_the_hot_message_command(name: str) -> None:
    frame_max = {"command_above_frame_max": 100, "ack_above_frame_max": 8}.get(
        name, 1024 if "frame_max" in name else 131072)
    # A browsed message answers HANDLE BROWSE: left open, the end would say it was never answered.
    s = _scenario(SCENARIOS[name], frame_max=frame_max, close=name != "notify_browsed")
    for cut in (0, 7):
        calls: list = []
        for d, data, ts in s.steps:
            step = cut or len(data)
            calls += [("feed", (d, data[i:i + step], ts)) for i in range(0, len(data), step)]
        calls.append(("end", (s.ts + 1,)))
        assert len(same(Recorded("amqp_fast", False, calls))) > 10


def test_clean_values_are_remembered_by_encoding_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path reads a command's values once for its bytes and encoding (hot._VALUES_SEEN):
    only those of a command it may take (whole, no zero octet in a short string, no confirm tag);
    the same bytes with another bit order are read again. The busy sessions above run with it."""
    from dissectors.amqp_fast import hot
    from dissectors.amqp_fast.commands import BY_NAME
    from dissectors.amqp_fast.wire import Encoding

    seen: dict = {}
    monkeypatch.setattr(hot, "_VALUES_SEEN", seen)
    cmd = BY_NAME["HANDLE SEND"]
    clean = E.command("HANDLE SEND", handle_id=1, fragment_size=500, partial=True)
    refused = [E.command("HANDLE SEND", handle_id=1, confirm_tag=3, fragment_size=500),
               E.command("HANDLE SEND", handle_id=1, fragment_size=500, dest_name="a\0b"),
               E.frame(31, E.fields("HANDLE SEND", {"handle_id": 1, "fragment_size": 5}) + b"zz")]
    lsb, msb = Encoding(), Encoding("msb")
    for enc in (lsb, msb):
        for data in refused:
            assert hot._clean_values(cmd, enc, data, len(data) - 1) is None
        first = hot._clean_values(cmd, enc, clean, len(clean) - 1)
        assert first is not None and hot._clean_values(cmd, enc, clean, len(clean) - 1) is first
    assert set(seen) == {(lsb, clean), (msb, clean)}
    assert seen[(lsb, clean)]["partial"] is True and seen[(msb, clean)]["partial"] is False
    monkeypatch.setattr(hot, "_VALUES_SEEN_MAX", 1)
    seen.clear()
    for enc in (lsb, msb):
        hot._clean_values(cmd, enc, clean, len(clean) - 1)
    assert len(seen) == 1


def test_clean_values_remembered_by_what_follows_the_leading_integers_are_the_values_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hot command whose octets after its leading integers (handle, confirm tag or message
    number, fragment size) were read clean before (hot._REST_SEEN) takes its values from them with
    its own integers: what read_values gives from scratch; None when its confirm tag asks for a
    confirmation, as when read."""
    from dissectors.amqp_fast import hot
    from dissectors.amqp_fast.commands import BY_NAME, layout
    from dissectors.amqp_fast.wire import Encoding

    rest: dict = {}
    monkeypatch.setattr(hot, "_VALUES_SEEN", {})
    monkeypatch.setattr(hot, "_REST_SEEN", rest)
    rng = random.Random(41)
    commands = [("HANDLE SEND", {"dest_name": "q", "partial": True}, ("handle_id", "confirm_tag", "fragment_size")),
                ("HANDLE NOTIFY", {"dest_name": "queue.a", "delivered": True},
                 ("handle_id", "message_nbr", "fragment_size")),
                ("CHANNEL ACK", {}, ("channel_id", "confirm_tag", "message_nbr"))]
    taken = 0
    for enc in (Encoding(), Encoding("msb")):
        for name, fixed, ints in commands:
            cmd = BY_NAME[name]
            for i in range(40):
                values = {k: rng.choice((0, 1, 7, 300, 65535)) if k != "fragment_size" and k != "message_nbr"
                          else rng.randrange(1 << 32) for k in ints}
                if i % 5 and "confirm_tag" in values:
                    values["confirm_tag"] = 0  # mostly unconfirmed: the commands the hot path takes
                data = E.command(name, **fixed, **values)
                end = len(data) - 1
                read, used = layout(cmd.code, enc).read_values(data, 3, end)
                want = None if read.get("confirm_tag") or used != end else read
                key = (enc, cmd.code, data[3 + hot._lead(cmd.code, enc)[1].size:end])
                before = rest.get(key)
                got = hot._clean_values(cmd, enc, data, end)
                assert got == want, (name, enc, values)
                if before is not None and got is not None:
                    taken += got is not rest[key]  # made from the remembered values, not read
    assert taken > 100, taken
