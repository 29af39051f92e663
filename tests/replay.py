"""Record what the engine hands a dissector, then replay it: straight, or cut by a snapshot.

``record(path)`` runs a capture through the real engine with every dissector wrapped, and returns
per conversation the dissector name, whether it started mid-stream, and the exact sequence of
calls (feed, gap, tick, end). ``replay`` runs such a sequence on a fresh connection; with
``cut_at`` it snapshots after that many calls, sends the snapshot through JSON, resumes, and
goes on; ``split_feeds`` cuts feed calls in two so that such cuts also fall inside frames. Outputs are compared in a normal form that covers everything a renderer shows.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from analyzer.api import Connection, Dissector, Event, Field, Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.jsonout import fields_json
from analyzer.registry import load_dissectors

Call = tuple[str, tuple[Any, ...]]


@dataclass
class Recorded:
    protocol: str
    midstream: bool
    calls: list[Call] = field(default_factory=list)


class _Recorder(Connection):
    def __init__(self, inner: Connection, log: Recorded) -> None:
        self.inner = inner
        self.log = log

    @property
    def dialect(self) -> str | None:  # type: ignore[override]
        return self.inner.dialect

    def feed(self, direction, data, ts):  # type: ignore[no-untyped-def]
        self.log.calls.append(("feed", (direction, bytes(data), ts)))
        return self.inner.feed(direction, data, ts)

    def gap(self, direction, length, ts):  # type: ignore[no-untyped-def]
        self.log.calls.append(("gap", (direction, length, ts)))
        return self.inner.gap(direction, length, ts)

    def tick(self, ts):  # type: ignore[no-untyped-def]
        self.log.calls.append(("tick", (ts,)))
        return self.inner.tick(ts)

    def deadline(self):  # type: ignore[no-untyped-def]
        return self.inner.deadline()

    def end(self, ts):  # type: ignore[no-untyped-def]
        self.log.calls.append(("end", (ts,)))
        return self.inner.end(ts)


class _Wrapping(Dissector):
    def __init__(self, inner: Dissector, logs: list[Recorded]) -> None:
        self.inner = inner
        self.logs = logs
        self.name = inner.name  # type: ignore[misc]
        self.title = inner.title  # type: ignore[misc]
        self.default_ports = inner.default_ports  # type: ignore[misc]

    def sniff(self, data):  # type: ignore[no-untyped-def]
        return self.inner.sniff(data)

    def connection(self, midstream: bool) -> Connection:
        log = Recorded(self.inner.name, midstream)
        self.logs.append(log)
        return _Recorder(self.inner.connection(midstream), log)


def record(path: str) -> list[Recorded]:
    logs: list[Recorded] = []
    wrapped = {name: _Wrapping(d, logs) for name, d in load_dissectors().items()}
    for _ in Analyzer(wrapped).run(read_packets(path)):  # type: ignore[arg-type]
        pass
    return logs


def normal(events: Iterable[Event]) -> list[Any]:
    """Everything a renderer shows of a dissector's output, as comparable plain data: the JSON of
    the fields, and the tree view's part of them (offsets, sizes, display texts)."""
    out: list[Any] = []
    for ev in events:
        if isinstance(ev, Frame):
            out.append(["frame", str(ev.direction), ev.offset, ev.size, ev.command, ev.code, ev.info, ev.dialect,
                        json.dumps(fields_json(ev.fields), sort_keys=True, default=repr),
                        [_finding(f) for f in ev.findings], _tree(ev.fields)])
        else:
            out.append(_finding(ev))
    return out


def _tree(fields: list[Field] | None) -> list[Any] | None:
    if fields is None:
        return None
    return [[f.name, f.offset, f.size, f.display, f.is_list, _tree(f.children)] for f in fields]


def _finding(f: Finding) -> list[Any]:
    return ["finding", f.id, str(f.severity), f.message, list(f.related) if f.related is not None else None,
            f.command, f.field]


def events(dissector: Dissector, rec: Recorded) -> list[Event]:
    """What a fresh connection of ``dissector`` gives back for the calls of ``rec``, in order."""
    conn = dissector.connection(rec.midstream)
    return [ev for name, args in rec.calls for ev in getattr(conn, name)(*args) or ()]


def replay(dissector: Dissector, rec: Recorded, cut_at: int | None = None) -> list[Any]:
    conn = dissector.connection(rec.midstream)
    out: list[Any] = []
    for i, (name, args) in enumerate(rec.calls):
        if cut_at is not None and i == cut_at:
            state = json.loads(json.dumps(conn.snapshot()))
            conn = dissector.resume(state)
        out.extend(normal(getattr(conn, name)(*args) or ()))
    return out


def agree(first: Dissector, second: Dissector, rec: Recorded) -> list[Any]:
    """What two dissectors (a hot path and its general path) make of ``rec``, asserted the same."""
    a, b = replay(first, rec), replay(second, rec)
    assert a == b
    return a


def cut_points(n: int, rng: Any, k: int = 6) -> Sequence[int]:
    """A few cut positions: the first and last calls and random ones between."""
    points = {0, max(n - 1, 0), n // 2}
    points.update(rng.randrange(n) for _ in range(k) if n)
    return sorted(points)


@cache
def recordings(path: str, protocol: str) -> tuple[Recorded, ...]:
    """The recorded conversations of ``protocol`` in the capture at ``path`` (recorded once)."""
    return tuple(r for r in record(path) if r.protocol == protocol)


def split_feeds(rec: Recorded, rng: Any, n: int | None = None) -> tuple[Recorded, list[int]]:
    """The same calls with ``n`` feed calls (every one when None) of more than one byte cut in two at
    a random byte, and the indexes of the second halves: cut points that fall inside a frame (or a
    frame header) as often as not."""
    feeds = [i for i, (name, args) in enumerate(rec.calls) if name == "feed" and len(args[1]) > 1]
    chosen = set(feeds) if n is None else set(rng.sample(feeds, min(n, len(feeds))))
    out = Recorded(rec.protocol, rec.midstream)
    cuts: list[int] = []
    for i, (name, args) in enumerate(rec.calls):
        if i in chosen:
            d, data, ts = args
            at = rng.randrange(1, len(data))
            out.calls.append(("feed", (d, data[:at], ts)))
            cuts.append(len(out.calls))
            out.calls.append(("feed", (d, data[at:], ts)))
        else:
            out.calls.append((name, args))
    return out, cuts


def lean_calls(dissector: Dissector, rec: Recorded,
               leave_out: bool) -> list[tuple[list[Event], int, int, list[list[Any]]]]:
    """Per call of ``rec``: the events a fresh connection gives back, the frames it counted
    instead of making them (Connection.frames_left_out, other_frames_left_out) and the anchors of
    those it handed over (anchors_left_out, as plain lists), with ``leave_out`` as a
    findings-only run asks it (Connection.leave_out_plain_frames)."""
    conn = dissector.connection(rec.midstream)
    if leave_out:
        assert conn.leave_out_plain_frames() is True
    calls = []
    for name, args in rec.calls:
        events = list(getattr(conn, name)(*args) or ())
        anchors = conn.anchors_left_out
        calls.append((events, conn.frames_left_out, conn.other_frames_left_out, [list(a) for a in anchors or ()]))
        conn.frames_left_out = 0
        if conn.other_frames_left_out:
            conn.other_frames_left_out = 0
        if anchors:
            anchors.clear()
    return calls


def plain(ev: Event, anchors: Sequence[list[Any]] = ()) -> bool:
    """A frame that carries nothing of its own a findings-only run shows: no findings, no anchor
    a later finding may name but one handed over (``anchors``: the call's anchors_left_out), not
    a request awaiting its response."""
    return (isinstance(ev, Frame) and not ev.findings and not ev.awaits
            and (ev.ref is None or list(ev.ref) in anchors))


def check_leave_out(dissector: Dissector, rec: Recorded) -> int:
    """Asserts, call by call, that the findings-only (lean) run gives the full run's events minus
    frames it may leave out, in the same order and the same form (:func:`normal`), and counts
    exactly those. A frame may be left out when it is :func:`plain`, answers no request given back
    with findings (the engine gives back its response too), and carries no dialect or the one the
    frames given back last carried (the engine learns the conversation's dialect from frames).
    The count: in frames_left_out the fed direction's, in other_frames_left_out the other
    direction's. When a feed gives nothing back but left frames of its direction out, the engine
    forgets that direction's segments before the call's (no later frame starts before them):
    each of those frames ends at or after where the call's bytes start. An anchored frame left
    out hands its anchor over in that call's anchors_left_out, which holds no other, and ends in
    the call's bytes (the engine gives the anchor the call's packet, the frame's last). A gap or
    tick leaves nothing out (the engine collects the counts after feeds and the end). Returns how
    many were left out."""
    total = 0
    at = {"c2s": 0, "s2c": 0}  # each direction's stream offset where the next call's bytes start
    shown: set[int] = set()  # the anchors of the full run's requests with findings
    dialect: str | None = None  # the last dialect a frame given back carried
    full_calls, lean = lean_calls(dissector, rec, False), lean_calls(dissector, rec, True)
    for (name, args), (full, none, none_other, _), (kept, own, other, anchors) in zip(rec.calls, full_calls, lean,
                                                                                  strict=True):
        assert none == none_other == 0
        expected = iter(zip(normal(full), full, strict=True))
        missing: list[Frame] = []
        for ev, given in zip(normal(kept), kept, strict=True):  # kept is full with some frames taken out
            for want, frame in expected:
                if want == ev:
                    break
                assert _may_leave_out(frame, shown, dialect, anchors), f"{want} is missing from the findings-only run"
                missing.append(frame)  # type: ignore[arg-type]
            else:
                raise AssertionError(f"{ev} is not in the full run (or out of order)")
            if isinstance(frame, Frame):
                if frame.findings and frame.awaits:
                    shown.add(id(frame.ref))
                if given.dialect:  # type: ignore[union-attr]
                    dialect = given.dialect  # type: ignore[union-attr]
        for want, frame in expected:
            assert _may_leave_out(frame, shown, dialect, anchors), f"{want} is missing from the findings-only run"
            missing.append(frame)  # type: ignore[arg-type]
        fed = str(args[0]) if name in ("feed", "gap") else None
        mine = [f for f in missing if str(f.direction) == fed]
        assert (len(mine), len(missing) - len(mine)) == (own, other), name
        handed = [list(f.ref) for f in missing if f.ref is not None]
        assert sorted(handed, key=repr) == sorted(anchors, key=repr), f"{name}: anchors handed over"
        if anchors:
            assert name == "feed", f"{name} handed anchors over"
            assert all(f.offset + f.size > at[fed] for f in mine if f.ref is not None)  # type: ignore[index]
        if name in ("gap", "tick"):
            assert not missing, f"{name} left frames out"
        if name == "feed":
            if not kept:
                assert all(f.offset + f.size >= at[fed] for f in mine)  # type: ignore[index]
            at[fed] += len(args[1])  # type: ignore[index]
        elif name == "gap":
            at[fed] += args[1]  # type: ignore[index]
        total += len(missing)
    return total


def check_leave_out_variants(dissector: Dissector, rec: Recorded, rng: random.Random, mutated: int, most: int,
                             split: bool = False) -> int:
    """:func:`check_leave_out` on ``rec``, on ``mutated`` variants of it (1 to ``most`` edits), on
    four of it joined mid-stream (every other one mutated) and, with ``split``, on it with every
    feed cut in two; returns how many frames ``rec`` itself left out."""
    left = check_leave_out(dissector, rec)
    for i in range(mutated):
        check_leave_out(dissector, mutate(rec, rng, 1 + i % most))
    for i in range(4):
        cut = midstream(rec, rng)
        check_leave_out(dissector, cut if i % 2 else mutate(cut, rng, 2))
    if split:
        check_leave_out(dissector, split_feeds(rec, rng)[0])
    return left


def _may_leave_out(ev: Event, shown: set[int], dialect: str | None, anchors: list[list[Any]]) -> bool:
    """Whether a findings-only run may leave ``ev`` out (see :func:`check_leave_out`)."""
    return (plain(ev, anchors) and (ev.request is None or id(ev.request) not in shown)  # type: ignore[union-attr]
            and ev.dialect in (None, "", dialect))  # type: ignore[union-attr]


def mutate(rec: Recorded, rng: random.Random, n: int) -> Recorded:
    """``n`` random edits of the fed bytes: flip, insert, delete, or re-cut a feed in two."""
    calls = list(rec.calls)
    for _ in range(n):
        i = rng.choice([j for j, (name, args) in enumerate(calls) if name == "feed" and args[1]])
        d, data, ts = calls[i][1]
        buf = bytearray(data)
        pos = rng.randrange(len(buf))
        kind = rng.choice(("flip", "flip", "insert", "delete", "cut"))
        if kind == "flip":
            buf[pos] = rng.randrange(256)
        elif kind == "insert":
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        elif kind == "delete":
            del buf[pos:pos + rng.randint(1, 12)]
        calls[i] = ("feed", (d, bytes(buf), ts))
        if kind == "cut" and len(buf) > 1:
            at = rng.randrange(1, len(buf))
            calls[i:i + 1] = [("feed", (d, bytes(buf[:at]), ts)), ("feed", (d, bytes(buf[at:]), ts))]
    return Recorded(rec.protocol, rec.midstream, calls)


def midstream(rec: Recorded, rng: random.Random) -> Recorded:
    """The conversation as a capture that started late: the calls from a random one on, the
    first fed bytes cut at a random position (the tail of an unseen frame)."""
    feeds = [i for i, (name, args) in enumerate(rec.calls) if name == "feed" and len(args[1]) > 1]
    start = rng.choice(feeds[: max(1, len(feeds) // 2)])
    calls = list(rec.calls[start:])
    d, data, ts = calls[0][1]
    calls[0] = ("feed", (d, data[rng.randrange(1, len(data)):], ts))
    return Recorded(rec.protocol, True, calls)
