"""One AMQP/Fast connection: the sans-IO :class:`Connection` tying the pieces together.

Bytes come in through feed/gap/end with capture timestamps; frames and findings go out. Each
command is cut (:mod:`.framing`), decoded (:mod:`.decode`), stepped through the flow machines of
its level (:mod:`.machines`: connection, channel, handle), its confirm-tag paired with the REPLY
that confirms it (the kit's :class:`Correlator`), and message data sequenced per channel
(:mod:`.messages`).

The whole state is plain data, the dissector's settings included: :meth:`snapshot` returns it and
``AmqpFastDissector.resume`` continues with the same encoding.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from analyzer.api import Connection as BaseConnection
from analyzer.api import Direction, Event, Finding, Frame
from dissectors.amqp_fast import decode
from dissectors.amqp_fast import rules as R
from dissectors.amqp_fast.commands import Command
from dissectors.amqp_fast.framing import DEFAULT_CAP, MAX_CAP, Side
from dissectors.amqp_fast.hot import cut_segment, direct
from dissectors.amqp_fast.machines import (
    CHANNEL,
    CHANNEL_MACHINE,
    CLOSED,
    CLOSING,
    COMMAND,
    CONNECTION,
    HANDLE_MACHINE,
    LIVE,
    NEW,
)
from dissectors.amqp_fast.messages import FRAGMENT, Messages
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit.correlate import Correlator
from dissectors.kit.lazy import add_computed
from dissectors.kit.state import plain_state
from dissectors.kit.state import snapshot as kit_snapshot
from dissectors.kit.timers import Silence

_OTHER = {"c2s": "s2c", "s2c": "c2s"}
C2S, S2C = Direction.C2S, Direction.S2C
#: Channels and handles remembered per connection; past this, the oldest closed ones are forgotten.
TABLE_LIMIT = 65536
#: The RFC's smallest frame-max (§3.2.5).
FRAME_MAX_MIN = 1024


def encoding(settings: dict[str, str]) -> Encoding:
    return Encoding(settings.get("bit_order", "lsb"), int(settings.get("long_string_length", "2")),
                    int(settings.get("field_table_length", "2")))


@plain_state
class AmqpFastConnection(BaseConnection):
    __slots__ = ("settings", "midstream", "ts", "side_c2s", "side_s2c", "msgs_c2s", "msgs_s2c", "hs", "foreign",
                 "client_version", "server_tune", "frame_max", "limits", "mechanisms", "chans", "handles", "corr", "order",
                 "over", "silence",
                 "enc", "_measure", "_resync", "hot", "leave_out", "frames_left_out", "other_frames_left_out")
    # leave_out and the counts belong to the run, not the conversation: the engine asks again
    # when it resumes one (leave_out_plain_frames), and the counts are collected after every call.
    TRANSIENT = ("enc", "_measure", "_resync", "leave_out", "frames_left_out", "other_frames_left_out")

    def __init__(self, midstream: bool = False, settings: dict[str, str] | None = None, hot: bool = True) -> None:
        #: hot=False: every piece through the kit's framer (the reference the hot path is tested against).
        self.hot = hot
        self.settings = dict(settings or {})
        self.midstream = midstream
        self.ts = 0.0
        self.side_c2s = Side("c2s", not midstream, client=True)
        self.side_s2c = Side("s2c", not midstream, client=False)
        self.msgs_c2s = Messages()
        self.msgs_s2c = Messages()
        self.hs = "open" if midstream else CONNECTION.start
        self.foreign = False  # the initiation named AMQP/HTTP: nothing more to decode
        self.client_version: int | None = None  # from the initiation; -1: the client sent none
        self.server_tune: list[int] | None = None  # the server's [frame-max, channel-max, handle-max]
        self.frame_max = 0  # negotiated (0: not yet)
        self.limits = (0, 0)  # negotiated (channel-max, handle-max); 0: unlimited
        self.mechanisms: str | None = None  # the server's last offer
        #: channel -> [state, transacted, restartable]
        self.chans: dict[int, list] = {}
        #: handle -> [state, channel, temporary, consuming or browsing]
        self.handles: dict[int, list] = {}
        #: Confirm-tags: (level, channel or handle, tag) -> the command waiting for its REPLY.
        self.corr = Correlator.by_id()
        #: HANDLE QUERY -> INDEX and HANDLE PREPARE -> READY, in order per handle.
        self.order = Correlator.in_order()
        self.over: tuple[str, ...] = ()
        #: Heartbeat silence: None until the client's TUNE asks for heartbeats (most never do).
        self.silence: Silence | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        #: The hot path counts the frames it made or finished that carry nothing to show in
        #: frames_left_out instead of giving them (leave_out_plain_frames).
        self.leave_out = False
        self.frames_left_out = self.other_frames_left_out = 0
        self.enc = encoding(self.settings)
        self._measure = {C2S: self.side_c2s.measure_with(self.enc), S2C: self.side_s2c.measure_with(self.enc)}
        self._resync = {C2S: self.side_c2s.resync_with(self.enc), S2C: self.side_s2c.resync_with(self.enc)}

    def leave_out_plain_frames(self) -> bool:
        self.leave_out = True
        return True

    def snapshot(self) -> dict[str, Any]:
        return kit_snapshot(self)

    def side(self, d: str) -> Side:
        return self.side_c2s if d == "c2s" else self.side_s2c

    def msgs(self, d: str) -> Messages:
        return self.msgs_c2s if d == "c2s" else self.msgs_s2c

    # ------------------------------------------------------------------ the sans-IO interface
    def feed(self, direction: Direction, data: bytes, ts: float) -> Iterable[Event]:
        if self.foreign:
            return ()
        # A Direction member (the engine's) as it is; a plain "c2s"/"s2c" made one.
        d = direction if direction is C2S or direction is S2C else Direction(direction)
        self.ts = ts
        if d is C2S:
            side, msgs, peer = self.side_c2s, self.msgs_c2s, self.side_s2c
        else:
            side, msgs, peer = self.side_s2c, self.msgs_s2c, self.side_c2s
        out: list[Event] = []
        silence = self.silence
        if silence is not None:
            out.extend(silence.seen(d, ts, None, R.HEARTBEAT_SILENCE))  # with what fell due when no tick came
        # A fragment of the peer still waiting for what follows it: the peer's stream held nothing
        # more when this side went on, so nothing more belongs to the fragment (the peer's octets
        # that come later are judged as commands). This keeps a message's frame before the answer to it.
        if peer.after == "ok" or (peer.after == "check" and not len(peer.queue)):
            fragment = self._pending(d.other, self.leave_out)
            if fragment is not None:
                out.append(fragment)
        if self.hot and direct(side):
            pos = cut_segment(self, d, side, msgs, data, out)
            if pos:
                side.queue.skip(pos)  # the queue (empty) never held these octets
                data = data[pos:] if pos < len(data) else b""
        for piece in side.cut(data, self._measure[d], self._resync[d], R.FRAMING_RESYNC) if data else ():
            if isinstance(piece, Finding):
                out.append(piece)
                continue
            if side.due:
                side.due -= len(piece.data)
                msgs.data(piece.data, self.enc)
                if side.due == 0:
                    # The fragment's frame waits for what follows it: a command, or proof that the
                    # fragment was shorter or longer than its fragment-size.
                    side.after, side.tail = "check", msgs.tail()
                continue
            if side.after:
                decided, side.after, tail, side.tail = side.after, "", side.tail, b""
                if decided == "long":
                    out.append(msgs.finish_fragment(d, self.enc, extra=piece.data))
                    continue
                if decided == "short":
                    taken = side.swallowed
                    out.append(msgs.finish_fragment(d, self.enc, short=taken))
                    out.append(self._command(d, tail[len(tail) - taken:] + piece.data, piece.offset - taken))
                    continue
                out.append(msgs.finish_fragment(d, self.enc))
            if side.initiation:
                side.initiation = False
                out.append(self._initiation(d, piece.data, piece.offset))
                if self.foreign:
                    break
                continue
            out.append(self._command(d, piece.data, piece.offset))
        if side.after == "ok":  # decided: a command follows, junk or not
            fragment = self._pending(d)
            if fragment is not None:
                out.append(fragment)
        return out

    def gap(self, direction: Direction, length: int, ts: float) -> Iterable[Event]:
        side = self.side(direction)
        msgs = self.msgs(direction)
        fragment = self._pending(Direction(direction))
        out: list[Event] = [fragment] if fragment is not None else []
        if side.due >= length and not len(side.queue):
            # The hole lies inside message data: the stream stays in step, only the octets are missing.
            side.due -= length
            side.queue.skip(length)
            msgs.lost(length)
            if side.due == 0 and msgs.frag is not None:
                out.append(msgs.finish_fragment(Direction(direction), self.enc))
            return out
        side.lost(length)
        side.initiation = False
        side.due = 0
        msgs.clear()  # whatever was half-received is lost with the hole
        return out

    def _pending(self, d: Direction, lean: bool = False) -> Frame | None:
        """A fragment of ``d`` whose frame waits for what follows it: finished as it is (the other
        direction went on, a gap, the end); None when there is none. ``lean``: the other
        direction's call settles it, and a findings-only run counts it instead of a frame without
        findings (see finish_fragment)."""
        side = self.side(d)
        msgs = self.msgs(d)
        fragment = None
        if side.after and msgs.frag is not None:
            fragment = msgs.finish_fragment(d, self.enc, lean=lean)
            if fragment is None:
                self.other_frames_left_out += 1
        side.after, side.tail = "", b""
        return fragment

    def tick(self, ts: float) -> Iterable[Event]:
        return self.silence.due(ts, R.HEARTBEAT_SILENCE) if self.silence is not None else ()

    def deadline(self) -> float | None:
        silence = self.silence
        return silence.at if silence is not None else None  # Silence.deadline() without its call

    def end(self, ts: float) -> Iterable[Event]:
        out: list[Event] = []
        if self.foreign:
            return out
        if self.silence is not None:
            out.extend(self.silence.due(ts, R.HEARTBEAT_SILENCE))
        for d in (C2S, S2C):
            side = self.side(d)
            fragment = self._pending(d)
            if fragment is not None:
                out.append(fragment)
            out.extend(side.end(R.FRAMING_RESYNC, R.FRAMING_INCOMPLETE))
            frag = self.msgs(d).frag
            if side.due and frag is not None:
                out.append(R.FRAMING_INCOMPLETE(f"{d}: the capture ends {frag[3]} octets into a {frag[2]}-octet message "
                                                f"fragment at stream offset {frag[1]}", command=FRAGMENT))
                self.msgs(d).drop(frag[0])  # its message is cut short by the same end: one finding
        if not self.midstream:
            f = CONNECTION.at_end(self.hs, "the connection")
            if f is not None:
                out.append(f)
        if self.hs in CLOSING.values():
            who = "client" if self.hs == CLOSING["c2s"] else "server"
            out.append(R.CONNECTION_CLOSE_UNANSWERED(f"the {who}'s CONNECTION CLOSE was never answered",
                                                     command="CONNECTION CLOSE"))
        elif self.hs != "closed":
            for ch, rec in self.chans.items():
                if rec[0] in CLOSING.values():
                    out.append(R.CHANNEL_CLOSE_UNANSWERED(f"CHANNEL CLOSE of channel {ch} was never answered",
                                                          command="CHANNEL CLOSE"))
            for h, rec in self.handles.items():
                if rec[0] in CLOSING.values() and self._chan_state(rec[1]) not in (CLOSED, *CLOSING.values()):
                    out.append(R.HANDLE_CLOSE_UNANSWERED(f"HANDLE CLOSE of handle {h} was never answered",
                                                         command="HANDLE CLOSE"))
            for d in ("c2s", "s2c"):
                out.extend(self.msgs(d).incomplete())
        out.extend(self.corr.unanswered(R.UNANSWERED, _unconfirmed))
        out.extend(self.order.unanswered(R.UNANSWERED, _unanswered))
        return out

    # ------------------------------------------------------------------ initiation
    def _initiation(self, d: Direction, data: bytes, offset: int) -> Frame:
        frame, ours = decode.initiation(d, data, offset)
        self.client_version = data[1]
        if not ours:
            self.foreign = True  # AMQP/HTTP: a text protocol this dissector does not decode
            return frame
        self._step_connection(d, decode.INITIATION, frame)
        return frame

    # ------------------------------------------------------------------ commands
    def _command(self, d: Direction, data: bytes, offset: int) -> Frame:
        frame, cmd, values = decode.command(d, data, offset, self.enc)
        findings = frame.findings
        if d == "c2s" and self.client_version is None and not self.midstream:
            findings.append(R.INITIATION_MISSING("the client sent a command before the initiation octets",
                                                 command=frame.command))
            self.client_version = -1  # reported once
            if self.hs == CONNECTION.start:
                self.hs = "challenge"  # followed as if it had come
        self._sizes(frame, cmd, values)
        if cmd is None:
            return frame
        if cmd.level == "connection":
            self._connection_command(d, cmd, values, frame)
        else:
            self._step_connection(d, CHANNEL, frame)
            if cmd.level == "channel":
                self._channel_command(d, cmd, values, frame)
            else:
                self._handle_command(d, cmd, values, frame)
        if cmd.reply and values.get("confirm_tag"):
            self._confirm_request(d, cmd, values, frame)
        elif cmd.name in ("CONNECTION REPLY", "CHANNEL REPLY", "HANDLE REPLY"):
            self._confirm(d, cmd, values, frame)
        return frame

    def _sizes(self, frame: Frame, cmd: Command | None, values: dict[str, Any]) -> None:
        if cmd is not None and cmd.limit and frame.size > cmd.limit:
            frame.findings.append(R.CONNECTION_LIMIT(f"{cmd.name} is {frame.size} octets, above its limit of "
                                                     f"{cmd.limit}", command=cmd.name))
        fm = self.frame_max
        if fm:
            if frame.size > fm:
                frame.findings.append(R.FRAME_MAX(f"{frame.command} is {frame.size} octets, above frame-max {fm}",
                                                  command=frame.command))
            size = values.get("fragment_size")
            if cmd is not None and cmd.data and isinstance(size, int) and size > fm:
                frame.findings.append(R.FRAME_MAX(f"{cmd.name} announces a {size}-octet fragment, above frame-max "
                                                  f"{fm}", command=cmd.name, field="fragment_size"))

    def _step_connection(self, d: str, event: str, frame: Frame) -> None:
        state = self.hs
        nxt, finding = CONNECTION.step(state, d, event)
        if finding is not None and not (self.midstream and finding.id == R.HANDSHAKE_ORDER.id):
            frame.findings.append(finding)
        self.hs = nxt
        if nxt == "closed" and state != "closed":
            # Both sides closed the connection: every channel and handle with it.
            for rec in self.chans.values():
                rec[0] = CLOSED
            for rec in self.handles.values():
                rec[0] = CLOSED

    def _connection_command(self, d: Direction, cmd: Command, values: dict[str, Any], frame: Frame) -> None:
        name = cmd.name
        findings = frame.findings
        self._step_connection(d, name, frame)
        if name == "CONNECTION CHALLENGE":
            version = values.get("version")
            client = self.client_version
            if isinstance(version, int) and client is not None and client >= 0 and version > client:
                findings.append(R.HANDSHAKE_VERSION(f"version {version} is above the client's {client}",
                                                    command=name, field="version"))
            offer = values.get("mechanisms")
            self.mechanisms = sys.intern(offer) if isinstance(offer, str) else None
        elif name == "CONNECTION RESPONSE":
            chosen = values.get("mechanism")
            if self.mechanisms is not None and isinstance(chosen, str) and chosen not in self.mechanisms.split():
                findings.append(R.HANDSHAKE_MECHANISM(f"mechanism {chosen!r} is not one of the offered "
                                                      f"{self.mechanisms!r}", command=name, field="mechanism"))
        elif name == "CONNECTION TUNE" and "frame_max" in values:
            self._tune(d, values, frame)
        elif name == "CONNECTION CLOSE":
            if self.silence is not None:
                self.silence.stop()  # silence is expected from now on
            if d == "s2c":
                # The server closes the connection: it confirms nothing more.
                self.corr.drop("c2s", lambda _k, _e: False)
                self.order.drop("c2s", lambda _k, _e: False)

    def _tune(self, d: str, values: dict[str, Any], frame: Frame) -> None:
        fm, ch, hm = values["frame_max"], values.get("channel_max", 0), values.get("handle_max", 0)
        problems = []
        if fm < FRAME_MAX_MIN:
            problems.append(f"frame-max {fm} is below {FRAME_MAX_MIN}")
        if d == "s2c":
            self.server_tune = [fm, ch, hm]
        elif self.server_tune is not None:
            for label, mine, theirs in zip(("frame-max", "channel-max", "handle-max"), (fm, ch, hm),
                                           self.server_tune, strict=True):
                # Zero means 'unlimited' for the -max counts: more than any limit the server set.
                if theirs and (mine > theirs or (mine == 0 and label != "frame-max")):
                    problems.append(f"{label} {mine} is above the server's {theirs}")
        if problems:
            frame.findings.append(R.HANDSHAKE_TUNE("; ".join(problems), command="CONNECTION TUNE"))
        heartbeat = values.get("heartbeat", 0)
        if d == "c2s" and heartbeat and self.hs not in ("closed", *CLOSING.values()):
            # Each side asks for the heartbeat it needs; the client's TUNE settles it (§3.2.5).
            if self.silence is None:
                self.silence = Silence()
            self.silence.start(heartbeat, self.ts)
        self.limits = (ch, hm)  # the server's proposal, then what the client settles on
        if fm:
            self.frame_max = fm
            cap = min(max(fm * 4, DEFAULT_CAP), MAX_CAP)
            self.side_c2s.cap = self.side_s2c.cap = cap

    # ------------------------------------------------------------------ channels
    def _chan_state(self, ch: int) -> str:
        rec = self.chans.get(ch)
        return rec[0] if rec is not None else (LIVE if self.midstream else NEW)

    def _step_channel(self, d: str, ch: int, event: str, frame: Frame, what: str) -> str:
        rec = self.chans.get(ch)
        if rec is None:
            # Joined mid-stream: a channel first seen opening is new, any other was open already.
            rec = [LIVE if self.midstream and event != "CHANNEL OPEN" else NEW, False, False]
            if len(self.chans) >= TABLE_LIMIT and not self._forget(self.chans, "channels", frame):
                return rec[0]
            self.chans[ch] = rec
        state = rec[0]
        nxt, rule = CHANNEL_MACHINE.judge(state, d, event)
        if rule is not None:
            frame.findings.append(rule(_lifecycle_message(rule, "channel", ch, state, what, d), command=what))
        rec[0] = nxt
        if nxt == CLOSED and state != CLOSED:
            self._channel_closed(ch)
        return state

    def _channel_closed(self, ch: int) -> None:
        key = f"channel {ch}"
        for d in ("c2s", "s2c"):
            self.msgs(d).drop(key)
            self.corr.drop(d, lambda k, _e: not (k[0] == "channel" and k[1] == ch))
        gone = [h for h, rec in self.handles.items() if rec[1] == ch]
        for h in gone:
            self.handles[h][0] = CLOSED
            self._handle_forgotten(h)

    def _channel_command(self, d: Direction, cmd: Command, values: dict[str, Any], frame: Frame) -> None:
        ch = values.get("channel_id")
        if not isinstance(ch, int):
            return
        name = cmd.name
        if name == "CHANNEL OPEN":
            if ch == 0:
                frame.findings.append(R.CHANNEL_ZERO("CHANNEL OPEN of channel 0", command=name, field="channel_id"))
            if self._step_channel(d, ch, name, frame, name) != LIVE:
                self._count_open(self.chans, self.limits[0], R.CHANNEL_MAX, "channels", "channel-max", frame)
            rec = self.chans.get(ch)
            if rec is not None and d == "c2s":
                rec[1], rec[2] = bool(values.get("transacted")), bool(values.get("restartable"))
            return
        self._step_channel(d, ch, name, frame, name)
        if name in ("CHANNEL COMMIT", "CHANNEL ROLLBACK"):
            rec = self.chans.get(ch)
            if rec is not None and not rec[1] and not (self.midstream and rec[0] == LIVE):
                frame.findings.append(R.CHANNEL_NOT_TRANSACTED(f"{name} on channel {ch}, which was not opened as "
                                                               f"transacted", command=name))

    # ------------------------------------------------------------------ handles
    def _handle_command(self, d: Direction, cmd: Command, values: dict[str, Any], frame: Frame) -> None:
        h = values.get("handle_id")
        if not isinstance(h, int):
            return
        name = cmd.name
        findings = frame.findings
        if name == "HANDLE OPEN":
            ch = values.get("channel_id", 0)
            self._step_channel(d, ch, COMMAND, frame, name)
            service = values.get("service_type")
            if isinstance(service, int) and service not in (1, 2, 3):
                findings.append(R.SERVICE_TYPE(f"service type {service}", command=name, field="service_type"))
        rec = self.handles.get(h)
        if rec is None:
            rec = [LIVE if self.midstream and name != "HANDLE OPEN" else NEW, None, False, self.midstream]
            if len(self.handles) >= TABLE_LIMIT and not self._forget(self.handles, "handles", frame):
                return
            self.handles[h] = rec
        state = rec[0]
        nxt, rule = HANDLE_MACHINE.judge(state, d, name)
        if rule is not None:
            findings.append(rule(_lifecycle_message(rule, "handle", h, state, name, d), command=name))
        rec[0] = nxt
        if name == "HANDLE OPEN":
            rec[1], rec[2], rec[3] = values.get("channel_id"), bool(values.get("temporary")), False
            if state != LIVE:
                self._count_open(self.handles, self.limits[1], R.HANDLE_MAX, "handles", "handle-max", frame)
            return
        ch = rec[1]
        if ch is not None and rule is None:
            self._step_channel(d, ch, COMMAND, frame, name)
        key = f"channel {ch}" if ch is not None else f"handle {h}"
        if name == "HANDLE CLOSE":
            if nxt == CLOSED:
                self._handle_forgotten(h)
                for dd in ("c2s", "s2c"):
                    self.msgs(dd).drop(key, h)
            return
        if name in ("HANDLE CONSUME", "HANDLE BROWSE"):
            rec[3] = True
        elif name == "HANDLE CREATED" and not rec[2] and not self.midstream:
            findings.append(R.CREATED_NOT_TEMPORARY(f"HANDLE CREATED for handle {h}, which was not opened as "
                                                    f"temporary", command=name))
        elif name == "HANDLE NOTIFY":
            if not rec[3]:
                findings.append(R.NOTIFY_UNREQUESTED(f"HANDLE NOTIFY on handle {h}, which sent neither HANDLE "
                                                     f"CONSUME nor HANDLE BROWSE", command=name))
            if not values.get("delivered"):
                # A browsed message: the answer to the handle's HANDLE BROWSE.
                self.corr.drop("c2s", lambda k, e: not (k[0] == "handle" and k[1] == h and e[0] == "HANDLE BROWSE"))
        elif name == "HANDLE QUERY":
            self._in_order(d, ("HANDLE INDEX", h), frame)
        elif name == "HANDLE INDEX":
            self._answer_in_order(d, ("HANDLE INDEX", h), frame)
        elif name == "HANDLE PREPARE":
            chan = self.chans.get(ch) if ch is not None else None
            if chan is not None and not chan[2] and not self.midstream:
                findings.append(R.NOT_RESTARTABLE(f"HANDLE PREPARE on channel {ch}, which was not opened as "
                                                  f"restartable", command=name))
            self._in_order(d, ("HANDLE READY", h), frame)
        elif name == "HANDLE READY":
            self._answer_in_order(d, ("HANDLE READY", h), frame)
            size = values.get("message_size")
            if isinstance(size, int):
                self.msgs(_OTHER[d]).ready(key, h, size)
        if cmd.data and "fragment_size" in values:
            self._message(d, cmd, h, key, values, frame)

    def _count_open(self, table: dict[int, list], limit: int, rule: Any, what: str, label: str, frame: Frame) -> None:
        """After an OPEN: more of ``what`` open at once than the negotiated ``limit`` (0: unlimited)?"""
        if limit and len(table) > limit:
            live = sum(1 for rec in table.values() if rec[0] != CLOSED)
            if live > limit:
                frame.findings.append(rule(f"{live} {what} open at once, {label} is {limit}", command=frame.command))

    def _handle_forgotten(self, h: int) -> None:
        for d in ("c2s", "s2c"):
            self.corr.drop(d, lambda k, _e: not (k[0] == "handle" and k[1] == h))
            self.order.forget(d, ("HANDLE INDEX", h))
            self.order.forget(d, ("HANDLE READY", h))

    def _forget(self, table: dict[int, list], what: str, frame: Frame) -> bool:
        """The table is full: forget its oldest closed entry (reported once); False when none is closed."""
        for k, rec in table.items():
            if rec[0] == CLOSED:
                del table[k]
                break
        else:
            return False
        if what not in self.over:
            self.over += (what,)
            frame.findings.append(R.LIMIT_EXCEEDED(f"more than {TABLE_LIMIT} {what} seen; closed ones are forgotten"))
        return True

    # ------------------------------------------------------------------ message data
    def _message(self, d: Direction, cmd: Command, h: int, key: str, values: dict[str, Any], frame: Frame) -> None:
        size = values["fragment_size"]
        partial = bool(values.get("partial"))
        nbr = values.get("message_nbr") if cmd.name == "HANDLE NOTIFY" else None
        msgs = self.msgs(d)
        msgs.command(cmd.name, key, h, nbr, values, frame)
        if values.get("out_of_band"):
            msgs.out_of_band(key, size, partial, frame)
            return
        if cmd.name == "HANDLE PREPARE":
            partial = True  # the rest of the message follows in HANDLE SEND or NOTIFY
        msgs.begin(key, frame.offset + frame.size, size, partial)
        if size:
            self.side(d).due = size
        else:
            frame_ = msgs.finish_fragment(d, self.enc)
            frame.findings.extend(frame_.findings)
            frame.fields.extend(f for f in frame_.fields if f.name == "message")

    # ------------------------------------------------------------------ confirmations
    def _confirm_request(self, d: str, cmd: Command, values: dict[str, Any], frame: Frame) -> None:
        level = cmd.reply.split()[0].lower()
        scope = 0 if level == "connection" else values.get(f"{level}_id", 0)
        key = (level, scope, values["confirm_tag"])
        f = self.corr.request(d, key, cmd.name, frame.request_anchor(), self.ts, duplicate=R.DUPLICATE,
                              limit_rule=R.LIMIT_EXCEEDED)
        if f is not None:
            frame.findings.append(f)

    def _confirm(self, d: str, cmd: Command, values: dict[str, Any], frame: Frame) -> None:
        level = cmd.name.split()[0].lower()
        tag = values.get("confirm_tag")
        scope = 0 if level == "connection" else values.get(f"{level}_id", 0)
        entry = self.corr.response(d, (level, scope, tag))
        if entry is None:
            other = next((k for k in self.corr.out[_OTHER[d]] if k[2] == tag), None) if tag else None
            if other is not None:
                entry = self.corr.response(d, other)
                if cmd.name == "HANDLE REPLY" and entry[0] == "CHANNEL ACK":
                    # §3.3.9 has the server confirm CHANNEL ACK with HANDLE REPLY: as good as CHANNEL REPLY.
                    self._answered(frame, entry)
                    return
                frame.findings.append(R.MISMATCH(f"{cmd.name} confirm-tag {tag} confirms {entry[0]}, which a "
                                                 f"{other[0].upper()} REPLY confirms", command=cmd.name))
            elif not self.corr.forgot(_OTHER[d]) and not self.midstream:
                frame.findings.append(R.UNKNOWN_RESPONSE(f"{cmd.name} confirm-tag {tag} confirms no outstanding "
                                                         f"command", command=cmd.name))
                return
            else:
                return
        self._answered(frame, entry)

    def _answered(self, frame: Frame, entry: list) -> None:
        frame.request = entry[1]
        frame.latency = dt = self.ts - entry[2]
        add_computed(frame, "response_time", dt, f"{dt:.6f} s after {entry[0]}")

    def _in_order(self, d: str, key: tuple[str, int], frame: Frame) -> None:
        f = self.order.request(d, key, frame.command, frame.request_anchor(), self.ts, limit_rule=R.LIMIT_EXCEEDED)
        if f is not None:
            frame.findings.append(f)

    def _answer_in_order(self, d: str, key: tuple[str, int], frame: Frame) -> None:
        entry = self.order.response(d, key)
        if entry is None:
            if not self.order.forgot(_OTHER[d]) and not self.midstream:
                asked = "HANDLE QUERY" if key[0] == "HANDLE INDEX" else "HANDLE PREPARE"
                frame.findings.append(R.UNKNOWN_RESPONSE(f"{frame.command} on handle {key[1]} answers no {asked}",
                                                         command=frame.command))
            return
        self._answered(frame, entry)


def _lifecycle_message(rule: Any, level: str, n: int, state: str, what: str, d: str) -> str:
    who = "client" if d == "c2s" else "server"
    if rule is R.NEVER_EXPECTED:
        return f"{what} from the {who}, which never sends it"
    if rule in (R.CHANNEL_ALREADY_OPEN, R.HANDLE_ALREADY_OPEN):
        return f"{what} on {level} {n}, which is already open"
    if rule in (R.CHANNEL_AFTER_CLOSE, R.HANDLE_AFTER_CLOSE):
        return f"{what} on {level} {n} after the {who} sent {level.upper()} CLOSE"
    label = "never opened" if state == NEW else "closed"
    return f"{what} on {level} {n}, which is {label}"


def _unconfirmed(d: str, key: Any, entry: list) -> str | None:
    level, scope, tag = key
    where = "" if level == "connection" else f" on {level} {scope}"
    return f"{entry[0]}{where} with confirm-tag {tag} was never confirmed"


def _unanswered(d: str, key: Any, entry: list) -> str | None:
    return f"{entry[0]} on handle {key[1]} was never answered by {key[0]}"
