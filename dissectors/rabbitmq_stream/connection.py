"""Per-connection state of the RabbitMQ Stream dissector: framing, decoding and conformance checks.

Sans-IO: bytes in through ``feed``/``gap``/``end``, Frames and Findings out. One ByteQueue per
direction cuts frames (uint32 Size + Size bytes); decoding is table-driven (:mod:`.layouts`,
:mod:`.draft`) except Deliver, which is the hot path and has its own code.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from analyzer.api import Connection, Direction, Event, Field, Finding, Frame, Severity
from dissectors.kit.framing import ByteQueue, Piece
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.chunk import ChunkInfo, ChunkProblem, decode_chunk
from dissectors.rabbitmq_stream.draft import DIALECT as DRAFT
from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS
from dissectors.rabbitmq_stream.layouts import COMMANDS, RESPONSE_BIT, Command
from dissectors.rabbitmq_stream.wire import CODES, DRAFT_CODES
from dissectors.schema import DecodeError, Struct

CURRENT = "current"
HEAD = struct.Struct(">IHH")
U8 = struct.Struct(">B")
U64 = struct.Struct(">Q")
I32 = struct.Struct(">i")
C2S, S2C = Direction.C2S, Direction.S2C
#: A Size above this is taken as loss of sync rather than a frame to wait for.
MAX_FRAME = 64 << 20
#: Bytes examined per resynchronisation attempt (bounds the work on long runs of garbage).
RESYNC_WINDOW = 256 << 10
#: Publishing ids remembered per connection while waiting for confirms.
MAX_TRACKED = 1_000_000
KEYS_CURRENT = frozenset(COMMANDS)
KEYS_DRAFT = frozenset(DRAFT_COMMANDS)
# Commands the client may send, in order, before Open (index = handshake step).
STEP = {"PeerProperties": 0, "SaslHandshake": 1, "SaslAuthenticate": 2, "Tune": 3, "Open": 4}
OPEN_SENT = 5
#: RabbitMQ 4.3.5+ refuses bigger client frames until Open succeeds (`stream.initial_frame_max`).
PRE_OPEN_FRAME_MAX = 8192


def _code_name(code: int, draft: bool) -> str:
    return (DRAFT_CODES if draft else CODES).get(code, f"UNKNOWN({code:#x})")


class _Pending:
    __slots__ = ("frame", "cmd", "values")

    def __init__(self, frame: Frame, cmd: Command, values: dict[str, Any]) -> None:
        self.frame = frame
        self.cmd = cmd
        self.values = values


class StreamConnection(Connection):
    def __init__(self, midstream: bool) -> None:
        self.midstream = midstream
        self.dialect: str | None = None
        self.queues = {C2S: ByteQueue(synced=not midstream), S2C: ByteQueue(synced=not midstream)}
        self._resync_reason: dict[Direction, str] = {C2S: "", S2C: ""}
        self._measure = {d: self._make_measure(d) for d in (C2S, S2C)}
        self._seen_frame = {C2S: False, S2C: False}
        self._after_gap = {C2S: False, S2C: False}
        self._junk_run: dict[Direction, list[Any] | None] = {C2S: None, S2C: None}
        self.lossy = midstream
        # handshake
        self.step = OPEN_SENT if midstream else 0
        self.server_tuned = midstream
        self.auth_ok = midstream
        self.broker_version: str | None = None
        # negotiation
        self.server_tune: tuple[int, int] | None = None
        self.frame_max = 0
        self.heartbeat = 0
        self.last_ts: dict[Direction, float | None] = {C2S: None, S2C: None}
        self.last_frame: dict[Direction, Frame | None] = {C2S: None, S2C: None}
        self.closed = False
        # correlation: requests sent by each side, by correlation id
        self.pending: dict[Direction, dict[int, _Pending]] = {C2S: {}, S2C: {}}
        # publishers / subscriptions
        self.publishers: set[int] = set()
        self.unconfirmed: dict[int | None, set[int]] = {}
        self.tracked = 0
        self.credit: dict[int, int] = {}
        self.sub_stream: dict[int, str] = {}
        # Subscriptions the client gave up or the server dropped (MetadataUpdate): a later
        # SUBSCRIPTION_ID_DOES_NOT_EXIST for them is a benign race, not a client mistake.
        self.gone: set[int] = set()

    # ------------------------------------------------------------------ sans-IO entry points
    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterator[Event]:
        q = self.queues[direction]
        q.append(data)
        out: list[Event] = []
        self._silence(direction, ts, out)
        for piece in q.cut(self._measure[direction], self._resync):
            if piece.junk:
                self._junk(direction, piece, out)
                continue
            self._seen_frame[direction] = True
            self._after_gap[direction] = False
            self._flush_junk(direction, out)
            out.append(self._frame(direction, piece, ts))
        self.last_ts[direction] = ts
        return out

    def gap(self, direction: Direction, length: int, ts: float) -> Iterator[Event]:
        self.queues[direction].lost(length)
        # The bytes skipped to find the next frame after a hole are explained by the hole (the engine
        # reports it): no resync finding for them.
        self._after_gap[direction] = True
        # Requests, confirms or subscriptions may have been in the hole: stop judging them.
        self.lossy = True
        return ()

    def end(self, ts: float) -> Iterator[Event]:
        out: list[Event] = []
        for d in (C2S, S2C):
            self._flush_junk(d, out)
            piece = self.queues[d].drain()
            if piece is not None and piece.data:
                out.append(R.FRAME_INCOMPLETE(f"{d}: capture ends {len(piece.data)} bytes into a frame at stream "
                                              f"offset {piece.offset}"))
        if not self.closed:
            for d in (C2S, S2C):
                self._silence(d, ts, out)
        if not self.lossy:
            for d in (C2S, S2C):
                for corr, p in sorted(self.pending[d].items()):
                    if p.cmd.name == "Close":
                        out.append(R.CLOSE_UNANSWERED(f"Close (corr={corr}) from the "
                                                      f"{'client' if d is C2S else 'server'} was never answered",
                                                      related=p.frame))
                    else:
                        out.append(R.UNANSWERED(f"{p.cmd.name} request corr={corr} was never answered",
                                                related=p.frame))
        return out

    # ------------------------------------------------------------------ framing
    def _make_measure(self, d: Direction):  # type: ignore[no-untyped-def]
        reasons = self._resync_reason
        unpack = I32.unpack_from

        def measure(buf: memoryview, pos: int) -> int:
            if len(buf) - pos < 4:
                return 0
            (size,) = unpack(buf, pos)
            if size < 4:
                reasons[d] = f"Size {size} is below 4" if size >= 0 else f"Size {size & 0xFFFFFFFF} is implausible"
                return -1
            if size > MAX_FRAME:
                reasons[d] = f"Size {size} is implausible"
                return -1
            return size + 4

        return measure

    def _plausible(self, key_raw: int, version: int) -> bool:
        key = key_raw & 0x7FFF
        if self.dialect == DRAFT:
            return version == 0 and key_raw in KEYS_DRAFT
        if self.dialect == CURRENT:
            return version in (1, 2) and key in KEYS_CURRENT
        return (version in (1, 2) and key in KEYS_CURRENT) or (version == 0 and key_raw in KEYS_DRAFT)

    def _resync(self, buf: memoryview, pos: int) -> tuple[int, bool]:
        """Next plausible frame start. A candidate is *confirmed* when the frame after it is plausible
        too (or it ends exactly where the data ends); the first confirmed candidate wins. Otherwise the
        bytes before the first unconfirmed candidate are dropped and we wait for more data."""
        n = len(buf)
        unpack = HEAD.unpack_from
        first_maybe = -1
        stop = min(n - 7, pos + RESYNC_WINDOW)
        for i in range(pos, stop):
            size, key_raw, version = unpack(buf, i)
            if not (4 <= size <= MAX_FRAME and self._plausible(key_raw, version)):
                continue
            nxt = i + 4 + size
            if nxt == n:
                return i, True
            if nxt + 8 <= n:
                s2, k2, v2 = unpack(buf, nxt)
                if 4 <= s2 <= MAX_FRAME and self._plausible(k2, v2):
                    return i, True
                continue
            if first_maybe < 0:
                first_maybe = i
        if first_maybe >= 0:
            return first_maybe, False
        return max(pos, stop), False

    def _junk(self, d: Direction, piece: Piece, out: list[Event]) -> None:
        """Skipped bytes: one finding per run of garbage, given when the next frame (or the end) comes."""
        reason = self._resync_reason[d]
        self._resync_reason[d] = ""
        if self.midstream and not self._seen_frame[d]:
            return  # joining a connection midway: the first bytes are the tail of an unseen frame
        if self._after_gap[d]:
            return  # explained by the capture gap the engine reports
        acc = self._junk_run[d]
        if acc is None:
            self._junk_run[d] = [piece.offset, len(piece.data), reason]
        else:
            acc[1] += len(piece.data)
            acc[2] = acc[2] or reason

    def _flush_junk(self, d: Direction, out: list[Event]) -> None:
        acc = self._junk_run[d]
        if acc is None:
            return
        self._junk_run[d] = None
        offset, length, reason = acc
        rule = R.FRAME_TOO_SMALL if "below 4" in reason else R.JUNK
        out.append(rule(f"{d}: {length} bytes at stream offset {offset} skipped to resynchronise"
                        + (f" ({reason})" if reason else "")))

    # ------------------------------------------------------------------ decoding
    def _frame(self, d: Direction, piece: Piece, ts: float) -> Frame:
        data = piece.data
        size, key_raw, version = HEAD.unpack_from(data, 0)
        if self.dialect is None:
            self.dialect = DRAFT if version == 0 and key_raw in KEYS_DRAFT else CURRENT
        draft = self.dialect == DRAFT
        findings: list[Finding] = []
        fields = [Field("size", size, 0, 4), Field("key", key_raw, 4, 2), Field("version", version, 6, 2)]
        frame = Frame(d, piece.offset, len(data), "Unknown", key_raw, "", fields, findings, self.dialect, data)
        if draft:
            cmd = DRAFT_COMMANDS.get(key_raw)
            is_resp = False
            if cmd is not None:
                is_resp = self._draft_is_response(cmd, d, data)
        else:
            cmd = COMMANDS.get(key_raw & 0x7FFF)
            is_resp = bool(key_raw & RESPONSE_BIT)
            if cmd is not None and not is_resp:
                if cmd.key in (0x18, 0x19) and d is S2C:
                    # RabbitMQ 3.9.0-3.11.0 answered Route/Partitions with the response bit clear.
                    is_resp = True
                    findings.append(R.LEGACY_RESPONSE_KEY(f"{cmd.name} response keyed {key_raw:#06x} without the "
                                                          f"response bit (RabbitMQ 3.9.0-3.11.0)"))
                elif cmd.key == 0x14 and d is C2S:
                    is_resp = True  # the server also accepts the client's Tune keyed 0x0014
        if cmd is None:
            fields[1].display = f"{key_raw:#06x} unknown"
            findings.append(R.UNKNOWN_KEY(f"unknown command key {key_raw:#06x}"))
            self._rest(fields, data, 8)
            frame.info = f"Unknown key={key_raw:#06x} version={version}"
            return frame
        name = cmd.name
        fields[1].display = f"{key_raw:#06x} {name}" + (" response" if is_resp else "")
        frame.command = name + "Response" if is_resp else name
        frame.code = key_raw
        layout: Struct | None
        if is_resp:
            layout = cmd.response
            if layout is None:
                findings.append(R.UNKNOWN_KEY(f"key {key_raw:#06x}: {name} has no response"))
                self._rest(fields, data, 8)
                frame.command = "Unknown"
                frame.info = f"Unknown key={key_raw:#06x} version={version}"
                return frame
            if version not in cmd.requests:
                findings.append(R.UNKNOWN_VERSION(f"{name} response with unknown version {version}"))
        else:
            layout = cmd.requests.get(version)
            if layout is None:
                findings.append(R.UNKNOWN_VERSION(f"{name} with unknown version {version} "
                                                  f"(known: {', '.join(map(str, sorted(cmd.requests)))})"))
                self._rest(fields, data, 8)
                frame.info = f"{name} version={version}"
                self._direction_check(cmd, is_resp, d, findings)
                return frame
        self._direction_check(cmd, is_resp, d, findings)
        if name == "Deliver" and not is_resp:
            self._deliver(frame, data, version, draft, findings)
        else:
            self._generic(frame, layout, data, findings)
        values = {f.name: f for f in fields}
        if not is_resp:
            frame.info = self._info(name, cmd.info, values, draft, response=False) if name != "Deliver" else frame.info
        else:
            frame.info = self._info(name, cmd.response_info, values, draft, response=True)
        if size > self.frame_max > 0 and name != "Deliver":
            findings.append(R.FRAME_MAX(f"{frame.command} Size {size} exceeds the negotiated frame_max "
                                        f"{self.frame_max}"))
        elif size > PRE_OPEN_FRAME_MAX and d is C2S and self.step < OPEN_SENT:
            findings.append(R.PRE_OPEN_FRAME(f"{frame.command} Size {size} before Open is above the "
                                             f"{PRE_OPEN_FRAME_MAX}-byte ceiling of RabbitMQ 4.3.5+"))
        self._track(frame, cmd, is_resp, d, values, draft, ts)
        self.last_frame[d] = frame
        return frame

    @staticmethod
    def _rest(fields: list[Field], data: bytes, at: int) -> None:
        if len(data) > at:
            fields.append(Field("payload", data[at:], at, len(data) - at))

    def _draft_is_response(self, cmd: Command, d: Direction, data: bytes) -> bool:
        if cmd.response is None:
            return False
        if cmd.sender == "c2s":
            return d is S2C
        if cmd.sender == "s2c":
            return d is C2S
        # Close goes both ways: a response answers an outstanding Close of the other side.
        if len(data) >= 12:
            (corr,) = I32.unpack_from(data, 8)
            p = self.pending[d.other].get(corr)
            return p is not None and p.cmd is cmd
        return False

    def _direction_check(self, cmd: Command, is_resp: bool, d: Direction, findings: list[Finding]) -> None:
        if cmd.sender == "both":
            return
        expected = C2S if cmd.sender == "c2s" else S2C
        if is_resp:
            expected = expected.other
        if d is not expected:
            side = "client" if d is C2S else "server"
            findings.append(R.WRONG_DIRECTION(f"{cmd.name}{' response' if is_resp else ''} sent by the {side}"))

    def _generic(self, frame: Frame, layout: Struct | None, data: bytes, findings: list[Finding]) -> None:
        if layout is None:
            return
        view = memoryview(data)
        end = len(data)
        off = 8
        fields = frame.fields
        try:
            for spec in layout.fields:
                if spec.optional and off >= end:
                    break
                try:
                    f, off = spec.type.read(spec.name, view, off, end, spec)
                except DecodeError as exc:
                    findings.append(R.FRAME_TRUNCATED(f"{frame.command}: {exc} (Size {end - 4})"))
                    if exc.offset < end:
                        fields.append(Field("undecoded", data[exc.offset:], exc.offset, end - exc.offset))
                    return
                fields.append(f)
            if off < end:
                findings.append(R.FRAME_TRAILING(f"{frame.command}: {end - off} bytes after the last field"))
                fields.append(Field("trailing", data[off:], off, end - off))
        finally:
            view.release()

    def _deliver(self, frame: Frame, data: bytes, version: int, draft: bool, findings: list[Finding]) -> None:
        fields = frame.fields
        end = len(data)
        need = 12 if draft else (17 if version == 2 else 9)
        if end < need:
            findings.append(R.FRAME_TRUNCATED(f"Deliver: {end - 8} bytes cannot hold the subscription id"
                                              f"{' and committed chunk id' if version == 2 else ''}"))
            self._rest(fields, data, 8)
            frame.info = "Deliver (truncated)"
            return
        if draft:
            (sub,) = I32.unpack_from(data, 8)
            fields.append(Field("subscription_id", sub, 8, 4))
            pos = 12
        else:
            sub = data[8]
            fields.append(Field("subscription_id", sub, 8, 1))
            pos = 9
            if version == 2:
                (committed,) = U64.unpack_from(data, 9)
                fields.append(Field("committed_chunk_id", committed, 9, 8))
                pos = 17
        problems = ChunkProblem()
        info = ChunkInfo()
        kids = decode_chunk(data, pos, end, problems, info, draft)
        fields.append(Field("chunk", info.first_offset, pos, end - pos, f"{info.records} records", kids))
        if problems.crc_mismatch is not None:
            want, got = problems.crc_mismatch
            findings.append(R.CRC_MISMATCH(f"chunk {info.first_offset}: CRC {want:#010x} in the header, data has "
                                           f"{got:#010x}"))
        for msg in problems.errors:
            findings.append(R.CHUNK_MALFORMED(f"chunk {info.first_offset}: {msg}"))
        for msg in problems.notes:
            findings.append(R.CHUNK_COMPRESSED(f"chunk {info.first_offset}: {msg}"))
        frame.info = f"Deliver sub={sub} first_offset={info.first_offset} records={info.records}"
        if info.chunk_type:
            frame.info += f" type={info.chunk_type}"

    def _info(self, name: str, items: tuple[tuple[str, str], ...], values: dict[str, Field], draft: bool,
              response: bool) -> str:
        parts = [name + (" response" if response else "")]
        code = values.get("response_code")
        if code is not None and name != "MetadataUpdate":
            parts.append(f"code={_code_name(code.value, draft)}")
        for label, key in items:
            f = values.get(key)
            if f is None:
                continue
            v = f.display if f.display is not None and not f.is_list and f.value is not None else f.value
            if isinstance(v, str) and (v == "" or " " in v):
                v = repr(v)
            parts.append(f"{label}={v}")
        corr = values.get("correlation_id")
        if corr is not None:
            parts.append(f"corr={corr.value}")
        return " ".join(parts)

    # ------------------------------------------------------------------ conformance
    def _silence(self, d: Direction, ts: float, out: list[Event]) -> None:
        last = self.last_ts[d]
        if self.heartbeat > 0 and last is not None and ts - last > 2 * self.heartbeat:
            side = "client" if d is C2S else "server"
            out.append(R.HEARTBEAT_SILENCE(f"the {side} sent nothing for {ts - last:.1f} s (heartbeat "
                                           f"{self.heartbeat} s)", related=self.last_frame[d]))
            self.last_ts[d] = ts

    def _track(self, frame: Frame, cmd: Command, is_resp: bool, d: Direction, values: dict[str, Field],
               draft: bool, ts: float) -> None:
        findings = frame.findings
        name = cmd.name
        ok = 0 if draft else 1
        mistakes = R.DRAFT_CLIENT_MISTAKES if draft else R.CLIENT_MISTAKES
        codes = DRAFT_CODES if draft else CODES
        strict = not self.lossy

        # --- handshake order
        if not self.midstream:
            self._handshake(frame, name, is_resp, d, values, ok)

        # --- correlation
        corr_f = values.get("correlation_id")
        request: _Pending | None = None
        if cmd.correlated and corr_f is not None:
            corr = corr_f.value
            if not is_resp:
                mine = self.pending[d]
                if corr in mine and strict:
                    findings.append(R.DUPLICATE_CORR(f"{name} reuses correlation id {corr} of an unanswered "
                                                     f"{mine[corr].cmd.name}"))
                mine[corr] = _Pending(frame, cmd, {})
            else:
                request = self.pending[d.other].pop(corr, None)
                if request is None:
                    if strict:
                        findings.append(R.UNKNOWN_RESPONSE(f"{name} response corr={corr} matches no outstanding "
                                                           f"request"))
                elif request.cmd is not cmd:
                    findings.append(R.KEY_MISMATCH(f"{name} response corr={corr} answers a {request.cmd.name} "
                                                   f"request"))

        # --- response codes
        code_f = values.get("response_code")
        if code_f is not None and (is_resp or name in ("Credit", "MetadataUpdate")):
            code = code_f.value
            if code not in codes:
                findings.append(R.UNKNOWN_CODE(f"{frame.command}: response code {code:#06x} is not defined"))
            elif code != ok and not (code == 0x0A and not draft):
                sev = Severity.WARNING if code in mistakes else None
                why = ""
                sid = self._subscription_of(name, values, request)
                if code == (3 if draft else 0x04) and sid is not None and sid in self.gone:
                    sev, why = None, " (the subscription was already unsubscribed or dropped by the server)"
                findings.append(R.ERROR_RESPONSE(f"{frame.command}: {codes[code]} ({code:#04x}){why}",
                                                 severity=sev))
        if name == "Close" and not is_resp:
            cc = values.get("closing_code")
            if cc is not None and cc.value != ok:
                sev = Severity.WARNING if cc.value in mistakes else None
                findings.append(R.ERROR_RESPONSE(f"Close with code {_code_name(cc.value, draft)} "
                                                 f"({cc.value:#04x})", severity=sev))
        if name == "Metadata" and is_resp:
            for entry in (values["stream_metadata"].children or ()) if "stream_metadata" in values else ():
                st, c = entry.child("stream"), entry.child("response_code")
                if c is not None and c.value != ok:
                    findings.append(R.ERROR_RESPONSE(f"Metadata for stream {st.value if st else '?'!r}: "
                                                     f"{_code_name(c.value, draft)} ({c.value:#04x})"))

        # --- per-command state
        if name == "Tune":
            fm, hb = values.get("frame_max"), values.get("heartbeat")
            if fm is not None and hb is not None:
                if not is_resp:
                    self.server_tune = (fm.value, hb.value)
                else:
                    sfm = self.server_tune[0] if self.server_tune else 0
                    cfm = fm.value
                    self.frame_max = min(sfm, cfm) if sfm and cfm else (sfm or cfm)
                    self.heartbeat = hb.value
        elif name == "PeerProperties" and is_resp:
            props = values.get("properties")
            v = props.child("version") if props is not None else None
            if v is not None and isinstance(v.value, str):
                self.broker_version = v.value
                frame.info += f" broker={v.value}"
        elif name == "Close" and is_resp:
            self.closed = True
        elif name == "DeclarePublisher":
            if not is_resp:
                pid = values.get("publisher_id")
                if pid is not None:
                    self.publishers.add(pid.value)
            elif request is not None and code_f is not None and code_f.value != ok:
                pid = request.frame.get("publisher_id")
                self.publishers.discard(pid)
        elif name == "DeletePublisher" and not is_resp:
            pid = values.get("publisher_id")
            if pid is not None:
                self.publishers.discard(pid.value)
        elif name == "Publish":
            self._publish(frame, values, draft, strict)
        elif name in ("PublishConfirm", "PublishError"):
            self._confirm(frame, name, values, draft, strict)
        elif name == "MetadataUpdate":
            st = values.get("stream")
            for sid, stream in list(self.sub_stream.items()):
                if st is not None and stream == st.value:
                    self.gone.add(sid)
                    self.credit.pop(sid, None)
        elif name == "Subscribe":
            if not is_resp:
                sid, cr, st = values.get("subscription_id"), values.get("credit"), values.get("stream")
                if sid is not None:
                    self.credit[sid.value] = cr.value if cr is not None else (1 << 30)
                    self.gone.discard(sid.value)
                    if st is not None:
                        self.sub_stream[sid.value] = st.value
            elif request is not None and code_f is not None and code_f.value != ok:
                self.credit.pop(request.frame.get("subscription_id"), None)
        elif name == "Unsubscribe" and not is_resp:
            sid = values.get("subscription_id")
            if sid is not None:
                self.gone.add(sid.value)
        elif name == "Unsubscribe" and is_resp and request is not None and code_f is not None \
                and code_f.value == ok:
            self.credit.pop(request.frame.get("subscription_id"), None)
        elif name == "Credit" and not is_resp:
            sid, cr = values.get("subscription_id"), values.get("credit")
            if sid is not None and cr is not None and sid.value in self.credit:
                # The server reads the value as signed 16-bit.
                c = cr.value - 0x10000 if cr.value >= 0x8000 else cr.value
                self.credit[sid.value] += c
        elif name == "Deliver":
            sid = values.get("subscription_id")
            if sid is not None:
                left = self.credit.get(sid.value)
                if left is None:
                    if strict:
                        findings.append(R.UNKNOWN_SUBSCRIPTION(f"Deliver for subscription {sid.value}, never "
                                                               f"subscribed on this connection"))
                else:
                    left -= 1
                    if left < 0:
                        if strict:
                            findings.append(R.NO_CREDIT(f"Deliver for subscription {sid.value} without credit "
                                                        f"left (the client granted none since the last chunk)"))
                        left = 0
                    self.credit[sid.value] = left

    @staticmethod
    def _subscription_of(name: str, values: dict[str, Field], request: _Pending | None) -> int | None:
        if name == "Credit":
            f = values.get("subscription_id")
            return f.value if f is not None else None
        if name == "Unsubscribe" and request is not None:
            return request.frame.get("subscription_id")
        return None

    def _handshake(self, frame: Frame, name: str, is_resp: bool, d: Direction, values: dict[str, Field],
                   ok: int) -> None:
        findings = frame.findings
        if name in ("Heartbeat", "Close"):
            return
        if d is C2S:
            if name == "Tune" and is_resp:
                if not self.server_tuned:
                    findings.append(R.HANDSHAKE_ORDER("client Tune before the server's Tune"))
                elif self.step != STEP["Tune"] and self.step < OPEN_SENT:
                    findings.append(R.HANDSHAKE_ORDER(f"client Tune at handshake step {self.step}"))
                if self.step < OPEN_SENT:
                    self.step = STEP["Open"]
                else:
                    findings.append(R.HANDSHAKE_ORDER("Tune after Open"))
                return
            if is_resp:
                return  # ConsumerUpdate response: judged by correlation
            want = STEP.get(name)
            if self.step >= OPEN_SENT:
                if want is not None and name != "SaslAuthenticate":
                    findings.append(R.HANDSHAKE_ORDER(f"{name} after Open"))
                return
            if want is None:
                findings.append(R.HANDSHAKE_ORDER(f"{name} before Open (the handshake is at "
                                                  f"{_step_name(self.step)})"))
                return
            if name == "Open":
                if not self.server_tuned or self.step < STEP["Tune"]:
                    findings.append(R.HANDSHAKE_ORDER(f"Open before the handshake reached Tune (at "
                                                      f"{_step_name(self.step)})"))
                elif self.step == STEP["Tune"]:
                    findings.append(R.HANDSHAKE_ORDER("Open without the client's Tune", severity=Severity.NOTE))
                self.step = OPEN_SENT
                return
            if name == "SaslAuthenticate" and self.step == STEP["SaslAuthenticate"]:
                return  # may repeat while the server answers with a challenge
            if want != self.step:
                findings.append(R.HANDSHAKE_ORDER(f"{name} at handshake step {_step_name(self.step)}"))
            self.step = max(self.step, want + 1)
            return
        # server side
        if is_resp:
            if name == "SaslAuthenticate":
                code = values.get("response_code")
                if code is not None and code.value == ok:
                    self.auth_ok = True
                    if self.server_tuned and self.step < STEP["Tune"]:
                        self.step = STEP["Tune"]
            return
        if name == "Tune":
            if not self.auth_ok:
                findings.append(R.HANDSHAKE_ORDER("server Tune before a successful SaslAuthenticate"))
            elif self.server_tuned:
                findings.append(R.HANDSHAKE_ORDER("second server Tune"))
            self.server_tuned = True
            if self.auth_ok and self.step < STEP["Tune"]:
                self.step = STEP["Tune"]
            return
        if self.step < OPEN_SENT:
            findings.append(R.HANDSHAKE_ORDER(f"server sent {name} before Open"))

    def _publish(self, frame: Frame, values: dict[str, Field], draft: bool, strict: bool) -> None:
        pid_f = values.get("publisher_id")
        pid = pid_f.value if pid_f is not None else None
        if not draft and pid is not None and pid not in self.publishers and strict:
            frame.findings.append(R.UNKNOWN_PUBLISHER(f"Publish for publisher {pid}, never declared on this "
                                                      f"connection"))
        msgs = values.get("messages")
        if msgs is None or not msgs.children:
            return
        ids = self.unconfirmed.setdefault(pid, set())
        for m in msgs.children:
            if self.tracked >= MAX_TRACKED:
                break
            if m.value is not None and m.value not in ids:
                ids.add(m.value)
                self.tracked += 1

    def _confirm(self, frame: Frame, name: str, values: dict[str, Field], draft: bool, strict: bool) -> None:
        pid_f = values.get("publisher_id")
        pid = pid_f.value if pid_f is not None else None
        ids = self.unconfirmed.get(pid, set())
        if name == "PublishConfirm":
            arr = values.get("publishing_ids")
            got = [c.value for c in (arr.children or ())] if arr is not None else []
        else:
            arr = values.get("errors")
            got = []
            by_code: dict[int, int] = {}
            for e in (arr.children or ()) if arr is not None else ():
                pid_c, code_c = e.child("publishing_id"), e.child("response_code")
                if pid_c is not None:
                    got.append(pid_c.value)
                if code_c is not None:
                    by_code[code_c.value] = by_code.get(code_c.value, 0) + 1
            mistakes = R.DRAFT_CLIENT_MISTAKES if draft else R.CLIENT_MISTAKES
            for code, n in sorted(by_code.items()):
                sev = Severity.WARNING if code in mistakes else None
                frame.findings.append(R.ERROR_RESPONSE(f"PublishError: {n} message(s) rejected with "
                                                       f"{_code_name(code, draft)} ({code:#04x})", severity=sev))
        unknown = []
        for i in got:
            if i in ids:
                ids.discard(i)
                self.tracked -= 1
            else:
                unknown.append(i)
        if unknown and strict and self.tracked < MAX_TRACKED:
            shown = ", ".join(map(str, unknown[:5])) + (" …" if len(unknown) > 5 else "")
            frame.findings.append(R.UNKNOWN_PUBLISHING_ID(f"{name} for {len(unknown)} publishing id(s) of publisher "
                                                          f"{pid} never published or already settled: {shown}"))


def _step_name(step: int) -> str:
    names = ["PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open"]
    return "after Open" if step >= OPEN_SENT else f"{names[step]}"
