"""AMQP/Fast decoding: every command and field, the RFC's example dialogue frame by frame, the
long-size escape, message fragments and their head, the encoding options, the heuristic."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from analyzer.api import Direction, Frame
from analyzer.engine import analyze_file
from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp_fast import AmqpFastDissector, codes
from dissectors.amqp_fast import encode as E
from dissectors.amqp_fast.commands import COMMANDS, MESSAGE_HEAD
from dissectors.amqp_fast.wire import Encoding
from dissectors.schema import field_values

CAPS = Path(__file__).resolve().parent.parent / "captures" / "amqp_fast"
C2S, S2C = Direction.C2S, Direction.S2C
ENCODINGS = [Encoding(), Encoding("msb", 4, 4), Encoding("lsb", 4, 2), Encoding("msb", 2, 4)]


def settings(enc: Encoding) -> dict[str, str]:
    return {"bit_order": enc.bit_order, "long_string_length": str(enc.long_string_length),
            "field_table_length": str(enc.field_table_length)}


def feed(steps: list[tuple[Direction, bytes]], dissector: AmqpFastDissector | None = None,
         split: int = 0) -> list[Frame]:
    conn = (dissector or AmqpFastDissector()).connection(False)
    frames: list[Frame] = []
    for i, (d, data) in enumerate(steps):
        chunks = [data[k:k + split] for k in range(0, len(data), split)] if split else [data]
        for chunk in chunks:
            frames += [e for e in conn.feed(d, chunk, float(i)) if isinstance(e, Frame)]
    frames += [e for e in conn.end(99.0) if isinstance(e, Frame)]
    return frames


def sample(fields: tuple[tuple[str, str], ...], seed: int) -> dict[str, Any]:
    """Distinct, non-default values for every field (so a field read from the wrong place shows)."""
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for i, (name, t) in enumerate(fields):
        if t == "bit":
            out[name] = bool((seed >> i) & 1) or i % 3 == 0
        elif t == "octet":
            out[name] = rng.randrange(1, 256)
        elif t == "short":
            out[name] = rng.randrange(1, 1 << 16)
        elif t in ("long", "date"):
            out[name] = rng.randrange(1, 1 << 31)
        elif t == "shortstr":
            out[name] = f"{name}-{seed}"
        else:
            out[name] = f"<{name} {seed}>".encode() * 3
    return out


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: e.name)
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.name)
def test_every_command_and_field_decodes(cmd, enc: Encoding) -> None:
    values = sample(cmd.fields, cmd.code)
    if cmd.data:  # no message data after it here: out of band, or an empty fragment
        if cmd.has("out_of_band"):
            values.update(out_of_band=True, streaming=False)
        else:
            values["fragment_size"] = 0
    if cmd.name == "HANDLE OPEN":
        values["service_type"] = 2
    wire = E.command(cmd.name, enc, **values)
    d = C2S if cmd.sender in ("c2s", "both") else S2C
    conn = AmqpFastDissector().configured(settings(enc)).connection(True)
    frames = [e for e in conn.feed(d, wire, 1.0) if isinstance(e, Frame)]
    assert [f.command for f in frames] == [cmd.name]
    fr = frames[0]
    assert fr.code == cmd.code and fr.size == len(wire)
    got = field_values(fr.fields)
    for name, t in cmd.fields:
        want = values[name]
        if t == "date":
            assert int(got[name].timestamp()) == want, name
        else:
            assert got[name] == want, name
    assert got["size"] == len(wire) - 2 and got["type"] == cmd.code and got["command_end"] == 0xCE
    # Every field sits where the encoder put it: its octets re-encode to themselves.
    assert [f.name for f in fr.fields[2:2 + len(cmd.fields)]] == [n for n, _ in cmd.fields]
    assert not [f.id for f in fr.findings if not f.id.endswith(("reply.error", "reply.unknown_code"))]


def test_bits_are_packed_low_bit_first_by_default_and_high_bit_first_with_the_option() -> None:
    lsb = E.command("HANDLE NOTIFY", handle_id=1, message_nbr=2, fragment_size=0, delivered=True)
    msb = E.command("HANDLE NOTIFY", Encoding("msb"), handle_id=1, message_nbr=2, fragment_size=0, delivered=True)
    # partial, out-of-band, recovery, delivered, redelivered, streaming: delivered is the fourth bit.
    assert lsb[13] == 0b0000_1000 and msb[13] == 0b0001_0000
    default = feed([(S2C, msb)])[0]
    assert default.get("delivered") is False and default.get("redelivered") is True
    switched = feed([(S2C, msb)], AmqpFastDissector().configured({"bit_order": "msb"}))[0]
    assert switched.get("delivered") is True and switched.get("redelivered") is False


def test_long_string_and_table_prefix_options() -> None:
    four = Encoding("lsb", 4, 4)
    wire = E.command("CONNECTION CHALLENGE", four, version=1, mechanisms="PLAIN", challenges=b"abc")
    assert wire[-8:] == b"\x00\x00\x00\x03abc\xce"  # a 4-octet table length
    ok = feed([(C2S, E.initiation()), (S2C, wire)], AmqpFastDissector().configured({"field_table_length": "4"}))[1]
    assert ok.get("challenges") == b"abc" and not ok.findings
    wrong = feed([(C2S, E.initiation()), (S2C, wire)])[1]  # read with 2-octet table lengths: the command does not fit
    assert "amqp_fast.framing.trailing" in [f.id for f in wrong.findings]


def test_options_are_validated() -> None:
    with pytest.raises(ValueError):
        AmqpFastDissector().configured({"bit_order": "middle"})
    with pytest.raises(ValueError):
        AmqpFastDissector().configured({"long_string_length": "3"})


# ------------------------------------------------------------------------------ the RFC's example
#: RFC 006 §3.2.13, line by line, with the octets each command is on the wire, written by hand from
#: the ABNF of §3.1.1 (independently of the encoder): size (type + fields + command-end), type, fields, 0xCE.
RFC_EXAMPLE = [
    ("c2s", "INITIATION 128 1", b"\x80\x01"),
    ("s2c", "CONNECTION CHALLENGE v1 'PLAIN TLS'", b"\x00\x0f" b"\x0a" b"\x01" b"\x09PLAIN TLS" b"\x00\x00" b"\xce"),
    ("c2s", "CONNECTION RESPONSE 'PLAIN' 'login:guest password:guest@home'",
     b"\x00\x29" b"\x0b" b"\x05PLAIN" b"\x00\x1flogin:guest password:guest@home" b"\xce"),
    ("s2c", "CONNECTION TUNE frame-max=48000 channel-max=1024",
     b"\x00\x0e" b"\x0c" b"\x00\x00\xbb\x80" b"\x04\x00" b"\x00\x00" b"\x00\x00" b"\x00\x00" b"\xce"),
    ("c2s", "CONNECTION TUNE frame-max=16384 channel-max=1",
     b"\x00\x0e" b"\x0c" b"\x00\x00\x40\x00" b"\x00\x01" b"\x00\x00" b"\x00\x00" b"\x00\x00" b"\xce"),
    ("s2c", "CONNECTION CLOSE 540 'Not implemented'", b"\x00\x14" b"\x13" b"\x02\x1c" b"\x0fNot implemented" b"\xce"),
    ("c2s", "CONNECTION CLOSE 200 'Ok'", b"\x00\x07" b"\x13" b"\x00\xc8" b"\x02Ok" b"\xce"),
]


def test_rfc_example_dialogue_frame_by_frame() -> None:
    events = list(analyze_file(str(CAPS / "rfc_example.pcap")))
    frames = [e for e in events if isinstance(e, Frame)]
    assert [(str(f.direction), f.info) for f in frames] == [(d, info) for d, info, _ in RFC_EXAMPLE]
    assert [f.data for f in frames] == [wire for _, _, wire in RFC_EXAMPLE]
    assert all(f.protocol == "amqp_fast" for f in frames)
    tune_s, tune_c = frames[3], frames[4]
    assert (tune_s.get("frame_max"), tune_s.get("channel_max")) == (48000, 1024)
    assert (tune_c.get("frame_max"), tune_c.get("channel_max")) == (16384, 1)
    close = frames[5]
    code = next(f for f in close.fields if f.name == "reply_code")
    assert code.value == 540 and code.display.startswith("not implemented; 5xx hard error")
    # The only finding of the dialogue: the server closes with an error code.
    found = [(f.command, f.id) for fr in frames for f in fr.findings]
    assert found == [("CONNECTION CLOSE", "amqp_fast.reply.error")]
    assert not [e for e in events if not isinstance(e, Frame)]


def test_rfc_example_fed_as_hand_written_octets() -> None:
    frames = feed([(Direction(d), wire) for d, _, wire in RFC_EXAMPLE])
    assert [f.info for f in frames] == [info for _, info, _ in RFC_EXAMPLE]


# ------------------------------------------------------------------------------ framing details
def test_long_size_escape() -> None:
    listing = b"1.3.5-9" * 10000  # 70000 octets: the size needs the escape
    wire = E.command("HANDLE INDEX", E.Encoding("lsb", 4, 2), handle_id=3, message_nbr=9, message_list=listing)
    assert wire[:2] == b"\xff\xff" and struct.unpack(">I", wire[2:6])[0] == len(wire) - 6
    conn = AmqpFastDissector().configured({"long_string_length": "4"}).connection(True)
    fr = next(e for e in conn.feed(S2C, wire, 1.0) if isinstance(e, Frame))
    size = fr.fields[0]
    assert (size.value, size.offset, size.size, size.display) == (len(wire) - 6, 0, 6, "long size")
    assert fr.get("message_list") == listing and not fr.findings


def test_session_capture_has_a_long_size_frame_and_every_command() -> None:
    frames = [e for e in analyze_file(str(CAPS / "amqp_fast_session.pcap")) if isinstance(e, Frame)]
    assert {f.command for f in frames} >= {c.name for c in COMMANDS} | {"INITIATION", "MESSAGE FRAGMENT"}
    index = next(f for f in frames if f.command == "HANDLE INDEX")
    assert index.fields[0].size == 6 and index.size > 0xFFFF
    assert not [f for fr in frames for f in fr.findings]


def test_command_end_is_counted_in_the_size() -> None:
    wire = b"\x00\x02\x0e\xce"  # CONNECTION PING with no field: type and command-end only
    fr = feed([(C2S, E.initiation()), (C2S, wire)])[1]
    assert fr.command == "CONNECTION PING" and fr.size == 4
    assert [f.id for f in fr.findings] == ["amqp_fast.framing.truncated"]


# ------------------------------------------------------------------------------ messages
def test_message_fragments_head_and_reassembly() -> None:
    body = bytes(range(256)) * 2
    head = E.head(len(body), persistent=True, priority=7, expiration=1767225600, mime_type="application/x-demo",
                  encoding="zlib", identifier="m-1", headers=b"k=v")
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1).cc("HANDLE CONSUME", handle_id=1, prefetch=1)
    s.s(E.message("HANDLE NOTIFY", 1, body, fragment=100, head_bytes=head, message_nbr=5, delivered=True))
    frames = feed([(d, data) for d, data, _ in s.steps])
    notify = [f for f in frames if f.command == "HANDLE NOTIFY"]
    frags = [f for f in frames if f.command == "MESSAGE FRAGMENT"]
    total = len(head) + len(body)
    assert len(notify) == len(frags) == -(-total // 100)
    assert [f.get("partial") for f in notify] == [True] * (len(notify) - 1) + [False]
    assert notify[0].info == "HANDLE NOTIFY handle=1 message=5 fragment=100 partial=1 delivered=1"
    first = frags[0]
    h = next(f for f in first.fields if f.name == "head")
    got = {c.name: c.value for c in h.children}
    assert [c.name for c in h.children] == [n for n, _ in MESSAGE_HEAD]
    assert (got["body_size"], got["persistent"], got["priority"], got["mime_type"], got["encoding"],
            got["identifier"], got["headers"]) == (512, True, 7, "application/x-demo", "zlib", "m-1", b"k=v")
    assert int(got["expiration"].timestamp()) == 1767225600
    assert next(c for c in h.children if c.name == "expiration").display == "2026-01-01T00:00:00Z"
    assert (h.offset, h.size) == (0, len(head))
    last = frags[-1]
    msg = {c.name: c.value for c in next(f for f in last.fields if f.name == "message").children}
    assert msg["size"] == total and msg["fragments"] == len(frags) and msg["message_nbr"] == 5
    assert msg["body"] == body[:1024] and msg["body_truncated"] is False
    assert all(not f.findings for f in frames)
    # Fragment frames lie exactly after their command, on the stream.
    for cmd, frag in zip(notify, frags, strict=True):
        assert frag.offset == cmd.offset + cmd.size and frag.size == cmd.get("fragment_size")


def test_message_head_spanning_fragments() -> None:
    head = E.head(5, mime_type="text/plain", identifier="x" * 40)
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    s.c(E.message("HANDLE SEND", 1, b"hello", fragment=10, head_bytes=head))
    frames = feed([(d, data) for d, data, _ in s.steps])
    frags = [f for f in frames if f.command == "MESSAGE FRAGMENT"]
    with_head = [f for f in frags if any(x.name == "head" for x in f.fields)]
    assert len(with_head) == 1 and with_head[0] is not frags[0]
    assert frags[-1].info.endswith(f"[message {len(head) + 5} octets in {len(frags)} fragments: 'hello']")
    assert all(not f.findings for f in frames)


def test_out_of_band_means_no_data_on_the_stream() -> None:
    s = E.Script().negotiate().open_channel(1, out_of_band="shm:/x").open_handle(1, 1)
    s.cc("HANDLE SEND", handle_id=1, fragment_size=100000, out_of_band=True)
    s.cc("CONNECTION PING", respond=True)
    frames = feed([(d, data) for d, data, _ in s.steps])
    assert [f.command for f in frames][-2:] == ["HANDLE SEND", "CONNECTION PING"]
    assert not [f for fr in frames for f in fr.findings]


def test_byte_at_a_time_gives_the_same_frames() -> None:
    from tests.test_amqp_fast_rules import session_steps

    whole = feed(session_steps())
    bytewise = feed(session_steps(), split=1)
    assert [(f.command, f.offset, f.size, f.info) for f in whole] == \
        [(f.command, f.offset, f.size, f.info) for f in bytewise]


# ------------------------------------------------------------------------------ reply codes
def test_reply_codes_by_their_digits() -> None:
    assert codes.explain(200) == "ok; 2xx success"
    assert codes.explain(310) == "message not found; 3xx warning: the command completed but did not do all it " \
                                 "asked, x1x message"
    assert codes.explain(432).startswith("4xx soft error") and "x3x access" in codes.explain(432)
    assert "no severity" in codes.explain(999) and "no severity" in codes.explain(42)
    assert codes.severity(541) == 5 and codes.severity(999) == 0


# ------------------------------------------------------------------------------ the heuristic
def test_sniff_recognises_both_sides_and_rejects_other_protocols() -> None:
    d = AmqpFastDissector()
    assert d.sniff(b"\x80\x01") == d.sniff(b"\x80\x01")
    assert d.sniff(b"\x80\x01").confidence >= 0.5 and d.sniff(b"\x80\x01").from_client is True
    response = E.command("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"x")
    assert d.sniff(b"\x80\x01" + response).confidence > 0.9
    challenge = E.command("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    assert d.sniff(challenge).confidence >= 0.9 and d.sniff(challenge).from_client is False
    others = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32),
              b"AMQP\x00\x00\x09\x01", b"\x80\x01GET / HTTP/1.1\r\n\r\n", b"\x80\x02", b"SSH-2.0-OpenSSH_9.6\r\n"]
    for data in others:
        assert d.sniff(data).confidence < 0.5, data
    rng = random.Random(7)
    for _ in range(2000):
        data = rng.randbytes(rng.randrange(1, 200))
        assert d.sniff(data).confidence < 0.5, data.hex()


def test_another_port_is_recognised_by_content(tmp_path: Path) -> None:
    s = E.Script().negotiate().open_channel(1).close()
    conv = TcpConversation(("10.0.0.1", 40000), ("10.0.0.2", 9999))
    conv.handshake()
    for d, data, _ in s.steps:
        conv.send(str(d), data)
    conv.close()
    path = tmp_path / "other_port.pcap"
    write_capture(str(path), [conv])
    events = list(analyze_file(str(path)))
    frames = [e for e in events if isinstance(e, Frame)]
    assert frames and all(f.protocol == "amqp_fast" for f in frames)
    assert frames[0].info == "INITIATION 128 1"
    assert not [f for fr in frames for f in fr.findings] and not [e for e in events if not isinstance(e, Frame)]


def test_field_catalogue_covers_every_emitted_field() -> None:
    from analyzer.jsonout import frame_json
    from dissectors.amqp_fast.catalog import CATALOG, command_path

    def paths(prefix: str, value: Any) -> list[str]:
        if isinstance(value, dict):
            out = [prefix] if prefix.count(".") > 1 else []
            for k, v in value.items():
                out += paths(f"{prefix}.{k}", v)
            return out
        return [prefix]

    frames = [e for e in analyze_file(str(CAPS / "amqp_fast_session.pcap")) if isinstance(e, Frame)]
    for fr in frames:
        j = frame_json(fr)
        for name, value in j["fields"].items():
            for p in paths(f"amqp_fast.{command_path(fr.command)}.{name}", value):
                assert CATALOG.get(p) is not None, p
    json.dumps([frame_json(f) for f in frames], default=str)


# The Info line writes an integer, a bit, a text and anything else each its own way; every way must
# be what _text and _short make of the value (the general rule the line was first written with).
_INFO_VALUES = (0, 7, 2**40, True, False, "", "dest", "x" * 63, "y" * 64, "z" * 65, "é" * 70, b"raw", b"\x00\x01",
                b"a" * 80, 1.5)


@pytest.mark.parametrize("value", _INFO_VALUES)
def test_info_writes_each_value_as_text_and_short_say(value: Any) -> None:
    from dissectors.amqp_fast import decode
    from dissectors.amqp_fast.commands import BY_CODE

    checked = 0
    for cmd in BY_CODE.values():
        for key, before, after, _fmt, _keys, optional in decode._INFO[cmd.code]:
            if key is None or optional:
                continue
            want = f"{before}{value}{after}" if type(value) is int else \
                before + decode._short(decode._text(value)) + after
            assert decode.info(cmd.name, cmd, {key: value}) == f"{cmd.name} {want}", (cmd.name, key)
            checked += 1
    assert checked > 20


def test_info_lines_are_remembered_by_bytes_and_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command checked from its values words its Info line once for its bytes and encoding
    (decode._INFO_SEEN): the same bytes read with another bit order have a line of their own."""
    from dissectors.amqp_fast import decode
    from dissectors.amqp_fast.commands import BY_NAME, layout

    seen: dict[Any, str] = {}
    monkeypatch.setattr(decode, "_INFO_SEEN", seen)
    cmd = BY_NAME["HANDLE SEND"]
    wire = E.command("HANDLE SEND", handle_id=1, fragment_size=500, partial=True)
    lines = {}
    for enc in (Encoding(), Encoding("msb")):
        values, _ = layout(cmd.code, enc).read_values(wire, 3, len(wire) - 1)
        got = {decode.values_frame(C2S, wire, 0, enc, cmd, values, []).info for _ in range(3)}
        assert got == {decode.info(cmd.name, cmd, values)}
        lines[enc.bit_order] = got.pop()
    assert "partial=1" in lines["lsb"] and "partial=1" not in lines["msb"]
    assert len(seen) == 2
    monkeypatch.setattr(decode, "_INFO_SEEN_MAX", 1)
    seen.clear()
    for enc in (Encoding(), Encoding("msb")):
        values, _ = layout(cmd.code, enc).read_values(wire, 3, len(wire) - 1)
        assert decode.values_frame(C2S, wire, 0, enc, cmd, values, []).info == lines[enc.bit_order]
    assert len(seen) == 1
    seen.clear()  # a long command is worded every time, not kept
    long = E.command("HANDLE SEND", handle_id=1, fragment_size=500, dest_name="d" * 255)
    values, _ = layout(cmd.code, Encoding()).read_values(long, 3, len(long) - 1)
    assert len(long) > decode._INFO_KEY_MAX
    assert decode.values_frame(C2S, long, 0, Encoding(), cmd, values, []).info == decode.info(cmd.name, cmd, values)
    assert not seen


@pytest.mark.parametrize("enc", [Encoding(), Encoding("msb", 4, 4)], ids=["lsb", "msb-4-4"])
def test_message_head_values_remembered_by_what_follows_the_size_are_the_values_read(
        enc: Encoding, monkeypatch: pytest.MonkeyPatch) -> None:
    # decode._HEADS: a head is looked up by the octets after its body-size. Heads of several
    # producers, sizes, bodies behind them, cut at every length, one octet changed: each gives what
    # the values reader gives from scratch (None for a cut head), the remembered heads are used,
    # and the memory keeps its bound.
    from dissectors.amqp_fast import decode

    monkeypatch.setattr(decode, "_HEADS", {})
    layout = decode.head_layout(enc)
    read = []  # the heads read from scratch by message_head_values
    monkeypatch.setattr(decode, "head_layout", lambda e: read.append(e) or layout)

    def fresh(buf: bytes) -> Any:
        try:
            return layout.read_values(buf, 0, len(buf))
        except decode.DecodeError:
            head = decode.message_head(buf, enc)
            return None if head is None else ({f.name: f.value for f in head[0]}, head[1])

    rng = random.Random(7)
    kinds = [dict(), dict(persistent=True, priority=5, mime_type="text/plain"),
             dict(identifier="id-1", headers=b"\x01\x02", expiration=1_700_000_000),
             dict(encoding="gzip", mime_type="application/json")]
    for i in range(300):
        kind = kinds[rng.randrange(len(kinds))]
        buf = E.head(rng.choice((0, 5, 2490, 1 << 30)), enc=enc, **kind) + bytes(rng.randrange(256) for _ in range(6))
        if i % 7 == 0:
            buf = buf[:rng.randrange(len(buf))]
        if i % 11 == 0 and len(buf) > 6:
            at = rng.randrange(4, len(buf))
            buf = buf[:at] + bytes([buf[at] ^ 0x41]) + buf[at + 1:]
        got = decode.message_head_values(buf, enc)
        assert got == fresh(buf)
        assert got is None or list(got[0]) == list(fresh(buf)[0])  # the same order of keys
        assert len(decode._HEADS.get(enc, ())) <= decode.HEADS_KEPT
    for kind in kinds:  # the four heads remembered, whatever their sizes: none is read again
        decode.message_head_values(E.head(1, enc=enc, **kind), enc)
    before = len(read)
    for kind in kinds:
        buf = E.head(77, enc=enc, **kind) + b"body"
        assert decode.message_head_values(buf, enc) == fresh(buf)
    assert len(read) == before
