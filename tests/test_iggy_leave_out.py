"""A findings-only run lets an Iggy connection leave out a classic response that carries nothing
to show (Connection.leave_out_plain_frames): no finding, answering a request given back without
findings, in the dialect the frames given back last carried; its classic requests make their Info
line only if read (a lazy frame). Differential against the same
connection making every frame (tests.replay.check_leave_out): call by call, the events it still
gives are the full run's in the same order and the same form, and the ones it leaves out are
counted exactly, on every bundled Iggy capture (every dialect, every rule's capture), mutated,
mid-stream and cut variants of them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dissectors.iggy import IggyDissector
from tests import replay as R
from tests.replay import check_leave_out, check_leave_out_variants

CAPS = Path(__file__).resolve().parent.parent / "captures" / "iggy"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*") if p.name.endswith((".pcap", ".pcap.gz")))
DISSECTOR = IggyDissector()
#: Recorded from real clients speaking a classic dialect (0.9.0 speaks V, whose replies are all made).
CLASSIC_RECORDED = [f"apache_iggy_0.{v}.0.pcap" for v in (5, 6, 7, 8)] + ["iggy_py_0.4.0.pcap"]


def test_the_corpus() -> None:
    assert len(ALL) >= 35 and "apache_iggy_0.7.0.pcap" in ALL and "synthetic/rule_value_invalid.pcap" in ALL


@pytest.mark.parametrize("name", ALL)
def test_leaving_out_on_every_capture_and_variants(name: str) -> None:
    rng = random.Random(f"iggy-lean-{name}")
    left = 0
    for rec in R.recordings(str(CAPS / name), "iggy"):
        left += check_leave_out_variants(DISSECTOR, rec, rng, 6, 4, split=True)
    if name in CLASSIC_RECORDED:
        assert left > 10  # responses really are left out


def test_the_answer_to_a_request_with_findings_is_given_back() -> None:
    # rule_value_invalid: a request with an invalid value (a finding), answered without one.
    rec = R.recordings(str(CAPS / "synthetic" / "rule_value_invalid.pcap"), "iggy")[0]
    check_leave_out(DISSECTOR, rec)
    given = [e for events, _, _, _ in R.lean_calls(DISSECTOR, rec, True) for e in events]
    flagged = [e for e in given if getattr(e, "awaits", False) and e.findings]
    assert flagged and all(any(getattr(r, "request", None) is f.ref for r in given) for f in flagged)


def test_a_resumed_connection_makes_every_frame_until_asked() -> None:
    conn = DISSECTOR.connection(False)
    conn.leave_out_plain_frames()
    conn.frames_left_out, conn.given_dialect = 2, "C"
    resumed = DISSECTOR.resume(conn.snapshot())
    assert (resumed.leave_out, resumed.frames_left_out, resumed.given_dialect) == (False, 0, None)
