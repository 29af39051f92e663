"""The kit framer's direct cut (whole frames straight from a segment when nothing is buffered) is
the queue's cut, only without the copies: a differential test.

With ``Framer.direct_cut = False`` every segment goes through the queue. Both ways must give the
same events (tests.replay.normal) and leave the same state (the snapshot after every call), for
every dissector (the AMQP ones also with their own hot paths off, so that every segment meets the
kit's framer), on every bundled capture, on mutated variants and on captures joined mid-stream.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Dissector
from analyzer.registry import load_dissectors
from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp_fast import AmqpFastDissector
from dissectors.kit.framing import Framer
from tests import replay as R
from tests.replay import Recorded, normal
from tests.test_amqp091_hotpath import midstream, mutate

CAPS = Path(__file__).resolve().parent.parent / "captures"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*.pcap*"))
GENERAL = {"amqp091": Amqp091Dissector(hot=False), "amqp_fast": AmqpFastDissector(hot=False)}


def framers(conn: Any, bytes_unread: bool = True) -> list[tuple[Any, ...]]:
    """What each of the connection's framers means after a call: the queue's stream offset,
    unread bytes and sync, and the framer's own state (the queue keeps read bytes until it
    compacts; the direct cut never copies them in). ``bytes_unread=False``: their count instead
    of the bytes (a frame waiting over thousands of small segments would be copied once each)."""
    out = []
    for cls in type(conn).__mro__:
        for name in getattr(cls, "__slots__", ()):
            f = getattr(conn, name, None)
            if isinstance(f, Framer):
                q = f.queue
                unread: bytes | int = len(q)
                if bytes_unread:
                    unread = bytes(q._buf[q._pos:]) if q._buf is not None else b""
                out.append((name, q.offset, unread, q.synced, q._rescan, f.seen_frame, f.after_gap, f.junk_at,
                            f.junk_len, f.reason))
    return out


def replay_framed(dissector: Dissector, rec: Recorded, bytes_unread: bool = True,
                  resume_at: int | None = None) -> tuple[list, list, Any]:
    """Events and the framers after each call (see ``framers``), and the connection at the end;
    ``resume_at``: the call before which the connection is snapshotted and resumed."""
    conn = dissector.connection(rec.midstream)
    events: list = []
    states: list = []
    for i, (name, args) in enumerate(rec.calls):
        if i == resume_at:
            conn = dissector.resume(json.loads(json.dumps(conn.snapshot())))
        events.extend(normal(getattr(conn, name)(*args) or ()))
        states.append(framers(conn, bytes_unread))
    assert states[-1], "no framer found"
    return events, states, conn


def run(dissector: Dissector, rec: Recorded, direct: bool) -> tuple[list, list, Any]:
    """Events, the framers after each call and the whole state at the end, with the direct cut on
    or off."""
    saved = Framer.direct_cut
    Framer.direct_cut = direct
    try:
        events, states, conn = replay_framed(dissector, rec)
        end = conn.snapshot()
        for f in framers(conn):  # the queues as above
            end["a"][f[0]]["a"]["queue"] = None
        return events, states, end
    finally:
        Framer.direct_cut = saved


def variants(path: str, seed: str) -> Iterator[tuple[Dissector, Recorded]]:
    rng = random.Random(seed)
    known = load_dissectors()
    for protocol in sorted({r.protocol for r in R.record(str(CAPS / path))}):
        for rec in R.recordings(str(CAPS / path), protocol):
            for dissector in (known[protocol], GENERAL.get(protocol)):
                if dissector is None:
                    continue
                yield dissector, rec
                for i in range(6):
                    yield dissector, mutate(rec, rng, 1 + i % 6)
                for i in range(2):
                    cut = midstream(rec, rng)
                    yield dissector, cut if i % 2 else mutate(cut, rng, 2)


@pytest.mark.parametrize("path", ALL)
def test_direct_cut_is_the_queue_cut(path: str) -> None:
    n = 0
    for dissector, rec in variants(path, f"direct-{path}"):
        assert run(dissector, rec, True) == run(dissector, rec, False)
        n += 1
    assert n
