"""The Iggy dissector on the recordings of real clients (captures/iggy, facts.jsonl written by the
recording script from the responder's log and the client's own view):

- the dialect detected is the client's (every frame from the login on carries it);
- the request commands, in order, are those the session sent; the failed requests and their
  statuses are those the responder refused;
- every message polled is, byte for byte with its user headers, the message sent at that partition
  and offset, and the facts' payloads, ids and offsets; every checksum verifies (recomputed here
  from the frame bytes, CRC32 or XXH3-64 by dialect);
- a clean session gives no finding of warning level or above.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import xxhash

from analyzer.api import Direction, Field, Finding, Frame, Severity
from analyzer.engine import analyze_file

HERE = Path(__file__).resolve().parent.parent / "captures" / "iggy"
FACTS = [json.loads(line) for line in (HERE / "facts.jsonl").read_text().splitlines() if line.strip()] \
    if (HERE / "facts.jsonl").exists() else []
#: The clients the issue asks for, with the dialect each must show.
EXPECTED = {"iggy_py_0.4.0.pcap": "L1", "apache_iggy_0.5.0.pcap": "Z1", "apache_iggy_0.6.0.pcap": "Z2",
            "apache_iggy_0.7.0.pcap": "C", "apache_iggy_0.8.0.pcap": "C", "apache_iggy_0.9.0.pcap": "V"}
BY_CAPTURE = {f["capture"]: f for f in FACTS}


def facts(name: str) -> dict[str, Any]:
    f = BY_CAPTURE.get(name)
    if f is None or not (HERE / name).exists():
        pytest.skip(f"{name} has not been recorded yet (captures/iggy is filled by the capture session)")
    return f


@cache
def decoded(name: str) -> tuple[list[Frame], list[Finding]]:
    frames: list[Frame] = []
    loose: list[Finding] = []
    for e in analyze_file(str(HERE / name)):
        if isinstance(e, Frame):
            frames.append(e)
        else:
            loose.append(e)
    return frames, loose


def test_every_expected_capture_has_facts() -> None:
    assert set(EXPECTED) <= set(BY_CAPTURE), f"missing: {set(EXPECTED) - set(BY_CAPTURE)}"
    for name, dialect in EXPECTED.items():
        assert BY_CAPTURE[name]["dialect"] == dialect


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_dialect_is_detected(name: str) -> None:
    f = facts(name)
    frames, _ = decoded(name)
    assert frames and {fr.protocol for fr in frames} == {"iggy"}
    login = next(i for i, fr in enumerate(frames) if fr.command in ("LOGIN_USER", "LOGIN_REGISTER"))
    assert {fr.dialect for fr in frames[login:]} == {f["dialect"]}
    # Before it, only the SDK's opening PINGs (and their answers), which every dialect shares.
    assert all(fr.command in ("PING", "PING_RESPONSE") for fr in frames[:login])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_request_sequence_and_the_failures_are_what_the_session_sent(name: str) -> None:
    f = facts(name)
    frames, _ = decoded(name)
    assert [fr.code for fr in frames if fr.direction is Direction.C2S] == f["requests"]
    failed = [[fr.code, _status(fr)] for fr in frames if fr.direction is Direction.S2C and _status(fr)]
    assert failed == f["failed"]
    # Every response is paired, in order (V: by request number), and knows its latency.
    responses = [fr for fr in frames if fr.direction is Direction.S2C]
    assert len(responses) == len(f["requests"])
    assert all(fr.request is not None and fr.latency is not None and fr.latency >= 0 for fr in responses)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_warning_on_a_clean_session(name: str) -> None:
    facts(name)
    frames, loose = decoded(name)
    found = [x for fr in frames for x in fr.findings] + loose
    bad = [(x.id, x.message) for x in found if x.severity.rank >= Severity.WARNING.rank]
    assert bad == []
    # What remains are the refusals the session provoked, as notes naming their status.
    assert {x.id for x in found} <= {"iggy.response.refused"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_messages_polled_are_the_messages_sent_byte_for_byte(name: str) -> None:
    f = facts(name)
    frames, _ = decoded(name)
    dialect = f["dialect"]
    sent = [m for fr in frames if fr.command == "SEND_MESSAGES" for m in _messages(fr)]
    polled = [m for fr in frames if fr.command == "POLL_MESSAGES_RESPONSE" for m in _messages(fr)]
    assert len(sent) == len(f["messages_sent"]) and len(polled) == len(f["messages_polled"])
    # The facts: payloads (or their digest), ids, offsets, user-header bytes.
    for got, want in zip(polled, f["messages_polled"], strict=True):
        _same(got, want)
        assert got["offset"] == want["offset"]
        assert got["id"] == want["id"]
    for got, want in zip(sent, f["messages_sent"], strict=True):
        _same(got, want)
        assert got["id"] == want["id"]  # 0 where the server assigns one
    # Each polled message is the one sent at its partition and offset, payload and headers alike.
    by_place = {(w["partition"], w["offset"]): got for got, w in zip(sent, f["messages_sent"], strict=True)}
    for got, want in zip(polled, f["messages_polled"], strict=True):
        original = by_place[(want["partition"], want["offset"])]
        assert got["payload"] == original["payload"]
        assert got["headers"] == original["headers"]
    # Every polled checksum verifies, recomputed from the frame bytes.
    for got, want in zip(polled, f["messages_polled"], strict=True):
        assert got["checksum"] == _checksum(dialect, got) == int(want["checksum"])


# ---------------------------------------------------------------------- helpers
def _status(fr: Frame) -> int:
    top = fr.get("status")
    if top is not None:
        return int(top)
    header = next((x for x in fr.fields if x.name == "header"), None)
    kids = {k.name: k.value for k in (header.children or ())} if header is not None else {}
    return int(kids.get("status", 0))


def _messages(fr: Frame) -> list[dict[str, Any]]:
    """Every message of a frame with the exact bytes of its parts, from the decoded fields' spans."""
    data = fr.data or b""
    out: list[dict[str, Any]] = []

    def walk(fields: list[Field]) -> None:
        for x in fields:
            kids = {k.name: k for k in x.children or ()}
            if x.name.startswith("[") and "payload" in kids:
                p = kids["payload"]
                h = kids.get("headers")
                out.append({"payload": data[p.offset:p.offset + p.size],
                            "headers": data[h.offset:h.offset + h.size] if h is not None and h.size else b"",
                            "id": kids["id"].value if "id" in kids else None,
                            "offset": _offset(kids), "checksum": kids["checksum"].value if "checksum" in kids else None,
                            "span": (x.offset, x.size), "frame": data})
            elif x.children:
                walk(x.children)

    walk(fr.fields)
    return out


def _offset(kids: dict[str, Field]) -> int | None:
    if "offset" in kids:
        return int(kids["offset"].value)
    return None


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    if "payload_hex" in want:
        assert got["payload"].hex() == want["payload_hex"]
    else:
        assert len(got["payload"]) == want["len"]
        assert hashlib.sha256(got["payload"]).hexdigest() == want["payload_sha256"]
    if "headers_hex" in want:
        assert got["headers"].hex() == want["headers_hex"]


def _checksum(dialect: str, m: dict[str, Any]) -> int:
    """iggy.md 5.2/5.3/9.6: legacy CRC32 of the payload; else the frame after its 8 checksum bytes,
    CRC32 (Z1) or XXH3-64 (Z2 on)."""
    if dialect in ("L0", "L1"):
        return zlib.crc32(m["payload"])
    at, size = m["span"]
    body = m["frame"][at + 8:at + size]
    return zlib.crc32(body) if dialect == "Z1" else xxhash.xxh3_64_intdigest(body)
