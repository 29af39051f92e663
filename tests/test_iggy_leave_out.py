"""A findings-only run lets an Iggy connection leave out a classic response or V reply that carries
nothing to show (Connection.leave_out_plain_frames): no finding, answering a request given back without
findings, in the dialect the frames given back last carried; its classic requests make their Info
line only if read (a lazy frame). Differential against the same
connection making every frame (tests.replay.check_leave_out): call by call, the events it still
gives are the full run's in the same order and the same form, and the ones it leaves out are
counted exactly, on every bundled Iggy capture (every dialect, every rule's capture), mutated,
mid-stream and cut variants of them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzer.api import Frame
from dissectors.iggy import IggyDissector, payloads
from dissectors.iggy.commands import COMMANDS
from dissectors.iggy.ends import CLEAN_END
from dissectors.schema import Struct
from tests import replay as R
from tests.replay import check_leave_out, check_leave_out_variants

CAPS = Path(__file__).resolve().parent.parent / "captures" / "iggy"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*") if p.name.endswith((".pcap", ".pcap.gz")))
DISSECTOR = IggyDissector()
#: Recorded from real clients: every classic dialect, and V (0.9.0).
RECORDED = [f"apache_iggy_0.{v}.0.pcap" for v in (5, 6, 7, 8, 9)] + ["iggy_py_0.4.0.pcap"]


def test_the_corpus() -> None:
    assert len(ALL) >= 35 and "apache_iggy_0.7.0.pcap" in ALL and "synthetic/rule_value_invalid.pcap" in ALL


@pytest.mark.parametrize("name", ALL)
def test_leaving_out_on_every_capture_and_variants(name: str) -> None:
    rng = random.Random(f"iggy-lean-{name}")
    left = 0
    for rec in R.recordings(str(CAPS / name), "iggy"):
        left += check_leave_out_variants(DISSECTOR, rec, rng, 6, 4, split=True)
    if name in RECORDED:
        assert left > 10  # responses (V: replies) really are left out


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


def _requests() -> dict[tuple[int, bytes], None]:
    """Every classic request of the bundled captures (command code, the frame's bytes), once."""
    out: dict[tuple[int, bytes], None] = {}
    for name in ALL:
        for rec in R.recordings(str(CAPS / name), "iggy"):
            for ev in R.events(DISSECTOR, rec):
                if isinstance(ev, Frame) and ev.direction == "c2s" and ev.code in COMMANDS and ev.data:
                    out[ev.code, bytes(ev.data)] = None
    return out


def _variants(data: bytes) -> Iterator[bytes]:
    """The request, each payload octet set to a few telling values, each octet taken as a length
    prefix and its value emptied (with a kind of 1, 2 or 3 before it too) or made one shorter (the
    rest still fitting), cut short at every length, and with octets after it."""
    yield data
    for i in range(8, len(data)):
        for v in (0, 1, 2, 3, 4, 5, 6, 0x80, 0xFF):
            if data[i] != v:
                yield data[:i] + bytes([v]) + data[i + 1:]
        n = data[i]
        if n and i + 1 + n <= len(data):
            emptied = data[:i] + b"\x00" + data[i + 1 + n:]
            yield emptied
            for kind in (1, 2, 3):  # and the octet before it (a kind) changed too
                yield emptied[:i - 1] + bytes([kind]) + emptied[i:]
            yield data[:i] + bytes([n - 1]) + data[i + 1:i + n] + data[i + 1 + n:]
    for n in range(8, len(data)):
        yield data[:n]
    for tail in (b"\x00", b"\x01\x02\x03"):
        yield data + tail


def test_a_clean_layout_is_what_its_decode_finds_nothing_wrong_with() -> None:
    # payloads.clean tells a findings-only run that a request's decode would have nothing to say
    # (so its Fields are left to the view): for every layout whose types it knows, exactly when
    # the decode is neither cut, nor leaves bytes over, nor notes a problem.
    checked = clean_ones = 0
    for code, data in _requests():
        for _dialects, layout in COMMANDS[code].layouts:
            if type(layout) is not Struct or any(type(f.type) not in CLEAN_END for f in layout.fields):
                continue
            for v in _variants(data):
                d = payloads.decode(layout, v, 8)
                want = d.cut is None and d.trailing is None and not d.problems
                assert payloads.clean(layout, v, 8) == want, (COMMANDS[code].name, layout.doc, v.hex())
                checked += 1
                clean_ones += want
    assert checked > 5000 and clean_ones > 100, (checked, clean_ones)


def test_clean_requests_of_a_findings_only_run_are_decoded_only_if_read() -> None:
    from dissectors.iggy.connection import _clean_request
    from dissectors.kit.lazy import LazyFrame

    rec = R.recordings(str(CAPS / "apache_iggy_0.7.0.pcap"), "iggy")[0]
    given = [e for events, _, _, _ in R.lean_calls(DISSECTOR, rec, True) for e in events]
    for command in ("POLL_MESSAGES", "SEND_MESSAGES"):
        lean = [e for e in given if getattr(e, "command", None) == command]
        # (a request sent while several dialects remained is decoded at once, as before)
        assert sum(type(e) is LazyFrame and e._build is _clean_request for e in lean) >= len(lean) - 1 >= 1
        full = [e for events, _, _, _ in R.lean_calls(DISSECTOR, rec, False) for e in events
                if getattr(e, "command", None) == command]
        assert [(e.info, R.normal([e])) for e in lean] == [(e.info, R.normal([e])) for e in full]


def test_a_clean_send_is_what_its_decode_finds_nothing_wrong_with() -> None:
    # messages.send_messages_clean tells a findings-only run that a SEND_MESSAGES request's decode
    # would have nothing to say, for the dialects it knows (Z1, Z2, C, V): exactly then.
    from dissectors.iggy.messages import decode_send_messages, send_messages_clean

    sends = [(dialect, data) for code, data in _requests()
             if COMMANDS[code].name == "SEND_MESSAGES" and len(data) <= 500  # the small ones: 14 sends
             for dialect in ("Z1", "Z2", "C")]
    sends += [("V", data) for data in _v_sends()]
    checked = clean_ones = 0
    counted: dict[str, int] = {}
    for dialect, data in sends:
        for v in _variants(data):
            d = decode_send_messages(dialect, v, 8, len(v))
            tried = [(v, d)]
            # A variant that changed the metadata's length, with metadata_length made to agree.
            count = next((f for f in d.fields if f.name == "messages_count"), None)
            if count is not None and count.offset - 8 != int.from_bytes(v[8:12], "little"):
                fixed = v[:8] + (count.offset - 8).to_bytes(4, "little") + v[12:]
                tried.append((fixed, decode_send_messages(dialect, fixed, 8, len(fixed))))
            for got, decoded in tried:
                want = not decoded.problems
                assert send_messages_clean(dialect, got, 8) == want, (dialect, got.hex())
                checked += 1
                clean_ones += want
                counted[dialect] = counted.get(dialect, 0) + want
    assert checked > 5000 and clean_ones > 20, (checked, clean_ones)
    assert counted["V"] >= 2, counted  # the recorded sends themselves at least


def test_a_clean_poll_answer_is_what_its_decode_finds_nothing_wrong_with() -> None:
    # messages.polled_clean tells a findings-only run that a POLL_MESSAGES answer's decode would
    # have nothing to say (so the reply is left out without its Fields made), for the dialects it
    # knows (Z1, Z2, C, V): exactly then; never for the legacy ones.
    from dissectors.iggy.messages import LEGACY, decode_polled, polled_clean

    checked = clean_ones = 0
    counted: dict[str, int] = {}
    answers = _poll_answers()
    assert {d for d, _ in answers} >= {"Z2", "C", "V"}, sorted({d for d, _ in answers})
    for dialect, data in answers:
        # Z2's answers read as Z1's too (CRC32 instead of XXH3: checksums that do not verify), and
        # as L1's (legacy: never clean).
        for d in (dialect, "Z1", "L1") if dialect == "Z2" else (dialect,):
            for v in _variants(data):
                want = not decode_polled(d, v, 8, len(v)).problems and d not in LEGACY
                assert polled_clean(d, v, 8) == want, (d, v.hex())
                checked += 1
                clean_ones += want
                counted[d] = counted.get(d, 0) + want
    assert checked > 5000 and clean_ones > 50, (checked, clean_ones)
    assert min(counted[d] for d in ("Z1", "Z2", "C", "V")) >= 2 and counted["L1"] == 0, counted


def _poll_answers() -> list[tuple[str, bytes]]:
    """The small POLL_MESSAGES answers of the bundled captures with their dialect, the payload
    behind 8 octets (a classic response's own; a V reply's header replaced), each once."""
    out: dict[tuple[str, bytes], None] = {}
    for name in ALL:
        for rec in R.recordings(str(CAPS / name), "iggy"):
            for ev in R.events(DISSECTOR, rec):
                if (isinstance(ev, Frame) and ev.command == "POLL_MESSAGES_RESPONSE" and ev.data and ev.dialect
                        and len(ev.data) <= 700):
                    body = bytes(8) + bytes(ev.data[256:]) if ev.dialect == "V" else bytes(ev.data)
                    if len(body) > 8:
                        out[ev.dialect, body] = None
    return list(out)


def _v_sends() -> list[bytes]:
    """The bodies of the small V SEND_MESSAGES requests of the bundled captures, each behind 8
    octets (where a classic request's payload starts, as _variants wants it)."""
    out: dict[bytes, None] = {}
    for name in ALL:
        for rec in R.recordings(str(CAPS / name), "iggy"):
            for ev in R.events(DISSECTOR, rec):
                if (isinstance(ev, Frame) and ev.dialect == "V" and ev.command == "SEND_MESSAGES" and ev.data
                        and len(ev.data) <= 800):
                    out[bytes(8) + bytes(ev.data[256:])] = None
    assert len(out) >= 2
    return list(out)


def test_clean_v_requests_of_a_findings_only_run_are_decoded_only_if_read() -> None:
    from dissectors.iggy.connection import _v_clean_request
    from dissectors.kit.lazy import LazyFrame

    rec = R.recordings(str(CAPS / "apache_iggy_0.9.0.pcap"), "iggy")[0]
    given = [e for events, _, _, _ in R.lean_calls(DISSECTOR, rec, True) for e in events]
    full = [e for events, _, _, _ in R.lean_calls(DISSECTOR, rec, False) for e in events]
    lazy = [e for e in given if type(e) is LazyFrame and e._build is _v_clean_request]
    assert {e.command for e in lazy} >= {"POLL_MESSAGES", "SEND_MESSAGES", "PING", "GET_CLUSTER_METADATA"}
    requests = [e for e in given if getattr(e, "direction", None) == "c2s"]
    # every request is given back, and read it says what the full run's frame says
    assert len(requests) == len([e for e in full if getattr(e, "direction", None) == "c2s"])
    by_offset = {e.offset: e for e in full if getattr(e, "direction", None) == "c2s"}
    for e in lazy:
        assert e._build is not None  # nothing read it yet
        twin = by_offset[e.offset]
        assert (e.info, R.normal([e])) == (twin.info, R.normal([twin]))


def test_a_clean_v_send_reply_is_what_its_decode_finds_nothing_wrong_with() -> None:
    # responses.confirmations_clean tells a findings-only run (and a summary) that a V
    # SEND_MESSAGES reply's confirmations would decode with nothing to say: exactly then, and its
    # Info from them is the decode's; the classic dialects' empty answers are never told clean.
    from dissectors.iggy.responses import confirmations_info, decode_response

    replies: dict[bytes, None] = {}
    for name in ALL:
        for rec in R.recordings(str(CAPS / name), "iggy"):
            for ev in R.events(DISSECTOR, rec):
                if (isinstance(ev, Frame) and ev.dialect == "V" and ev.command == "SEND_MESSAGES_RESPONSE"
                        and ev.data and len(ev.data) > 256):
                    replies[bytes(8) + bytes(ev.data[256:])] = None
    assert replies
    two = next(iter(replies))  # and one with two confirmations, one with none
    replies[two[:8] + (2).to_bytes(4, "little") + two[12:] * 2] = None
    replies[two[:8] + bytes(4)] = None
    checked = clean_ones = 0
    for data in replies:
        for v in _variants(data):
            decoded = decode_response(101, "V", v, 8, len(v))
            want = not decoded.problems
            assert payloads.clean_response(101, "V", v, 8) == want, v.hex()
            assert not payloads.clean_response(101, "C", v, 8)
            if want:
                assert confirmations_info(v, 8) == decoded.info == payloads.clean_response_info(101, v, 8), v.hex()
            checked += 1
            clean_ones += want
    assert checked > 500 and clean_ones > 50, (checked, clean_ones)
