"""The summary view's Info lines come without field trees (issue 15): a lazy frame answers
``info`` through the decoder's quick function, and must give exactly the line its tree builder
gives, on every frame of every bundled capture, mutated variants of them and a busy session."""

from __future__ import annotations

import pytest

from analyzer.api import Frame
from dissectors.amqp091 import Amqp091Dissector, decode
from dissectors.amqp091 import encode as E
from dissectors.amqp091.decode import IDS
from dissectors.kit.lazy import QUICK_INFO, LazyFrame
from tests.replay import Recorded
from tests.test_amqp091_hotpath import ALL, busy_session, busy_variants, variants

DISSECTORS = (Amqp091Dissector(), Amqp091Dissector(hot=False))


def infos(rec: Recorded, first: str) -> tuple[list[str], int]:
    """Every frame's Info line, reading ``first`` ("info" or "fields") before the other; and how
    many lazy frames had a quick Info function."""
    lines: list[str] = []
    quick = 0
    for dissector in DISSECTORS:
        conn = dissector.connection(rec.midstream)
        for name, args in rec.calls:
            for ev in getattr(conn, name)(*args) or ():
                if not isinstance(ev, Frame):
                    continue
                if isinstance(ev, LazyFrame) and ev._build is not None:
                    quick += ev._build in QUICK_INFO
                if first == "fields":
                    _ = ev.fields
                lines.append(ev.info)
                if first == "info":
                    assert ev.fields is not None  # the tree still builds after a quick Info
                    lines.append(ev.info)  # and the Info line stays the one first given
    return lines, quick


def check(rec: Recorded) -> int:
    quick_lines, quick = infos(rec, "info")
    tree_lines, _ = infos(rec, "fields")
    assert quick_lines[::2] == tree_lines
    assert quick_lines[1::2] == tree_lines
    return quick


@pytest.mark.parametrize("name", ALL)
def test_quick_info_is_the_tree_info_on_every_capture(name: str) -> None:
    for rec in variants(name, f"quick-{name}", mutated=20):
        check(rec)


def test_quick_info_on_a_busy_session() -> None:
    rec = busy_session()
    assert check(rec) > 300  # the quick path really ran
    for variant in busy_variants("quick-busy", 100):
        check(variant)


def test_quick_info_of_names_that_are_not_utf8() -> None:
    """Exchange names and routing keys are short strings of any bytes: the tree shows the ones
    that are not UTF-8 as bytes, and so must the quick Info of the hot methods."""
    s = E.Script().handshake().open_channel(1)
    s.c(E.method("Basic.Consume", 1, queue="q", consumer_tag="c")).s(E.method("Basic.ConsumeOk", 1, consumer_tag="c"))
    s.c(E.message(1, b"one", {}, exchange=b"ex\x80", routing_key=b"\xff\xfe"))
    s.s(E.message(1, b"two", {}, name="Basic.Deliver", consumer_tag="c", delivery_tag=1, exchange="x",
                  routing_key=b"k\xc3"))
    s.c(E.method("Basic.Ack", 1, delivery_tag=1))
    s.close((1,))
    rec = Recorded("amqp091", False, [("feed", (d, data, ts)) for d, data, ts in s.steps] + [("end", (s.ts + 1,))])
    assert check(rec) >= 3
    lines, _ = infos(rec, "info")
    assert "Basic.Publish x=b'ex\\x80' rk=b'\\xff\\xfe'" in lines
    assert "Basic.Deliver x=x rk=b'k\\xc3' tag=1" in lines


def test_quick_info_remembers_the_frames_that_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Info lines are remembered by frame bytes (decode._INFO_SEEN) for the methods whose frames
    repeat (Basic.Publish, the handshake, the closes), never for those naming a delivery tag, and
    no more than the bound; the lines stay the tree's (check, above, runs with the memory)."""
    seen: dict[bytes, str] = {}
    monkeypatch.setattr(decode, "_INFO_SEEN", seen)
    lines, _ = infos(busy_session(), "info")
    kinds = {IDS.unpack_from(key, 7) for key in seen}
    assert (60, 40) in kinds  # Basic.Publish
    assert (10, 11) in kinds  # Connection.StartOk
    assert not kinds & {(60, 60), (60, 80), (60, 71)}  # Deliver, Ack, GetOk: a tag each
    # Twelve batches of five publishes to one exchange and key: a single line each way.
    assert sum(key[7:11] == b"\x00\x3c\x00\x28" for key in seen) == 1
    # Each with its own confirm number after the remembered line.
    publishes = [line for line in lines if line.startswith("Basic.Publish x=x rk=r seq=")]
    assert len(set(publishes)) == 60 and len(publishes) == 60 * 2 * len(DISSECTORS)
    monkeypatch.setattr(decode, "_INFO_SEEN_MAX", 3)
    seen.clear()
    infos(busy_session(), "info")
    assert 0 < len(seen) <= 3
