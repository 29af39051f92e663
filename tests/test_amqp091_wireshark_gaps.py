"""Real recordings of the places where Wireshark's AMQP 0-9-1 dissector is known to be wrong
(/work/shared/specs/prior-art-wireshark.md), decoded by us and by tshark on the same bytes.

Each case asserts our exact facts, then asserts what tshark (through pyshark) actually does. The tshark
assertions pin Wireshark's CURRENT behaviour: if a test of that kind fails after a tshark upgrade,
Wireshark has changed (probably fixed the gap), and the comment next to it should be updated.
Captures: captures/amqp091/MANIFEST.md; recorded by captures/amqp091/record.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Field, Finding, Frame, Severity
from analyzer.engine import analyze_file
from tests.pyshark_rows import pyshark_rows

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp091"
PI_ERROR = 0x00800000  # Wireshark's expert severity "Error"


@cache
def events(name: str) -> tuple[list[Frame], list[Finding]]:
    evs = list(analyze_file(str(CAPS / name)))
    frames = [e for e in evs if isinstance(e, Frame)]
    findings = [e for e in evs if isinstance(e, Finding)] + [f for fr in frames for f in fr.findings]
    return frames, findings


def cmd(frames: list[Frame], command: str) -> list[Frame]:
    return [f for f in frames if f.command == command]


def message(frame: Frame) -> dict[str, Any]:
    m = next(f for f in frame.fields if f.name == "message")
    return {c.name: c.value for c in m.children or ()}


def assert_clean(name: str) -> list[Frame]:
    frames, findings = events(name)
    bad = [f for f in findings if f.severity.rank >= Severity.WARNING.rank]
    assert bad == [], [(f.id, f.message) for f in bad]
    assert all(f.protocol == "amqp091" for f in frames)
    assert frames[0].command == "ProtocolHeader" and frames[0].dialect == "0-9-1"
    return frames


@cache
def tshark_packets(name: str, decode_as: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    """Per packet: TCP source port, every AMQP PDU (type, class, method, length, experts), malformed
    marker, TCP reassembled length, and the field-table entries tshark shows."""
    return pyshark_rows(lambda: _read_packets(name, decode_as))  # see tests/pyshark_rows.py


def _read_packets(name: str, decode_as: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    import pyshark

    cap = pyshark.FileCapture(str(CAPS / name), display_filter="amqp || _ws.malformed", keep_packets=False,
                              decode_as=dict(decode_as) or None)
    out = []
    try:
        for pkt in cap:
            row: dict[str, Any] = {"packet": int(pkt.number), "pdus": [], "malformed": None, "reassembled": None}
            for layer in pkt.layers:
                if layer.layer_name == "tcp":
                    row["srcport"] = int(layer.get_field_value("srcport"))
                elif layer.layer_name == "DATA":
                    n = layer.get_field_value("tcp_reassembled_length")
                    row["reassembled"] = int(n) if n is not None else None
                elif layer.layer_name == "_ws.malformed":
                    row["malformed"] = layer.get_field_value("_ws_expert_message")
                elif layer.layer_name == "amqp":
                    experts = layer.get_field("_ws_expert_message")
                    sev = layer.get_field("_ws_expert_severity")
                    pdu = {k: layer.get_field_value(k) for k in ("type", "channel", "length", "method_class",
                                                                  "method_method")}
                    pdu["experts"] = [x.show for x in experts.all_fields] if experts is not None else []
                    pdu["severities"] = [int(x.show) for x in sev.all_fields] if sev is not None else []
                    for key in ("field", "field_timestamp", "field_byte_array"):
                        f = layer.get_field(key)
                        pdu[key] = [x.showname for x in f.all_fields] if f is not None else []
                    row["pdus"].append(pdu)
            out.append(row)
    finally:
        cap.close()
    return out


# =============================================================================== 1. update-secret
US = "aiopika_update_secret.pcap"


def test_update_secret_decoded() -> None:
    frames = assert_clean(US)
    (us,) = cmd(frames, "Connection.UpdateSecret")
    (ok,) = cmd(frames, "Connection.UpdateSecretOk")
    assert us.direction == "c2s" and ok.direction == "s2c"
    assert (us.get("channel"), us.get("class"), us.get("method"), us.code) == (0, 10, 70, (10 << 16) | 70)
    assert (ok.get("channel"), ok.get("class"), ok.get("method"), ok.code) == (0, 10, 71, (10 << 16) | 71)
    assert us.get("new_secret") == "guest" and us.get("reason") == "sp rotate" and us.size == 31
    assert us.info == "Connection.UpdateSecret reason=sp rotate" and ok.info == "Connection.UpdateSecretOk"
    assert frames.index(ok) == frames.index(us) + 1
    # The session goes on normally after the rotation: a publish, fetched back, then a clean close.
    bodies = [message(f)["body"] for f in cmd(frames, "ContentBody")]
    assert bodies == ["after update-secret", "after update-secret"]
    assert [f.command for f in frames[-2:]] == ["Connection.Close", "Connection.CloseOk"]


@pytest.mark.tshark
def test_wireshark_flags_update_secret_as_an_unknown_method() -> None:
    """WIRESHARK GAP: connection.update-secret / -ok (RabbitMQ's 10/70 and 10/71) are shown as
    "Connection.Unknown (70)" / "(71)" with an Error expert item "Unknown connection method 70/71",
    and their arguments (new-secret, reason) are not decoded. They are the only experts of the file."""
    frames, _ = events(US)
    (us,) = cmd(frames, "Connection.UpdateSecret")
    (ok,) = cmd(frames, "Connection.UpdateSecretOk")
    rows = {r["packet"]: r for r in tshark_packets(US)}
    for fr, method in ((us, 70), (ok, 71)):
        (pdu,) = rows[fr.packets[1]]["pdus"]
        assert (pdu["type"], pdu["channel"], pdu["method_class"], pdu["method_method"]) == ("1", "0", "10",
                                                                                           str(method))
        assert pdu["length"] == str(fr.get("size"))
        assert pdu["experts"] == [f"Unknown connection method {method}"]
        assert pdu["severities"] == [PI_ERROR]
    experts = [(r["packet"], e) for r in rows.values() for p in r["pdus"] for e in p["experts"]]
    assert experts == [(us.packets[1], "Unknown connection method 70"),
                       (ok.packets[1], "Unknown connection method 71")]
    # Not a desync: tshark still decodes every later method (it knows the frame length).
    theirs = [(p["method_class"], p["method_method"]) for r in rows.values() for p in r["pdus"] if p["type"] == "1"]
    mine = [(str(f.get("class")), str(f.get("method"))) for f in frames if f.get("frame_type") == 1]
    assert theirs == mine


# ============================================================================ 2. frame over 1 MiB
BIG = "aiopika_big_frame.pcap.gz"
BIG_PORT = 5673  # the private frame_max 4 MiB broker (the shared one keeps 128 KiB)
HUGE = bytes((i * 7 + 3) % 251 for i in range(1_500_000))


def huge_frames(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.command == "ContentBody" and f.size > 1 << 20]


def test_big_frame_decoded() -> None:
    frames = assert_clean(BIG)
    (tune,) = cmd(frames, "Connection.Tune")
    (tune_ok,) = cmd(frames, "Connection.TuneOk")
    assert tune.direction == "s2c" and tune.get("frame_max") == 4194304  # the private broker's frame_max
    assert tune_ok.direction == "c2s" and tune_ok.get("frame_max") == 4194304  # aiormq takes the broker's value
    big = huge_frames(frames)
    assert [f.direction for f in big] == ["c2s", "s2c"]
    for fr in big:
        # ONE body frame of 1 500 008 bytes (7 header + 1 500 000 + frame-end), over many TCP segments.
        assert fr.size == 1_500_008 and fr.get("size") == 1_500_000 and fr.get("channel") == 1
        assert fr.data is not None and fr.data[7:-1] == HUGE and fr.data[-1] == 0xCE
        assert fr.packets[1] - fr.packets[0] > 30
        m = message(fr)
        assert m["body_size"] == 1_500_000 and m["body_frames"] == 1
    assert [message(f)["method"] for f in big] == ["Basic.Publish", "Basic.Deliver"]
    # Everything after the big frames is still decoded, in both directions.
    small = [f for f in cmd(frames, "ContentBody") if f not in big]
    assert [(f.direction, message(f)["body"]) for f in small] == [("c2s", "after the big frame"),
                                                                  ("s2c", "after the big frame")]
    assert [f.get("publish_seq") for f in cmd(frames, "Basic.Publish")] == [1, 2]
    assert [f.get("delivery_tag") for f in cmd(frames, "Basic.Deliver")] == [1, 2]
    assert [f.get("delivery_tag") for f in cmd(frames, "Basic.Ack") if f.direction == "c2s"] == [1, 2]
    assert [f.command for f in frames[-2:]] == ["Connection.Close", "Connection.CloseOk"]


@pytest.mark.tshark
def test_wireshark_breaks_on_a_frame_over_1_mib() -> None:
    """WIRESHARK GAP: the 0-9 length getter clamps a frame to 1 MiB. tshark reassembles exactly
    1 048 584 bytes (1 MiB + 8) of the 1 500 008-byte body frame, reports it as [Malformed Packet]
    (Exception occurred) while its own Length field says 1500000, then loses sync: in each direction
    no AMQP PDU after the big frame is decoded (the second publish, its delivery, the acks, the close).
    Port 5673 is not AMQP's default, so the test uses Decode-As (tcp.port==5673 -> amqp)."""
    frames, _ = events(BIG)
    big = huge_frames(frames)
    rows = tshark_packets(BIG, (("tcp.port==5673", "amqp"),))
    bad = [r for r in rows if r["malformed"] is not None]
    assert [r["malformed"] for r in bad] == ["Malformed Packet (Exception occurred)"] * 2
    for fr, row in zip(big, bad, strict=True):
        # The malformed packet is inside our frame's span: tshark cut the frame short of its real end.
        assert fr.packets[0] < row["packet"] < fr.packets[1]
        assert row["reassembled"] == 1 << 20 | 8
        (pdu,) = row["pdus"]
        assert (pdu["type"], pdu["channel"], pdu["length"]) == ("3", "1", "1500000")
    # Desync: nothing after the malformed packet is decoded, in either direction, while we decode
    # every frame that follows the big one.
    ours_after = {
        "c2s": ["Basic.Publish", "ContentHeader", "ContentBody", "Basic.Consume", "Basic.Ack", "Basic.Ack",
                "Basic.Cancel", "Queue.Delete", "Connection.Close"],
        "s2c": ["Basic.Deliver", "ContentHeader", "ContentBody", "Basic.CancelOk", "Queue.DeleteOk",
                "Connection.CloseOk"],
    }
    for fr, row in zip(big, bad, strict=True):
        later = [r for r in rows if r["srcport"] == row["srcport"] and r["packet"] > row["packet"]]
        assert later == []
        mine = [f.command for f in frames if f.direction == fr.direction and f.offset > fr.offset]
        assert mine == ours_after[fr.direction]
    # In numbers: tshark sees 1 of our 2 publishes and none of our Connection.Close / CloseOk.
    methods = [(p["method_class"], p["method_method"]) for r in rows for p in r["pdus"] if p["type"] == "1"]
    assert methods.count(("60", "40")) == 1 and len(cmd(frames, "Basic.Publish")) == 2
    assert ("10", "50") not in methods and ("10", "51") not in methods
    # The two server Basic.Ack confirms come before the big Deliver, so tshark still has them.
    assert methods.count(("60", "80")) == 2 and len(cmd(frames, "Basic.Ack")) == 4


# ============================================================================= 3. field-table letters
#: What each client puts on the wire for each header (the tag letter), as recorded.
LETTERS = {
    "pika_header_types.pcap": {
        "bool-true": "t", "bool-false": "t", "int": "I", "int-neg": "I", "long": "l", "int-big": "l",
        "decimal": "D", "timestamp": "T", "nested": "F", "array": "A", "bytes": "x", "void": "V", "text": "S",
    },
    "aiopika_header_types.pcap": {  # pamqp picks the narrowest integer letter; keys sorted by aio-pika
        "array": "A", "bool-false": "t", "bool-true": "t", "bytes": "x", "decimal": "D", "float": "f",
        "i16": "s", "i32": "I", "i64": "l", "i8": "b", "nested": "F", "text": "S", "timestamp": "T",
        "u16": "u", "u32": "i", "void": "V",
    },
}
TS = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
NESTED = {"k": "v", "n": 1, "deeper": {"ok": True}}
ARRAY = [1, "two", True, None, [3]]
VALUES = {
    "pika_header_types.pcap": {
        "bool-true": True, "bool-false": False, "int": 42, "int-neg": -7, "long": 1 << 40, "int-big": 3000000000,
        "decimal": Decimal("3.14"), "timestamp": TS, "nested": NESTED, "array": ARRAY,
        "bytes": b"\x00\x01\xfe\xff", "void": None, "text": "h\u00e9llo",
    },
    "aiopika_header_types.pcap": {
        "bool-true": True, "bool-false": False, "i8": -5, "i16": -300, "u16": 40000, "i32": -100000,
        "u32": 3000000000, "i64": -(1 << 40), "float": 1.5, "decimal": Decimal("3.14"), "timestamp": TS,
        "nested": NESTED, "array": ARRAY, "bytes": b"\x00\x01\xfe\xff", "void": None, "text": "h\u00e9llo",
    },
}
HEADER_CAPS = sorted(LETTERS)


def py(f: Field) -> Any:
    """Our decoded field-table value as plain Python (tables -> dict, arrays -> list)."""
    if f.children is not None and f.value is None:
        return {c.name: py(c) for c in f.children}
    if f.children is not None:
        return [py(c) for c in f.children]
    return f.value


def tag_of(frame: Frame, f: Field, in_array: bool) -> str:
    """The tag letter on the wire: array items start with it; table entries after their name."""
    assert frame.data is not None
    at = f.offset if in_array else f.offset + 1 + len(f.name.encode())
    return chr(frame.data[at])


def walk(frame: Frame, fields: list[Field], in_array: bool = False) -> Iterator[tuple[Field, str]]:
    for f in fields:
        letter = tag_of(frame, f, in_array)
        yield f, letter
        if letter in "FA":
            yield from walk(frame, f.children or [], letter == "A")


def headers(frame: Frame) -> list[Field]:
    return next(f for f in frame.fields if f.name == "headers").children or []


def header_frames(name: str) -> list[Frame]:
    frames, _ = events(name)
    return [f for f in cmd(frames, "ContentHeader") if any(x.name == "headers" for x in f.fields)]


@pytest.mark.parametrize("name", HEADER_CAPS)
def test_header_types_decoded(name: str) -> None:
    assert_clean(name)
    hdrs = header_frames(name)
    assert [f.direction for f in hdrs] == ["c2s", "s2c"]  # the publish, and the same message's Basic.GetOk
    for fr in hdrs:
        table = headers(fr)
        assert {f.name: tag_of(fr, f, False) for f in table} == LETTERS[name]
        assert list(LETTERS[name]) == [f.name for f in table]  # wire order
        got = {f.name: py(f) for f in table}
        assert got == VALUES[name]
        assert all(type(got[k]) is type(v) for k, v in VALUES[name].items())  # 1.5 stays float, 3.14 Decimal
    # The broker passes the table through byte for byte.
    a, b = (next(x for x in fr.fields if x.name == "headers") for fr in hdrs)
    assert hdrs[0].data[a.offset:a.offset + a.size] == hdrs[1].data[b.offset:b.offset + b.size]
    # Nested letters: integers inside nested tables / arrays follow the same client rule.
    inner = {(f.name, letter) for f, letter in walk(hdrs[0], headers(hdrs[0]))}
    small = "I" if name.startswith("pika") else "b"
    assert {("n", small), ("[0]", small), ("k", "S"), ("ok", "t"), ("[3]", "V"), ("[4]", "A")} <= inner


#: Wireshark's label of each tag letter (packet-amqp.c, RabbitMQ-errata reading).
WS_LABEL = {"t": "boolean", "b": "byte", "s": "short int", "u": "short uint", "I": "integer",
            "i": "unsigned integer", "l": "long int", "f": "float", "d": "double", "D": "decimal",
            "S": "string", "F": "field table", "A": "array", "V": "void", "T": "timestamp", "x": "byte array"}


def ws_showname(f: Field, letter: str) -> str:
    label = f"{f.name} ({WS_LABEL[letter]})"
    if letter in "FA":
        return label
    v = f.value
    if letter == "t":
        text = "true" if v else "false"
    elif letter in "fdD":
        text = f"{float(v):f}"
    elif letter == "V":
        text = ""
    elif letter == "x":
        text = bytes(v).hex()
    elif letter == "T":
        text = v.strftime("%b %e, %Y %H:%M:%S.000000000 UTC")
    else:
        text = str(v)
    return f"{label}: {text}"


@pytest.mark.tshark
@pytest.mark.parametrize("name", HEADER_CAPS)
def test_wireshark_reads_real_client_header_tables_like_we_do(name: str) -> None:
    """WIRESHARK IS RIGHT HERE. Its field-table letters follow RabbitMQ's errata (s = signed 16,
    l = signed 64, b/u/i/I/f/D/T/x/V as the errata), and so do real clients: pika 1.4.4 writes
    t/I/l/D/T/F/A/x/V/S, pamqp 4.0.1 (aio-pika) adds b/s/u/i/f. tshark shows every entry, nested
    ones included, with the same type and value as we do. Its gap - no decoding of the spec-only
    U / L and of `s` read as a short string - cannot be recorded: neither client emits those
    letters, so it stays covered by synthetic tests only. (tshark shows `T` and `x` entries as
    separate typed fields, amqp.field.timestamp / amqp.field.byte_array, hence the three lists.)"""
    rows = {r["packet"]: r for r in tshark_packets(name)}
    for fr in header_frames(name):
        (pdu,) = [p for p in rows[fr.packets[1]]["pdus"] if p["type"] == "2"]
        assert pdu["experts"] == []
        entries = list(walk(fr, headers(fr)))
        assert pdu["field"] == [ws_showname(f, c) for f, c in entries if c not in "Tx"]
        assert pdu["field_timestamp"] == [ws_showname(f, c) for f, c in entries if c == "T"]
        assert pdu["field_byte_array"] == [ws_showname(f, c) for f, c in entries if c == "x"]
    # Spot checks, spelled out: the errata reading of the letters real clients send.
    first = next(p for r in rows.values() for p in r["pdus"] if p["type"] == "2")
    if name.startswith("aiopika"):
        assert {"i16 (short int): -300", "u16 (short uint): 40000", "u32 (unsigned integer): 3000000000",
                "i64 (long int): -1099511627776", "i8 (byte): -5", "float (float): 1.500000"} <= set(first["field"])
    else:
        assert {"int (integer): 42", "long (long int): 1099511627776", "int-big (long int): 3000000000",
                "decimal (decimal): 3.140000"} <= set(first["field"])
    assert first["field_timestamp"] == ["timestamp (timestamp): Jan  2, 2024 03:04:05.000000000 UTC"]
    assert first["field_byte_array"] == ["bytes (byte array): 0001feff"]
