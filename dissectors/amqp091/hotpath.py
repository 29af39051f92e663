"""The hot path: the frames of a busy connection (publish/deliver + content header + body, acks,
and the requests and replies of synchronous exchanges, on open channels) and the connection
handshake's methods, checked with a few comparisons against the steady state.

Each function here runs the same checks as the general path (``Amqp091Connection.frame``) but
decides them from the state directly: when every check passes it builds the (lazy) frame and
updates the state exactly as the general path would; when any check would speak it returns 0
having changed nothing, and the general path redoes the frame and says what is wrong. That the
two paths agree is proven by tests/test_amqp091_hotpath.py (every bundled capture and mutated
variants through both, ``Amqp091Connection(hot=False)`` being the general path alone).
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from analyzer.api import Direction, Event, FrameRef
from dissectors.amqp091.clean_properties import clean_content_type
from dissectors.amqp091.codes import FRAME_END
from dissectors.amqp091.decode import (
    BODY_KEEP,
    CH_HEAD,
    HDR,
    IDS,
    build_body,
    build_header,
    build_method,
    complete,
    header_info,
    lazy_values,
)
from dissectors.amqp091.fast import FAST
from dissectors.amqp091.framing import KNOWN_TYPES, Side
from dissectors.amqp091.machines import (
    CHANNEL,
    CLOSE,
    CLOSE_OK,
    CLOSED,
    HANDSHAKE,
    HS_DONE,
    NEW,
    OPEN,
    OPEN_M,
    OPEN_OK,
)
from dissectors.amqp091.methods import CONNECTION_CLOSE, CONNECTION_CLOSE_OK, METHODS, RESPONSE_CODES, Method
from dissectors.amqp091.tracking import ACTIONS
from dissectors.kit.lazy import LazyFrame

if TYPE_CHECKING:
    from dissectors.amqp091.connection import Amqp091Connection

# ``d`` is always a Direction member here (Amqp091Connection.feed makes sure): compared by identity.
C2S: Final = Direction.C2S


def cut_segment(conn: Amqp091Connection, d: Direction, side: Side, data: bytes, out: list[Event]) -> int:
    """Frame whole frames straight from ``data`` (nothing is queued on this side) into ``out``;
    returns how many bytes were used (a trailing partial frame is left for the queue)."""
    pos = 0
    n = len(data)
    base = side.queue.offset
    cap = side.cap
    unpack = HDR.unpack_from
    quiet_size, quiet_ch = conn._quiet
    while n - pos >= 8:
        ftype, ch, size = unpack(data, pos)
        stop = pos + size + 8
        if stop > n or size > cap or ftype not in KNOWN_TYPES:
            break
        if size <= quiet_size and ch <= quiet_ch and data[stop - 1] == FRAME_END:
            after = _HOT[ftype](conn, d, data, pos, stop, ch, size, base, out)
            if after:
                pos = after
                if not ch:  # a handshake method: tune-ok and start move the bounds and the cap
                    quiet_size, quiet_ch = conn._quiet
                    cap = side.cap
                continue
        out.append(conn.frame(d, side, data[pos:stop], base + pos))
        if conn.foreign:
            return stop
        quiet_size, quiet_ch = conn._quiet
        cap = side.cap
        pos = stop
    return pos


def hot_piece(conn: Amqp091Connection, d: Direction, data: bytes, offset: int, out: list[Event]) -> bool:
    """The hot path for one frame cut by the queue: True when it took the frame."""
    ftype, ch, size = HDR.unpack_from(data, 0)
    quiet_size, quiet_ch = conn._quiet
    if ftype not in KNOWN_TYPES or size > quiet_size or ch > quiet_ch or data[-1] != FRAME_END:
        return False
    return bool(_HOT[ftype](conn, d, data, 0, len(data), ch, size, offset, out))


# Each takes the frame data[pos:stop] (payload ``size`` bytes on channel ``ch``, at stream offset
# base + pos) and appends it to ``out`` when every check passes, returning where the next frame
# starts; 0 means "not here: use the general path", with nothing changed.

def _hot_method(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, ch: int, size: int,
                base: int, out: list[Event]) -> int:
    """A hot method from its allowed sender on an open channel of an open connection, with no
    content due: none of the general path's checks can fire, only its action runs."""
    if size < 4:
        return 0
    if ch == 0:
        handshake = _HOT_CONNECTION[d].get(IDS.unpack_from(data, pos + 7))
        return _hot_connection(conn, d, data, pos, stop, size, base, out, handshake) if handshake else 0
    if conn.hs != HS_DONE or d in conn.closed:
        return 0
    ids = IDS.unpack_from(data, pos + 7)
    hot = _HOT_METHODS[d].get(ids)
    if hot is None:
        lifecycle = _HOT_CHANNEL[d].get(ids)
        return _hot_channel(conn, d, data, pos, stop, ch, size, base, out, lifecycle) if lifecycle else 0
    chans = conn.chans
    if chans is None or chans.get(ch) != OPEN:
        return 0
    content = conn.content_c2s if d is C2S else conn.content_s2c
    if content is not None and (ch in content.awaiting or ch in content.body):
        return 0
    meth, validate, act, sync, coded = hot
    raw = data[pos:stop]
    values = validate(raw, 7 + size)
    if values is None:
        return 0
    answers = None
    asks = False
    if sync:
        # A synchronous exchange: the request is remembered and the reply settles it as the
        # general path does (Amqp091Connection._request, answers, link_answer); a reply that
        # answers nothing and a request past the correlator's limit need its words.
        if sync == _REPLY:
            answers = conn.answers(d, ch, meth)
            if answers is None:
                return 0
        elif not (meth.has_nowait and values.get("nowait")):
            corr = conn.corr
            if corr.outstanding(d) >= corr.limit:
                return 0
            asks = True
    # A findings-only run is given back a request awaiting its reply (the views hold it until the
    # reply names it) and the reply (its request may have findings that show it).
    if conn.leave_out and not asks and answers is None:
        # A findings-only run gives the method only when its action found something; else it is
        # counted, not made, and so are its content frames (_hot_content). When its content does
        # not follow whole in this segment, the content header due points at it: its anchor goes
        # to the engine (anchors_left_out), which gives it this packet. No action anchors its
        # frame: it writes its findings and computed fields into the scratch frame, and the frame
        # made takes them.
        scratch = _SCRATCH
        try:
            if coded:
                conn._reply_code(meth, values, scratch.findings)
            extra = act(conn, d, ch, meth, values, scratch)
            findings, computed = scratch.findings, scratch._extra
        finally:
            scratch.findings = []
            scratch._extra = None
        after = _hot_content(conn, d, meth, data, stop, ch, base, out) if meth.content else stop
        # An anchor is handed over only for a frame that ends in this call's bytes (the framer may
        # have held one that ended before them): its last packet is then the call's.
        if not findings and (after or base + stop > conn.fed_at):
            conn.frames_left_out += 1
            if after:
                return after
            ref = FrameRef.of(d, base + pos)
            conn.anchors_left_out.append(ref)  # type: ignore[union-attr]  # a list once leave_out is set
        else:
            frame = LazyFrame(d, base + pos, size + 8, meth.name, meth.code, findings, raw, build_method, meth)
            frame._extra = computed
            if extra:
                frame._info_extra = extra
            out.append(frame)  # _hot_content gave none of its content frames here
            if after:
                return after
            ref = frame.anchor()
        conn.content_of(d).awaiting[ch] = [meth.name, meth.class_id, ref]
        return stop
    frame = LazyFrame(d, base + pos, size + 8, meth.name, meth.code, [], raw, build_method, meth)
    out.append(frame)
    if coded:
        conn._reply_code(meth, values, frame.findings)
    if answers is not None:
        conn.link_answer(d, ch, answers, frame)
    elif asks:
        conn._request(d, ch, meth, values, frame)
    extra = act(conn, d, ch, meth, values, frame)
    if extra:
        frame._info_extra = extra
    if meth.content:
        after = _hot_content(conn, d, meth, data, stop, ch, base, out)
        if after:
            stop = after
        else:
            if content is None:
                content = conn.content_of(d)
            content.awaiting[ch] = [meth.name, meth.class_id, frame.anchor()]
    return stop


def _hot_channel(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, ch: int, size: int,
                 base: int, out: list[Event], hot: tuple[Method, Any, str, int]) -> int:
    """Channel.Open, OpenOk, Close or CloseOk (``hot``: the method, its reader, its event for the
    channel machine, _REQUEST or _REPLY) on an open connection (_hot_method checked that), when
    neither the channel machine nor the correlator has anything to say of it and no content is
    due on the channel: what _check_method does with it, in its order, without its checks; else 0,
    having changed nothing. Each is a request awaiting its reply or a reply: a findings-only run is
    given every one, as from the general path (a reply code that is a finding, as for Close, is
    judged by the general path's own _reply_code)."""
    meth, validate, event, sync = hot
    chans = conn.chans
    state = chans.get(ch) if chans is not None else None
    if state is None:
        state = OPEN if conn.midstream else NEW
    nxt, rule = CHANNEL.judge(state, d, event)
    if rule is not None:
        return 0
    if event is not OPEN_M:  # (an Open lets go of whatever was due on the channel: _forget_channel)
        content = conn.content_c2s if d is C2S else conn.content_s2c
        if content is not None and (ch in content.awaiting or ch in content.body):
            return 0
    raw = data[pos:stop]
    read = _read_sync(conn, d, ch, meth, validate, raw, size, sync)
    if read is None:
        return 0
    values, answers = read
    if answers is None and conn.corr.outstanding(d) >= conn.corr.limit:
        return 0
    frame = LazyFrame(d, base + pos, size + 8, meth.name, meth.code, [], raw, build_method, meth)
    out.append(frame)
    if event is CLOSE:
        conn._reply_code(meth, values, frame.findings)
    if chans is None:
        chans = conn.chans = {}
    chans[ch] = nxt
    if event is OPEN_M:
        conn._forget_channel(ch)
    elif event is CLOSE and d is not C2S and values.get("reply_code", 200) != 200:
        conn.corr.forget("c2s", ch)  # the server failed the channel (as _check_method says)
    if answers is not None:
        conn.link_answer(d, ch, answers, frame)
        if nxt == CLOSED:
            conn._forget_channel(ch)
    else:
        conn._request(d, ch, meth, values, frame)
    return stop


def _hot_connection(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, size: int, base: int,
                    out: list[Event], hot: tuple[Method, Any, int]) -> int:
    """A connection method on channel 0 other than Close and CloseOk (``hot``: the method, its
    reader, _REQUEST/_REPLY/_NOT_SYNC), in its turn in the handshake, from a side that has not sent
    connection.close, a reply only when it answers the oldest request: what _check_method does
    with it, in its order (the handshake step, the answer or the request, then the connection's
    own handshake_action), without its checks; else 0, having changed nothing. What the request
    and the action find (a request past the correlator's limit, a mechanism not offered, a tune-ok
    asking too much) they add to the frame themselves, as on the general path, which gives every
    such frame back: so does this one."""
    meth, validate, sync = hot
    if d in conn.closed:
        return 0
    nxt, rule = HANDSHAKE.judge(conn.hs, d, meth.name)
    if rule is not None:
        return 0
    raw = data[pos:stop]
    read = _read_sync(conn, d, 0, meth, validate, raw, size, sync)
    if read is None:
        return 0
    values, answers = read
    frame = LazyFrame(d, base + pos, size + 8, meth.name, meth.code, [], raw, build_method, meth)
    out.append(frame)
    conn.hs = nxt
    if answers is not None:
        conn.link_answer(d, 0, answers, frame)
    elif sync == _REQUEST:
        conn._request(d, 0, meth, values, frame)
    conn.handshake_action(meth.code, values, frame)
    conn._quiet = conn._quiet_bounds()
    return stop


def _read_sync(conn: Amqp091Connection, d: Direction, ch: int, meth: Method, validate: Any, raw: bytes, size: int,
               sync: int) -> tuple[dict[str, Any], list | None] | None:
    """The values of a channel lifecycle or connection method frame ``raw`` (``size`` bytes of
    payload) and, for a reply (``sync``), the request it answers: None when its arguments need the
    general path's words or a reply answers no request."""
    values = validate(raw, 7 + size)
    if values is None:
        return None
    answers = None
    if sync == _REPLY:
        answers = conn.answers(d, ch, meth)
        if answers is None:
            return None
    return values, answers


def _hot_content(conn: Amqp091Connection, d: Direction, meth: Method, data: bytes, pos: int, ch: int, base: int,
                 out: list[Event]) -> int:
    """The content header and single body frame of a hot content-bearing method just accepted on
    ``ch``, when both follow in this segment (how clients and brokers write them) and pass the
    checks of _hot_header and _hot_body: they are framed, and the channel is left as after the
    whole message; returns where the next frame starts. Otherwise returns 0 having done nothing
    (the caller marks the header as due and the loop takes the frames one by one).

    The channel checks of those two hold by construction here: the method was just accepted on
    this open channel with nothing due, so exactly this header is due, then this body."""
    n = len(data)
    if n - pos < 8:
        return 0
    quiet_size = conn._quiet[0]
    cap = (conn.side_c2s if d is C2S else conn.side_s2c).cap
    ftype, hch, hsize = HDR.unpack_from(data, pos)
    hstop = pos + hsize + 8
    if (ftype != 2 or hch != ch or hstop > n or hsize < 14 or hsize > quiet_size or hsize > cap
            or data[hstop - 1] != FRAME_END):
        return 0
    class_id, weight, body_size = CH_HEAD.unpack_from(data, pos + 7)
    if weight or class_id != meth.class_id:
        return 0
    content_type = clean_content_type(data, pos + 19, hstop - 1)
    if content_type is None:
        return 0
    if body_size:
        if n - hstop < 8:
            return 0
        ftype, bch, bsize = HDR.unpack_from(data, hstop)
        bstop = hstop + bsize + 8
        if (ftype != 3 or bch != ch or bsize != body_size or bstop > n or bsize > quiet_size or bsize > cap
                or data[bstop - 1] != FRAME_END):
            return 0
    if conn.leave_out:  # a findings-only run: checked, counted, not made
        if not body_size:
            conn.frames_left_out += 1
            return hstop
        conn.frames_left_out += 2
        return bstop
    # decode.complete, inline: the message is whole on its last frame.
    if not body_size:
        header = LazyFrame(d, base + pos, hsize + 8, "ContentHeader", 2, [], data[pos:hstop], build_header,
                           (meth.name, 0, 0, b"", content_type))
        out.append(header)
        return hstop
    # Its Info line from the values at hand (a view that shows frames reads it; findings-only runs
    # do not make these frames), rather than read from the bytes again on first access.
    out.append(LazyFrame(d, base + pos, hsize + 8, "ContentHeader", 2, [], data[pos:hstop], build_header, None,
                         _header_info(body_size, content_type)))
    body = LazyFrame(d, base + hstop, bsize + 8, "ContentBody", 3, [], data[hstop:bstop], build_body, None)
    out.append(body)
    body._ctx = (meth.name, bsize, 1, data[hstop + 7:hstop + 7 + min(bsize, BODY_KEEP)], content_type)
    return bstop


def _hot_header(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, ch: int, size: int,
                base: int, out: list[Event]) -> int:
    """The content header a content-bearing method announced, with sound properties."""
    chans = conn.chans
    if ch == 0 or size < 14 or chans is None or chans.get(ch) != OPEN:
        return 0
    content = conn.content_c2s if d is C2S else conn.content_s2c
    if content is None:
        return 0
    due = content.awaiting.get(ch)
    if due is None:
        return 0
    class_id, weight, body_size = CH_HEAD.unpack_from(data, pos + 7)
    if weight or class_id != due[1]:
        return 0
    content_type = clean_content_type(data, pos + 19, stop - 1)
    if content_type is None:
        return 0
    del content.awaiting[ch]
    if conn.leave_out:  # a findings-only run: checked, counted, not made
        conn.frames_left_out += 1
        frame = None
    else:
        # With a body to come, the Info line from the values at hand (see _hot_content).
        frame = LazyFrame(d, base + pos, size + 8, "ContentHeader", 2, [], data[pos:stop], build_header, None,
                          _header_info(body_size, content_type) if body_size else None)
        out.append(frame)
    if body_size == 0:
        if frame is not None:
            complete(frame, due[0], 0, 0, b"", content_type)
    else:
        content.seq.start(ch, due[0], body_size, due[2])
        content.meta[ch] = [content_type, 0, b""]
    return stop


def _hot_body(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, ch: int, size: int,
              base: int, out: list[Event]) -> int:
    """A body frame that does not overrun the size its content header announced."""
    chans = conn.chans
    if ch == 0 or chans is None or chans.get(ch) != OPEN:
        return 0
    content = conn.content_c2s if d is C2S else conn.content_s2c
    if content is None:
        return 0
    entry = content.body.get(ch)
    if entry is None or entry[2] + size > entry[1]:
        return 0
    if conn.leave_out:  # a findings-only run: checked, counted, not made
        conn.frames_left_out += 1
        content.add_body(ch, None, data[pos:stop], size, [])
        return stop
    raw = data[pos:stop]
    frame = LazyFrame(d, base + pos, size + 8, "ContentBody", 3, [], raw, build_body, None)
    out.append(frame)
    content.add_body(ch, frame, raw, size, frame.findings)
    return stop


def _header_info(body_size: int, content_type: str) -> str | None:
    """A content header's Info line from the values the hot path read; None (it is made from the
    bytes when asked) for a content type that is not UTF-8: clean_content_type gives it with
    replacement characters, where the Info line leaves it out."""
    return header_info(body_size, content_type) if "\ufffd" not in content_type else None


def _not_hot(conn: Amqp091Connection, d: Direction, data: bytes, pos: int, stop: int, ch: int, size: int,
             base: int, out: list[Event]) -> int:
    return 0


#: Frame type -> its hot path (heartbeats are rare; unknown types always need a word). A plain
#: global: a test counts the frames the hot path takes through it.
_HOT = (_not_hot, _hot_method, _hot_header, _hot_body, _not_hot, _not_hot, _not_hot, _not_hot, _not_hot)

#: What a findings-only run's action of a hot method writes into (_hot_method): its findings and
#: computed fields, taken by the frame made when there is one, and emptied after every use (a
#: connection's bytes are fed to the end before another's).
_SCRATCH: Final = LazyFrame(C2S, 0, 0, "", None, [], b"", build_method, None)

#: What a hot method is in a synchronous exchange (the fourth item of its _HOT_METHODS entry).
_NOT_SYNC: Final = 0
_REQUEST: Final = 1
_REPLY: Final = 2


def _no_action(conn: Amqp091Connection, d: Direction, ch: int, meth: Method, values: dict[str, Any],
               frame: Any) -> str:
    return ""


#: Per sender: (class id, method id) -> (method, layout check, action, _NOT_SYNC/_REQUEST/_REPLY,
#: whether it has a reply code) of the methods the hot path takes: those none of whose own checks
#: can fire on an open channel (not obsolete, not of class connection/channel; a synchronous
#: request or reply is taken only when the correlator has nothing to say of it; a reply code, as
#: Basic.Return's, is judged by the general path's own _reply_code). Which methods qualify is data
#: (the method table; FAST's validators where a method has one, else the lazy frames' values
#: reader); the differential test proves the rest.
_HOT_METHODS: Final[dict[Direction, dict[tuple[int, int], tuple[Method, Any, Any, int, bool]]]] = {
    Direction.C2S: {}, Direction.S2C: {}}
#: Per sender: (class id, method id) -> (method, reader, channel machine event, _REQUEST/_REPLY) of
#: the channel lifecycle methods _hot_channel takes (Flow is left to the general path).
_HOT_CHANNEL: Final[dict[Direction, dict[tuple[int, int], tuple[Method, Any, str, int]]]] = {
    Direction.C2S: {}, Direction.S2C: {}}
#: Per sender: (class id, method id) -> (method, reader, _REQUEST/_REPLY/_NOT_SYNC) of the connection
#: methods _hot_connection takes: every one of class connection but Close and CloseOk, whose
#: handling is their own (_connection_method).
_HOT_CONNECTION: Final[dict[Direction, dict[tuple[int, int], tuple[Method, Any, int]]]] = {
    Direction.C2S: {}, Direction.S2C: {}}
#: The channel machine's events named by those methods (the machine's own objects: compared by identity).
_LIFECYCLE: Final = {event: event for event in (OPEN_M, OPEN_OK, CLOSE, CLOSE_OK)}
for _code, _meth in METHODS.items():
    _event = _LIFECYCLE.get(_meth.name)
    _validate = FAST.get(_code) or partial(lazy_values, _meth)
    _sync = _REPLY if _code in RESPONSE_CODES else _REQUEST if _meth.responses else _NOT_SYNC
    if _meth.class_id == 10 and not _meth.note and _code not in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK):
        for _d in (Direction.C2S, Direction.S2C):
            if _meth.direction in ("both", _d):
                _HOT_CONNECTION[_d][_meth.class_id, _meth.method_id] = (_meth, _validate, _sync)
        continue
    if _meth.note or (_meth.class_id <= 20 and _event is None):
        continue
    _coded = any(f.name == "reply_code" for f in _meth.layout.fields)
    for _d in (Direction.C2S, Direction.S2C):
        if _meth.direction in ("both", _d):
            if _event is not None:
                _HOT_CHANNEL[_d][_meth.class_id, _meth.method_id] = (_meth, _validate, _event, _sync)
            else:
                _HOT_METHODS[_d][_meth.class_id, _meth.method_id] = (_meth, _validate, ACTIONS.get(_code, _no_action),
                                                                      _sync, _coded)
del _code, _validate, _meth, _d, _sync, _coded, _event
