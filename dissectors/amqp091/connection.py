"""One AMQP 0-9-1 connection: cut both directions into frames, decode them, check the state machine.

Sans-IO: bytes come in through feed/gap/end with the capture time of their segment; frames and
findings go out. Everything about timing (heartbeats) uses only those timestamps.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from analyzer.api import Connection as BaseConnection
from analyzer.api import Direction, Event, Field, Finding, Frame, Severity
from dissectors.amqp091 import methods as M
from dissectors.amqp091 import rules as R
from dissectors.amqp091.codes import (
    FRAME_END,
    FRAME_MIN_SIZE,
    FRAME_TYPES,
    PROTOCOL_HEADERS,
    RABBITMQ_41_FRAME_MIN_SIZE,
    REPLY_CODES,
)
from dissectors.amqp091.fast import FAST
from dissectors.amqp091.lazy import LazyFrame, add_computed, add_info
from dissectors.amqp091.methods import CLASSES, LEGACY_CLASSES, METHODS, RESPONSE_CODES, Method
from dissectors.amqp091.properties import clean_content_type, decode_properties, scan_properties
from dissectors.amqp091.state import (
    BODY_KEEP,
    CLOSED,
    CLOSING,
    EXPECT_BODY,
    EXPECT_HEADER,
    EXPECT_METHOD,
    NEW,
    OPEN,
    OPENING,
    STATE_NAMES,
    TRACK_LIMIT,
    Channel,
    Content,
)
from dissectors.amqp091.wire import TableNotes
from dissectors.kit.framing import ByteQueue, Piece
from dissectors.schema import DecodeError

C2S, S2C = Direction.C2S, Direction.S2C
_HDR = struct.Struct(">BHI")
_KNOWN_TYPES = frozenset((1, 2, 3, 8))
_OTHER = {Direction.C2S: Direction.S2C, Direction.S2C: Direction.C2S}
_IDS = struct.Struct(">HH")
_CH_HEAD = struct.Struct(">HHQ")

# Handshake states (spec §7.1).
(HS_HEADER, HS_START, HS_START_OK, HS_SECURING, HS_SECURE_OK, HS_TUNE_OK, HS_OPEN, HS_OPEN_OK,
 HS_DONE) = range(9)
_HS_NEXT: dict[tuple[int, Direction], tuple[tuple[int, ...], int]] = {
    # (method code, sender) -> (states it is legal in, next state)
    (M.CONNECTION_START, S2C): ((HS_START,), HS_START_OK),
    (M.CONNECTION_START_OK, C2S): ((HS_START_OK,), HS_SECURING),
    (M.CONNECTION_SECURE, S2C): ((HS_SECURING,), HS_SECURE_OK),
    (M.CONNECTION_SECURE_OK, C2S): ((HS_SECURE_OK,), HS_SECURING),
    (M.CONNECTION_TUNE, S2C): ((HS_SECURING,), HS_TUNE_OK),
    (M.CONNECTION_TUNE_OK, C2S): ((HS_TUNE_OK,), HS_OPEN),
    (M.CONNECTION_OPEN, C2S): ((HS_OPEN,), HS_OPEN_OK),
    (M.CONNECTION_OPEN_OK, S2C): ((HS_OPEN_OK,), HS_DONE),
}
_HS_WANT = {HS_HEADER: "the protocol header", HS_START: "connection.start", HS_START_OK: "connection.start-ok",
            HS_SECURING: "connection.secure or connection.tune", HS_SECURE_OK: "connection.secure-ok",
            HS_TUNE_OK: "connection.tune-ok", HS_OPEN: "connection.open", HS_OPEN_OK: "connection.open-ok",
            HS_DONE: "channel traffic"}

#: Frames larger than this are not believed before tune-ok (start-ok can carry big OAuth tokens).
_PRE_TUNE_CAP = 1 << 20
_UNLIMITED_CAP = 64 << 20
_MIDSTREAM_CAP = 16 << 20
#: Bytes of a body frame's payload kept in its "payload" field.
PAYLOAD_KEEP = 1024
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript",
               "application/x-www-form-urlencoded")


def _is_text(content_type: str, raw: bytes) -> str | None:
    ct = content_type.lower()
    textual = ct.startswith(_TEXT_TYPES) or ct.endswith(("+json", "+xml"))
    if not textual and ct:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if not textual:
            return None
        # A cut in the middle of a multi-byte character at the display cap.
        text = raw.decode("utf-8", errors="replace")
    if not textual and not all(c.isprintable() or c in "\r\n\t" for c in text[:256]):
        return None
    return text


def _short(value: Any, limit: int = 40) -> str:
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[:limit] + "…"


def head_fields(ftype: int, ch: int, size: int) -> list[Field]:
    # "frame-type", not "type": exchange.declare and the content properties have a "type".
    return [Field("frame-type", ftype, 0, 1, FRAME_TYPES.get(ftype, "unknown")), Field("channel", ch, 1, 2),
            Field("size", size, 3, 4)]


def method_info(meth: Method, values: dict[str, Any]) -> str:
    if "reply-code" in values:
        rc = values["reply-code"]
        text = values.get("reply-text") or ""
        name = REPLY_CODES.get(rc, (f"UNKNOWN_{rc}", False))[0] if isinstance(rc, int) else "?"
        info = f"{meth.name} {rc} " + (text if isinstance(text, str) and text.startswith(name) else
                                       f"{name} {text}".rstrip())
        if meth.info:
            info += " " + " ".join(f"{label}={values.get(arg, '')}" for label, arg in meth.info)
        return info
    if not meth.info:
        return meth.name
    return meth.name + " " + " ".join(f"{label}={values.get(arg, '')}" for label, arg in meth.info)


def _build_method(frame: LazyFrame, meth: Method) -> tuple[list[Field], str]:
    """Field tree of a method frame that already passed its fast layout check."""
    data = frame.data
    assert data is not None
    ftype, ch, size = _HDR.unpack_from(data, 0)
    fields = head_fields(1, ch, size)
    fields.append(Field("class", meth.class_id, 7, 2, CLASSES[meth.class_id]))
    fields.append(Field("method", meth.method_id, 9, 2, meth.name.partition(".")[2]))
    args, _stop = meth.layout.read_fields(memoryview(data), 11, 7 + size)
    fields.extend(args)
    return fields, method_info(meth, {f.name: f.value for f in args})


class _Side:
    """Framing state of one direction."""

    __slots__ = ("queue", "header_possible", "junk_at", "junk_len", "junk_why", "frames", "last_ts",
                 "pending_findings", "closed_conn", "skew", "direct")

    def __init__(self, synced: bool, header_possible: bool) -> None:
        self.queue = ByteQueue(synced)
        self.header_possible = header_possible
        self.junk_at = -1
        self.junk_len = 0
        self.junk_why = ""
        self.frames = 0
        self.last_ts: float | None = None
        self.pending_findings: list[Finding] = []
        self.closed_conn = False  # this side sent connection.close
        self.skew = 0  # stream bytes framed without passing through the queue
        # Nothing buffered, in sync, no header or junk pending: segments are framed in place.
        self.direct = synced and not header_possible


class Amqp091Connection(BaseConnection):
    def __init__(self, midstream: bool = False) -> None:
        self.midstream = midstream
        self.dialect = None if midstream else None
        self.sides = {C2S: _Side(not midstream, not midstream), S2C: _Side(not midstream, not midstream)}
        self.hs = HS_DONE if midstream else HS_HEADER
        self.tuned = False
        self.frame_max = 0
        self.channel_max = 0
        self.heartbeat = 0
        self.server_tune: tuple[int, int, int] | None = None
        self.mechanisms: list[str] | None = None
        self.channels: dict[int, Channel] = {}
        self.conn_pending: dict[Direction, list[tuple[Method, Frame]]] = {C2S: [], S2C: []}
        self.foreign = False  # another protocol (AMQP 1.0/0-10) after its header: stop decoding
        self.hb_monitor = False
        self._measures = {d: self._make_measure(d) for d in (C2S, S2C)}
        self._resyncs = {d: self._make_resync(d) for d in (C2S, S2C)}
        self._cap = _MIDSTREAM_CAP if midstream else _PRE_TUNE_CAP
        # Largest conformant frame now (0 = no limit): frame-min-size until tune-ok, then frame-max.
        self.frame_min = FRAME_MIN_SIZE  # raised by the broker's Connection.Start (RabbitMQ 4.1+)
        self._limit = 0 if midstream else FRAME_MIN_SIZE
        self._quiet = self._quiet_bounds()

    # ------------------------------------------------------------------ framing
    def _make_measure(self, d: Direction):  # type: ignore[no-untyped-def]
        side = self.sides[d]
        unpack = _HDR.unpack_from

        def measure(buf: memoryview, pos: int) -> int:
            avail = len(buf) - pos
            if side.header_possible:
                n = min(avail, 4)
                if bytes(buf[pos:pos + n]) == b"AMQP"[:n]:
                    return 8 if avail >= 8 else 0
                side.header_possible = False
            if avail < 7:
                return 0
            ftype, _ch, size = unpack(buf, pos)
            if size > self._cap:
                side.junk_why = f"a frame header claims {size} payload bytes, more than plausible"
                return -1
            if ftype in (1, 2, 3, 8):
                return size + 8
            # Unknown type: only believe it when its frame-end octet is where it should be.
            if avail < size + 8:
                return 0
            if buf[pos + size + 7] != FRAME_END:
                side.junk_why = f"frame type {ftype} is unknown and no frame-end follows its payload"
                return -1
            return size + 8

        return measure

    def _make_resync(self, d: Direction):  # type: ignore[no-untyped-def]
        unpack = _HDR.unpack_from

        def resync(buf: memoryview, pos: int) -> tuple[int, bool]:
            # A candidate is a known frame type with a plausible size whose frame-end octet is 0xCE
            # (and, for a method, a known class). A candidate whose end is not buffered yet cannot
            # be checked: keep scanning for a checkable one, and only wait (keeping bytes from the
            # first unchecked candidate on) when none is found.
            n = len(buf)
            cap = self._cap
            p = pos
            unchecked = -1
            while p < n:
                t = buf[p]
                if t in (1, 2, 3, 8):
                    if p + 7 > n:
                        return (p if unchecked < 0 else unchecked), False
                    _t, _ch, size = unpack(buf, p)
                    if size <= cap:
                        end = p + 7 + size
                        if end < n:
                            if buf[end] == FRAME_END and (t != 1 or size >= 4 and (buf[p + 7] << 8 | buf[p + 8])
                                                          in CLASSES):
                                return p, True
                        elif unchecked < 0:
                            unchecked = p
                p += 1
            return (n if unchecked < 0 else unchecked), False

        return resync

    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        side = self.sides[direction]
        if self.foreign:
            return ()
        if self.hb_monitor and side.last_ts is not None and self.heartbeat:
            silence = ts - side.last_ts
            if silence > 2 * self.heartbeat:
                side.pending_findings.append(R.HEARTBEAT_MISSED(
                    f"nothing from the {'client' if direction is C2S else 'server'} for {silence:.1f} s "
                    f"(heartbeat {self.heartbeat} s)"))
        side.last_ts = ts
        out: list[Event] = []
        if side.direct:
            # Fast path: nothing buffered, so whole frames are cut straight from this segment
            # without copying it into the queue; only a trailing partial frame is queued.
            # ``skew`` keeps frame offsets in stream space (the queue never saw these bytes).
            pos = self._cut_segment(direction, side, data, out)
            if self.foreign:
                return out
            side.skew += pos
            if pos == len(data):
                return out
            data = data[pos:] if pos else data
        q = side.queue
        q.append(data)
        for piece in q.cut(self._measures[direction], self._resyncs[direction]):
            if piece.junk:
                self._junk(side, piece)
                continue
            if side.junk_len:
                out.extend(self._flush_junk(side))
            if not self._hot_piece(direction, side, piece.data, piece.offset + side.skew, out):
                out.append(self._general_frame(direction, side, piece.data, piece.offset + side.skew))
            if self.foreign:
                break
        side.direct = not len(q) and q.synced and not side.header_possible and not side.junk_len
        return out

    def _cut_segment(self, d: Direction, side: _Side, data: bytes, out: list[Event]) -> int:
        """Frame whole frames straight from ``data`` (nothing is queued on this side) into ``out``;
        returns how many bytes were used (a trailing partial frame is left for the queue).

        The hot frames of a busy connection (see _hot_method, _hot_header, _hot_body) are tried
        first; anything else, or anything a check would complain about, takes the general path.
        """
        pos = 0
        n = len(data)
        base = side.queue.offset + side.skew
        cap = self._cap
        unpack = _HDR.unpack_from
        # A finding waiting for the next frame (missed heartbeat) goes through the general path.
        hot = not side.pending_findings
        quiet_size, quiet_ch = self._quiet
        # Every frame cut here adds one entry to ``out``: side.frames == len(out) - first.
        first = len(out) - side.frames
        while n - pos >= 8:
            ftype, ch, size = unpack(data, pos)
            stop = pos + size + 8
            if stop > n or size > cap or ftype not in _KNOWN_TYPES:
                break
            if hot and size <= quiet_size and ch <= quiet_ch and data[stop - 1] == FRAME_END:
                after = _HOT[ftype](self, d, side, data, pos, stop, ch, size, base, out)
                if after:
                    pos = after
                    continue
            side.frames = len(out) - first
            out.append(self._general_frame(d, side, data[pos:stop], base + pos))
            if self.foreign:
                return stop
            quiet_size, quiet_ch = self._quiet
            hot = True
            pos = stop
        side.frames = len(out) - first
        return pos

    def _general_frame(self, d: Direction, side: _Side, data: bytes, offset: int) -> Frame:
        """_frame, then the bounds of the hot path (the frame may have been tune-ok or the header)."""
        frame = self._frame(d, side, data, offset)
        self._quiet = self._quiet_bounds()
        return frame

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        side = self.sides[direction]
        side.queue.lost(length)
        side.header_possible = False
        side.direct = False
        # Whatever was half-received on any channel is lost with the hole.
        for ch in self.channels.values():
            ch.content[direction].reset()
        return ()

    def end(self, ts: float) -> Iterable[Event]:
        out: list[Event] = []
        for d, side in self.sides.items():
            rest = side.queue.drain()
            if rest is not None and not self.foreign:
                if side.junk_len:
                    out.extend(self._flush_junk(side))
                out.append(R.FRAME_TRUNCATED(f"the {d} stream ended inside a frame: {len(rest.data)} bytes "
                                             f"at offset {rest.offset + side.skew} never completed"))
            elif side.junk_len:
                out.extend(self._flush_junk(side))
            out.extend(side.pending_findings)
            side.pending_findings = []
        if self.foreign:
            return out
        if not self.midstream and HS_HEADER < self.hs < HS_DONE:
            out.append(R.HANDSHAKE_INCOMPLETE(f"the connection ended while waiting for {_HS_WANT[self.hs]}"))
        if self.hb_monitor and self.heartbeat and not any(s.closed_conn for s in self.sides.values()):
            for d, side in self.sides.items():
                if side.last_ts is not None and ts - side.last_ts > 2 * self.heartbeat:
                    out.append(R.HEARTBEAT_MISSED(
                        f"nothing from the {'client' if d is C2S else 'server'} for {ts - side.last_ts:.1f} s "
                        f"before the end (heartbeat {self.heartbeat} s)"))
        for d in (C2S, S2C):
            for meth, frame in self.conn_pending[d]:
                out.append(R.SYNC_UNANSWERED(f"{meth.name} was never answered", related=frame))
        for ch in self.channels.values():
            for d in (C2S, S2C):
                for meth, frame in ch.pending[d]:
                    out.append(R.SYNC_UNANSWERED(f"{meth.name} on channel {ch.number} was never answered",
                                                 related=frame))
                c = ch.content[d]
                if c.expect != EXPECT_METHOD and c.frame is not None:
                    what = "content header" if c.expect == EXPECT_HEADER else \
                        f"body ({c.received} of {c.body_size} bytes)"
                    out.append(R.CONTENT_INCOMPLETE(f"{c.method.name if c.method else 'message'} on channel "
                                                    f"{ch.number}: the {what} never arrived", related=c.frame))
            for seq, frame in list(ch.unconfirmed.items())[:100]:
                out.append(R.CONFIRM_MISSING(f"publish #{seq} on channel {ch.number} was never confirmed",
                                             related=frame))
            if len(ch.unconfirmed) > 100:
                out.append(R.CONFIRM_MISSING(f"{len(ch.unconfirmed) - 100} more publishes on channel "
                                             f"{ch.number} were never confirmed"))
        return out

    def _junk(self, side: _Side, piece: Piece) -> None:
        if side.junk_len == 0:
            side.junk_at = piece.offset + side.skew
        side.junk_len += len(piece.data)

    def _flush_junk(self, side: _Side) -> list[Finding]:
        why = f" ({side.junk_why})" if side.junk_why else ""
        f = R.FRAME_JUNK(f"{side.junk_len} bytes at stream offset {side.junk_at} skipped to find the next "
                         f"frame{why}")
        if self.midstream and side.frames == 0:
            f.severity = Severity.NOTE
            f.message = (f"capture starts mid-stream: {side.junk_len} bytes before the first whole frame "
                         f"skipped")
        side.junk_len = 0
        side.junk_why = ""
        return [f]

    # --------------------------------------------------------------- frames
    def _frame(self, d: Direction, side: _Side, data: bytes, offset: int) -> Frame | None:
        if side.header_possible:
            side.header_possible = False
            if data[:4] == b"AMQP":
                side.frames += 1
                return self._protocol_header(d, data, offset)
        side.frames += 1
        ftype, ch, size = _HDR.unpack_from(data, 0)
        findings: list[Finding] = side.pending_findings
        side.pending_findings = []
        end_octet = data[-1]
        if end_octet != FRAME_END:
            findings.append(R.FRAME_END(f"frame-end is {end_octet:#04x}, not 0xce"))
        if self._limit and size + 8 > self._limit:
            total = size + 8
            if self.tuned:
                findings.append(R.FRAME_TOO_LARGE(f"{total}-byte frame exceeds the negotiated frame-max "
                                                  f"{self.frame_max}"))
            else:
                findings.append(R.FRAME_TOO_LARGE(f"{total}-byte frame before tune-ok exceeds frame-min-size "
                                                  f"{self.frame_min}"))
        if self.channel_max and ch > self.channel_max:
            findings.append(R.FRAME_CHANNEL_MAX(f"channel {ch} is above the negotiated channel-max "
                                                f"{self.channel_max}"))
        if self.hs == HS_HEADER and not self.midstream:
            if d is C2S:
                findings.append(R.HEADER_MISSING("the client sent a frame before the protocol header"))
            else:
                findings.append(R.HANDSHAKE_ORDER("the server sent a frame before the client's protocol header"))
            self.hs = HS_START
        if ftype == 1:
            frame = self._method(d, data, ch, size, offset, findings)
        elif ftype == 2:
            frame = self._content_header(d, data, ch, size, offset, findings)
        elif ftype == 3:
            frame = self._body(d, data, ch, size, offset, findings)
        elif ftype == 8:
            frame = self._heartbeat(d, data, ch, size, offset, findings)
        else:
            name = FRAME_TYPES.get(ftype, "unknown")
            findings.append(R.FRAME_TYPE(f"frame type {ftype} ({name}) is not an AMQP 0-9-1 frame type"))
            frame = Frame(d, offset, len(data), f"Unknown({ftype})", ftype,
                          f"Unknown frame type {ftype} ch={ch} len={size}",
                          [*self._head_fields(ftype, ch, size),
                           Field("payload", bytes(data[7:7 + size]), 7, size)], findings)
        frame.data = data  # the wire bytes, for --hex and for oracles
        return frame

    # ------------------------------------------------------------- hot path
    # A busy connection is mostly publish/deliver + content header + body, and acks, on open
    # channels. For those the hot_* functions below run the same checks as the general path, but
    # decide them with a few comparisons against the steady state: when every check passes they
    # build the (lazy) frame themselves; when any check would speak they return None without
    # touching any state, and the general path redoes the frame and reports what is wrong.

    def _quiet_bounds(self) -> tuple[int, int]:
        """(largest payload size, largest channel) of a frame that raises no frame-level finding."""
        if self.hs == HS_HEADER and not self.midstream:
            return -1, -1  # any frame now is out of order: the general path says so
        limit = self._limit
        return (limit - 8 if limit else 1 << 62), (self.channel_max or 0xFFFF)

    def _hot_piece(self, d: Direction, side: _Side, data: bytes, offset: int, out: list[Event]) -> bool:
        """The hot path for one frame cut by the queue: True when it took the frame."""
        if side.header_possible or side.pending_findings:
            return False
        ftype, ch, size = _HDR.unpack_from(data, 0)
        quiet_size, quiet_ch = self._quiet
        if ftype not in _KNOWN_TYPES or size > quiet_size or ch > quiet_ch or data[-1] != FRAME_END:
            return False
        if _HOT[ftype](self, d, side, data, 0, len(data), ch, size, offset, out):
            side.frames += 1
            return True
        return False

    def _protocol_header(self, d: Direction, data: bytes, offset: int) -> Frame:
        tail = data[4:8]
        known = PROTOCOL_HEADERS.get(tail)
        findings: list[Finding] = []
        pid, a, b, c = tail
        if known is not None:
            dialect, desc = known
        else:
            dialect, desc = None, f"unknown AMQP protocol id {pid} version {a}.{b}.{c}"
        fields = [Field("protocol", "AMQP", 0, 4), Field("protocol-id", pid, 4, 1), Field("major", a, 5, 1),
                  Field("minor", b, 6, 1), Field("revision", c, 7, 1),
                  Field("version", dialect or "unknown", -1, 0, desc)]
        if d is S2C:
            findings.append(R.HEADER_REFUSED(f"the server answered with the {desc} protocol header: it does not "
                                             f"accept the client's version"))
        else:
            if self.hs != HS_HEADER:
                findings.append(R.HANDSHAKE_ORDER("a second protocol header"))
            self.hs = HS_START
            if known is None:
                findings.append(R.HEADER_UNKNOWN(f"protocol header {data.hex(' ')}: {desc}"))
            elif dialect != "0-9-1":
                findings.append(R.HEADER_VERSION(f"the client asks for {desc}, not 0-9-1"))
            self.dialect = dialect or "unknown"
            if dialect is not None and (dialect.startswith("1.0") or dialect == "0-10"):
                self.foreign = True
        return Frame(d, offset, 8, "ProtocolHeader", None, f"ProtocolHeader {desc}", fields, findings,
                     dialect=dialect, data=data)

    def _heartbeat(self, d: Direction, data: bytes, ch: int, size: int, offset: int,
                   findings: list[Finding]) -> Frame:
        if ch != 0:
            findings.append(R.HEARTBEAT_CHANNEL(f"heartbeat on channel {ch}"))
        if size:
            findings.append(R.HEARTBEAT_PAYLOAD(f"heartbeat carries {size} payload bytes"))
        fields = self._head_fields(8, ch, size)
        if size:
            fields.append(Field("payload", bytes(data[7:7 + size]), 7, size))
        return Frame(d, offset, len(data), "Heartbeat", 8, "Heartbeat", fields, findings)

    # -------------------------------------------------------------- methods
    def _method(self, d: Direction, data: bytes, ch: int, size: int, offset: int,
                findings: list[Finding]) -> Frame:
        end = 7 + size
        if size >= 4:
            cid, mid = _IDS.unpack_from(data, 7)
            code = cid << 16 | mid
            fast = FAST.get(code)
            if fast is not None:
                values = fast(data, end)
                if values is not None:
                    # Hot path: the layout fits exactly; the checks run now, the tree is built on demand.
                    meth = METHODS[code]
                    lazy = LazyFrame(d, offset, len(data), meth.name, code, findings, data, _build_method, meth)
                    add_info(lazy, self._check_method(d, ch, meth, values, lazy))
                    return lazy
        fields = self._head_fields(1, ch, size)
        if size < 4:
            findings.append(R.METHOD_OVERRUN(f"a method frame needs 4 bytes of class and method id, has {size}"))
            fields.append(Field("payload", bytes(data[7:end]), 7, size))
            return Frame(d, offset, len(data), "Method", None, "Method (truncated)", fields, findings)
        meth = METHODS.get(code)
        cls_name = CLASSES.get(cid)
        # "class"/"method", not "class-id"/"method-id": close methods have arguments of those names.
        fields.append(Field("class", cid, 7, 2, cls_name or LEGACY_CLASSES.get(cid, "unknown")))
        if meth is None:
            if cls_name is None:
                legacy = LEGACY_CLASSES.get(cid)
                findings.append(R.METHOD_UNKNOWN_CLASS(
                    f"class {cid}" + (f" ({legacy}, an AMQP 0-8/0-9 class removed in 0-9-1)" if legacy else
                                      " is not an AMQP 0-9-1 class")))
                command = f"{legacy or f'Class{cid}'}.Unknown({mid})"
            else:
                findings.append(R.METHOD_UNKNOWN(f"class {cls_name} has no method {mid}"))
                command = f"{cls_name}.Unknown({mid})"
            fields.append(Field("method", mid, 9, 2, "unknown"))
            if size > 4:
                fields.append(Field("arguments", bytes(data[11:end]), 11, size - 4))
            return Frame(d, offset, len(data), command, code, command, fields, findings)
        fields.append(Field("method", mid, 9, 2, meth.name.partition(".")[2]))
        mv = memoryview(data)
        TableNotes.reset()
        try:
            args, stop = meth.layout.read_fields(mv, 11, end)
        except DecodeError as exc:
            findings.append(R.METHOD_OVERRUN(f"{meth.name}: {exc}"))
            args, stop = [], end
            fields.append(Field("arguments", bytes(data[11:end]), 11, size - 4, f"undecodable: {exc}"))
        if stop < end:
            findings.append(R.METHOD_UNDERRUN(f"{meth.name}: {end - stop} bytes after the last argument"))
        if TableNotes.unknown:
            findings.append(R.TABLE_UNKNOWN_TAG(f"{meth.name}: " + "; ".join(TableNotes.unknown[:5])))
        if TableNotes.spec_only:
            findings.append(R.TABLE_SPEC_TAG(f"{meth.name}: " + "; ".join(TableNotes.spec_only[:5])))
        fields.extend(args)
        values = {f.name: f.value for f in args}
        frame = Frame(d, offset, len(data), meth.name, code, "", fields, findings)
        extra = self._check_method(d, ch, meth, values, frame)
        frame.info = method_info(meth, values) + extra
        return frame

    @staticmethod
    def _head_fields(ftype: int, ch: int, size: int) -> list[Field]:
        return head_fields(ftype, ch, size)

    def _check_method(self, d: Direction, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        """The state machine for one method frame; returns extra text for the Info line."""
        findings = frame.findings
        code = meth.code
        extra = ""
        if meth.direction != "both" and meth.direction != d:
            findings.append(R.METHOD_DIRECTION(f"{meth.name} is sent by the "
                                               f"{'client' if meth.direction == 'c2s' else 'server'} only"))
        if meth.note:
            findings.append(R.METHOD_OBSOLETE(f"{meth.name}: {meth.note}"))
        if "reply-code" in values:
            self._reply_code(meth, values, findings)
        if meth.class_id == 10:
            if ch != 0:
                findings.append(R.METHOD_CHANNEL(f"{meth.name} on channel {ch}; connection methods use channel 0"))
            self._connection_method(d, meth, values, frame)
            return extra
        if ch == 0:
            findings.append(R.METHOD_CHANNEL(f"{meth.name} on channel 0, which only carries connection methods"))
            return extra
        if self.hs != HS_DONE:
            findings.append(R.HANDSHAKE_ORDER(f"{meth.name} on channel {ch} before the connection is open "
                                              f"(waiting for {_HS_WANT[self.hs]})"))
        self._closed_sender(d, meth, findings)
        chan = self.channels.get(ch)
        if code == M.CHANNEL_OPEN:
            if chan is not None and chan.state in (OPENING, OPEN):
                findings.append(R.CHANNEL_ALREADY_OPEN(f"channel {ch} is already {STATE_NAMES[chan.state]}"))
            chan = self.channels[ch] = Channel(ch, OPENING)
            chan.opened_by = frame
            self._request(d, chan.pending[d], meth, values, frame)
            return extra
        if chan is None:
            chan = self.channels[ch] = Channel(ch, OPEN if self.midstream else NEW)
        self._sequence(d, chan, meth, frame)
        state = chan.state
        if code == M.CHANNEL_OPEN_OK:
            self._reply(d, chan.pending[_OTHER[d]], meth, frame)
            if state == OPENING:
                chan.state = OPEN
            return extra
        if code == M.CHANNEL_CLOSE:
            if state in (NEW, CLOSED):
                findings.append(R.CHANNEL_NOT_OPEN(f"channel.close on channel {ch}, which is "
                                                   f"{STATE_NAMES[state]}"))
            elif d in chan.closer:
                findings.append(R.CHANNEL_AFTER_CLOSE(f"second channel.close on channel {ch}"))
            chan.closer.add(d)
            chan.state = CLOSING
            if d is S2C and values.get("reply-code", 200) != 200:
                # The server failed the channel: the client's outstanding requests will never be answered.
                chan.pending[C2S].clear()
            self._request(d, chan.pending[d], meth, values, frame)
            return extra
        if code == M.CHANNEL_CLOSE_OK:
            if _OTHER[d] not in chan.closer:
                findings.append(R.CHANNEL_CLOSE_OK(f"channel.close-ok on channel {ch} but the peer did not "
                                                   f"close it"))
            else:
                self._reply(d, chan.pending[_OTHER[d]], meth, frame)
                chan.closer.discard(_OTHER[d])
            if not chan.closer:
                # Closed both ways: forget what was outstanding (the channel's state is gone).
                chan.state = CLOSED
                for q in chan.pending.values():
                    q.clear()
                chan.unacked.clear()
                chan.unconfirmed.clear()
                for c in chan.content.values():
                    c.reset()
            return extra
        if state in (NEW, CLOSED):
            findings.append(R.CHANNEL_NOT_OPEN(f"{meth.name} on channel {ch}, which is {STATE_NAMES[state]}"))
            chan.state = OPEN  # report once, then follow the channel as if it were open
        elif state == OPENING:
            findings.append(R.CHANNEL_NOT_OPEN(f"{meth.name} on channel {ch} before channel.open-ok"))
        elif state == CLOSING and d in chan.closer:
            findings.append(R.CHANNEL_AFTER_CLOSE(f"{meth.name} on channel {ch} after this side sent "
                                                  f"channel.close"))
        # Requests and replies.
        if code in RESPONSE_CODES:
            self._reply(d, chan.pending[_OTHER[d]], meth, frame)
        if meth.responses:
            self._request(d, chan.pending[d], meth, values, frame)
        # Deliveries, acknowledgements, confirms.
        act = _ACTIONS.get(code)
        if act is not None:
            extra = act(self, d, chan, meth, values, frame)
        return extra

    # The per-method actions of _check_method (dispatched by _ACTIONS); each returns Info text.
    def _publish(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        if not chan.confirm:
            return ""
        chan.publish_seq += 1
        seq = chan.publish_seq
        if len(chan.unconfirmed) < TRACK_LIMIT:
            chan.unconfirmed[seq] = frame
        add_computed(frame, "publish-seq", seq, "publisher-confirm sequence number")
        return f" seq={seq}"

    def _deliver(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        tag = values.get("delivery-tag")
        noack = False
        if meth.code == M.BASIC_DELIVER:
            noack = values.get("consumer-tag") in chan.noack_consumers
        elif chan.noack_pending["get"]:
            noack = chan.noack_pending["get"].popleft()
        if isinstance(tag, int):
            if chan.tag_floor < 0 and self.midstream:
                chan.tag_floor = tag - 1
            if not noack and len(chan.unacked) < TRACK_LIMIT:
                chan.unacked.add(tag)
        return ""

    def _get(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        if values.get("no-ack") is not None:
            chan.noack_pending["get"].append(bool(values.get("no-ack")))
        return ""

    def _consume(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        if values.get("no-ack"):
            ctag = values.get("consumer-tag") or ""
            if ctag:
                chan.noack_consumers.add(ctag)
        if not values.get("nowait") and not values.get("consumer-tag"):
            chan.noack_pending["consume"].append(bool(values.get("no-ack")))
        return ""

    def _consume_ok(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        if chan.noack_pending["consume"] and chan.noack_pending["consume"].popleft():
            chan.noack_consumers.add(values.get("consumer-tag") or "")
        return ""

    def _select_mode(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        """confirm.select and tx.select: a channel may be in one of the two modes, not both."""
        tx = meth.code == M.TX_SELECT
        if chan.confirm if tx else chan.tx:
            now, before = ("tx.select", "in confirm mode (confirm.select)") if tx else \
                ("confirm.select", "transactional (tx.select)")
            frame.findings.append(R.TX_AND_CONFIRM(f"{now} on channel {chan.number}, which is {before}"))
        if tx:
            chan.tx = True
        else:
            chan.confirm = True
        return ""

    def _get_empty(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        if chan.noack_pending["get"]:  # the pending get's no-ack flag is used up
            chan.noack_pending["get"].popleft()
        return ""

    def _settle(self, d: Direction, chan: Channel, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        tag = values.get("delivery-tag")
        multiple = bool(values.get("multiple"))
        if not isinstance(tag, int):
            return ""
        if d is C2S:
            if self.midstream and (chan.tag_floor < 0 or tag <= chan.tag_floor):
                return ""  # deliveries before the capture started are unknown
            tracked = chan.unacked
            if multiple:
                if tag == 0:
                    tracked.clear()
                    return " multiple"
                done = [t for t in tracked if t <= tag]
                for t in done:
                    tracked.discard(t)
                if not done and tag > chan.tag_floor:
                    frame.findings.append(R.ACK_UNKNOWN_TAG(f"{meth.name} multiple up to delivery tag {tag} on "
                                                            f"channel {chan.number}: no unacknowledged delivery"))
                return " multiple"
            if tag in tracked:
                tracked.discard(tag)
            else:
                frame.findings.append(R.ACK_UNKNOWN_TAG(f"{meth.name} of delivery tag {tag} on channel "
                                                        f"{chan.number}, which is not an unacknowledged delivery"))
            return ""
        # Server to client: publisher confirms.
        if meth.code == M.BASIC_REJECT:
            return ""
        if not chan.confirm:
            if not self.midstream:
                frame.findings.append(R.CONFIRM_NOT_SELECTED(f"{meth.name} from the server on channel "
                                                             f"{chan.number}, which is not in confirm mode"))
            return ""
        pending = chan.unconfirmed
        if multiple:
            seqs = []
            while pending:
                first = next(iter(pending))
                if first > tag:
                    break
                del pending[first]
                seqs.append(first)
        elif tag in pending:
            del pending[tag]
            seqs = [tag]
        else:
            seqs = []
        if not seqs and tag > 0:
            if not self.midstream:
                frame.findings.append(R.CONFIRM_UNKNOWN_TAG(f"{meth.name} confirms publish #{tag} on channel "
                                                            f"{chan.number}, which is not outstanding"))
            return ""
        add_computed(frame, "confirms", seqs, _ranges(seqs))
        return f" confirms {_ranges(seqs)}" + (" multiple" if multiple else "")

    def _closed_sender(self, d: Direction, meth: Method, findings: list[Finding]) -> None:
        if self.sides[d].closed_conn and meth.code not in (M.CONNECTION_CLOSE, M.CONNECTION_CLOSE_OK):
            findings.append(R.CHANNEL_AFTER_CLOSE(f"{meth.name} after this side sent connection.close"))

    @staticmethod
    def _request(d: Direction, queue: Any, meth: Method, values: dict[str, Any], frame: Frame) -> None:
        if meth.responses and not (meth.has_nowait and values.get("nowait")):
            queue.append((meth, frame))

    @staticmethod
    def _reply(d: Direction, queue: Any, meth: Method, frame: Frame) -> None:
        code = meth.code
        for i, (req, _f) in enumerate(queue):
            if code in req.response_codes:
                del queue[i]
                return
        frame.findings.append(R.SYNC_UNEXPECTED(f"{meth.name} answers no pending request"))

    def _reply_code(self, meth: Method, values: dict[str, Any], findings: list[Finding]) -> None:
        rc = values.get("reply-code")
        if not isinstance(rc, int):
            return
        known = REPLY_CODES.get(rc)
        text = values.get("reply-text") or ""
        if rc == 0:
            # pika closes channels with reply code 0 "Normal shutdown"; brokers treat it as a normal close.
            findings.append(R.REPLY_UNKNOWN(f"{meth.name}: reply code 0 is not defined (clients such as pika "
                                            f"use it for a normal close)", severity=Severity.NOTE))
            return
        if known is None:
            findings.append(R.REPLY_UNKNOWN(f"{meth.name}: reply code {rc} is not defined"))
            name = f"code {rc}"
        else:
            name = f"{rc} {known[0]}"
        if meth.code == M.BASIC_RETURN:
            findings.append(R.REPLY_RETURN(f"message returned: {name} ({text})"))
        elif rc != 200:
            rule = R.REPLY_CONNECTION if meth.class_id == 10 else R.REPLY_CHANNEL
            findings.append(rule(f"{meth.name}: {name} ({text})"))

    def _connection_method(self, d: Direction, meth: Method, values: dict[str, Any], frame: Frame) -> None:
        code = meth.code
        findings = frame.findings
        self._closed_sender(d, meth, findings)
        pending = self.conn_pending
        if code == M.CONNECTION_CLOSE:
            self.sides[d].closed_conn = True
            if d is S2C:
                pending[C2S] = []  # the server discards everything the client still sends
            pending[d].append((meth, frame))
            return
        if code == M.CONNECTION_CLOSE_OK:
            if not self.sides[_OTHER[d]].closed_conn:
                findings.append(R.CHANNEL_CLOSE_OK("connection.close-ok but the peer did not send "
                                                   "connection.close"))
            elif pending[_OTHER[d]]:
                self._reply(d, pending[_OTHER[d]], meth, frame)
            for q in pending.values():
                q[:] = [x for x in q if x[0].code == M.CONNECTION_CLOSE and x[1].direction is not _OTHER[d]]
            for ch in self.channels.values():
                for q2 in ch.pending.values():
                    q2.clear()
                ch.unconfirmed.clear()
            self.hb_monitor = False
            return
        step = _HS_NEXT.get((code, d))
        if step is not None:
            legal, nxt = step
            if not self.midstream and self.hs not in legal:
                findings.append(R.HANDSHAKE_ORDER(f"{meth.name} while waiting for {_HS_WANT[self.hs]}"))
            self.hs = nxt
        elif not self.midstream and self.hs != HS_DONE:
            findings.append(R.HANDSHAKE_ORDER(f"{meth.name} before the connection is open "
                                              f"(waiting for {_HS_WANT[self.hs]})"))
        if code in RESPONSE_CODES:
            self._reply(d, pending[_OTHER[d]], meth, frame)
        if meth.responses:
            self._request(d, pending[d], meth, values, frame)
        if code == M.CONNECTION_START:
            mech = values.get("mechanisms")
            if isinstance(mech, str):
                self.mechanisms = mech.split()
            props = next((f for f in frame.fields if f.name == "server-properties"), None)
            self.frame_min = broker_frame_min(props)
            if not self.tuned and self._limit:
                self._limit = self.frame_min
            if self.dialect is None:
                self.dialect = "0-9-1"
        elif code == M.CONNECTION_START_OK:
            mech = values.get("mechanism")
            if self.mechanisms is not None and mech not in self.mechanisms:
                findings.append(R.HANDSHAKE_MECHANISM(f"mechanism {mech!r} is not one of the offered "
                                                      f"{' '.join(self.mechanisms)!r}"))
        elif code == M.CONNECTION_TUNE:
            self.server_tune = (values.get("channel-max", 0), values.get("frame-max", 0), values.get("heartbeat", 0))
        elif code == M.CONNECTION_TUNE_OK:
            self._tune_ok(values, findings)
        elif code == M.CONNECTION_OPEN_OK:
            self.hb_monitor = bool(self.heartbeat)

    def _tune_ok(self, values: dict[str, Any], findings: list[Finding]) -> None:
        ch_c, fm_c, hb_c = values.get("channel-max", 0), values.get("frame-max", 0), values.get("heartbeat", 0)
        problems = []
        if self.server_tune is not None:
            ch_s, fm_s, _hb_s = self.server_tune
            if ch_s and (ch_c == 0 or ch_c > ch_s):
                problems.append(f"channel-max {ch_c} but the server allows at most {ch_s}")
            if fm_s and (fm_c == 0 or fm_c > fm_s):
                problems.append(f"frame-max {fm_c} but the server allows at most {fm_s}")
        if fm_c and fm_c < self.frame_min:
            problems.append(f"frame-max {fm_c} is below frame-min-size {self.frame_min}")
        if problems:
            findings.append(R.HANDSHAKE_TUNE("; ".join(problems)))
        self.tuned = True
        self.channel_max, self.frame_max, self.heartbeat = ch_c, fm_c, hb_c
        self._limit = fm_c
        self._cap = max(fm_c * 4, _PRE_TUNE_CAP) if fm_c else _UNLIMITED_CAP

    # -------------------------------------------------------------- content
    def _sequence(self, d: Direction, chan: Channel, meth: Method, frame: Frame) -> None:
        """A method frame on channel ``chan``: check and advance content sequencing."""
        c = chan.content[d]
        if c.expect != EXPECT_METHOD:
            prev = c.method.name if c.method else "a content-bearing method"
            if c.expect == EXPECT_HEADER:
                frame.findings.append(R.CONTENT_HEADER_EXPECTED(f"{meth.name} on channel {chan.number} where the "
                                                                f"content header of {prev} was due"))
            else:
                frame.findings.append(R.CONTENT_INTERLEAVED(
                    f"{meth.name} on channel {chan.number} while {c.body_size - c.received} body bytes of "
                    f"{prev} are still due"))
            c.reset()
        if meth.content:
            c.start(meth, frame)

    def _content_header(self, d: Direction, data: bytes, ch: int, size: int, offset: int,
                        findings: list[Finding]) -> Frame:
        end = 7 + size
        if size < 14:
            fields = self._head_fields(2, ch, size)
            findings.append(R.CONTENT_HEADER_MALFORMED(f"a content header needs at least 14 bytes, has {size}"))
            fields.append(Field("payload", bytes(data[7:end]), 7, size))
            return Frame(d, offset, len(data), "ContentHeader", 2, "ContentHeader (truncated)", fields, findings)
        class_id, weight, body_size = _CH_HEAD.unpack_from(data, 7)
        TableNotes.reset()
        try:
            content_type, problems, stop = scan_properties(data, 19, end)
            if stop < end:
                findings.append(R.CONTENT_HEADER_MALFORMED(f"{end - stop} bytes after the last property"))
        except DecodeError as exc:
            findings.append(R.CONTENT_HEADER_MALFORMED(f"properties: {exc}"))
            content_type, problems = "", []
        if TableNotes.unknown:
            findings.append(R.TABLE_UNKNOWN_TAG("headers: " + "; ".join(TableNotes.unknown[:5])))
        if TableNotes.spec_only:
            findings.append(R.TABLE_SPEC_TAG("headers: " + "; ".join(TableNotes.spec_only[:5])))
        frame = LazyFrame(d, offset, len(data), "ContentHeader", 2, findings, data, _build_header, None)
        chan = self._content_channel(d, ch, "content header", findings)
        if chan is None:
            return frame
        c = chan.content[d]
        if c.expect == EXPECT_HEADER:
            assert c.method is not None
            if class_id != c.method.class_id or weight or problems:
                bad = []
                if class_id != c.method.class_id:
                    bad.append(f"class {class_id} but {c.method.name} is class {c.method.class_id}")
                if weight:
                    bad.append(f"weight {weight} (must be 0)")
                findings.append(R.CONTENT_HEADER_BAD("; ".join(bad + problems)))
            c.body_size = body_size
            c.content_type = content_type
            if body_size == 0:
                _complete(c, frame, b"")
            else:
                c.expect = EXPECT_BODY
        elif c.expect == EXPECT_BODY:
            findings.append(R.CONTENT_INTERLEAVED(f"content header on channel {ch} while "
                                                  f"{c.body_size - c.received} body bytes of the previous message "
                                                  f"are still due"))
            c.reset()
        else:
            findings.append(R.CONTENT_UNEXPECTED(f"content header on channel {ch} without a content-bearing method"))
        return frame

    def _content_channel(self, d: Direction, ch: int, what: str, findings: list[Finding]) -> Channel | None:
        """The channel a content frame belongs to, with findings when it may not carry one (None: channel 0)."""
        if ch == 0:
            findings.append(R.CONTENT_CHANNEL_ZERO(f"{what} on channel 0"))
            return None
        chan = self.channels.get(ch)
        if chan is not None and chan.state == OPEN:
            return chan
        if chan is None:
            chan = self.channels[ch] = Channel(ch, OPEN if self.midstream else NEW)
        if chan.state in (NEW, CLOSED):
            findings.append(R.CHANNEL_NOT_OPEN(f"{what} on channel {ch}, which is {STATE_NAMES[chan.state]}"))
            chan.state = OPEN
        elif chan.state == CLOSING and d in chan.closer:
            findings.append(R.CHANNEL_AFTER_CLOSE(f"{what} on channel {ch} after this side sent channel.close"))
        return chan

    def _body(self, d: Direction, data: bytes, ch: int, size: int, offset: int, findings: list[Finding]) -> Frame:
        frame = LazyFrame(d, offset, len(data), "ContentBody", 3, findings, data, _build_body, None)
        chan = self._content_channel(d, ch, "content body", findings)
        if chan is None:
            return frame
        c = chan.content[d]
        if c.expect == EXPECT_BODY:
            self._add_body(c, frame, data, size, findings)
        elif c.expect == EXPECT_HEADER:
            findings.append(R.CONTENT_HEADER_EXPECTED(f"body frame on channel {ch} before the content header of "
                                                      f"{c.method.name if c.method else 'the message'}"))
            c.reset()
        else:
            findings.append(R.CONTENT_UNEXPECTED(f"body frame on channel {ch} without a content-bearing method "
                                                 f"and header"))
        return frame

    def _add_body(self, c: Content, frame: LazyFrame, data: bytes, size: int, findings: list[Finding]) -> None:
        """Count a body frame into the message on ``c`` (which expects body); complete it when whole."""
        if c.received == 0 and size >= c.body_size:
            # The whole message in one frame (the common case): no accumulation buffer.
            c.received = size
            c.frames = 1
            if size > c.body_size:
                findings.append(R.CONTENT_BODY_SIZE(f"body frames carry {size} bytes, the header "
                                                    f"announced {c.body_size}"))
            _complete(c, frame, data[7:7 + min(size, BODY_KEEP)])
            return
        c.received += size
        c.frames += 1
        room = BODY_KEEP - len(c.kept)
        if room > 0:
            c.kept += data[7:7 + min(size, room)]
        if c.received >= c.body_size:
            if c.received > c.body_size:
                findings.append(R.CONTENT_BODY_SIZE(f"body frames carry {c.received} bytes, the header "
                                                    f"announced {c.body_size}"))
            _complete(c, frame, bytes(c.kept))



# The hot path: see Amqp091Connection._quiet_bounds. Each takes the frame data[pos:stop] (payload
# ``size`` bytes on channel ``ch``, at stream offset base + pos) and appends it to ``out`` when every
# check passes, returning where the next frame starts; 0 means "not here: use the general path",
# with nothing changed.

def _hot_method(conn: Amqp091Connection, d: Direction, side: _Side, data: bytes, pos: int, stop: int, ch: int,
                size: int, base: int, out: list[Event]) -> int:
    """A hot method from its allowed sender on an open channel of an open connection, with
    no content pending: none of _check_method's checks can fire, only its action runs."""
    if size < 4 or ch == 0 or conn.hs != HS_DONE or side.closed_conn:
        return 0
    hot = _HOT_METHODS[d].get(_IDS.unpack_from(data, pos + 7))
    if hot is None:
        return 0
    chan = conn.channels.get(ch)
    if chan is None or chan.state != OPEN:
        return 0
    c = chan.content[d]
    if c.expect != EXPECT_METHOD:
        return 0
    meth, validate, act = hot
    raw = data[pos:stop]
    values = validate(raw, 7 + size)
    if values is None:
        return 0
    frame = LazyFrame(d, base + pos, size + 8, meth.name, meth.code, [], raw, _build_method, meth)
    out.append(frame)
    extra = act(conn, d, chan, meth, values, frame)
    if extra:
        frame._info_extra = extra
    if meth.content:
        after = _hot_content(d, c, meth, data, stop, ch, base, conn._quiet[0], conn._cap, out)
        if after:
            return after
        c.start(meth, frame)
    return stop


def _hot_content(d: Direction, c: Content, meth: Method, data: bytes, pos: int, ch: int, base: int,
                 quiet_size: int, cap: int, out: list[Event]) -> int:
    """The content header and single body frame of a hot content-bearing method just accepted
    on ``c``, when both follow in this segment (how clients and brokers write them) and pass
    the checks of _hot_header and _hot_body: they are framed, and ``c`` is left as after the
    whole message; returns where the next frame starts. Otherwise returns 0 having done
    nothing (the caller starts the message on ``c`` and the loop takes the frames one by one).

    The channel checks of those two hold by construction here: the method was just accepted on
    this open channel with no content pending, so ``c`` expects exactly this header, then this body.
    """
    n = len(data)
    if n - pos < 8:
        return 0
    ftype, hch, hsize = _HDR.unpack_from(data, pos)
    hstop = pos + hsize + 8
    if (ftype != 2 or hch != ch or hstop > n or hsize < 14 or hsize > quiet_size or hsize > cap
            or data[hstop - 1] != FRAME_END):
        return 0
    class_id, weight, body_size = _CH_HEAD.unpack_from(data, pos + 7)
    if weight or class_id != meth.class_id:
        return 0
    content_type = clean_content_type(data, pos + 19, hstop - 1)
    if content_type is None:
        return 0
    if body_size:
        if n - hstop < 8:
            return 0
        ftype, bch, bsize = _HDR.unpack_from(data, hstop)
        bstop = hstop + bsize + 8
        if (ftype != 3 or bch != ch or bsize != body_size or bstop > n or bsize > quiet_size or bsize > cap
                or data[bstop - 1] != FRAME_END):
            return 0
    header = LazyFrame(d, base + pos, hsize + 8, "ContentHeader", 2, [], data[pos:hstop], _build_header, None)
    out.append(header)
    # What c.start, the header, the body and _complete would leave (c.kept is empty between messages).
    c.body_size = body_size
    c.content_type = content_type
    c.method = c.frame = None
    if not body_size:
        c.received = c.frames = 0
        header._ctx = (meth.name, 0, 0, b"", content_type)
        return hstop
    body = LazyFrame(d, base + hstop, bsize + 8, "ContentBody", 3, [], data[hstop:bstop], _build_body, None)
    out.append(body)
    c.received = bsize
    c.frames = 1
    body._ctx = (meth.name, bsize, 1, data[hstop + 7:hstop + 7 + min(bsize, BODY_KEEP)], content_type)
    return bstop


def _hot_header(conn: Amqp091Connection, d: Direction, side: _Side, data: bytes, pos: int, stop: int, ch: int,
                size: int, base: int, out: list[Event]) -> int:
    """The content header a content-bearing method announced, with sound properties."""
    if ch == 0 or size < 14:
        return 0
    chan = conn.channels.get(ch)
    if chan is None or chan.state != OPEN:
        return 0
    c = chan.content[d]
    if c.expect != EXPECT_HEADER:
        return 0
    class_id, weight, body_size = _CH_HEAD.unpack_from(data, pos + 7)
    if weight or class_id != c.method.class_id:  # type: ignore[union-attr]
        return 0
    content_type = clean_content_type(data, pos + 19, stop - 1)
    if content_type is None:
        return 0
    frame = LazyFrame(d, base + pos, size + 8, "ContentHeader", 2, [], data[pos:stop], _build_header, None)
    out.append(frame)
    c.body_size = body_size
    c.content_type = content_type
    if body_size == 0:
        _complete(c, frame, b"")
    else:
        c.expect = EXPECT_BODY
    return stop


def _hot_body(conn: Amqp091Connection, d: Direction, side: _Side, data: bytes, pos: int, stop: int, ch: int,
              size: int, base: int, out: list[Event]) -> int:
    """A body frame that does not overrun the size its content header announced."""
    if ch == 0:
        return 0
    chan = conn.channels.get(ch)
    if chan is None or chan.state != OPEN:
        return 0
    c = chan.content[d]
    if c.expect != EXPECT_BODY or c.received + size > c.body_size:
        return 0
    raw = data[pos:stop]
    frame = LazyFrame(d, base + pos, size + 8, "ContentBody", 3, [], raw, _build_body, None)
    out.append(frame)
    conn._add_body(c, frame, raw, size, frame.findings)
    return stop


def _not_hot(conn: Amqp091Connection, d: Direction, side: _Side, data: bytes, pos: int, stop: int, ch: int,
             size: int, base: int, out: list[Event]) -> int:
    return 0


#: Frame type -> its hot path (heartbeats are rare; unknown types always need a word).
_HOT = (_not_hot, _hot_method, _hot_header, _hot_body, _not_hot, _not_hot, _not_hot, _not_hot, _not_hot)


#: Per sender: (class id, method id) -> (method, layout check, action) of the methods the hot path takes.
#: Only methods none of whose own checks can fire on an open channel qualify: not obsolete, no
#: reply code, neither request nor reply of a synchronous exchange, not of class connection/channel.
_HOT_METHODS: dict[Direction, dict[tuple[int, int], tuple[Method, Any, Any]]] = {C2S: {}, S2C: {}}


def _hot_methods() -> None:
    for code, validate in FAST.items():
        meth = METHODS[code]
        assert not meth.note and not meth.responses and code not in RESPONSE_CODES and meth.class_id > 20
        assert all(f.name != "reply-code" for f in meth.layout.fields)
        for d in (C2S, S2C):
            if meth.direction in ("both", d):
                _HOT_METHODS[d][meth.class_id, meth.method_id] = (meth, validate, _ACTIONS[code])


#: Method code -> what _check_method does for it after the channel checks (state bookkeeping).
_ACTIONS = {
    M.BASIC_PUBLISH: Amqp091Connection._publish,
    M.BASIC_DELIVER: Amqp091Connection._deliver,
    M.BASIC_GET_OK: Amqp091Connection._deliver,
    M.BASIC_GET: Amqp091Connection._get,
    M.BASIC_CONSUME: Amqp091Connection._consume,
    M.BASIC_CONSUME_OK: Amqp091Connection._consume_ok,
    M.BASIC_ACK: Amqp091Connection._settle,
    M.BASIC_NACK: Amqp091Connection._settle,
    M.BASIC_REJECT: Amqp091Connection._settle,
    M.CONFIRM_SELECT: Amqp091Connection._select_mode,
    M.TX_SELECT: Amqp091Connection._select_mode,
    M.BASIC_GET_EMPTY: Amqp091Connection._get_empty,
}
_hot_methods()


def broker_frame_min(server_properties: Field | None) -> int:
    """frame-min-size for this broker: RabbitMQ 4.1 raised it from the spec's 4096 to 8192."""
    if server_properties is None:
        return FRAME_MIN_SIZE
    product, version = server_properties.child("product"), server_properties.child("version")
    if product is None or product.value != "RabbitMQ" or version is None:
        return FRAME_MIN_SIZE
    parts = str(version.value).split(".")
    try:
        if (int(parts[0]), int(parts[1])) >= (4, 1):
            return RABBITMQ_41_FRAME_MIN_SIZE
    except (ValueError, IndexError):
        pass
    return FRAME_MIN_SIZE


def _complete(c: Content, frame: LazyFrame, raw: bytes) -> None:
    """The message on channel state ``c`` is whole: it is shown on ``frame`` (built on demand)."""
    frame._ctx = (c.method.name if c.method else "message", c.received, c.frames, raw, c.content_type)
    c.reset()


def _build_header(frame: LazyFrame, msg: tuple | None) -> tuple[list[Field], str]:
    data = frame.data
    assert data is not None
    _t, ch, size = _HDR.unpack_from(data, 0)
    end = 7 + size
    class_id, weight, body_size = _CH_HEAD.unpack_from(data, 7)
    fields = head_fields(2, ch, size)
    fields += [Field("class-id", class_id, 7, 2, CLASSES.get(class_id, "unknown")), Field("weight", weight, 9, 2),
               Field("body-size", body_size, 11, 8)]
    content_type = ""
    try:
        props, _problems, _stop = decode_properties(memoryview(data), 19, end)
        fields.extend(props)
        for f in props:
            if f.name == "content-type" and isinstance(f.value, str):
                content_type = f.value
    except DecodeError as exc:
        fields.append(Field("properties", bytes(data[19:end]), 19, end - 19, f"undecodable: {exc}"))
    info = f"ContentHeader size={body_size}" + (f" type={content_type}" if content_type else "")
    if msg is not None:
        info += _message(fields, msg)
    return fields, info


def _build_body(frame: LazyFrame, msg: tuple | None) -> tuple[list[Field], str]:
    data = frame.data
    assert data is not None
    _t, ch, size = _HDR.unpack_from(data, 0)
    if size <= PAYLOAD_KEEP:
        pf = Field("payload", data[7:7 + size], 7, size)
    else:
        pf = Field("payload", data[7:7 + PAYLOAD_KEEP], 7, size, f"{size} bytes (first {PAYLOAD_KEEP} kept)")
    fields = [Field("frame-type", 3, 0, 1, "ContentBody"), Field("channel", ch, 1, 2), Field("size", size, 3, 4), pf]
    info = f"ContentBody len={size}"
    if msg is not None:
        info += _message(fields, msg)
    return fields, info


def _message(fields: list[Field], msg: tuple) -> str:
    """Append the whole message's field to ``fields``; returns the Info text for it."""
    name, total, frames, raw, content_type = msg
    truncated = total > len(raw)
    text = _is_text(content_type, raw)
    children = [Field("method", name, -1, 0), Field("body-size", total, -1, 0), Field("body-frames", frames, -1, 0)]
    if text is not None:
        children.append(Field("body", text, -1, 0, f"first {len(raw)} of {total} bytes" if truncated else None))
        preview = f": {_short(text)!r}" if total else ""
    else:
        children.append(Field("body", raw[:64], -1, 0, f"{total} bytes of binary data"))
        preview = " (binary)"
    if truncated:
        children.append(Field("body-truncated", True, -1, 0, f"only the first {len(raw)} bytes are kept"))
    fields.append(Field("message", None, -1, 0, f"{name} message, {total} bytes in {frames} body frame(s)",
                        children))
    return f" [{name} message {total} bytes{preview}]"


def _ranges(seqs: list[int]) -> str:
    if not seqs:
        return "-"
    parts = []
    start = prev = seqs[0]
    for s in seqs[1:]:
        if s == prev + 1:
            prev = s
            continue
        parts.append(f"#{start}" if start == prev else f"#{start}-{prev}")
        start = prev = s
    parts.append(f"#{start}" if start == prev else f"#{start}-{prev}")
    return ",".join(parts)
