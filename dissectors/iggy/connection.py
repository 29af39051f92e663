"""Per-connection state of the Iggy dissector, built on the kit.

Sans-IO: bytes in through ``feed``/``gap``/``end``, Frames and Findings out. The first bytes decide
the framing (classic, or V's consensus header: :func:`.framing.detect`); an
:class:`~.framing.IggyFramer` per direction cuts frames. Classic responses carry no correlation id,
so they pair with requests strictly in order (``Correlator.in_order()``); V replies name their
request number; several requests share a number (reads carry the number the next replicated request
will use), so V pairs in order per number (``Correlator.in_order()`` keyed by it). The login is a
transition table (:mod:`.login`).

The dialect: V from its framing; otherwise every classic dialect starts as a candidate and a
request or response that one candidate's layout cannot decode (and another's can) removes it
(:meth:`IggyConnection._narrow`); LOGIN_USER's SDK version puts the dialect it implies first. Each
frame is decoded with the first remaining candidate, and labelled with it once the bytes have said
anything about the dialect. ``--dialect iggy=NAME`` fixes the dialect. All state is plain data: ``snapshot()`` / ``IggyDissector.resume``.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import Any

from analyzer.api import Connection, Direction, Event, Field, Finding, Frame
from dissectors.iggy import payloads
from dissectors.iggy import rules as R
from dissectors.iggy.commands import (
    BY_NAME,
    COMMANDS,
    EVICTION_REASONS,
    LOGINS,
    LOGOUT,
    OPERATIONS,
    REGISTER_REPLY,
    REPLICATED,
    RESULTS,
    SEND_PAYLOAD,
    V_COMMANDS,
    V_EVICTION,
    V_REPLY,
    V_REQUEST,
    VERSION_EVICTIONS,
    Command,
)
from dissectors.iggy.dialects import (
    CLASSIC,
    DIALECTS,
    accepts,
    from_sdk_version,
    order,
    zero_based,
    zero_id,
)
from dissectors.iggy.framing import MIDSTREAM_DETECT, REQUEST, RESPONSE, VSR, IggyFramer, detect
from dissectors.iggy.login import MACHINE
from dissectors.iggy.messages import send_messages_info
from dissectors.iggy.status import CLIENT_MISTAKES, OK, UNSOLICITED, known, status_name, status_text
from dissectors.iggy.types import Decoded
from dissectors.iggy.vheader import header_json, header_leaves, request_has_code, version_text
from dissectors.kit import Correlator, Piece, plain_state
from dissectors.kit import state as kit_state
from dissectors.kit.lazy import QUICK_INFO, Builder, LazyField, LazyFrame
from dissectors.schema import DecodeError, Struct

PAIR = struct.Struct("<II")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
C2S, S2C = Direction.C2S, Direction.S2C
#: Bytes held while the first bytes cannot tell classic from V framing yet.
DETECT_LIMIT = 64
#: A request already reported (a warning or an error): the error status that answers it is no news.
FLAGGED = 1
#: A request made with findings: a findings-only run gives it back, and its response with it.
SHOWN = 2


@plain_state
class IggyConnection(Connection):
    __slots__ = ("midstream", "forced", "dialect", "cands", "evidence", "framing", "pending", "framer_c2s",
                 "framer_s2c", "pairs", "login", "lossy", "client_version", "replicated", "leave_out",
                 "frames_left_out", "given_dialect", "info_lines")
    # These belong to the run, not the conversation: the engine asks again when it resumes one
    # (leave_out_plain_frames, read_for_info_lines), and the count is collected after every call.
    TRANSIENT = ("leave_out", "frames_left_out", "given_dialect", "info_lines")

    def __init__(self, midstream: bool, forced: str | None = None) -> None:
        self.midstream = midstream
        #: The dialect the user fixed (``-o iggy.dialect``), or None to detect it.
        self.forced = forced
        #: Classic dialects still possible, the preferred first (V: ["V"]).
        self.cands: list[str] = [forced] if forced else list(CLASSIC)
        #: The dialect frames are labelled with: None while nothing in the bytes has pointed at one
        #: (the preferred candidate still decodes them).
        self.dialect: str | None = forced
        #: Whether the bytes (or the user) have said anything about the dialect yet.
        self.evidence = forced is not None
        #: None until the first bytes tell classic from V framing.
        self.framing: str | None = None if forced is None else (VSR if forced == "V" else REQUEST)
        #: Bytes held per direction while the framing is undecided: [direction, bytes, ts] items.
        self.pending: list[list[Any]] | None = None
        self.framer_c2s: IggyFramer | None = None
        self.framer_s2c: IggyFramer | None = None
        self.pairs: Correlator | None = None
        if self.framing is not None:
            self._start(self.framing == VSR)
        # Login state (kit Machine); None when the capture joined mid-stream (not judged).
        self.login: str | None = None if midstream else MACHINE.start
        # After a capture gap requests or responses may be lost: pairing proves nothing any more.
        self.lossy = midstream
        #: V: the protocol version of the client's LOGIN_REGISTER.
        self.client_version: int | None = None
        #: V: the request number of the last replicated request (they number 1, 2, 3, ...).
        self.replicated = 0
        self._rebuild()

    def _rebuild(self) -> None:
        #: A findings-only run (leave_out_plain_frames): a classic response without findings to a
        #: request given back without them is checked and counted in frames_left_out, not made;
        #: only while its dialect is the last one a frame given back carried (given_dialect), so
        #: that the engine learns every change of dialect from a frame.
        self.leave_out = False
        self.frames_left_out = 0
        self.given_dialect: str | None = None
        #: The view reads Info lines (read_for_info_lines): a request or poll answer with nothing
        #: to say is a lazy frame, its Info line from a few values (a findings-only run's requests
        #: are so anyway). Not otherwise: a view that reads the tree would pay the clean test and
        #: then the decode.
        self.info_lines = False

    def read_for_info_lines(self) -> None:
        self.info_lines = True

    def leave_out_plain_frames(self) -> bool:
        self.leave_out = True
        return True

    def _start(self, vsr: bool) -> None:
        synced = not self.midstream
        if vsr:
            self.framing = VSR
            self.cands = ["V"]
            self.dialect = "V"
            self.evidence = True
            self.framer_c2s = IggyFramer("c2s", VSR, synced)
            self.framer_s2c = IggyFramer("s2c", VSR, synced)
            # In order per request number: reads share the number of the next replicated request.
            self.pairs = Correlator.in_order()
        else:
            self.framing = REQUEST
            self.framer_c2s = IggyFramer("c2s", REQUEST, synced)
            self.framer_s2c = IggyFramer("s2c", RESPONSE, synced)
            self.pairs = Correlator.in_order()

    # ------------------------------------------------------------------ sans-IO entry points
    def feed(self, direction: Direction, data: bytes, ts: float) -> list[Event]:
        if self.framing is None:
            return self._detect(direction, data, ts)
        return self._cut(direction, data, ts, self.leave_out)

    def gap(self, direction: Direction, length: int, ts: float) -> list[Event]:
        self.lossy = True
        if self.framing is None:
            # What was held is the start of a frame whose rest is lost: drop it, the framer
            # starts out of sync once the framing is known.
            self.pending = [p for p in self.pending or () if p[0] != direction] or None
            self.midstream = True
            return []
        framer = self.framer_c2s if direction == "c2s" else self.framer_s2c
        assert framer is not None
        framer.lost(length)
        return []

    def end(self, ts: float) -> list[Event]:
        out: list[Event] = []
        if self.framing is None:
            if not self.pending:
                return out
            out.extend(self._decide(self.pending[0][0], b""))
        for framer in (self.framer_c2s, self.framer_s2c):
            assert framer is not None
            out.extend(framer.end(R.JUNK, R.INCOMPLETE))
        if not self.lossy and self.pairs is not None:
            out.extend(self.pairs.unanswered(R.UNANSWERED, _unanswered))
        return out

    def snapshot(self) -> dict[str, Any]:
        return kit_state.snapshot(self)

    # ------------------------------------------------------------------ framing
    def _detect(self, direction: Direction, data: bytes, ts: float) -> list[Event]:
        pending = self.pending if self.pending is not None else []
        held = b"".join(p[1] for p in pending if p[0] == direction) + data
        pending.append([direction, data, ts])
        self.pending = pending
        kind = detect(direction, held, self.midstream)
        if kind is None and len(held) < (MIDSTREAM_DETECT if self.midstream else DETECT_LIMIT):
            return []
        return self._decide(direction, held)

    def _decide(self, direction: str, held: bytes) -> list[Event]:
        """Fix the framing from ``held`` (the bytes of ``direction`` so far), then feed everything
        held, in the order it came."""
        kind = detect(direction, held, self.midstream) or (REQUEST if direction == "c2s" else RESPONSE)
        self._start(kind == VSR)
        pending, self.pending = self.pending or [], None
        out: list[Event] = []
        for d, data, ts in pending:
            out.extend(self._cut(Direction(d), data, ts, False))
        return out

    def _cut(self, direction: Direction, data: bytes, ts: float, lean: bool) -> list[Event]:
        """The frames and findings of ``data``; ``lean``: the frames are all this call's bytes'
        (a findings-only run's plain responses are counted instead, see _lean_response)."""
        framer = self.framer_c2s if direction == "c2s" else self.framer_s2c
        assert framer is not None
        out: list[Event] = []
        for item in framer.cut(data, framer.measure, framer.resync, R.JUNK):
            if type(item) is Piece:
                frame = self._frame(direction, item, ts, lean)
                if frame is None:
                    self.frames_left_out += 1
                    continue
                if lean and frame.dialect:
                    self.given_dialect = frame.dialect
                out.append(frame)
            else:
                out.append(item)  # type: ignore[arg-type]
        if framer.over:
            for at, length in framer.over:
                out.append(R.OVER_LIMIT(f"{direction}: frame length {length} at stream offset {at} is over the "
                                        f"64 MiB limit"))
            framer.over = None
        return out

    def _frame(self, d: Direction, piece: Piece, ts: float, lean: bool) -> Frame | None:
        """The frame of ``piece``; ``lean`` (a findings-only run): None for a response or V reply
        that carries nothing to show (see _lean_response, _v_lean_reply)."""
        if self.framing == VSR:
            vcmd = piece.data[60]
            if vcmd == V_REPLY and d is S2C:
                if lean:
                    return self._v_lean_reply(piece, ts)
                if self.info_lines:
                    return self._v_clean_reply(piece, ts)
            elif vcmd == V_REQUEST and (lean or self.info_lines):
                return self._vsr(d, piece, ts, clean=_v_clean_command(piece.data))
            return self._vsr(d, piece, ts)
        if d is C2S:
            return self._request(piece, ts, lean)
        assert self.pairs is not None
        pending = self.pairs.response("s2c", 0)
        if lean:
            return self._lean_response(piece, ts, pending)
        return self._response(piece, ts, pending)

    def _lean_response(self, piece: Piece, ts: float, pending: list[Any] | None) -> Frame | None:
        """A classic response answering ``pending`` in a findings-only run: None when it carries
        nothing to show (no finding, answering a request given back without findings, in the
        dialect the engine last saw), checked as _response checks it; else its frame."""
        data = piece.data
        status, _ = PAIR.unpack_from(data, 0)
        if pending is None or status != OK or pending[3][1] & SHOWN or pending[3][0] is None:
            return self._response(piece, ts, pending)
        code = pending[3][0]
        decoded = self._lean_decode(code, data, 8)
        if (decoded is not None and decoded.problems) or (self.dialect and self.dialect != self.given_dialect):
            return self._response(piece, ts, pending, decoded)
        self._login_answered(code, status)
        return None

    # ------------------------------------------------------------------ classic requests
    def _request(self, piece: Piece, ts: float, lean: bool = False) -> Frame:
        """A classic request. In a findings-only run (``lean``, which gives a request back only with
        findings) or one whose view reads Info lines (info_lines), one with nothing to say of it
        once the dialect is settled is a lazy frame: its Fields are made only if a view reads them,
        its Info line from the few values it names (_clean_request, _clean_request_info); in a
        findings-only run, a decoded one's Info line is made only if read (_lean_request)."""
        data = piece.data
        cmd = code = None
        if len(data) >= 8:
            (code,) = U32.unpack_from(data, 4)
            cmd = COMMANDS.get(code)
            if cmd is not None and cmd.by_dialect.keys().isdisjoint(self.cands):
                cmd = None
        if cmd is None:
            fields = _head_fields(data, cmd)
            return self._unusable_request(piece, ts, fields, fields[0].value, code)
        if (lean or self.info_lines) and len(self.cands) == 1:
            dialect = self.cands[0]
            if payloads.clean_request(cmd, dialect, data, 8):
                # Nothing to say of it: its Fields and Info line are made only if a view asks
                # (_clean_request decodes it as _narrow would with this one candidate).
                self.evidence = True
                self._label()
                frame = LazyFrame(C2S, piece.offset, len(data), cmd.name, cmd.code, [], data, _clean_request,
                                  (cmd, dialect))
                return self._sent_request(frame, cmd, ts)
        fields = _head_fields(data, cmd)
        decoded = self._narrow(cmd, data, 8)
        if lean:
            frame: Frame = LazyFrame(C2S, piece.offset, len(data), cmd.name, cmd.code, [], data, _lean_request,
                                     (fields, cmd, decoded))
            fields.extend(decoded.fields)
            _layout_findings(frame.findings, decoded, cmd.name, frame.size)
        else:
            frame = Frame(C2S, piece.offset, len(data), cmd.name, cmd.code, "", fields, [], self.dialect, data)
            self._request_frame(frame, cmd, decoded)
        return self._sent_request(frame, cmd, ts)

    def _sent_request(self, frame: Frame, cmd: Command, ts: float) -> Frame:
        """What every decoded classic request goes through: its dialect, the login machine, its pairing."""
        frame.dialect = self.dialect
        self._judge_login(frame, cmd)
        self._pair_request(frame, cmd, ts, _flags(frame))
        return frame

    def _unusable_request(self, piece: Piece, ts: float, fields: list[Field], length: int,
                          code: int | None) -> Frame:
        """A request too short for a command code (``code`` None), or whose code no candidate
        dialect defines."""
        data = piece.data
        frame = Frame(C2S, piece.offset, len(data), "INVALID", None, "", fields, [], self.dialect, data)
        if code is None:
            # length < 4: no room for the code. The server answers InvalidCommand.
            frame.findings.append(R.TOO_SHORT(f"request length {length} is below 4 (no command code)",
                                              command="INVALID", field="length"))
            if len(data) > 4:
                fields.append(Field("undecoded", data[4:], 4, len(data) - 4))
            frame.info = f"INVALID length={length}"
        else:
            frame.command = "UNKNOWN"
            frame.code = code
            frame.findings.append(R.UNKNOWN_COMMAND(f"command code {code} is not defined in dialect "
                                                    f"{self._best()}", command="UNKNOWN", field="code"))
            if len(data) > 8:
                fields.append(Field("payload", data[8:], 8, len(data) - 8))
            frame.info = f"UNKNOWN code={code}"
        self._pair_request(frame, None, ts, FLAGGED)
        return frame

    def _best(self) -> str:
        return self.cands[0]

    def _narrow(self, cmd: Command, data: bytes, start: int) -> payloads.Request:
        """Decode the request with the preferred candidate dialect; while several remain, drop those
        whose layout cannot account for the bytes when another's can."""
        cands = self.cands
        if len(cands) > 1:
            results, good = self._per_candidate(cmd, cands, data, start)
            if good and len(good) < len(cands):
                self.cands = cands = good
                self.evidence = True
            # Identifier numbering: a numeric id 0 exists only where ids are 0-based.
            based = zero_based(cands)
            probe = results.get(based[0]) if based else None
            if probe is not None and len(based) < len(cands) and zero_id(probe.fields):
                self.cands = cands = based
                self.evidence = True
            if cmd.code == 38:
                self._prefer_sdk(results.get(cands[0]))
                cands = self.cands
            self._label()
            return results.get(cands[0]) or payloads.request(cmd, cands[0], data, start)
        self.evidence = True
        self._label()
        return payloads.request(cmd, cands[0], data, start)

    @staticmethod
    def _per_candidate(cmd: Command, cands: list[str], data: bytes,
                       start: int) -> tuple[dict[str, payloads.Request], list[str]]:
        """The request decoded as each candidate that knows it, and the candidates whose layouts
        account for the bytes exactly. Candidates with the same layouts (most commands are laid out
        alike in several dialects) share one decode: a capture that never reveals its dialect is
        not decoded once per candidate."""
        results: dict[str, payloads.Request] = {}
        good: list[str] = []
        seen: dict[Any, tuple[payloads.Request, bool]] = {}
        by_dialect = cmd.by_dialect
        for c in cands:
            layouts = by_dialect.get(c)
            if layouts is None:
                continue
            # SEND_MESSAGES' decoder reads the dialect itself; a Struct's decode does not.
            key = (c,) if SEND_PAYLOAD in layouts else layouts
            got = seen.get(key)
            if got is None:
                decoded = payloads.request(cmd, c, data, start)
                got = seen[key] = (decoded, decoded.fits())
            results[c] = got[0]
            if got[1]:
                good.append(c)
        return results, good

    def _label(self) -> None:
        self.dialect = self.cands[0] if self.evidence else None

    def _prefer_sdk(self, decoded: Decoded | None) -> None:
        """LOGIN_USER names the SDK version, which implies a dialect: prefer it among the candidates."""
        if decoded is None or self.forced:
            return
        version = next((f.value for f in decoded.fields if f.name == "version"), None)
        preferred = from_sdk_version(version) if isinstance(version, str) else None
        if preferred in self.cands:
            self.cands = order(self.cands, preferred)
            self.evidence = True

    def _request_frame(self, frame: Frame, cmd: Command, decoded: payloads.Request) -> None:
        """Fill in a request frame from its decoded payload: fields, findings, Info."""
        frame.command = cmd.name
        frame.code = cmd.code
        frame.fields.extend(decoded.fields)
        _layout_findings(frame.findings, decoded, cmd.name, frame.size)
        frame.info = _request_info(cmd, decoded)

    def _judge_login(self, frame: Frame, cmd: Command) -> None:
        state = self.login
        if state is None:
            return
        code = cmd.code
        event = "PING" if code == 1 else "LOGIN" if code in LOGINS else "LOGOUT" if code == LOGOUT else "COMMAND"
        nxt, rule = MACHINE.judge(state, "c2s", event)
        self.login = nxt
        if rule is not None:
            frame.findings.append(rule(f"{cmd.name} before a successful login ({MACHINE.labels.get(state, state)})",
                                       command=cmd.name))

    def _pair_request(self, frame: Frame, cmd: Command | None, ts: float, flags: int) -> None:
        assert self.pairs is not None
        pending = [cmd.code if cmd else None, flags]
        f = self.pairs.request("c2s", 0, frame.command, frame.request_anchor(), ts, pending, limit_rule=R.LIMIT)
        if f is not None:
            frame.findings.append(f)
        if frame.findings:
            pending[1] |= SHOWN

    # ------------------------------------------------------------------ classic responses
    def _response(self, piece: Piece, ts: float, pending: list[Any] | None, decoded: Decoded | None = None) -> Frame:
        """A classic response answering ``pending`` (its request, or None); ``decoded`` its
        payload when decoded already (see _lean_response)."""
        data = piece.data
        status, length = PAIR.unpack_from(data, 0)
        if (self.info_lines and decoded is None and pending is not None and status == OK and len(data) > 8
                and len(self.cands) == 1
                and pending[3][0] is not None
                and payloads.clean_response(pending[3][0], self.cands[0], data, 8)):
            return self._lazy_answer(piece, ts, pending, 8, "", _clean_response_fields)
        frame = Frame(S2C, piece.offset, len(data), "RESPONSE", None, "", _response_head(status, length), [],
                      self.dialect, data)
        self._answer(frame, pending, status, data, 8, ts, decoded=decoded)
        return frame

    def _lazy_answer(self, piece: Piece, ts: float, pending: list[Any], start: int, suffix: str,
                     build: Builder) -> Frame:
        """The frame _answer makes of an OK response (V: reply) to ``pending`` whose payload from
        ``start`` payloads.clean_response passed, lazy: its Info line now, from a few of its values
        (payloads.clean_response_info), its Fields only if a view reads them (``build``:
        _clean_response_fields, _v_clean_reply_fields)."""
        data = piece.data
        name, code = pending[0], pending[3][0]
        dt = ts - pending[2]
        info = _answer_info(name, OK, payloads.clean_response_info(code, data, start), suffix, dt)
        frame = LazyFrame(S2C, piece.offset, len(data), f"{name}_RESPONSE", code, [], data, build,
                          (self.cands[0], dt, name), info)
        frame.request = pending[1]
        frame.latency = dt
        frame.dialect = self.dialect
        self._login_answered(code, OK)
        return frame

    def _answer(self, frame: Frame, pending: list[Any] | None, status: int, data: bytes, start: int,
                ts: float, suffix: str = "", decoded: Decoded | None = None) -> None:
        """What a classic response and a V reply share: pairing, status, payload (``decoded``
        when decoded already), login, Info."""
        findings = frame.findings
        code: int | None = None
        name = "RESPONSE"
        flags = 0
        if pending is None:
            if status != UNSOLICITED and not self.lossy and self.framing != VSR:
                findings.append(R.UNKNOWN_RESPONSE(f"response status={status_text(status)} with no request "
                                                   f"outstanding", command="RESPONSE"))
        else:
            code, flags = pending[3][0], pending[3][1]
            name = pending[0]
            frame.command = f"{name}_RESPONSE"
            frame.code = code
            frame.request = pending[1]
            frame.latency = dt = ts - pending[2]
            frame.fields.append(_response_time(dt, name))
        command = frame.command
        if status != OK:
            if len(data) > start:
                findings.append(R.ERROR_PAYLOAD(f"{command}: error status {status} with {len(data) - start} "
                                                f"payload bytes", command=command))
            if pending is not None and not flags & FLAGGED or pending is None and status == UNSOLICITED:
                self._status(frame, status)
        elif code is not None and len(data) > start:
            if decoded is None:
                decoded = self._decode_response(code, data, start)
            frame.dialect = self.dialect
            frame.fields.extend(decoded.fields)
            _problems(findings, decoded.problems, command)
        self._login_answered(code, status)
        frame.info = _answer_info(name if pending is not None else None, status,
                                  decoded.info if decoded is not None else "", suffix,
                                  None if pending is None else frame.latency or 0.0)

    def _login_answered(self, code: int | None, status: int) -> None:
        """The login machine steps on the response to a login request (command ``code``)."""
        if code in LOGINS and self.login is not None:
            self.login, _ = MACHINE.judge(self.login, "s2c", "LOGIN_OK" if status == OK else "LOGIN_FAILED")

    def _decode_response(self, code: int, data: bytes, start: int) -> Decoded:
        cands = self.cands
        if len(cands) > 1:
            results = {c: payloads.response(code, c, data, start) for c in cands}
            good = [c for c in cands if not results[c].problems]
            if good and len(good) < len(cands):
                self.cands = cands = good
                self.evidence = True
            self._label()
            return results[cands[0]]
        return payloads.response(code, cands[0], data, start)

    def _lean_decode(self, code: int, data: bytes, start: int) -> Decoded | None:
        """A findings-only run's decode of a response's payload ``data[start:]``: None when there
        is none, or when the one candidate dialect's clean test finds nothing to say of it
        (payloads.clean_response; its Fields are then not made: nothing shows them)."""
        if len(data) <= start or len(self.cands) == 1 and payloads.clean_response(code, self.cands[0], data, start):
            return None
        return self._decode_response(code, data, start)

    def _status(self, frame: Frame, status: int) -> None:
        command = frame.command
        text = f"{command}: status {status} {status_name(status)}"
        if not known(status):
            frame.findings.append(R.UNKNOWN_STATUS(text, command=command, field="status"))
        elif status in CLIENT_MISTAKES:
            frame.findings.append(R.ERROR_STATUS(text, command=command, field="status"))
        else:
            frame.findings.append(R.REFUSED(text, command=command, field="status"))

    # ------------------------------------------------------------------ V (consensus header)
    def _vsr(self, d: Direction, piece: Piece, ts: float, reply: tuple[Any, Decoded | None] | None = None,
             clean: Command | None = None) -> Frame:
        """A V frame; ``reply``: a reply's request as pairs.response gave it, and its decoded
        payload or None, when _v_lean_reply took them already; ``clean``: a request's command when
        _v_clean_command found nothing to say of its bytes (its fields are then made only if a view
        reads them, by _v_clean_request, its Info line from a few values, _v_clean_request_info)."""
        data = piece.data
        vcmd = data[60]
        frame: Frame
        if clean is not None:
            frame = LazyFrame(d, piece.offset, len(data), clean.name, clean.code, [], data, _v_clean_request, clean)
            frame.dialect = "V"
        else:
            frame = Frame(d, piece.offset, len(data), V_COMMANDS.get(vcmd, "UNKNOWN").upper(), None, "",
                          [_v_header(data)], [], "V", data)
        pending: list[Any] | None = None
        if vcmd == V_REQUEST:
            pending = self._v_request(frame, data, ts)
        elif vcmd == V_REPLY:
            self._v_reply(frame, data, ts, *(reply or (_TAKE, None)))
        elif vcmd == V_EVICTION:
            self._v_eviction(frame, data)
        else:
            if vcmd not in V_COMMANDS:
                frame.findings.append(R.UNKNOWN_OPERATION(f"V header command {vcmd} is not defined",
                                                          command="UNKNOWN", field="command"))
            if len(data) > 256:
                frame.fields.append(Field("body", data[256:], 256, len(data) - 256))
            frame.info = f"{frame.command} size={len(data)}"
        _reserved(frame, data, _V_HEADER, "header")
        if pending is not None and frame.findings:
            pending[1] |= SHOWN  # its reply is given back in a findings-only run (_v_lean_reply)
        return frame

    def _v_request(self, frame: Frame, data: bytes, ts: float) -> list[Any]:
        """Checks and pairs a V request; what it left with the correlator for its reply."""
        (number,) = U64.unpack_from(data, 168)
        op = data[176]
        code = OPERATIONS.get(op, ("unknown", None))[1]
        (at196,) = U32.unpack_from(data, 196)
        _reserved(frame, data, _V_REQUEST_PADDING, "padding")
        if request_has_code(op, at196):
            code = at196
            _reserved(frame, data, _V_AFTER_CODE, "reserved")
        else:
            _reserved(frame, data, _V_AFTER_OPERATION, "reserved")
        cmd = COMMANDS.get(code) if code is not None else None
        if cmd is not None and not cmd.known_in("V"):
            cmd = None
        if cmd is None:
            frame.command = "UNKNOWN"
            what = f"operation {op}" if code is None else f"command code {code} (operation {op})"
            frame.findings.append(R.UNKNOWN_OPERATION(f"V request {what} is not defined", command="UNKNOWN",
                                                      field="operation"))
            if len(data) > 256:
                frame.fields.append(Field("body", data[256:], 256, len(data) - 256))
            frame.info = f"UNKNOWN operation={op} req={number}"
            frame.code = code
        else:
            if type(frame) is not LazyFrame:  # (a LazyFrame's bytes are clean: _v_clean_command)
                decoded = payloads.request(cmd, "V", data, 256)
                self._request_frame(frame, cmd, decoded)
                frame.info += f" req={number}"
                if cmd.code == 40:
                    cv = next((f for f in decoded.fields if f.name == "client_version"), None)
                    if cv is not None and cv.children:
                        self.client_version = cv.children[0].value
                        frame.info += f" protocol={cv.children[0].display}"
            self._judge_login(frame, cmd)
        assert self.pairs is not None
        if op >= 128 and not self.lossy:
            # Replicated requests consume the numbers 1, 2, 3, ...; a number used again is a request
            # the server has applied already (RequestAlreadyApplied) or a client that lost count.
            if number <= self.replicated:
                frame.findings.append(R.DUPLICATE(f"{frame.command} reuses request number {number} (the last "
                                                  f"replicated request had {self.replicated})",
                                                  command=frame.command, field="request"))
            self.replicated = max(self.replicated, number)
        pending = [frame.code, _flags(frame), op]
        f = self.pairs.request("c2s", number, frame.command, frame.request_anchor(), ts, pending, limit_rule=R.LIMIT)
        if f is not None:
            frame.findings.append(f)
        return pending

    def _v_lean_reply(self, piece: Piece, ts: float) -> Frame | None:
        """A findings-only run's V reply: None when it carries nothing to show (as _lean_response:
        no finding, answering a request given back without findings, in the dialect the engine
        last saw), checked as _vsr and _v_reply check it; else its frame."""
        data = piece.data
        status, pending, plain = self._v_plain_reply(data)
        if not plain or status != OK or pending[3][1] & SHOWN or self.dialect != self.given_dialect:
            return self._vsr(S2C, piece, ts, (pending, None))
        code = pending[3][0]
        decoded = self._lean_decode(code, data, 256)
        if decoded is not None and decoded.problems:
            return self._vsr(S2C, piece, ts, (pending, decoded))
        self._login_answered(code, status)
        return None

    def _v_plain_reply(self, data: bytes) -> tuple[int, Any, bool]:
        """A V reply's status, the request it answers (as pairs.response gives it, taken from the
        correlator: for _vsr(..., (pending, None)) when the reply is not left to a lean path), and
        whether nothing but its payload and status could call for a word: a request pending, of an
        unreplicated operation that is the reply's, a command other than the register, the reserved
        ranges zero."""
        (number,) = U64.unpack_from(data, 200)
        op = data[208]
        (status,) = U32.unpack_from(data, 216)
        assert self.pairs is not None
        pending = self.pairs.response("s2c", number)
        if (pending is None or op in REPLICATED or pending[3][0] in (None, 40, 45) or len(pending[3]) < 3
                or pending[3][2] != op or data[_V_HEADER] != _V_HEADER_ZERO
                or data[_V_REPLY_PADDING] != _V_REPLY_PADDING_ZERO
                or data[_V_REPLY_RESERVED] != _V_REPLY_RESERVED_ZERO):
            return status, pending, False
        return status, pending, True

    def _v_clean_reply(self, piece: Piece, ts: float) -> Frame:
        """A V reply: when it is plain (_v_plain_reply), OK, and its payload one payloads.clean_response
        passes, _v_reply's frame, lazy (_lazy_answer); else _vsr's."""
        data = piece.data
        status, pending, plain = self._v_plain_reply(data)
        if (not plain or status != OK or len(self.cands) != 1 or len(data) <= 256
                or not payloads.clean_response(pending[3][0], self.cands[0], data, 256)):
            return self._vsr(S2C, piece, ts, (pending, None))
        (number,) = U64.unpack_from(data, 200)
        return self._lazy_answer(piece, ts, pending, 256, f" req={number}", _v_clean_reply_fields)

    def _v_reply(self, frame: Frame, data: bytes, ts: float, pending: Any, decoded: Decoded | None) -> None:
        """Checks a V reply and pairs it with its request (``pending``: as pairs.response gave it,
        or _TAKE to ask it here); ``decoded``: its payload when decoded already."""
        (number,) = U64.unpack_from(data, 200)
        op = data[208]
        (status,) = U32.unpack_from(data, 216)
        _reserved(frame, data, _V_REPLY_PADDING, "padding")
        _reserved(frame, data, _V_REPLY_RESERVED, "reserved")
        assert self.pairs is not None
        frame.command = "RESPONSE"  # until it is paired: <REQUEST>_RESPONSE
        if pending is _TAKE:
            pending = self.pairs.response("s2c", number)
        if pending is None and not self.lossy:
            frame.findings.append(R.UNKNOWN_REPLY(f"reply to request number {number} that matches no outstanding "
                                                  f"request", command="RESPONSE"))
        elif pending is not None and len(pending[3]) > 2 and pending[3][2] != op:
            frame.findings.append(R.MISMATCH(f"reply operation {op} to a request of operation {pending[3][2]}",
                                             command=pending[0]))
        start = 256
        if status == OK and op in REPLICATED and len(data) > start:
            results, start = _results(frame, data, start)
            if results is not None and results.value:
                frame.findings.append(R.REFUSED(f"{pending[0] if pending else 'reply'}: {results.value} failed "
                                                f"results", command=pending[0] if pending else "RESPONSE"))
        if pending is not None and pending[3][0] in (40, 45) and status == OK and len(data) > start:
            self._register_reply(frame, pending, data, start, ts, number)
            return
        self._answer(frame, pending, status, data, start, ts, f" req={number}", decoded)

    def _register_reply(self, frame: Frame, pending: list[Any], data: bytes, start: int, ts: float,
                        number: int) -> None:
        """The register reply's body (9.5): user id, session, and the server's protocol version,
        which must accept the client's."""
        decoded = payloads.decode(REGISTER_REPLY, data, start)
        command = f"{pending[0]}_RESPONSE"
        frame.command = command
        _layout_findings(frame.findings, decoded, command, len(data))
        values = {f.name: f.value for f in decoded.fields}
        server = values.get("server_protocol_version")
        cv = self.client_version
        if isinstance(server, int) and cv is not None and not accepts(server, cv):
            frame.findings.append(R.PROTOCOL_VERSION(
                f"client protocol {version_text(cv)} is newer than the server's {version_text(server)}", command=command,
                field="server_protocol_version"))
        # Pairing, login and Info as for every reply; the body is decoded here.
        user = f" user_id={values['user_id']}" if "user_id" in values else ""
        self._answer(frame, pending, OK, data, len(data), ts, f"{user} req={number}")
        frame.fields.extend(decoded.fields)

    def _v_eviction(self, frame: Frame, data: bytes) -> None:
        server, minimum = _EVICTION_VERSIONS.unpack_from(data, 144)
        reason = data[255]
        rname = EVICTION_REASONS.get(reason, "UNKNOWN")
        _reserved(frame, data, _V_EVICTION_RESERVED, "reserved")
        frame.info = f"EVICTION reason={reason} {rname}"
        frame.findings.append(R.EVICTION(f"the server evicted the client: {rname} ({reason})", command="EVICTION",
                                         field="reason"))
        cv = self.client_version
        if reason in VERSION_EVICTIONS or (cv is not None and not accepts(server, cv, minimum)):
            shown = version_text(cv) if cv is not None else "unknown"
            frame.findings.append(R.PROTOCOL_VERSION(
                f"client protocol {shown} is not accepted by a server of protocol {version_text(server)} "
                f"(minimum {version_text(minimum)})", command="EVICTION", field="server_protocol_version"))
        # An evicted session gets no more replies.
        if self.pairs is not None:
            self.pairs.clear()
        self.login = MACHINE.start if self.login is not None else None


# ---------------------------------------------------------------------- helpers
def _flags(frame: Frame) -> int:
    findings = frame.findings
    if not findings:  # nearly every request: without a generator made to say so
        return 0
    return FLAGGED if any(f.severity.rank >= 1 for f in findings) else 0


def _unanswered(d: str, key: Any, pending: list[Any]) -> str | None:
    if d != "c2s":
        return None
    return f"{pending[0]} was never answered" + (f" (request number {key})" if key else "")


def _layout_findings(findings: list[Finding], decoded: payloads.Request, command: str, size: int) -> None:
    """What decoding a layout found: where it was cut, bytes left over, invalid values."""
    if decoded.cut is not None:
        text, _, field = decoded.cut
        findings.append(R.TRUNCATED(f"{command}: {text}", command=command, field=field))
    if decoded.trailing is not None:
        findings.append(R.TRAILING(f"{command}: {size - decoded.trailing} bytes after the last field",
                                   command=command))
    _problems(findings, decoded.problems, command)


def _problems(findings: list[Finding], problems: list[tuple[str, str]], command: str) -> None:
    for kind, message in problems:
        rule = R.PROBLEM_RULES.get(kind, R.INVALID_VALUE)
        findings.append(rule(f"{command}: {message}", command=command))


def _lean_request(frame: LazyFrame, ctx: tuple[list[Field], Command, Decoded]) -> tuple[list[Field], str]:
    """A findings-only run's request: its fields (made), and its Info line, made now."""
    fields, cmd, decoded = ctx
    return fields, _request_info(cmd, decoded)


def _head_fields(data: bytes, cmd: Command | None) -> list[Field]:
    """A classic request's length and, when it has one, its command code (named by ``cmd``)."""
    fields = [Field("length", U32.unpack_from(data, 0)[0], 0, 4)]
    if len(data) >= 8:
        fields.append(Field("code", U32.unpack_from(data, 4)[0], 4, 4, cmd.name if cmd is not None else "unknown"))
    return fields


def _clean_request(frame: LazyFrame, ctx: tuple[Command, str]) -> tuple[list[Field], str]:
    """A request that payloads.clean_request passed: decoded now, as _narrow would have decoded it
    with its one candidate dialect."""
    cmd, dialect = ctx
    data = frame.data
    assert data is not None
    decoded = payloads.request(cmd, dialect, data, 8)
    return _head_fields(data, cmd) + decoded.fields, _request_info(cmd, decoded)


def _clean_request_info(frame: LazyFrame, ctx: tuple[Command, str]) -> str:
    """_clean_request's Info line without its tree."""
    data = frame.data
    assert data is not None
    return _clean_info(ctx[0], ctx[1], data, 8)


QUICK_INFO[_clean_request] = _clean_request_info


def _v_clean_command(data: bytes) -> Command | None:
    """A V request's command when nothing in its bytes calls for a word: the header's reserved
    ranges zero, a command V knows other than the register (whose version is followed), a payload
    that payloads.clean_request passes; else None (the request is then decoded at once)."""
    op = data[176]
    (at196,) = U32.unpack_from(data, 196)
    if request_has_code(op, at196):
        code, dirty = at196, data[_V_AFTER_CODE] != _V_AFTER_CODE_ZERO
    else:
        code = OPERATIONS.get(op, ("unknown", None))[1]
        dirty = data[_V_AFTER_OPERATION] != _V_AFTER_OPERATION_ZERO
    cmd = COMMANDS.get(code) if code is not None else None
    if (cmd is None or cmd.code == 40 or dirty or data[_V_HEADER] != _V_HEADER_ZERO
            or data[_V_REQUEST_PADDING] != _V_REQUEST_PADDING_ZERO
            or not cmd.known_in("V") or not payloads.clean_request(cmd, "V", data, 256)):
        return None
    return cmd


def _v_clean_request(frame: LazyFrame, cmd: Command) -> tuple[list[Field], str]:
    """A V request _v_clean_command passed: decoded now, as _v_request decodes one."""
    data = frame.data
    assert data is not None
    decoded = payloads.request(cmd, "V", data, 256)
    (number,) = U64.unpack_from(data, 168)
    return [_v_header(data), *decoded.fields], f"{_request_info(cmd, decoded)} req={number}"


def _v_clean_request_info(frame: LazyFrame, cmd: Command) -> str:
    """_v_clean_request's Info line without its tree."""
    data = frame.data
    assert data is not None
    (number,) = U64.unpack_from(data, 168)
    return f"{_clean_info(cmd, 'V', data, 256)} req={number}"


QUICK_INFO[_v_clean_request] = _v_clean_request_info


def _request_info(cmd: Command, decoded: Decoded) -> str:
    if cmd.name == "SEND_MESSAGES":
        return f"{cmd.name} {decoded.info}".rstrip()
    return _info_line(cmd, {f.name: f.value if f.display is None or isinstance(f.value, str) else f.display
                            for f in decoded.fields})


def _clean_info(cmd: Command, dialect: str, data: bytes, start: int) -> str:
    """_request_info of payloads.request(cmd, dialect, data, start) for bytes that
    payloads.clean_request passed, from the fields the Info line names alone
    (tests/test_iggy_quick_info.py holds the two alike)."""
    layout = cmd.layout(dialect)
    if layout is SEND_PAYLOAD:
        return f"{cmd.name} {send_messages_info(dialect, data, start)}".rstrip()
    if not cmd.info:
        return cmd.name
    assert isinstance(layout, Struct)
    return _info_line(cmd, payloads.info_items(layout, data, start, cmd.info_names))


def _info_line(cmd: Command, items: dict[str, Any]) -> str:
    """The command's name and its Info items (Command.info): ``items`` has, by field name, what
    the line shows of each field (its display, or its value where it has none or is text)."""
    parts = [cmd.name]
    for label, key in cmd.info:
        if key not in items:
            continue
        v = items[key]
        if isinstance(v, bytes):
            v = v.hex()
        if isinstance(v, str) and (v == "" or " " in v):
            v = repr(v)
        parts.append(f"{label}={v}")
    return " ".join(parts)


def _response_head(status: int, length: int) -> list[Field]:
    """A classic response's status and length Fields."""
    return [Field("status", status, 0, 4, status_name(status)), Field("length", length, 4, 4)]


def _response_time(dt: float, name: str) -> Field:
    return Field("response_time", dt, -1, 0, f"{dt:.6f} s after {name}")


def _answer_info(name: str | None, status: int, payload: str, suffix: str, latency: float | None) -> str:
    """A response's (V: reply's) Info line: what it answers (``name``: None when nothing), its
    status, its payload's Info, ``suffix``, and its latency (None: no request)."""
    head = f"response to {name}" if name is not None else "response"
    info = f"{head} status={status_text(status)}"
    if payload:
        info += " " + payload
    info += suffix
    if latency is not None:
        info += f" ({_ms(latency)})"
    return info


def _clean_response_fields(frame: LazyFrame, ctx: tuple[str, float, str]) -> tuple[list[Field], str]:
    """A classic response _lazy_answer made: its Fields, _response's and _answer's, the payload decoded now."""
    dialect, dt, name = ctx
    data = frame.data
    assert data is not None
    status, length = PAIR.unpack_from(data, 0)
    assert frame.code is not None
    decoded = payloads.response(frame.code, dialect, data, 8)
    return [*_response_head(status, length), _response_time(dt, name), *decoded.fields], frame.info


def _v_clean_reply_fields(frame: LazyFrame, ctx: tuple[str, float, str]) -> tuple[list[Field], str]:
    """_v_clean_reply's Fields: _vsr's header and _answer's, the payload decoded now."""
    dialect, dt, name = ctx
    data = frame.data
    assert data is not None and frame.code is not None
    decoded = payloads.response(frame.code, dialect, data, 256)
    return [_v_header(data), _response_time(dt, name), *decoded.fields], frame.info


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.1f} ms" if ms >= 0.1 else f"{ms * 1000:.0f} µs"


def _v_header(data: bytes) -> Field:
    """The 256-byte header (9.1): its fields are made when a view reads them, its JSON without them
    (both from the table in vheader)."""
    vcmd = data[60]
    return LazyField("header", vcmd, 0, 256, partial(_v_header_fields, data), False, V_COMMANDS.get(vcmd, "unknown"),
                     partial(header_json, data))


def _v_header_fields(data: bytes) -> list[Field]:
    return [Field(name, value, at, size, display) for name, value, at, size, display in header_leaves(data)]


def _span(start: int, end: int) -> tuple[slice, bytes]:
    return slice(start, end), bytes(end - start)


#: The V header's ranges that must be zero, each stated once, with zero bytes of its length: the
#: checks that report one (_reserved) count its zeros, the lean paths that only ask whether it is
#: clear compare it with its zeros (a function of our own, or bytes.strip, cost a findings-only run
#: 2-3 % more instructions).
_V_HEADER, _V_HEADER_ZERO = _span(62, 128)
_V_REQUEST_PADDING, _V_REQUEST_PADDING_ZERO = _span(177, 184)
_V_AFTER_CODE, _V_AFTER_CODE_ZERO = _span(200, 256)  # a request's bytes after a command code at 196
_V_AFTER_OPERATION, _V_AFTER_OPERATION_ZERO = _span(196, 256)  # after its operation's part, without a code
_V_REPLY_PADDING, _V_REPLY_PADDING_ZERO = _span(209, 216)
_V_REPLY_RESERVED, _V_REPLY_RESERVED_ZERO = _span(220, 256)
_V_EVICTION_RESERVED = slice(152, 255)  # no lean path reads an eviction: no zeros kept for it
#: _v_reply's ``pending`` when the reply's request is still to be taken from the correlator.
_TAKE: Any = object()
_EVICTION_VERSIONS = struct.Struct("<II")


def _reserved(frame: Frame, data: bytes, span: slice, what: str) -> None:
    chunk = data[span]
    if chunk.count(0) != len(chunk):  # (all zero: counted in C, not tested octet by octet)
        start, end = span.start, span.stop
        at = next(i for i in range(start, end) if data[i])
        frame.findings.append(R.RESERVED(f"{frame.command}: V header {what} bytes {start}..{end} are not zero "
                                         f"(first at {at})", command=frame.command, field=what))


def _results(frame: Frame, data: bytes, start: int) -> tuple[Field | None, int]:
    """The result section of a replicated reply: count u32, then count x {index u32, result u32}."""
    view = memoryview(data)
    try:
        f, off = RESULTS.read("results", view, start, len(data))
    except DecodeError as exc:  # the count overruns the body
        frame.findings.append(R.TRUNCATED(f"{frame.command}: result section: {exc}", command=frame.command))
        return None, len(data)
    finally:
        view.release()
    frame.fields.append(f)
    return f, off


__all__ = ["IggyConnection", "BY_NAME", "DIALECTS"]
