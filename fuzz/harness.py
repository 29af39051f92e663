"""What every fuzz target runs: the targets, the input format, and what counts as a failure.

Targets (:func:`targets`): one per dissector the registry loads (so a dissector added to
``dissectors/`` is fuzzed without touching this file) plus ``capture``, the capture reader.

A dissector target turns its input into one TCP conversation (:func:`conversation`) on a port
forced to that dissector, runs the whole engine on it (reassembly, the dissector, its end of
conversation) and walks every field tree of every frame, which is where lazily built trees are
decoded. The ``capture`` target writes its input to a file and reads it as a capture with every
dissector loaded (link layers, IP, TCP, heuristics, then whatever claims the traffic).

A failure (:class:`Failure`, or any exception escaping) is: an exception other than the
clear errors the CLI reports in one line (:class:`~analyzer.capture.CaptureError`,
:class:`~analyzer.engine.NoDecodableLinkType`); an ``engine.dissector_error`` finding
(the engine caught a dissector's exception); a frame whose fields do not stay inside it. A hang
(over 1 s on one input) and an allocation over the bound are enforced by the runner (libFuzzer's
``-timeout`` and ``-rss_limit_mb``, see fuzz/README.md).
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator

from analyzer.api import Dissector, Field, Finding, Frame
from analyzer.capture import CaptureError, RawPacket, read_packets
from analyzer.engine import Analyzer, NoDecodableLinkType
from analyzer.packets import ACK, FIN, PSH, RST, SYN
from analyzer.pcapwrite import Segment
from analyzer.registry import load_dissectors

CAPTURE = "capture"
#: A port no dissector has by default: the target's dissector is forced onto it (as --decode-as).
PORT = 40999
CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.2", PORT)
ETHERNET = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
#: Inputs longer than this are cut (libFuzzer is run with the same -max_len).
MAX_INPUT = 1 << 16


class Failure(AssertionError):
    """The input broke a rule of fuzz/README.md."""


def targets() -> list[str]:
    """Every dissector the registry finds, then the capture reader."""
    return [*sorted(load_dissectors()), CAPTURE]


# ------------------------------------------------------------------------------ input format
def conversation(data: bytes) -> list[RawPacket]:
    """A fuzz input as the packets of one TCP conversation between CLIENT and SERVER.

    Byte 0 holds flags: bit 0 mid-stream (no handshake), bit 1 closed with FIN both ways, bit 2
    ended by a RST. Then records, each a 2-byte header and its payload: bit 15 of the header is
    the direction (set: server to client), bit 14 drops the segment from the capture (the stream
    gets a hole of its length), bits 0-13 the payload length (cut to what is left of the input).
    """
    data = data[:MAX_INPUT]
    flags = data[0] if data else 0
    seq = {"c2s": 1000, "s2c": 5000}
    segments: list[Segment] = []
    ts = 1_700_000_000.0

    def add(direction: str, fl: int, payload: bytes = b"", skip: bool = False) -> None:
        nonlocal ts
        src, dst = (CLIENT, SERVER) if direction == "c2s" else (SERVER, CLIENT)
        other = "s2c" if direction == "c2s" else "c2s"
        if not skip:
            segments.append(Segment(ts, src, dst, seq[direction], seq[other], fl, payload))
        ts += 0.001
        seq[direction] += len(payload) + (1 if fl & (SYN | FIN) else 0)

    if not flags & 1:
        add("c2s", SYN)
        segments[-1].ack = 0
        add("s2c", SYN | ACK)
        add("c2s", ACK)
    pos = 1
    while pos + 2 <= len(data):
        (head,) = struct.unpack_from(">H", data, pos)
        pos += 2
        payload = data[pos:pos + (head & 0x3FFF)]
        pos += len(payload)
        add("s2c" if head & 0x8000 else "c2s", ACK | PSH, payload, skip=bool(head & 0x4000))
    if flags & 2:
        add("c2s", FIN | ACK)
        add("s2c", FIN | ACK)
        add("c2s", ACK)
    elif flags & 4:
        add("c2s", RST | ACK)
    return [RawPacket(i + 1, s.ts, 1, _packet(s), 14 + 40 + len(s.payload)) for i, s in enumerate(segments)]


_IPTCP = struct.Struct("!BBHHHBBH4s4sHHIIBBHHH")
_ADDR = {CLIENT: bytes([10, 0, 0, 1]), SERVER: bytes([10, 0, 0, 2])}


def _packet(s: Segment) -> bytes:
    """Ethernet, IPv4 and TCP headers and the payload: what ``pcapwrite.ip_packet`` builds, without
    parsing the addresses for every packet (a third of the time of a small input)."""
    return ETHERNET + _IPTCP.pack(0x45, 0, 40 + len(s.payload), 0, 0x4000, 64, 6, 0, _ADDR[s.src], _ADDR[s.dst],
                                  s.src[1], s.dst[1], s.seq % (1 << 32), s.ack % (1 << 32), 5 << 4, s.flags,
                                  65535, 0, 0) + s.payload


def encode(records: list[tuple[str, bytes]], *, midstream: bool = False, close: bool = True) -> bytes:
    """The input :func:`conversation` turns back into ``records`` ((direction, payload) in order):
    how seeds are made from captured conversations."""
    out = bytearray([(1 if midstream else 0) | (2 if close else 0)])
    for direction, payload in records:
        for i in range(0, len(payload), 0x3FFF):
            piece = payload[i:i + 0x3FFF]
            out += struct.pack(">H", (0x8000 if direction == "s2c" else 0) | len(piece)) + piece
    return bytes(out)


# ------------------------------------------------------------------------------ running one input
_DISSECTORS: dict[str, Dissector] | None = None


def _dissectors() -> dict[str, Dissector]:
    global _DISSECTORS
    if _DISSECTORS is None:
        _DISSECTORS = load_dissectors()
    return _DISSECTORS


def run(target: str, data: bytes) -> int:
    """Run one input through ``target``; the number of events seen. Raises on any failure."""
    if target == CAPTURE:
        return _run_capture(data)
    dissector = _dissectors()[target]
    analyzer = Analyzer({target: dissector}, decode_as={PORT: target})
    return check(analyzer.run(conversation(data)))


def check(events: Iterator[Frame | Finding]) -> int:
    n = 0
    for ev in events:
        n += 1
        if isinstance(ev, Frame):
            for f in ev.findings:
                _finding(f)
            _fields(ev, ev.fields, 0)
            str(ev.info)
        else:
            _finding(ev)
    return n


def _finding(f: Finding) -> None:
    if f.id == "engine.dissector_error":
        raise Failure(f"engine.dissector_error: {f.message}")


def _fields(frame: Frame, fields: list[Field], depth: int) -> None:
    if depth > 200:
        raise Failure(f"{frame.command}: field tree deeper than 200 levels")
    for f in fields:
        if f.offset >= 0 and f.offset + f.size > frame.size:
            raise Failure(f"{frame.command}: field {f.name} [{f.offset}+{f.size}] lies outside the "
                          f"{frame.size}-byte frame")
        kids = f.children  # builds lazy trees
        if kids:
            _fields(frame, kids, depth + 1)


_CAPTURE_DIR = tempfile.mkdtemp(prefix="streamproto-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def _run_capture(data: bytes) -> int:
    # The reader takes a path (it sniffs gzip, pcap and pcapng from the file): one file per
    # process, rewritten for every input, in memory where the system has a tmpfs.
    path = os.path.join(_CAPTURE_DIR, "input.pcap")
    with open(path, "wb") as f:
        f.write(data[:MAX_INPUT])
    analyzer = Analyzer(_dissectors())
    try:
        return check(analyzer.run(read_packets(path)))
    except (CaptureError, NoDecodableLinkType):
        return 0  # the clear errors the CLI reports in one line (exit 2): the wanted outcome
