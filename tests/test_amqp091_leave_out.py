"""A findings-only run lets an AMQP 0-9-1 connection leave out the frames its hot path checked
(methods, content headers and bodies) when they carry nothing to show (Connection.
leave_out_plain_frames, counted in frames_left_out instead). Differential against the same
connection making every frame: call by call, the events it still gives are the full run's in the
same order and the same form (tests.replay.normal), the ones it leaves out are frames without
findings, anchor, link or dialect, and it counts exactly those; on every bundled capture, mutated
and mid-stream variants of them, and the busy session of the hot-path test."""

from __future__ import annotations

import pytest

from dissectors.amqp091 import Amqp091Dissector
from dissectors.amqp091 import encode as E
from tests.replay import Recorded, check_leave_out, lean_calls, normal, plain
from tests.test_amqp091_hotpath import ALL, busy_session, busy_variants, mutants, sync_session, variants

DISSECTOR = Amqp091Dissector()


def run(rec: Recorded, leave_out: bool) -> list[tuple[list, int]]:
    """Per call: the events in normal form (each with whether it is a plain frame), and
    how many frames the connection counted instead of making."""
    return [(list(zip(normal(events), map(plain, events), strict=True)), own)
            for events, own, _, _ in lean_calls(DISSECTOR, rec, leave_out)]


def check(rec: Recorded) -> int:
    """Asserts the lean run is the full run minus counted plain frames; how many were left out."""
    return check_leave_out(DISSECTOR, rec)


@pytest.mark.parametrize("name", ALL)
def test_leaving_out_on_every_capture_and_variants(name: str) -> None:
    for rec in variants(name, f"lean-{name}", mutated=20, joined=6):
        check(rec)


def test_leaving_out_on_a_busy_session() -> None:
    rec = busy_session()
    assert check(rec) > 100  # frames really are left out
    for variant in busy_variants("lean-busy", 100):
        check(variant)


def test_leaving_out_on_synchronous_exchanges() -> None:
    # Requests awaiting their replies and the replies are given back; the rest of the hot frames
    # (acks, a nowait declare, the transaction's publishes) are left out.
    rec = sync_session()
    assert check(rec) >= 10
    for variant in mutants(rec, "lean-sync", 100, 4):
        check(variant)


def test_a_resumed_connection_makes_every_frame_until_asked() -> None:
    # leave_out belongs to the run: a snapshot does not carry it.
    conn = DISSECTOR.connection(False)
    conn.leave_out_plain_frames()
    resumed = DISSECTOR.resume(conn.snapshot())
    assert resumed.leave_out is False and resumed.frames_left_out == 0


def test_a_shown_last_body_frame_still_previews_the_bytes_of_left_out_ones() -> None:
    # Three body frames, each in its own segment; the last one carries more than the header
    # announced (a finding: the general path takes it and shows the message). The first two were
    # left out, but their bytes are the start of its preview.
    s = E.Script().handshake().open_channel(1)
    s.c(E.method("Basic.Publish", 1, exchange="", routing_key="q") + E.content_header(1, 12, {"content-type": "text/plain"}))
    s.c(E.body(1, b"abcd"))
    s.c(E.body(1, b"efgh"))
    s.c(E.body(1, b"ijklmn"))
    s.close((1,))
    rec = Recorded("amqp091", False, [("feed", (d, data, ts)) for d, data, ts in s.steps] + [("end", (s.ts + 1,))])
    assert check(rec) == 4  # the publish (its anchor handed over), the header and the first two body frames
    shown = [e for call, _ in run(rec, True) for e, _ in call if e[0] == "frame" and e[4] == "ContentBody"]
    assert len(shown) == 1 and "abcdefghijkl" in shown[0][6] and shown[0][9]


def test_a_frame_made_for_a_finding_keeps_what_its_action_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    # A findings-only run's action of a method without content (ack, nack, reject) writes into a
    # scratch frame, and a frame is made only when it found something. No action now both finds
    # something and adds a computed field (settle does one or the other), so a probe does both:
    # the frame made must carry the field as the full run's frame does, and the next one must not.
    from dissectors.amqp091 import hotpath
    from dissectors.amqp091 import rules as R
    from dissectors.kit.lazy import add_computed

    def probe(act):  # noqa: ANN001, ANN202 - the hot path's action signature
        def probed(conn, d, ch, meth, values, frame):  # noqa: ANN001, ANN202
            text = act(conn, d, ch, meth, values, frame)
            add_computed(frame, "probe", values.get("delivery_tag"), "probe")
            if values.get("delivery_tag", 0) % 2:
                frame.findings.append(R.ACK_UNKNOWN_TAG("probe"))
            return text
        return probed

    for table in hotpath._HOT_METHODS.values():
        for key, (meth, validate, act, *flags) in list(table.items()):
            if not meth.content:
                monkeypatch.setitem(table, key, (meth, validate, probe(act), *flags))
    rec = busy_session()
    check(rec)
    shown = [e for call, _ in run(rec, True) for e, _ in call if e[0] == "frame" and e[4] in ("Basic.Ack", "Basic.Nack")]
    assert shown and all('"probe": ' in e[8] and e[9] for e in shown)
