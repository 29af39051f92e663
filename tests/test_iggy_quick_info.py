"""When the view reads Info lines (``inspect -T summary`` tells each connection:
Connection.read_for_info_lines), a request with nothing to say of it is a lazy frame
(Connection._request, _v_clean_command), and so is a poll's clean answer (_lazy_answer,
_v_clean_reply): their Info lines come from the few values they name (connection._clean_info:
payloads.info_items, messages.send_messages_info; messages.polled_info), their Fields only if read.
Held here to the decode they stand for: on every request and poll answer of the bundled captures
in every dialect that knows its command, and on mutated, cut and extended variants of them
whenever they stay clean; and every capture's frames to those of a run not told (every frame
decoded at once, as the tree and JSON views have them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Frame
from dissectors.iggy import IggyDissector, payloads
from dissectors.iggy.commands import COMMANDS
from dissectors.iggy.connection import (
    _clean_info,
    _clean_request,
    _clean_response_fields,
    _request_info,
    _v_clean_reply_fields,
    _v_clean_request,
)
from dissectors.iggy.ends import CLEAN_END, INFO_ITEM
from dissectors.iggy.types import PARTITIONING, Partitioning
from dissectors.kit.lazy import QUICK_INFO, LazyFrame
from dissectors.schema import F
from tests import replay as R
from tests.test_iggy_leave_out import _poll_answers, _requests, _v_sends, _variants

CAPS = Path(__file__).resolve().parent.parent / "captures" / "iggy"
ALL = sorted(str(p.relative_to(CAPS)) for p in CAPS.rglob("*") if p.name.endswith((".pcap", ".pcap.gz")))
DISSECTOR = IggyDissector()


def test_every_type_with_an_end_function_has_an_info_item() -> None:
    assert INFO_ITEM.keys() == CLEAN_END.keys()
    # Partitioning's (no Info line names one): its read's display, on every kind
    spec = F("partitioning", PARTITIONING)
    for raw in (b"\x01\x00", b"\x02\x04\x07\x00\x00\x00", b"\x03\x03abc", b"\x03\x28" + bytes(range(40))):
        f, stop = PARTITIONING.read("partitioning", memoryview(raw), 0, len(raw), spec)
        assert INFO_ITEM[Partitioning](PARTITIONING, raw, 0, spec) == (f.display, stop) == (f.display, len(raw))


def test_the_info_line_from_a_few_values_is_the_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: dict[str, set[Any]] = {}  # what each Info item function gave

    def counted(t: type, item: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            got = item(*args)
            shown.setdefault(t.__name__, set()).add(got[0])
            return got
        return wrapped

    for t, item in list(INFO_ITEM.items()):
        monkeypatch.setitem(INFO_ITEM, t, counted(t, item))
    checked = 0
    counted: dict[str, int] = {}
    cases = [(code, dialect, data) for code, data in _requests() if len(data) <= 500  # 14 sends, every other
             for dialect in COMMANDS[code].by_dialect]
    cases += [(101, "V", data) for data in _v_sends()]
    for code, dialect, data in cases:
        cmd = COMMANDS[code]
        for v in _variants(data):
            if not payloads.clean_request(cmd, dialect, v, 8):
                continue
            want = _request_info(cmd, payloads.request(cmd, dialect, v, 8))
            assert _clean_info(cmd, dialect, v, 8) == want, (cmd.name, dialect, v.hex())
            checked += 1
            counted[cmd.name] = counted.get(cmd.name, 0) + 1
    assert checked > 2000, checked
    # every Info item function, on values of several forms (the Bool8 fields are named by no line)
    assert {t: len(v) for t, v in shown.items() if len(v) >= 2}.keys() == {
        "Int", "Identifier", "Consumer", "PollingStrategy", "OptionalPartition"}, shown
    # the busy ones, a command with an optional field (partition) and one without Info items
    assert min(counted.get(n, 0) for n in ("SEND_MESSAGES", "POLL_MESSAGES", "STORE_CONSUMER_OFFSET",
                                           "PING")) >= 3, counted


def test_a_clean_poll_answers_info_is_its_decodes() -> None:
    from dissectors.iggy.messages import decode_polled, polled_clean, polled_info

    checked = 0
    for dialect, data in _poll_answers():
        for v in _variants(data):
            if polled_clean(dialect, v, 8):
                assert polled_info(v, 8) == decode_polled(dialect, v, 8, len(v)).info, (dialect, v.hex())
                checked += 1
    assert checked > 200, checked


def _events(rec: R.Recorded, info_lines: bool) -> list[Any]:
    """R.events, the connection told (or not) that the view reads Info lines."""
    conn = DISSECTOR.connection(rec.midstream)
    if info_lines:
        conn.read_for_info_lines()
    return [ev for name, args in rec.calls for ev in getattr(conn, name)(*args) or ()]


@pytest.mark.parametrize("name", ALL)
def test_the_lazy_frames_are_the_frames_decoded_at_once(name: str) -> None:
    lazy: dict[Any, int] = {}
    runs = []
    for told in (True, False):
        seen = []
        for rec in R.recordings(str(CAPS / name), "iggy"):
            events = _events(rec, told)
            for ev in events:
                if type(ev) is LazyFrame:
                    lazy[ev._build, told] = lazy.get((ev._build, told), 0) + 1
            seen.append(R.normal(events))
        runs.append(seen)
    assert runs[0] == runs[1]
    builds = (_clean_request, _clean_response_fields, _v_clean_request, _v_clean_reply_fields)
    assert not any(build in builds for build, told in lazy if not told), lazy
    if name.startswith("apache_iggy_0.") and name != "apache_iggy_0.9.0.pcap":
        assert lazy.get((_clean_request, True), 0) >= 5 and lazy.get((_clean_response_fields, True), 0) >= 2, lazy
    if name == "apache_iggy_0.9.0.pcap":
        assert lazy.get((_v_clean_request, True), 0) >= 5 and lazy.get((_v_clean_reply_fields, True), 0) >= 2, lazy


@pytest.mark.parametrize("name", ALL)
def test_every_lazy_request_tells_its_info_without_its_tree(name: str) -> None:
    lazy = 0
    for rec in R.recordings(str(CAPS / name), "iggy"):
        for ev in _events(rec, True):
            if type(ev) is not LazyFrame or ev._build not in (_clean_request, _v_clean_request):
                continue
            build, ctx = ev._build, ev._ctx
            text = ev.info
            assert ev._build is build  # the Info line was read without building the tree
            fields, built = build(ev, ctx)
            assert text == built and QUICK_INFO[build](ev, ctx) == built
            assert ev.fields and ev.fields == fields  # and the tree, when read, is the decode's
            lazy += 1
    if name.startswith("apache_iggy") or name in ("synthetic/c_session.pcap", "synthetic/v_session.pcap"):
        assert lazy >= 3, lazy


def test_a_summary_makes_no_fields_of_clean_requests() -> None:
    rec = R.recordings(str(CAPS / "apache_iggy_0.7.0.pcap"), "iggy")[0]
    requests = [e for e in _events(rec, True) if isinstance(e, Frame) and e.direction == "c2s"]
    # Until the first send settles the dialect, requests are decoded at once (as before); from then
    # on every send and poll is lazy, and so is every other request whose types have clean tests.
    settled = requests[[e.command for e in requests].index("SEND_MESSAGES") + 1:]
    busy = [e for e in settled if e.command in ("SEND_MESSAGES", "POLL_MESSAGES")]
    assert len(busy) >= 6 and all(type(e) is LazyFrame and e._build is _clean_request for e in busy)
    lazy = [e for e in settled if type(e) is LazyFrame and e._build is _clean_request]
    assert {e.command for e in lazy} >= {"GET_STREAM", "JOIN_CONSUMER_GROUP", "STORE_CONSUMER_OFFSET"}


@pytest.mark.parametrize("fmt", ["summary", "jsonl", "tree"])
def test_inspect_tells_the_connections_in_the_summary_alone(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from analyzer.cli import app
    from dissectors.iggy.connection import IggyConnection

    told: list[bool] = []
    monkeypatch.setattr(IggyConnection, "read_for_info_lines", lambda self: told.append(True))
    args = ["inspect", str(CAPS / "apache_iggy_0.7.0.pcap"), "--jobs", "1", "--format", fmt]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "POLL_MESSAGES" in result.output
    assert told == ([True] if fmt == "summary" else [])
    result = CliRunner().invoke(app, [*args, "-V"])  # the tree, whatever -T says
    assert result.exit_code == 0 and told == ([True] if fmt == "summary" else [])
