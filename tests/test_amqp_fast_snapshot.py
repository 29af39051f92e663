"""Snapshot → JSON → resume continues an AMQP/Fast connection exactly, with its encoding settings;
and its state stays bounded however large the messages.

The bundled captures are recorded through the real engine (tests.replay.record), then replayed on a
fresh connection straight and cut at several points by a snapshot that goes through JSON; with the
feeds split at random bytes, the cuts also fall inside commands and message fragments (a fragment
half received, its frame waiting for what follows it, a confirmation outstanding).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analyzer.api import Direction, Frame
from dissectors.amqp_fast import AmqpFastConnection, AmqpFastDissector
from dissectors.amqp_fast import encode as E
from dissectors.amqp_fast.messages import BODY_KEEP, FRAGMENT_KEEP, HEAD_LIMIT, TAIL_KEEP
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit.state import attribute_names, is_plain
from tests import replay as R
from tests.replay import Recorded, cut_points, replay
from tests.state_walk import containers

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp_fast"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*.pcap"))
D = AmqpFastDissector()


def recordings(name: str) -> tuple[Recorded, ...]:
    recs = R.recordings(str(CAPS / name), "amqp_fast")
    assert recs, name
    return recs


@pytest.mark.parametrize("name", ALL)
def test_resume_from_json_continues_identically(name: str) -> None:
    rng = random.Random(name)
    for rec in recordings(name):
        whole = replay(D, rec)
        assert whole
        for k in cut_points(len(rec.calls), rng):
            assert replay(D, rec, cut_at=k) == whole, (name, k)
        inside, _ = R.split_feeds(rec, rng)  # every feed split in two at a random byte
        assert replay(D, inside) == whole
        for k in cut_points(len(inside.calls), rng):
            assert replay(D, inside, cut_at=k) == whole, (name, "inside", k)


def test_snapshot_is_json_after_every_call() -> None:
    rec = recordings("amqp_fast_session.pcap")[0]
    conn = D.connection(rec.midstream)
    for call, args in R.split_feeds(rec, random.Random(1))[0].calls:
        list(getattr(conn, call)(*args) or ())
        text = json.dumps(conn.snapshot())
        again = D.resume(json.loads(text))
        assert isinstance(again, AmqpFastConnection)
        assert json.dumps(again.snapshot()) == text


def script_calls(script: E.Script, rng: random.Random) -> Recorded:
    calls = []
    for d, data, ts in script.steps:
        while data:
            n = rng.randint(1, 40)
            calls.append(("feed", (d, data[:n], ts)))
            data = data[n:]
    calls.append(("end", (script.ts + 1,)))
    return Recorded("amqp_fast", False, calls)


def test_the_encoding_settings_travel_with_the_state() -> None:
    """A connection configured for high-bit-first bits and 4-octet lengths, snapshotted and resumed
    by a dissector with the default settings, goes on decoding with its own."""
    enc = Encoding("msb", 4, 4)
    s = E.Script(enc).negotiate().open_channel(1, transacted=True).open_handle(1, 1)
    s.c(E.message("HANDLE SEND", 1, b"m" * 500, fragment=120, enc=enc, head_bytes=E.head(500, enc=enc)))
    s.cc("CHANNEL COMMIT", channel_id=1, confirm_tag=3).sc("CHANNEL REPLY", channel_id=1, confirm_tag=3,
                                                           reply_code=200, reply_text="OK")
    s.close()
    msb = D.configured({"bit_order": "msb", "long_string_length": "4", "field_table_length": "4"})
    rec = script_calls(s, random.Random(5))
    whole = replay(msb, rec)
    assert not [f for item in whole if item[0] == "frame" for f in item[9]]
    assert sum(1 for item in whole if item[4] == "MESSAGE FRAGMENT") == 5
    for k in cut_points(len(rec.calls), random.Random(6), 10):
        conn = msb.connection(False)
        out = []
        for i, (name, args) in enumerate(rec.calls):
            if i == k:
                conn = D.resume(json.loads(json.dumps(conn.snapshot())))  # the default dissector
            out += [e for e in getattr(conn, name)(*args) or ()]
        from tests.replay import normal

        assert normal(out) == whole, k
    # Read with the default settings the same bytes are something else entirely.
    assert replay(D, rec) != whole


def test_state_stays_bounded_for_large_messages() -> None:
    """A 4 MB message in 100 KB fragments, and one whose head holds a 64 KB headers table: what the
    connection keeps is bounded (the head being decoded at most), never the message."""
    s = E.Script().negotiate(frame_max=131072).open_channel(1).open_handle(1, 1)
    s.cc("HANDLE CONSUME", handle_id=1, prefetch=1)
    body = bytes(random.Random(3).randbytes(4 << 20))
    s.s(E.message("HANDLE NOTIFY", 1, body, fragment=100_000, message_nbr=1, delivered=True))
    s.cc("HANDLE SEND", handle_id=1, fragment_size=120_000, partial=True)
    # body-size 5, flags, priority, expiration, three empty short strings, a 65535-octet table
    head = b"\x00\x00\x00\x05" + b"\x00\x00" + bytes(4) + bytes(3) + b"\xff\xff"
    s.c(head + bytes(120_000 - len(head)))
    s.cc("HANDLE SEND", handle_id=1, fragment_size=60_000, partial=False)
    s.c(bytes(60_000))
    conn = D.connection(False)
    bound = max(HEAD_LIMIT, FRAGMENT_KEEP, BODY_KEEP, TAIL_KEEP) + 1024
    largest = 0
    frames: list[Frame] = []
    for d, data, ts in s.steps:
        for i in range(0, len(data), 1448):
            frames += [e for e in conn.feed(d, data[i:i + 1448], ts) if isinstance(e, Frame)]
            for path, obj in containers(conn):
                size = len(obj)  # type: ignore[arg-type]
                assert size < bound, path
            sizes = [len(v) for v in _bytes(conn)]
            largest = max(largest, *sizes, 0)
    assert largest < bound
    frames += [e for e in conn.end(s.ts + 1) if isinstance(e, Frame)]
    frags = [f for f in frames if f.command == "MESSAGE FRAGMENT"]
    msg = next(f for f in frags if any(x.name == "message" for x in f.fields))
    assert f"[message {len(body) + 15} octets in 42 fragments" in msg.info
    ids = [f.id for fr in frames for f in fr.findings]
    assert ids == ["amqp_fast.message.size"]  # 180,000 octets for a head of 65,550 and a body of 5


def _bytes(obj: object) -> list[bytes]:
    """Every bytes value in a connection's state."""
    out: list[bytes] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, (bytes, bytearray)):
            out.append(bytes(o))
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif is_plain(o):
            for name in attribute_names(type(o)):
                if hasattr(o, name) and name not in getattr(o, "TRANSIENT", ()):
                    stack.append(getattr(o, name))
    return out


def test_directions_are_plain_after_resume() -> None:
    conn = D.connection(False)
    list(conn.feed(Direction.C2S, E.initiation(), 0.0))
    again = D.resume(json.loads(json.dumps(conn.snapshot())))
    frames = list(again.feed(Direction.S2C, E.command("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN"), 1.0))
    assert [f.info for f in frames] == ["CONNECTION CHALLENGE v1 'PLAIN'"] and not frames[0].findings
