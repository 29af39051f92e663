"""Per-connection state of the RabbitMQ Stream dissector, built on the kit.

Sans-IO: bytes in through ``feed``/``gap``/``end`` (and capture time through ``tick``), Frames and
Findings out. A :class:`~dissectors.kit.Framer` per direction cuts frames (uint32 Size + Size
bytes); decoding is table-driven (:mod:`.layouts`, :mod:`.draft`) except Deliver, and a client's
Publish, the server's PublishConfirm and the client's Credit are first tried by a hot path that
checks them without building their trees (``_hot_publish``, ``_hot_request``);
the dialect is a :class:`~dissectors.kit.Dialect` (:mod:`.dialects`); the handshake is a
transition table (:mod:`.handshake`); requests and responses are paired by a
:class:`~dissectors.kit.Correlator`; per-command bookkeeping is the :data:`TRACK` table
(:mod:`.track`). All state is plain data: ``snapshot()`` / ``RabbitMQStreamDissector.resume``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from analyzer.api import Connection, Direction, Event, Field, Finding, Frame, FrameRef
from dissectors.kit import Correlator, Framer, Piece, Silence, plain_state
from dissectors.kit import state as kit_state
from dissectors.kit.dialect import Dialect
from dissectors.kit.lazy import QUICK_INFO, LazyFrame
from dissectors.kit.memo import remember
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.chunk import HEADER as CHUNK_HEADER
from dissectors.rabbitmq_stream.chunk import ChunkInfo, clean_chunk, decode_chunk
from dissectors.rabbitmq_stream.dialects import (
    CURRENT,
    DIALECTS,
    DRAFT,
    DRAFT_CHUNK,
    INT32_SUBSCRIPTION,
    RESPONSE_BIT,
    plausible,
)
from dissectors.rabbitmq_stream.handshake import MACHINE, message
from dissectors.rabbitmq_stream.layouts import RESPONSE_BIT as BIT
from dissectors.rabbitmq_stream.layouts import Command
from dissectors.rabbitmq_stream.sub_batch import ChunkProblem
from dissectors.rabbitmq_stream.track import CODED, REMEMBER, TRACK, add_credit, settle_ids, track_published
from dissectors.schema import DecodeError, Struct

HEAD = struct.Struct(">IHH")
U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")
PUBLISH = 0x0002
I32 = struct.Struct(">i")
_unpack_i32 = I32.unpack_from
C2S, S2C = Direction.C2S, Direction.S2C
#: A Size above this is taken as loss of sync rather than a frame to wait for.
MAX_FRAME = 64 << 20
#: Bytes examined per resynchronisation attempt (bounds the work on long runs of garbage).
RESYNC_WINDOW = 256 << 10
#: RabbitMQ 4.3.5+ refuses bigger client frames until Open succeeds (`stream.initial_frame_max`).
PRE_OPEN_FRAME_MAX = 8192
#: Responses that move the handshake: command -> event (SaslAuthenticate only when OK).
RESPONSE_EVENTS = {"Tune": "Tune", "SaslAuthenticate": "SaslAuthenticateOk"}
#: What the hot path gives for a frame a findings-only run leaves out (see _rebuild), having done
#: the rest.
LEFT_OUT: Any = object()


@plain_state
class StreamFramer(Framer):
    """One direction's kit :class:`~dissectors.kit.Framer` that also measures RabbitMQ Stream frames.

    ``measure`` is a method of the framer (it sets the framer's ``reason``) rather than a closure
    made per direction of every connection: two closures and the dict holding them cost ~650 bytes
    per connection and are no plain data."""

    __slots__ = ()
    #: measure reads only the Size prefix: a frame that spans many segments is measured once
    #: (tests/test_kit_stable_measure.py holds this to the cut on every segment).
    stable_measure = True

    def measure(self, buf: memoryview, pos: int) -> int:
        if len(buf) - pos < 4:
            return 0
        (size,) = _unpack_i32(buf, pos)
        if size < 4:
            self.reason = f"Size {size} is below 4" if size >= 0 else f"Size {size & 0xFFFFFFFF} is implausible"
            return -1
        if size > MAX_FRAME:
            self.reason = f"Size {size} is implausible"
            return -1
        return size + 4


@plain_state
class StreamConnection(Connection):
    # Slots, one framer attribute per direction, and tables that exist only while they hold
    # something (None when empty): 100,000 idle connections are a hostile case (issue 8 §6), so an
    # established connection's state is kept to about a kilobyte.
    __slots__ = ("midstream", "dialect", "framer_c2s", "framer_s2c", "lossy", "hs", "broker_version", "server_frame_max",
                 "server_tune_ref", "frame_max", "heartbeat", "silence", "closed", "corr", "publishers", "unconfirmed",
                 "tracked", "credit", "sub_stream", "gone", "_dialect", "leave_out", "frames_left_out",
                 "anchors_left_out", "fed_at", "given")
    #: Rebuilt by ``_rebuild`` after a resume: the dialect object; and what belongs to the run, not
    #: the conversation (the engine asks again when it resumes one: leave_out_plain_frames).
    TRANSIENT = ("_dialect", "leave_out", "frames_left_out", "anchors_left_out", "fed_at", "given")
    #: False: every frame takes the general path (the hot path's reference, for the differential test).
    hot = True

    def __init__(self, midstream: bool) -> None:
        self.midstream = midstream
        self.dialect: str | None = None
        self.framer_c2s = StreamFramer("c2s", synced=not midstream)
        self.framer_s2c = StreamFramer("s2c", synced=not midstream)
        # After a capture gap, requests, confirms or subscriptions may have been lost: stop judging them.
        self.lossy = midstream
        # Handshake state (kit Machine); None when the capture joined mid-stream (not judged).
        self.hs: str | None = None if midstream else MACHINE.start
        self.broker_version: str | None = None
        #: The frame_max of the server's Tune (0: none seen), negotiated down by the client's Tune.
        self.server_frame_max = 0
        #: The server's last frame from its Tune until the client's Tune: the heartbeat timer,
        #: created then, counts the server's silence from it.
        self.server_tune_ref: FrameRef | None = None
        self.frame_max = 0
        self.heartbeat = 0
        #: Heartbeat silence; None until the client's Tune negotiates heartbeats (many connections
        #: never do) and again once the connection closes (silence is expected then).
        self.silence: Silence | None = None
        self.closed = False
        self.corr = Correlator.by_id()
        # Publishers and subscriptions, each None while empty (see track.py).
        self.publishers: set[int] | None = None
        #: publisher id -> publishing ids awaiting a confirm (an id's set goes when it empties).
        self.unconfirmed: dict[int | None, set[int]] | None = None
        self.tracked = 0
        #: subscription id -> credit left, while subscribed.
        self.credit: dict[int, int] | None = None
        #: subscription id -> its stream, while subscribed (for MetadataUpdate).
        self.sub_stream: dict[int, str] | None = None
        # Subscriptions the client gave up or the server dropped (MetadataUpdate): a later
        # SUBSCRIPTION_ID_DOES_NOT_EXIST for them is a benign race, not a client mistake.
        self.gone: set[int] | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        self._dialect: Dialect | None = DIALECTS.get(self.dialect) if self.dialect else None
        #: A findings-only run (leave_out_plain_frames): a frame the hot path took (nothing wrong
        #: with it, nothing points at it) is counted in frames_left_out, not made, when it ends in
        #: the bytes of the call (fed_at: where they start) and a frame given back already told the
        #: engine the dialect (given).
        self.leave_out = False
        self.frames_left_out = 0
        self.anchors_left_out: list[FrameRef] | None = None
        self.fed_at = 0
        self.given = False

    def leave_out_plain_frames(self) -> bool:
        self.leave_out = True
        self.anchors_left_out = []
        return True

    # ------------------------------------------------------------------ sans-IO entry points
    def feed(self, direction: Direction, data: bytes, ts: float) -> list[Event]:
        out: list[Event] = []
        silence = self.silence
        if silence is not None and silence.interval > 0:
            out.extend(silence.due(ts, R.HEARTBEAT_SILENCE))
        framer = self.framer_c2s if direction == "c2s" else self.framer_s2c
        last: Frame | Piece | None = None
        if self.leave_out:
            q = framer.queue
            self.fed_at = q.offset + len(q)
        for item in framer.cut(data, framer.measure, self._resync, R.JUNK):
            if type(item) is Piece:
                frame = self._frame(direction, item, ts)
                if frame is LEFT_OUT:
                    self.frames_left_out += 1
                    last = item
                    continue
                last = frame
                out.append(frame)
                self.given = True
            else:
                out.append(item)  # type: ignore[arg-type]
        silence = self.silence  # these frames may have negotiated heartbeats or closed the connection
        if silence is not None:
            silence.seen(direction, ts, self._anchor(direction, last) if last is not None else None)
        elif last is not None and direction == "s2c" and self.server_tune_ref is not None:
            self.server_tune_ref = self._anchor(direction, last)
        return out

    def _anchor(self, d: Direction, last: Frame | Piece) -> FrameRef:
        """The anchor of a call's last frame; of one left out, handed to the engine (it ends in
        the call's bytes, so the engine gives it the call's packet, as it would the frame's)."""
        if type(last) is not Piece:
            return last.anchor()  # type: ignore[union-attr]
        ref = FrameRef.of(d, last.offset)
        self.anchors_left_out.append(ref)  # type: ignore[union-attr]  # a list once leave_out is set
        return ref

    def gap(self, direction: Direction, length: int, ts: float) -> list[Event]:
        (self.framer_c2s if direction == "c2s" else self.framer_s2c).lost(length)
        self.lossy = True
        return []

    def tick(self, ts: float) -> list[Event]:
        silence = self.silence
        return silence.due(ts, R.HEARTBEAT_SILENCE) if silence is not None else []  # type: ignore[return-value]

    def deadline(self) -> float | None:
        silence = self.silence
        return silence.at if silence is not None else None  # Silence.deadline() without its call

    def end(self, ts: float) -> list[Event]:
        out: list[Event] = []
        for framer in (self.framer_c2s, self.framer_s2c):
            out.extend(framer.end(R.JUNK, R.FRAME_INCOMPLETE))
        if self.silence is not None:
            out.extend(self.silence.due(ts, R.HEARTBEAT_SILENCE))
        if not self.lossy:
            out.extend(self.corr.unanswered(R.UNANSWERED, _unanswered))
            out.extend(self.corr.unanswered(R.CLOSE_UNANSWERED, _close_unanswered))
        return out

    def snapshot(self) -> dict[str, Any]:
        return kit_state.snapshot(self)

    # ------------------------------------------------------------------ framing
    def _resync(self, buf: memoryview, pos: int) -> tuple[int, bool]:
        """Next plausible frame start. A candidate is *confirmed* when the frame after it is plausible
        too (or it ends exactly where the data ends); the first confirmed candidate wins. Otherwise the
        bytes before the first unconfirmed candidate are dropped and we wait for more data."""
        n = len(buf)
        unpack = HEAD.unpack_from
        dialect = self._dialect
        first_maybe = -1
        stop = min(n - 7, pos + RESYNC_WINDOW)
        for i in range(pos, stop):
            size, key_raw, version = unpack(buf, i)
            if not (4 <= size <= MAX_FRAME and plausible(dialect, key_raw, version)):
                continue
            nxt = i + 4 + size
            if nxt == n:
                return i, True
            if nxt + 8 <= n:
                s2, k2, v2 = unpack(buf, nxt)
                if 4 <= s2 <= MAX_FRAME and plausible(dialect, k2, v2):
                    return i, True
                continue
            if first_maybe < 0:
                first_maybe = i
        if first_maybe >= 0:
            return first_maybe, False
        return max(pos, stop), False

    # ------------------------------------------------------------------ decoding
    def _frame(self, d: Direction, piece: Piece, ts: float) -> Frame:
        data = piece.data
        size, key_raw, version = HEAD.unpack_from(data, 0)
        dia = self._dialect
        if dia is None:
            dia = self._dialect = DRAFT if version == 0 and key_raw in DRAFT.commands else CURRENT
            self.dialect = dia.name
        if dia is CURRENT and self.hot:
            if key_raw == PUBLISH:
                if d is C2S:
                    hot = self._hot_publish(piece, data, size, version)
                    if hot is not None:
                        return hot
            else:
                take = _HOT_TAKE.get(key_raw)
                if take is not None:
                    hot = self._hot_request(d, piece, data, size, key_raw, version, *take)
                    if hot is not None:
                        return hot
        findings: list[Finding] = []
        fields = [Field("size", size, 0, 4), Field("key", key_raw, 4, 2), Field("version", version, 6, 2)]
        frame = Frame(d, piece.offset, len(data), "Unknown", key_raw, "", fields, findings, dia.name, data)
        cmd: Command | None
        if dia.has(RESPONSE_BIT):
            cmd = dia.commands.get(key_raw & 0x7FFF)
            is_resp = bool(key_raw & BIT)
            if cmd is not None and not is_resp:
                unflagged = dia["unflagged_responses"].get(cmd.key)
                if unflagged is not None and unflagged[0] == d:
                    is_resp = True
                    if unflagged[1]:
                        findings.append(R.LEGACY_RESPONSE_KEY(
                            f"{cmd.name} response keyed {key_raw:#06x} without the response bit (RabbitMQ "
                            f"3.9.0-3.11.0)"))
        else:
            cmd = dia.commands.get(key_raw)
            is_resp = cmd is not None and self._is_response_by_direction(cmd, d, data)
        if cmd is None:
            fields[1].display = f"{key_raw:#06x} unknown"
            findings.append(R.UNKNOWN_KEY(f"unknown command key {key_raw:#06x}"))
            _rest(fields, data, 8)
            frame.info = f"Unknown key={key_raw:#06x} version={version}"
            return frame
        name = cmd.name
        fields[1].display = f"{key_raw:#06x} {name}" + (" response" if is_resp else "")
        frame.command = name + "Response" if is_resp else name
        layout: Struct | None
        if is_resp:
            layout = cmd.response
            if layout is None:
                findings.append(R.UNKNOWN_KEY(f"key {key_raw:#06x}: {name} has no response"))
                _rest(fields, data, 8)
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
                _rest(fields, data, 8)
                frame.info = f"{name} version={version}"
                _direction_check(cmd, is_resp, d, findings)
                return frame
        _direction_check(cmd, is_resp, d, findings)
        if name == "Deliver" and not is_resp:
            _deliver(frame, data, version, dia, findings)
        else:
            _generic(fields, frame.command, layout, data, findings)
        values = {f.name: f for f in fields}
        if not is_resp:
            if name != "Deliver":
                frame.info = _info(name, cmd.info, values, dia, response=False)
        else:
            frame.info = _info(name, cmd.response_info, values, dia, response=True)
        if size > self.frame_max > 0 and name != "Deliver":
            findings.append(R.FRAME_MAX(f"{frame.command} Size {size} exceeds the negotiated frame_max "
                                        f"{self.frame_max}"))
        elif size > PRE_OPEN_FRAME_MAX and d is C2S and self.hs is not None and self.hs != "open":
            findings.append(R.PRE_OPEN_FRAME(f"{frame.command} Size {size} before Open is above the "
                                             f"{PRE_OPEN_FRAME_MAX}-byte ceiling of RabbitMQ 4.3.5+"))
        self._track(frame, cmd, is_resp, d, values, dia, ts)
        return frame

    def _hot_publish(self, piece: Piece, data: bytes, size: int, version: int) -> LazyFrame | None:
        """A Publish from the client (today's protocol) checked without its field tree: when none
        of the general path's checks would speak, the state moves as the general path would move
        it and the frame comes back lazy (the tree and Info line are built if a view asks), or
        LEFT_OUT in a findings-only run (see _rebuild); otherwise None, having changed nothing,
        and the general path says what is wrong.
        tests/test_rabbitmq_stream_hotpath.py holds the two paths to each other."""
        layout = CURRENT.commands[PUBLISH].requests.get(version)  # publisher_id, then the entries
        if layout is None:
            return None
        hs = self.hs
        if size > self.frame_max > 0 or (size > PRE_OPEN_FRAME_MAX and hs is not None and hs != "open"):
            return None
        nxt = hs
        if hs is not None:
            nxt, rule = MACHINE.judge(hs, C2S, "Publish")
            if rule is not None:
                return None
        end = len(data)
        if end < 9:
            return None
        pid = data[8]
        pubs = self.publishers
        if (pubs is None or pid not in pubs) and not self.lossy:
            return None  # a publisher never declared: the general path reports it
        published = layout.fields[1].type.scan(data, 9, end)
        if published is None:
            return None
        self.hs = nxt
        track_published(self, pid, published)
        if self._left_out(piece):
            return LEFT_OUT
        frame = LazyFrame(C2S, piece.offset, end, "Publish", PUBLISH, [], data, build_publish, version)
        frame.dialect = CURRENT.name
        return frame

    def _hot_request(self, d: Direction, piece: Piece, data: bytes, size: int, key: int, version: int,
                     take: Callable[[StreamConnection, bytes], bool],
                     build: Callable[[LazyFrame, int], tuple[list[Field], str]]) -> LazyFrame | None:
        """A PublishConfirm, Credit or Deliver (today's protocol; see _HOT_TAKE) checked without
        its field tree, as _hot_publish checks a Publish: when none of the general path's checks
        would speak, the state moves as the general path would move it and the frame comes back
        lazy (``build`` makes its tree) or LEFT_OUT as from _hot_publish; otherwise None, having
        changed nothing.
        tests/test_rabbitmq_stream_hotpath.py holds the two paths to each other."""
        cmd = CURRENT.commands[key]
        if d != cmd.sender or version not in cmd.requests or size > self.frame_max > 0:
            return None
        hs = self.hs
        if d is C2S and size > PRE_OPEN_FRAME_MAX and hs is not None and hs != "open":
            return None
        nxt = hs
        if hs is not None:
            nxt, rule = MACHINE.judge(hs, d, cmd.name)
            if rule is not None:
                return None
        if not take(self, data):
            return None
        self.hs = nxt
        if self._left_out(piece):
            return LEFT_OUT
        frame = LazyFrame(d, piece.offset, len(data), cmd.name, key, [], data, build, version)
        frame.dialect = CURRENT.name
        return frame

    def _left_out(self, piece: Piece) -> bool:
        """Whether a frame the hot path took is left out of a findings-only run (see _rebuild)."""
        return self.leave_out and self.given and piece.offset + len(piece.data) > self.fed_at

    def _is_response_by_direction(self, cmd: Command, d: Direction, data: bytes) -> bool:
        """Without a response bit: a response goes the other way than its request; Close goes both
        ways, so a Close is a response when it answers an outstanding Close of the other side."""
        if cmd.response is None:
            return False
        if cmd.sender != "both":
            return d != cmd.sender
        if len(data) >= 12:
            (corr,) = I32.unpack_from(data, 8)
            p = self.corr.peek(d, corr)
            return p is not None and p[0] == cmd.name
        return False

    # ------------------------------------------------------------------ conformance
    def _track(self, frame: Frame, cmd: Command, is_resp: bool, d: Direction, values: dict[str, Field],
               dia: Dialect, ts: float) -> None:
        name = cmd.name
        if self.hs is not None:
            self._handshake(frame, name, is_resp, d, values, dia)
        request: list[Any] | None = None
        if cmd.correlated:
            corr_f = values.get("correlation_id")
            if corr_f is not None:
                request = self._correlate(frame, name, is_resp, d, corr_f.value, values, ts)
        if is_resp or (name, is_resp) in CODED:
            code_f = values.get("response_code")
            if code_f is not None:
                self._response_code(frame, name, code_f.value, values, request, dia)
        handler = TRACK.get((name, is_resp))
        if handler is not None:
            handler(self, frame, values, request, dia, ts)

    def _correlate(self, frame: Frame, name: str, is_resp: bool, d: Direction, corr: int,
                   values: dict[str, Field], ts: float) -> list[Any] | None:
        strict = not self.lossy
        if not is_resp:
            keep = REMEMBER.get(name)
            extra = values[keep].value if keep is not None and keep in values else None
            f = self.corr.request(d, corr, name, frame.request_anchor(), ts, extra,
                                  duplicate=R.DUPLICATE_CORR if strict else None, limit_rule=R.LIMIT)
            if f is not None:
                frame.findings.append(f)
            return None
        request = self.corr.response(d, corr)
        if request is None:
            if strict:
                frame.findings.append(R.UNKNOWN_RESPONSE(f"{name} response corr={corr} matches no outstanding "
                                                         f"request", command=frame.command))
            return None
        if request[0] != name:
            frame.findings.append(R.KEY_MISMATCH(f"{name} response corr={corr} answers a {request[0]} request",
                                                 command=frame.command))
        dt = ts - request[2]
        frame.fields.append(Field("response_time", dt, -1, 0, f"{dt:.6f} s after {request[0]}"))
        frame.request, frame.latency = request[1], dt  # the views link the pair
        return request

    def _response_code(self, frame: Frame, name: str, code: int, values: dict[str, Field],
                       request: list[Any] | None, dia: Dialect) -> None:
        if code not in dia.codes:
            frame.findings.append(R.UNKNOWN_CODE(f"{frame.command}: response code {code:#06x} is not defined",
                                                 command=frame.command, field="response_code"))
            return
        if code == dia["ok"] or code == dia["sasl_challenge"]:
            return
        text = f"{frame.command}: {dia.codes[code]} ({code:#04x})"
        if code == dia["subscription_gone"]:
            sid = _subscription_of(name, values, request)
            gone = self.gone
            if sid is not None and gone is not None and sid in gone:
                frame.findings.append(R.REFUSED(text + " (the subscription was already unsubscribed or dropped by "
                                                       "the server)", command=frame.command))
                return
        rule = R.ERROR_RESPONSE if code in dia["client_mistakes"] else R.REFUSED
        frame.findings.append(rule(text, command=frame.command))

    def _handshake(self, frame: Frame, name: str, is_resp: bool, d: Direction, values: dict[str, Field],
                   dia: Dialect) -> None:
        if is_resp:
            event = RESPONSE_EVENTS.get(name)
            if event is None:
                return
            if event == "SaslAuthenticateOk":
                code = values.get("response_code")
                if code is None or code.value != dia["ok"]:
                    return
        else:
            event = name
        state = self.hs
        assert state is not None
        nxt, rule = MACHINE.judge(state, d, event)
        if rule is not None:
            frame.findings.append(rule(message(rule, state, d, event), command=event))
        self.hs = nxt


def _unanswered(d: str, key: Any, pending: list[Any]) -> str | None:
    if pending[0] == "Close":
        return None
    return f"{pending[0]} request corr={key} was never answered"


def _close_unanswered(d: str, key: Any, pending: list[Any]) -> str | None:
    if pending[0] != "Close":
        return None
    return f"Close (corr={key}) from the {'client' if d == 'c2s' else 'server'} was never answered"


def _subscription_of(name: str, values: dict[str, Field], request: list[Any] | None) -> int | None:
    if name == "Credit":
        f = values.get("subscription_id")
        return f.value if f is not None else None
    if name == "Unsubscribe" and request is not None:
        return request[3]  # type: ignore[no-any-return]
    return None


def _rest(fields: list[Field], data: bytes, at: int) -> None:
    if len(data) > at:
        fields.append(Field("payload", data[at:], at, len(data) - at))


def _direction_check(cmd: Command, is_resp: bool, d: Direction, findings: list[Finding]) -> None:
    if cmd.sender == "both":
        return
    expected = C2S if cmd.sender == "c2s" else S2C
    if is_resp:
        expected = expected.other
    if d is not expected:
        side = "client" if d is C2S else "server"
        findings.append(R.WRONG_DIRECTION(f"{cmd.name}{' response' if is_resp else ''} sent by the {side}"))


def _generic(fields: list[Field], command: str, layout: Struct | None, data: bytes, findings: list[Finding]) -> None:
    """A frame's fields from offset 8 on, by its layout, appended to ``fields``."""
    if layout is None:
        return
    view = memoryview(data)
    end = len(data)
    off = 8
    try:
        for spec in layout.fields:
            if spec.optional and off >= end:
                break
            try:
                f, off = spec.type.read(spec.name, view, off, end, spec)
            except DecodeError as exc:
                findings.append(R.FRAME_TRUNCATED(f"{command}: {exc} (Size {end - 4})", command=command,
                                                  field=spec.name))
                if exc.offset < end:
                    fields.append(Field("undecoded", data[exc.offset:], exc.offset, end - exc.offset))
                return
            fields.append(f)
        if off < end:
            findings.append(R.FRAME_TRAILING(f"{command}: {end - off} bytes after the last field",
                                             command=command))
            fields.append(Field("trailing", data[off:], off, end - off))
    finally:
        view.release()


def build_publish(frame: LazyFrame, version: int) -> tuple[list[Field], str]:
    """The field tree and Info line of a Publish the hot path took (a builder of its own: its Info
    line has a quick way of its own, quick_publish)."""
    return build_request(frame, version)


#: (version, the publisher id and message count octets) -> quick_publish's line: a producer's
#: Publishes repeat them, and nothing else of the frame is in the line.
_PUBLISH_INFO: dict[tuple[int, bytes], str] = {}
_PUBLISH_INFO_MAX = 1024


def quick_publish(frame: LazyFrame, version: int) -> str:
    """build_publish's Info line without the tree, looked up by the octets it depends on."""
    data = frame.data
    assert data is not None
    key = (version, data[8:13])
    text = _PUBLISH_INFO.get(key)
    if text is None:
        text = remember(_PUBLISH_INFO, key, _publish_info(data, version), _PUBLISH_INFO_MAX)
    return text


def _publish_info(data: bytes, version: int) -> str:
    """_info over the two fields the Info line names (the publisher id read by its layout's own
    type, the message count as the entries' list field)."""
    cmd = CURRENT.commands[PUBLISH]
    spec = cmd.requests[version].fields[0]
    publisher, _at = spec.type.read(spec.name, memoryview(data), 8, len(data), spec)
    messages = Field("messages", U32.unpack_from(data, 9)[0], 9, 0, None, [], True)
    return _info("Publish", cmd.info, {"publisher_id": publisher, "messages": messages}, CURRENT, response=False)


QUICK_INFO[build_publish] = quick_publish


def _take_confirm(c: StreamConnection, data: bytes) -> bool:
    """A PublishConfirm that decodes cleanly (publisher id, int32 count, that many uint64 ids and
    nothing after them) and settles only ids awaiting their confirm, each once: settled, True."""
    end = len(data)
    if end < 13:
        return False
    (count,) = _unpack_i32(data, 9)
    if count < 0 or 13 + 8 * count != end:
        return False
    got = [i for (i,) in U64.iter_unpack(data[13:])]
    if got:
        unconfirmed = c.unconfirmed
        ids = unconfirmed.get(data[8]) if unconfirmed is not None else None
        if ids is None or len(set(got)) != count or not ids.issuperset(got):
            return False
    settle_ids(c, data[8], got)
    return True


def _take_credit(c: StreamConnection, data: bytes) -> bool:
    """A Credit that decodes cleanly (subscription id, uint16 credit, nothing after): granted, True."""
    if len(data) != 11:
        return False
    add_credit(c, data[8], data[9] << 8 | data[10])
    return True


def _take_deliver(c: StreamConnection, data: bytes) -> bool:
    """A Deliver (version 1 or 2: its low octet says which) to a subscription with credit left,
    whose chunk decodes cleanly (chunk.clean_chunk): the credit spent, True."""
    end = len(data)
    pos = 17 if data[7] == 2 else 9
    if end < pos:
        return False
    table = c.credit
    sub = data[8]
    left = table.get(sub) if table is not None else None
    if left is None or left < 1 or not clean_chunk(data, pos, end):  # a Credit may make it negative
        return False
    table[sub] = left - 1  # type: ignore[index]
    return True


def build_deliver(frame: LazyFrame, version: int) -> tuple[list[Field], str]:
    """The field tree and Info line of a Deliver the hot path took: what the general path makes."""
    data = frame.data
    assert data is not None
    size, key_raw, _version = HEAD.unpack_from(data, 0)
    fields = [Field("size", size, 0, 4), Field("key", key_raw, 4, 2, f"{key_raw:#06x} Deliver"),
              Field("version", version, 6, 2)]
    made = Frame(frame.direction, frame.offset, len(data), "Deliver", key_raw, "", fields, [], CURRENT.name, data)
    _deliver(made, data, version, CURRENT, made.findings)
    return made.fields, made.info


def quick_deliver(frame: LazyFrame, version: int) -> str:
    """build_deliver's Info line without the tree, from the chunk header."""
    data = frame.data
    assert data is not None
    pos = 17 if version == 2 else 9
    _magic, ctype, _n_entries, records, _ts, _epoch, first, *_rest = CHUNK_HEADER.unpack_from(data, pos)
    info = f"Deliver sub={data[8]} first_offset={first} records={records}"
    return f"{info} type={ctype}" if ctype else info


QUICK_INFO[build_deliver] = quick_deliver


def build_request(frame: LazyFrame, version: int) -> tuple[list[Field], str]:
    """The field tree and Info line of a request the hot path took: what the general path makes."""
    data = frame.data
    assert data is not None
    size, key_raw, _version = HEAD.unpack_from(data, 0)
    cmd = CURRENT.commands[key_raw]
    fields = [Field("size", size, 0, 4), Field("key", key_raw, 4, 2, f"{key_raw:#06x} {cmd.name}"),
              Field("version", version, 6, 2)]
    _generic(fields, cmd.name, cmd.requests[version], data, [])
    return fields, _info(cmd.name, cmd.info, {f.name: f for f in fields}, CURRENT, response=False)


#: (key, version, the octets its Info line depends on) -> quick_request's line: a connection's
#: PublishConfirms and Credits repeat their publisher or subscription, count and credit.
_REQUEST_INFO: dict[bytes, str] = {}
_REQUEST_INFO_MAX = 1024
#: Key -> how many octets after the header the Info line depends on (the publisher id and the
#: count of ids; the subscription id and the credit).
_INFO_OCTETS = {0x0003: 5, 0x0009: 3}


def quick_request(frame: LazyFrame, version: int) -> str:
    """build_request's Info line without the tree (a PublishConfirm's tree has a field per id),
    remembered by the octets it depends on."""
    data = frame.data
    assert data is not None
    key = data[4:8 + _INFO_OCTETS[HEAD.unpack_from(data, 0)[1]]]
    text = _REQUEST_INFO.get(key)
    if text is None:
        text = remember(_REQUEST_INFO, key, build_request(frame, version)[1], _REQUEST_INFO_MAX)
    return text


QUICK_INFO[build_request] = quick_request

#: Key -> how the hot path takes a frame of that command (today's protocol, its sender's direction)
#: and makes its tree: the frames a busy producer and consumer exchange besides Publish.
_HOT_TAKE: dict[int, tuple[Callable[[StreamConnection, bytes], bool],
                           Callable[[LazyFrame, int], tuple[list[Field], str]]]] = {
    0x0003: (_take_confirm, build_request),
    0x0009: (_take_credit, build_request),
    0x0008: (_take_deliver, build_deliver),
}
assert not CURRENT.has(INT32_SUBSCRIPTION)  # _take_deliver reads a uint8 subscription id


def _deliver(frame: Frame, data: bytes, version: int, dia: Dialect, findings: list[Finding]) -> None:
    fields = frame.fields
    end = len(data)
    wide = dia.has(INT32_SUBSCRIPTION)
    need = 12 if wide else (17 if version == 2 else 9)
    if end < need:
        findings.append(R.FRAME_TRUNCATED(f"Deliver: {end - 8} bytes cannot hold the subscription id"
                                          f"{' and committed chunk id' if version == 2 else ''}", command="Deliver"))
        _rest(fields, data, 8)
        frame.info = "Deliver (truncated)"
        return
    if wide:
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
    kids = decode_chunk(data, pos, end, problems, info, dia.has(DRAFT_CHUNK))
    fields.append(Field("chunk", info.first_offset, pos, end - pos, f"{info.records} records", kids))
    if problems.crc_mismatch is not None:
        want, got = problems.crc_mismatch
        findings.append(R.CRC_MISMATCH(f"chunk {info.first_offset}: CRC {want:#010x} in the header, data has "
                                       f"{got:#010x}", command="Deliver"))
    for msg in problems.errors:
        findings.append(R.CHUNK_MALFORMED(f"chunk {info.first_offset}: {msg}", command="Deliver"))
    for msg in problems.notes:
        findings.append(R.CHUNK_COMPRESSED(f"chunk {info.first_offset}: {msg}", command="Deliver"))
    for msg in problems.limits:
        findings.append(R.LIMIT(f"chunk {info.first_offset}: {msg}", command="Deliver"))
    frame.info = f"Deliver sub={sub} first_offset={info.first_offset} records={info.records}"
    if info.chunk_type:
        frame.info += f" type={info.chunk_type}"


def _info(name: str, items: tuple[tuple[str, str], ...], values: dict[str, Field], dia: Dialect,
          response: bool) -> str:
    parts = [name + (" response" if response else "")]
    code = values.get("response_code")
    if code is not None and name != "MetadataUpdate":
        parts.append(f"code={dia.code_name(code.value)}")
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
