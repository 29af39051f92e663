"""Recognising RabbitMQ Stream by content (traffic on a port the user did not name).

A frame header (Size, Key, Version) is eight bytes that much else resembles: a Kafka request is
Size, ApiKey, ApiVersion, so ApiVersions v1 reads as SaslHandshake version 1. So the header only
says whether to look further; the evidence is the decoder's own verdict on the first bytes: each
complete frame must decode by its command's layout with nothing missing or left over, no unknown
key, version or response code, and what follows it must be a frame too. PeerProperties (the
first frame of every connection, whose property map must parse exactly, or, when the capture cut
it, at least start plausibly) claims the conversation at once, as do two frames; one other frame
that decodes exactly claims it with less confidence, and a frame too long to see whole only when
it is a Deliver whose chunk header is consistent (a capture that starts inside a consumer's
stream, where the first frame can be far longer than the bytes the engine keeps for heuristics).
"""

from __future__ import annotations

import struct

from analyzer.api import Category, Direction, Finding, Frame, Sniff
from dissectors.rabbitmq_stream.connection import StreamConnection
from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS
from dissectors.rabbitmq_stream.layouts import COMMANDS, RESPONSE_BIT

_HEAD = struct.Struct(">IHH")
#: Findings that say the bytes are not this protocol (rather than this protocol misbehaving).
_NOT_OURS = frozenset((Category.MALFORMED, Category.UNKNOWN, Category.TRUNCATED, Category.CHECKSUM))
PEER_PROPERTIES = 0x0011
DELIVER = 0x0008
#: The Osiris chunk header: magic/version 0x50, chunk type, entries, records, timestamp, epoch,
#: first offset, CRC, data length, trailer length.
_CHUNK = struct.Struct(">BBHIqQQIII")


def sniff(data: bytes) -> Sniff:
    if len(data) < 8:
        return Sniff(0.0)
    if not _header_plausible(data, 0):
        return Sniff(0.0)
    size, key_raw, version = _HEAD.unpack_from(data, 0)
    key = key_raw & 0x7FFF
    resp = bool(key_raw & RESPONSE_BIT)
    if version in (1, 2) and key in COMMANDS:
        cmd = COMMANDS[key]
        from_client: bool | None = (cmd.sender == "c2s") != resp if cmd.sender != "both" else None
    else:
        from_client = None
    frames, bad = _decode(data, from_client)
    used = sum(f.size for f in frames)
    if len(data) >= used + 8 and not _header_plausible(data, used):
        bad = True  # the framer waits for more before it calls bytes junk; a heuristic need not
    if not frames and key == PEER_PROPERTIES and version == 1 and _properties_plausible(data, size, resp):
        # Claimed on its start alone: when the capture cut the first frame, the bytes kept for
        # heuristics run on after the hole and the whole frame never decodes.
        return Sniff(0.8, not resp)
    if bad:
        return Sniff(0.0)
    if frames and key == PEER_PROPERTIES and version == 1:
        return Sniff(0.95, from_client)
    if len(frames) >= 2:
        return Sniff(0.9, from_client)
    if frames:
        # One frame that decodes exactly by its layout, and nothing after it yet; a version 0
        # (2020 draft) header is weaker evidence than today's.
        return Sniff(0.6 if version else 0.5, from_client)
    if not frames and key == DELIVER and not resp and _chunk_plausible(data, size, version):
        return Sniff(0.6, False)
    return Sniff(0.3 if len(data) < size + 4 else 0.0, from_client)


def _header_plausible(data: bytes, at: int) -> bool:
    """A Size, Key and Version that this protocol could send, today's or the 2020 draft's."""
    size, key_raw, version = _HEAD.unpack_from(data, at)
    if size < 4 or size > 1 << 24:
        return False
    if version in (1, 2):
        return key_raw & 0x7FFF in COMMANDS
    return version == 0 and key_raw in DRAFT_COMMANDS


def _decode(data: bytes, from_client: bool | None) -> tuple[list[Frame], bool]:
    """The complete frames at the start of ``data`` as the dissector decodes them, and whether any
    of them (or what follows them) says the bytes are something else."""
    conn = StreamConnection(False)
    direction = Direction.S2C if from_client is False else Direction.C2S
    frames: list[Frame] = []
    for ev in conn.feed(direction, bytes(data), 0.0):
        found: list[Finding] = ev.findings if isinstance(ev, Frame) else [ev]
        if any(f.category in _NOT_OURS or f.id.endswith((".framing.trailing", ".framing.truncated"))
               for f in found):
            return frames, True
        if isinstance(ev, Frame):
            if ev.command == "Unknown":
                return frames, True
            frames.append(ev)
    return frames, False


def _properties_plausible(data: bytes, size: int, resp: bool) -> bool:
    """The start of a PeerProperties frame: a property count that fits the Size and a first key of
    printable text. (Kafka's SaslHandshake v1 has the same header, then a client id where the
    count would be.)"""
    at = 14 if resp else 12  # after the correlation id (and the response code)
    if len(data) < at + 6 or size > 1 << 16:
        return False
    count, klen = struct.unpack_from(">IH", data, at)
    if not 0 < count <= (size + 4 - at - 4) // 4 or not 0 < klen <= 255 or at + 6 + klen > size + 4:
        return False
    key = data[at + 6:at + 6 + klen]
    return all(0x21 <= b < 0x7F for b in key)


def _chunk_plausible(data: bytes, size: int, version: int) -> bool:
    """A Deliver too long to see whole: does its chunk header fit the frame's Size?"""
    at = 9 if version == 1 else 17  # after the subscription id (and committed chunk id, version 2)
    if len(data) < at + _CHUNK.size:
        return False
    magic, ctype, entries, records, _ts, _epoch, _first, _crc, dlen, tlen = _CHUNK.unpack_from(data, at)
    return (magic == 0x50 and ctype <= 2 and 0 < entries <= records
            and at + 48 + dlen + tlen == size + 4)
