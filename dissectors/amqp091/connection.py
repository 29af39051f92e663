"""One AMQP 0-9-1 connection: the sans-IO :class:`Connection` that ties the pieces together.

Bytes come in through feed/gap/end (and time through tick) with capture timestamps; frames and
findings go out. This module routes each frame through the mechanisms, each in its own module:
framing (:mod:`.framing`), decoding (:mod:`.decode`), the handshake and channel machines
(:mod:`.machines`), request/response pairing (the kit's in-order :class:`Correlator`, keyed by
channel), content sequencing (:mod:`.content`), delivery and confirm tracking (:mod:`.tracking`),
heartbeat silence (the kit's :class:`Silence`) and the hot path (:mod:`.hotpath`).

The whole state is plain data: :meth:`snapshot` returns it, ``Amqp091Dissector.resume`` continues.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from analyzer.api import Connection as BaseConnection
from analyzer.api import Direction, Event, Finding, Frame, FrameRef
from dissectors.amqp091 import decode
from dissectors.amqp091 import methods as M
from dissectors.amqp091 import rules as R
from dissectors.amqp091.codes import FRAME_END, FRAME_MIN_SIZE, REPLY_CODES
from dissectors.amqp091.content import ContentSide
from dissectors.amqp091.decode import HDR
from dissectors.amqp091.framing import MIDSTREAM_CAP, PRE_TUNE_CAP, UNLIMITED_CAP, Side
from dissectors.amqp091.hotpath import cut_segment, hot_piece
from dissectors.amqp091.machines import (
    CHANNEL,
    CLOSE,
    CLOSE_OK,
    CLOSED,
    FRAME,
    HANDSHAKE,
    HS_DONE,
    NEW,
    OPEN,
    OPEN_M,
    OPEN_OK,
    channel_message,
)
from dissectors.amqp091.methods import BY_NAME, RESPONSE_CODES, Method
from dissectors.amqp091.tracking import ACTIONS, Tracking
from dissectors.kit.correlate import Correlator
from dissectors.kit.lazy import add_computed, add_info
from dissectors.kit.state import plain_state
from dissectors.kit.state import snapshot as kit_snapshot
from dissectors.kit.timers import Silence

_OTHER = {"c2s": "s2c", "s2c": "c2s"}
C2S, S2C = Direction.C2S, Direction.S2C

#: Bounds of the per-connection tables; past one, the excess is one ``amqp091.limit.exceeded``.
DEFAULT_LIMITS = {
    "requests": 100_000,  # outstanding synchronous requests per direction (all channels)
    "ranges": 10_000,  # ranges of unacked delivery tags / unconfirmed publishes per channel
    "pending": 10_000,  # basic.get / basic.consume no-ack flags waiting for their reply, per channel
    "consumers": 10_000,  # no-ack consumer tags per channel
}


@plain_state
class Amqp091Connection(BaseConnection):
    # Slots, and per-direction pairs as two attributes each: 100,000 idle connections must fit in
    # a few hundred MB, so an established connection's state is kept to about a kilobyte.
    __slots__ = ("midstream", "hot", "limits", "dialect", "foreign", "ts", "side_c2s", "side_s2c", "hs", "closed",
                 "tuned", "frame_max", "channel_max", "heartbeat", "server_tune", "mechanisms", "frame_min", "limit",
                 "chans", "tracks", "content_c2s", "content_s2c", "corr", "silence", "over", "unconfirmed_cleared", "_quiet",
                 "leave_out", "frames_left_out", "anchors_left_out", "fed_at")
    # leave_out, frames_left_out, anchors_left_out and fed_at belong to the run, not the
    # conversation: the engine asks again when it resumes one (leave_out_plain_frames), and
    # collects the count and the anchors after every call.
    TRANSIENT = ("_quiet", "leave_out", "frames_left_out", "anchors_left_out", "fed_at")

    def __init__(self, midstream: bool = False, hot: bool = True, limits: dict[str, int] | None = None) -> None:
        self.midstream = midstream
        #: False: every frame takes the general path (the hot path's reference, for the differential test).
        self.hot = hot
        self.limits = {**DEFAULT_LIMITS, **limits} if limits else DEFAULT_LIMITS
        self.dialect = None
        self.foreign = False  # another protocol (AMQP 1.0/0-10) after its header: stop decoding
        self.ts = 0.0  # capture time of the bytes being decoded
        cap = MIDSTREAM_CAP if midstream else PRE_TUNE_CAP  # frames larger than this are junk
        # Keyed by the Direction members themselves: the hot path looks them up by identity.
        self.side_c2s = Side("c2s", not midstream, cap)
        self.side_s2c = Side("s2c", not midstream, cap)
        self.hs = HS_DONE if midstream else HANDSHAKE.start
        self.closed: tuple[str, ...] = ()  # the sides that sent connection.close
        self.tuned = False
        self.frame_max = 0
        self.channel_max = 0
        self.heartbeat = 0
        self.server_tune: tuple[int, int, int] | None = None  # the server's (channel-max, frame-max, heartbeat)
        self.mechanisms: str | None = None  # the server's offer, as sent (space-separated)
        # Largest conformant frame now (0 = no limit): frame-min-size until tune-ok, then frame-max.
        self.frame_min = FRAME_MIN_SIZE  # raised by the broker's Connection.Start (RabbitMQ 4.1+)
        self.limit = 0 if midstream else FRAME_MIN_SIZE
        #: channel -> its state in the CHANNEL machine (absent: never seen, i.e. new, or open midstream);
        #: None until the first channel frame.
        self.chans: dict[int, str] | None = None
        #: channel -> its delivery/confirm tracking, for channels that need one; None when none does.
        self.tracks: dict[int, Tracking] | None = None
        #: Content sequencing per direction, created by the first content-bearing method of that
        #: direction (see content_of) and let go when a channel close or a gap leaves it empty.
        self.content_c2s: ContentSide | None = None
        self.content_s2c: ContentSide | None = None
        #: Synchronous requests per channel, answered in order: [method name, frame ref, ts, quiet].
        self.corr = Correlator.in_order(self.limits["requests"])
        #: Heartbeat silence; None until heartbeats are negotiated (most connections never do) or
        #: the connection closes.
        self.silence: Silence | None = None
        self.over: tuple[str, ...] = ()  # limits already reported
        #: No channel has an unconfirmed publish since the last connection.close-ok cleared them all:
        #: a peer repeating close-ok (hostile) must not make each one visit every channel again.
        self.unconfirmed_cleared = False
        self._rebuild()

    def _rebuild(self) -> None:
        self._quiet = self._quiet_bounds()
        #: The hot path counts the frames it checked that carry nothing to show in frames_left_out
        #: instead of making them (leave_out_plain_frames).
        self.leave_out = False
        self.frames_left_out = 0
        self.anchors_left_out: list[FrameRef] | None = None
        #: In a findings-only run: the stream offset where the bytes of the call being fed start,
        #: or -1 when every frame cut in the call ends in them (see feed).
        self.fed_at = -1

    def leave_out_plain_frames(self) -> bool:
        self.leave_out = True
        self.anchors_left_out = []
        return True

    def snapshot(self) -> dict[str, Any]:
        return kit_snapshot(self)

    # Views of the per-direction pairs, for readers (tests, diagnostics): built on each call.
    @property
    def sides(self) -> dict[Direction, Side]:
        return {C2S: self.side_c2s, S2C: self.side_s2c}

    @property
    def content(self) -> dict[Direction, ContentSide | None]:
        return {C2S: self.content_c2s, S2C: self.content_s2c}

    def content_of(self, d: str) -> ContentSide:
        """The content sequencing of direction ``d``, created on first use."""
        if d == "c2s":
            c = self.content_c2s
            if c is None:
                c = self.content_c2s = ContentSide()
        else:
            c = self.content_s2c
            if c is None:
                c = self.content_s2c = ContentSide()
        return c

    def _let_go_content(self, d: str) -> None:
        """Drop direction ``d``'s content sequencing when nothing is in flight on any channel."""
        if d == "c2s":
            if self.content_c2s is not None and self.content_c2s.empty():
                self.content_c2s = None
        elif self.content_s2c is not None and self.content_s2c.empty():
            self.content_s2c = None

    # ------------------------------------------------------------------ the sans-IO interface
    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        if self.foreign:
            return ()
        self.ts = ts
        out: list[Event] = []
        silence = self.silence
        if silence is not None and silence.interval:
            due = silence.seen(direction, ts, None, R.HEARTBEAT_SILENCE)  # with what fell due when no tick came
            if due:
                out.extend(due)
        if direction is not C2S and direction is not S2C:
            direction = Direction(direction)  # a plain "c2s"/"s2c": the paths below compare by identity
        side = self.side_c2s if direction is C2S else self.side_s2c
        if self.leave_out:
            # With nothing buffered every frame cut now lies in these bytes (-1: no need to know
            # where they start); else the framer may have held whole frames (out of sync, until
            # it confirms where a frame starts) that ended before them.
            if side.direct:
                self.fed_at = -1
            else:
                queue = side.queue
                self.fed_at = queue.offset + len(queue)
        if side.direct and self.hot:
            # Nothing buffered: whole frames are cut straight from this segment without copying it
            # into the queue; only a trailing partial frame is queued.
            pos = cut_segment(self, direction, side, data, out)
            if self.foreign:
                return out
            if pos:
                # The queue (empty) never held these bytes: move its stream offset past them. A side is
                # direct only after the framer cut a frame since the start or the last gap, so the
                # framer's seen_frame/after_gap are already right.
                side.queue.skip(pos)
            if pos == len(data):
                return out
            data = data[pos:]
        for piece in side.cut(data, side.measure, side.resync, R.FRAMING_RESYNC):
            if type(piece) is Finding:
                out.append(piece)
                continue
            if not (self.hot and not side.header_possible and
                    hot_piece(self, direction, piece.data, piece.offset, out)):  # type: ignore[union-attr]
                out.append(self.frame(direction, side, piece.data, piece.offset))  # type: ignore[union-attr]
            if self.foreign:
                break
        side.update_direct()
        return out

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        side = self.side_c2s if direction == "c2s" else self.side_s2c
        side.lost(length)
        side.header_possible = False
        side.direct = False
        # Whatever was half-received on any channel is lost with the hole.
        if direction == "c2s":
            self.content_c2s = None
        else:
            self.content_s2c = None
        return ()

    def tick(self, ts: float) -> Iterable[Event]:
        return self.silence.due(ts, R.HEARTBEAT_SILENCE) if self.silence is not None else ()

    def deadline(self) -> float | None:
        silence = self.silence
        return silence.at if silence is not None else None  # Silence.deadline() without its call

    def end(self, ts: float) -> Iterable[Event]:
        out: list[Event] = []
        if self.foreign:
            return out
        for side in (self.side_c2s, self.side_s2c):
            out.extend(side.end(R.FRAMING_RESYNC, R.FRAMING_INCOMPLETE))
        describe = _unanswered
        if not self.midstream:
            f = HANDSHAKE.at_end(self.hs, "the connection")
            if f is not None:
                out.append(f)
                # The handshake step left unanswered is what handshake.incomplete reports: one event,
                # one finding.
                describe = _unanswered_beyond_handshake
        if self.silence is not None:
            out.extend(self.silence.due(ts, R.HEARTBEAT_SILENCE))
        out.extend(self.corr.unanswered(R.UNANSWERED, describe))
        for content in (self.content_c2s, self.content_s2c):
            if content is not None:
                out.extend(content.incomplete())
        for ch, tr in (self.tracks or {}).items():
            n = len(tr.unconfirmed)
            if n:
                out.append(R.CONFIRM_MISSING(f"{'publish' if n == 1 else f'{n} publishes'} {tr.unconfirmed.text()} on "
                                             f"channel {ch} {'was' if n == 1 else 'were'} never confirmed",
                                             command="Basic.Publish"))
        return out

    # ------------------------------------------------------------------ the general path
    def _quiet_bounds(self) -> tuple[int, int]:
        """(largest payload size, largest channel) of a frame that raises no frame-level finding:
        the hot path takes only frames within them."""
        if self.hs == HANDSHAKE.start and not self.midstream:
            return -1, -1  # any frame now is out of order: the general path says so
        limit = self.limit
        return (limit - 8 if limit else 1 << 62), (self.channel_max or 0xFFFF)

    def frame(self, d: Direction, side: Side, data: bytes, offset: int) -> Frame:
        """Decode and check one whole frame (the general path)."""
        if side.header_possible:
            side.header_possible = False
            if data[:4] == b"AMQP":
                frame = self._protocol_header(d, data, offset)
                self._quiet = self._quiet_bounds()
                return frame
        ftype, ch, size = HDR.unpack_from(data, 0)
        findings: list[Finding] = []
        end_octet = data[-1]
        if end_octet != FRAME_END:
            findings.append(R.FRAME_END(f"frame-end is {end_octet:#04x}, not 0xce"))
        if self.limit and size + 8 > self.limit:
            if self.tuned:
                findings.append(R.FRAME_TOO_LARGE(f"{size + 8}-byte frame exceeds the negotiated frame-max "
                                                  f"{self.frame_max}"))
            else:
                findings.append(R.FRAME_TOO_LARGE(f"{size + 8}-byte frame before tune-ok exceeds frame-min-size "
                                                  f"{self.frame_min}"))
        if self.channel_max and ch > self.channel_max:
            findings.append(R.FRAME_CHANNEL_MAX(f"channel {ch} is above the negotiated channel-max "
                                                f"{self.channel_max}"))
        if self.hs == HANDSHAKE.start and not self.midstream:
            if d == "c2s":
                findings.append(R.HEADER_MISSING("the client sent a frame before the protocol header"))
            else:
                findings.append(R.HANDSHAKE_ORDER("the server sent a frame before the client's protocol header"))
            self.hs = "start"
        frame: Frame
        if ftype == 1:
            frame, meth, values = decode.method(d, data, ch, size, offset, findings)
            if meth is not None:
                add_info(frame, self._check_method(d, ch, meth, values, frame))  # type: ignore[arg-type]
        elif ftype == 2:
            frame, head = decode.content_header(d, data, ch, size, offset, findings)
            if head is not None and self._content_channel(d, ch, "content header", findings):
                self.content_of(d).on_header(ch, frame, head, findings)  # type: ignore[arg-type]
                self._let_go_content(d)
        elif ftype == 3:
            frame = decode.content_body(d, data, offset, findings)
            if self._content_channel(d, ch, "content body", findings):
                self.content_of(d).on_body(ch, frame, data, size, findings)  # type: ignore[arg-type]
                self._let_go_content(d)
        elif ftype == 8:
            frame = decode.heartbeat(d, data, ch, size, offset, findings)
        else:
            frame = decode.unknown_type(d, data, ftype, ch, size, offset, findings)
        frame.data = data  # the wire bytes, for --hex and for oracles
        self._quiet = self._quiet_bounds()
        return frame

    def _protocol_header(self, d: Direction, data: bytes, offset: int) -> Frame:
        frame, dialect, desc, known = decode.protocol_header(d, data, offset)
        findings = frame.findings
        if d == "s2c":
            findings.append(R.HEADER_REFUSED(f"the server answered with the {desc} protocol header: it does not "
                                             f"accept the client's version"))
            return frame
        self.hs, f = HANDSHAKE.step(self.hs, "c2s", "ProtocolHeader")
        if f is not None:
            findings.append(R.HANDSHAKE_ORDER("a second protocol header"))
        if not known:
            findings.append(R.HEADER_UNKNOWN(f"protocol header {data.hex(' ')}: {desc}"))
        elif dialect != "0-9-1":
            findings.append(R.HEADER_VERSION(f"the client asks for {desc}, not 0-9-1"))
        self.dialect = dialect or "unknown"
        if dialect is not None and (dialect.startswith("1.0") or dialect == "0-10"):
            self.foreign = True
        return frame

    # ------------------------------------------------------------------ channels
    def _channel(self, d: str, ch: int, event: str, what: str, findings: list[Finding]) -> str:
        """Step channel ``ch``'s machine with ``event`` sent by ``d``; returns the state it was in."""
        chans = self.chans
        if chans is None:
            chans = self.chans = {}
        state = chans.get(ch, OPEN if self.midstream else NEW)
        nxt, rule = CHANNEL.judge(state, d, event)
        if rule is not None:
            findings.append(rule(channel_message(rule, event, ch, state, what), command=what))
        if nxt != state or ch not in chans:
            chans[ch] = nxt
        return state

    def _content_channel(self, d: str, ch: int, what: str, findings: list[Finding]) -> bool:
        """Whether a content frame on ``ch`` is sequenced (not on channel 0), after its channel checks."""
        if ch == 0:
            findings.append(R.CONTENT_CHANNEL_ZERO(f"{what} on channel 0"))
            return False
        self._channel(d, ch, FRAME, what, findings)
        return True

    def _forget_channel(self, ch: int) -> None:
        """Channel ``ch`` closed both ways or opened anew: what was outstanding on it is gone."""
        for d in ("c2s", "s2c"):
            self.corr.forget(d, ch)
            content = self.content_c2s if d == "c2s" else self.content_s2c
            if content is not None:
                content.drop(ch)
                self._let_go_content(d)
        tracks = self.tracks
        if tracks is not None:
            tracks.pop(ch, None)
            if not tracks:
                self.tracks = None

    def _silence(self) -> Silence:
        if self.silence is None:
            self.silence = Silence()
        return self.silence

    def track(self, ch: int) -> Tracking:
        tracks = self.tracks
        if tracks is None:
            tracks = self.tracks = {}
        tr = tracks.get(ch)
        if tr is None:
            tr = tracks[ch] = Tracking()
        return tr

    def over_limit(self, frame: Frame, table: str, message: str) -> None:
        if table not in self.over:
            self.over += (table,)
            frame.findings.append(R.LIMIT_EXCEEDED(message))

    # ------------------------------------------------------------------ methods
    def _check_method(self, d: Direction, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
        """What one method frame means for the state machines, correlation and tracking; returns
        extra text for the Info line."""
        findings = frame.findings
        code = meth.code
        if meth.direction != "both" and meth.direction != d:
            findings.append(R.METHOD_DIRECTION(f"{meth.name} is sent by the "
                                               f"{'client' if meth.direction == 'c2s' else 'server'} only"))
        if meth.note:
            findings.append(R.METHOD_OBSOLETE(f"{meth.name}: {meth.note}"))
        if "reply_code" in values:
            self._reply_code(meth, values, findings)
        if meth.class_id == 10:
            if ch != 0:
                findings.append(R.METHOD_CHANNEL(f"{meth.name} on channel {ch}; connection methods use channel 0"))
            self._connection_method(d, meth, values, frame)
            return ""
        if ch == 0:
            findings.append(R.METHOD_CHANNEL(f"{meth.name} on channel 0, which only carries connection methods"))
            return ""
        if not HANDSHAKE.allowed(self.hs, d, "channel"):
            findings.append(R.HANDSHAKE_ORDER(f"{meth.name} on channel {ch} before the connection is open "
                                              f"({HANDSHAKE.labels[self.hs]})"))
        if d in self.closed:
            findings.append(R.CHANNEL_AFTER_CLOSE(f"{meth.name} after this side sent connection.close"))
        if code == M.CHANNEL_OPEN:
            self._channel(d, ch, OPEN_M, meth.name, findings)
            self._forget_channel(ch)
            self._request(d, ch, meth, values, frame)
            return ""
        content = self.content_c2s if d == "c2s" else self.content_s2c
        if content is not None or meth.content:  # without sequencing state, only a content method matters
            (content or self.content_of(d)).on_method(ch, meth.name, meth.content, meth.class_id,
                                                      frame.anchor() if meth.content else None, findings)
        if code == M.CHANNEL_OPEN_OK:
            self._answer(d, ch, meth, frame)
            self._channel(d, ch, OPEN_OK, meth.name, findings)
            return ""
        if code == M.CHANNEL_CLOSE:
            self._channel(d, ch, CLOSE, meth.name, findings)
            if d == "s2c" and values.get("reply_code", 200) != 200:
                # The server failed the channel: the client's outstanding requests will never be answered.
                self.corr.forget("c2s", ch)
            self._request(d, ch, meth, values, frame)
            return ""
        if code == M.CHANNEL_CLOSE_OK:
            state = self._channel(d, ch, CLOSE_OK, meth.name, findings)
            if CHANNEL.allowed(state, d, CLOSE_OK):
                self._answer(d, ch, meth, frame)
            if self.chans[ch] == CLOSED:
                self._forget_channel(ch)
            return ""
        self._channel(d, ch, FRAME, meth.name, findings)
        if code in RESPONSE_CODES:
            self._answer(d, ch, meth, frame)
        if meth.responses:
            self._request(d, ch, meth, values, frame)
        act = ACTIONS.get(code)
        if act is not None:
            return act(self, d, ch, meth, values, frame)
        return ""

    def _request(self, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame,
                 quiet: bool = False) -> None:
        """A synchronous request: the peer owes the answer, in order on the channel."""
        if meth.responses and not (meth.has_nowait and values.get("nowait")):
            f = self.corr.request(d, ch, meth.name, frame.request_anchor(), self.ts, quiet,
                                  limit_rule=R.LIMIT_EXCEEDED)
            if f is not None:
                frame.findings.append(f)

    def answers(self, d: str, ch: int, meth: Method) -> list | None:
        """The outstanding request of the peer on the channel that a reply ``meth`` from ``d``
        answers (its oldest, kept), or None when it answers none."""
        entry = self.corr.peek(d, ch)
        return entry if entry is not None and meth.code in BY_NAME[entry[0]].response_codes else None

    def link_answer(self, d: str, ch: int, entry: list, frame: Frame) -> None:
        """Settle the request ``entry`` (see answers) with the reply ``frame``: the views link the pair."""
        self.corr.response(d, ch)
        dt = self.ts - entry[2]
        add_computed(frame, "response_time", dt, f"{dt:.6f} s after {entry[0]}")
        frame.request, frame.latency = entry[1], dt

    def _answer(self, d: str, ch: int, meth: Method, frame: Frame) -> None:
        """A reply: it answers the oldest outstanding request of the peer on the channel."""
        corr = self.corr
        entry = self.answers(d, ch, meth)
        if entry is not None:
            self.link_answer(d, ch, entry, frame)
            return
        if corr.forgot(_OTHER[d]):
            return  # the oldest requests were forgotten: no telling
        entry = corr.peek(d, ch)
        if entry is None:
            frame.findings.append(R.UNKNOWN_RESPONSE(f"{meth.name} answers no outstanding request"
                                                     + (f" on channel {ch}" if ch else ""), command=meth.name))
        else:
            frame.findings.append(R.MISMATCH(f"{meth.name} does not answer {entry[0]}, the oldest outstanding "
                                             f"request" + (f" on channel {ch}" if ch else ""), command=meth.name))

    def _reply_code(self, meth: Method, values: dict[str, Any], findings: list[Finding]) -> None:
        rc = values.get("reply_code")
        if not isinstance(rc, int):
            return
        known = REPLY_CODES.get(rc)
        text = values.get("reply_text") or ""
        if rc == 0:
            findings.append(R.REPLY_ZERO(f"{meth.name}: reply code 0 is not defined (clients such as pika use it "
                                         f"for a normal close)"))
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

    def _connection_method(self, d: str, meth: Method, values: dict[str, Any], frame: Frame) -> None:
        code = meth.code
        findings = frame.findings
        if code == M.CONNECTION_CLOSE:
            if d not in self.closed:
                self.closed += (str(d),)
            self._silence().stop()  # silence is expected from now on
            self.hs, _ = HANDSHAKE.step(self.hs, d, meth.name)
            quiet = False
            if d == "s2c":
                # The server closes the connection: it answers nothing the client asked on any channel
                # (and discards what the client still sends); those requests are not unanswered.
                if self.corr.outstanding("c2s"):
                    self.corr.drop("c2s", lambda _k, _e: False)
                if values.get("reply_code", 200) != 200:
                    # A connection error: the broker may drop the socket without waiting for close-ok
                    # (RabbitMQ does on a refused login), and confirms nothing more. Its close going
                    # unanswered and the publishes left unconfirmed are that same event, reported once.
                    quiet = True
                    if not self.unconfirmed_cleared:
                        for tr in (self.tracks or {}).values():
                            tr.unconfirmed.clear()
                        self.unconfirmed_cleared = True
            self._request(d, 0, meth, values, frame, quiet)
            return
        if code == M.CONNECTION_CLOSE_OK:
            o = _OTHER[d]
            if o not in self.closed:
                findings.append(R.CHANNEL_CLOSE_OK("connection.close-ok but the peer did not send "
                                                   "connection.close"))
            elif self.corr.peek(d, 0) is not None:
                self._answer(d, 0, meth, frame)
            # The connection is gone: only a close of this side crossing the peer's still waits.
            self.corr.drop(o, lambda _k, _e: False)
            self.corr.retain(d, 0, "Connection.Close")
            if not self.unconfirmed_cleared:
                for tr in (self.tracks or {}).values():
                    tr.unconfirmed.clear()
                self.unconfirmed_cleared = True
            self._silence().stop()
            return
        if d in self.closed:
            findings.append(R.CHANNEL_AFTER_CLOSE(f"{meth.name} after this side sent connection.close"))
        nxt, f = HANDSHAKE.step(self.hs, d, meth.name)
        if f is not None and not self.midstream:
            findings.append(f)
        self.hs = nxt
        if code in RESPONSE_CODES:
            self._answer(d, 0, meth, frame)
        if meth.responses:
            self._request(d, 0, meth, values, frame)
        self.handshake_action(code, values, frame)

    def handshake_action(self, code: int, values: dict[str, Any], frame: Frame) -> None:
        """What a connection method other than Close and CloseOk does to the connection, once the
        handshake machine and the correlator have taken it (the hot path's too: hotpath._hot_connection)."""
        findings = frame.findings
        if code == M.CONNECTION_START:
            mech = values.get("mechanisms")
            if isinstance(mech, str):
                # Interned: every connection to the same broker gets the same offer, kept once.
                self.mechanisms = sys.intern(mech)
            self.frame_min = decode.broker_frame_min(*decode.server_product(frame))
            if not self.tuned and self.limit:
                self.limit = self.frame_min
            if self.dialect is None:
                self.dialect = "0-9-1"
        elif code == M.CONNECTION_START_OK:
            mech = values.get("mechanism")
            offered = self.mechanisms.split() if self.mechanisms is not None else None
            if offered is not None and mech not in offered:
                findings.append(R.HANDSHAKE_MECHANISM(f"mechanism {mech!r} is not one of the offered "
                                                      f"{' '.join(offered)!r}"))
        elif code == M.CONNECTION_TUNE:
            self.server_tune = (values.get("channel_max", 0), values.get("frame_max", 0), values.get("heartbeat", 0))
        elif code == M.CONNECTION_TUNE_OK:
            self._tune_ok(values, findings)
        elif code == M.CONNECTION_OPEN_OK and self.heartbeat:
            self._silence().start(self.heartbeat, self.ts)

    def _tune_ok(self, values: dict[str, Any], findings: list[Finding]) -> None:
        ch_c, fm_c, hb_c = values.get("channel_max", 0), values.get("frame_max", 0), values.get("heartbeat", 0)
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
        self.limit = fm_c
        cap = max(fm_c * 4, PRE_TUNE_CAP) if fm_c else UNLIMITED_CAP
        self.side_c2s.cap = self.side_s2c.cap = cap
        self.side_c2s.remeasure()  # a frame waiting in a queue may be over the new cap
        self.side_s2c.remeasure()


def _unanswered_beyond_handshake(d: str, ch: Any, entry: list) -> str | None:
    return None if not ch and entry[0].startswith("Connection.") else _unanswered(d, ch, entry)


def _unanswered(d: str, ch: Any, entry: list) -> str | None:
    name, _ref, _ts, quiet = entry
    if quiet:
        return None
    return f"{name} was never answered" if not ch else f"{name} on channel {ch} was never answered"
