"""A findings-only run lets an AMQP/Fast connection leave out what its hot path makes that carries
nothing to show (Connection.leave_out_plain_frames): the fragments' frames, the commands that
continue a message, acknowledgements. A fragment that waited for what its direction sends next
and was settled because the other direction went on is counted in other_frames_left_out.
Differential against the same connection making every frame (tests.replay.check_leave_out): call
by call, the events it still gives are the full run's in the same order and the same form, the
ones it leaves out are plain frames, counted exactly, on every bundled capture, mutated and
mid-stream variants of them, and the busy sessions of the hot-path test."""

from __future__ import annotations

import random

import pytest

from dissectors.amqp_fast import AmqpFastDissector
from tests.replay import check_leave_out, check_leave_out_variants, lean_calls
from tests.test_amqp091_hotpath import mutants
from tests.test_amqp_fast_hot import ALL, ODD, busy_session, odd_session, recordings

DISSECTOR = AmqpFastDissector()


@pytest.mark.parametrize("name", ALL)
def test_leaving_out_on_every_capture_and_variants(name: str) -> None:
    rng = random.Random(f"fast-lean-{name}")
    for rec in recordings(name):
        check_leave_out_variants(DISSECTOR, rec, rng, 8, 6)


@pytest.mark.parametrize("seed", range(4))
def test_leaving_out_on_busy_sessions(seed: int) -> None:
    rec = busy_session(seed)
    assert check_leave_out(DISSECTOR, rec) > 100  # frames really are left out
    # Some of them settled by the other direction's bytes.
    assert sum(other for _, _, other, _ in lean_calls(DISSECTOR, rec, True)) > 0
    for variant in mutants(rec, f"fast-lean-busy-{seed}", 20, 4):
        check_leave_out(DISSECTOR, variant)


@pytest.mark.parametrize("odd", sorted(ODD))
@pytest.mark.parametrize("where", ["fragment", "short", "boundary"])
def test_leaving_out_around_odd_octets(odd: str, where: str) -> None:
    for cut in (0, 1, 5, 64):
        check_leave_out(DISSECTOR, odd_session(where, ODD[odd], cut))


def test_a_resumed_connection_makes_every_frame_until_asked() -> None:
    # leave_out belongs to the run: a snapshot does not carry it.
    conn = DISSECTOR.connection(False)
    conn.leave_out_plain_frames()
    conn.frames_left_out, conn.other_frames_left_out = 2, 1
    resumed = DISSECTOR.resume(conn.snapshot())
    assert (resumed.leave_out, resumed.frames_left_out, resumed.other_frames_left_out) == (False, 0, 0)
