"""The hot path: commands and message data cut straight from a segment.

Nearly every segment of a busy connection starts on a command boundary with nothing buffered on
its side: commands (HANDLE SEND / NOTIFY, CHANNEL ACK) each followed by its fragment's octets.
``cut_segment`` cuts them from the segment itself, as the kit's framer with :meth:`Side.measure`
would, without copying the segment into the queue, a generator per piece or a copy per piece of
message data it passes on whole; each piece then goes where the general path sends it
(:meth:`AmqpFastConnection._command`, :meth:`Messages.data`, :meth:`Messages.finish_fragment`).
It stops at the first thing it would have to wait for or doubt (a partial command, a long size,
an unknown type, the octets after a fragment that are not a whole well-formed command) and
leaves the rest of the segment to the framer, which then sees exactly what it would have seen.
tests/test_amqp_fast_hot.py proves both ways give the same (``AmqpFastConnection(hot=False)``).
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from analyzer.api import Direction, Event, Frame
from dissectors.amqp_fast.commands import BY_CODE, BY_NAME, COMMAND_END, LONG_SIZE, Command, layout
from dissectors.amqp_fast.decode import nul_fields, values_frame
from dissectors.amqp_fast.framing import Side
from dissectors.amqp_fast.machines import CHANNEL, CHANNEL_MACHINE, COMMAND, CONNECTION, HANDLE_MACHINE
from dissectors.amqp_fast.messages import Messages
from dissectors.amqp_fast.wire import Encoding
from dissectors.kit.memo import remember
from dissectors.schema import DecodeError

if TYPE_CHECKING:
    from dissectors.amqp_fast.connection import AmqpFastConnection


def direct(side: Side) -> bool:
    """Whether ``side`` may cut straight from the next segment: nothing buffered, in sync, no junk
    run waiting for its finding, past the initiation, and no doubt about a fragment's end."""
    return (not len(side.queue) and side.queue.synced and side.junk_at < 0 and not side.initiation
            and (side.after == "" or side.after == "check"))


def cut_segment(conn: AmqpFastConnection, d: Direction, side: Side, msgs: Messages, data: bytes,
                out: list[Event]) -> int:
    """Cut whole pieces from ``data`` into ``out`` (as ``feed``'s loop would); returns how many
    octets were used. Only when ``direct(side)``; the caller moves the queue past them."""
    n = len(data)
    pos = 0
    base = side.queue.offset
    enc = conn.enc
    general = conn._command
    # A findings-only run: a frame without findings that nothing points at is counted, not given.
    lean = conn.leave_out
    while pos < n:
        due = side.due
        if due:
            take = due if due <= n - pos else n - pos
            chunk = data[pos:pos + take] if take != n else data
            side.due = due - take
            msgs.data(chunk, enc)
            pos += take
            if due == take:
                side.after, side.tail = "check", msgs.tail()
            continue
        # A command: the 2-octet size form (never above the framer's cap, at least DEFAULT_CAP),
        # whole in this segment, of a known type.
        if n - pos < 3:
            break
        size = data[pos] << 8 | data[pos + 1]
        stop = pos + 2 + size
        if size < 2 or size == LONG_SIZE or stop > n or data[pos + 2] not in BY_CODE:
            break
        if side.after:  # "check": the octets after a fragment
            if data[stop - 1] != COMMAND_END:
                break  # the framer doubts the fragment's end
            side.after, side.tail = "", b""
            fragment = msgs.finish_fragment(d, enc, lean=lean)
            if fragment is None:
                conn.frames_left_out += 1
            else:
                out.append(fragment)
        piece = data[pos:stop]
        frame = _hot_command(conn, d, side, msgs, piece, base + pos)
        if frame is None:
            out.append(general(d, piece, base + pos))
        elif frame is LEFT_OUT:
            conn.frames_left_out += 1
        else:
            out.append(frame)
        pos = stop
    if pos:
        side.seen_frame = True
        side.after_gap = False
    return pos


#: The commands taken here when nothing about them can be wrong: those that carry message data
#: and the acknowledgement, none with a size limit of its own.
_HOT: Final = {c.code: c for c in (BY_NAME["HANDLE SEND"], BY_NAME["HANDLE NOTIFY"], BY_NAME["CHANNEL ACK"]) if not c.limit}
_ACK: Final = BY_NAME["CHANNEL ACK"].code
_NOTIFY: Final = BY_NAME["HANDLE NOTIFY"].code
#: (state, sender, event) the machines take without a word or a change: what is checked instead of
#: stepping them (the connection's "channel" event, a handle's command, its channel's "command").
_QUIET_CONNECTION: Final = CONNECTION.quiet_loops()
_QUIET_HANDLE: Final = HANDLE_MACHINE.quiet_loops()
_QUIET_CHANNEL: Final = CHANNEL_MACHINE.quiet_loops()


#: (encoding, command bytes) -> the values of a hot command that reads whole and clean (see
#: _clean_values): a sender's HANDLE SEND repeats fragment after fragment, a HANDLE NOTIFY for
#: every fragment of its message. Never changed once made (the frames share them). Bounded.
_VALUES_SEEN: dict[tuple[Encoding, bytes], dict[str, Any]] = {}
_VALUES_SEEN_MAX = 512
_VALUES_KEY_MAX: Final = 64


#: (encoding, command code, its octets after its leading integers up to its end) -> the values of
#: a hot command read whole and clean, whose integers (Struct.leading_ints: handle, message number
#: or confirm tag, fragment size) are put in afresh: a HANDLE NOTIFY differs from the last
#: message's in its message number, a HANDLE SEND from another message's in its fragment size.
#: Never changed once made. Bounded, as _VALUES_SEEN.
_REST_SEEN: dict[tuple[Encoding, int, bytes], dict[str, Any]] = {}
_REST_SEEN_MAX = 512
_REST_KEY_MAX: Final = 256
#: (command code, encoding) -> its leading integers' names and struct, or None (see _lead).
_LEADS: Final[dict[tuple[int, Encoding], tuple[tuple[str, ...], Any] | None]] = {}


def _lead(code: int, enc: Encoding) -> tuple[tuple[str, ...], Any] | None:
    """The leading integers of command ``code``'s layout (Struct.leading_ints); None when a field
    may be absent (where the octets end would then decide what is read)."""
    key = (code, enc)
    if key not in _LEADS:
        fields = layout(code, enc)
        _LEADS[key] = None if any(f.optional for f in fields.fields) else fields.leading_ints()
    return _LEADS[key]


def _clean_values(cmd: Command, enc: Encoding, data: bytes, end: int) -> dict[str, Any] | None:
    """The values of hot command ``data`` when they fill it up to its command-end octet at
    ``end``, no short string holds a zero octet and it asks for no confirmation; else None."""
    key = (enc, data)
    values = _VALUES_SEEN.get(key)
    if values is not None:
        return values
    lead = _lead(cmd.code, enc)
    rest_key: tuple[Encoding, int, bytes] | None = None
    if lead is not None and 3 + lead[1].size <= end and end - 3 - lead[1].size <= _REST_KEY_MAX:
        # The octets after the integers read to the same values and end whatever the integers are.
        names, ints = lead
        rest_key = (enc, cmd.code, data[3 + ints.size:end])
        rest = _REST_SEEN.get(rest_key)
        if rest is not None:
            values = rest.copy()
            values.update(zip(names, ints.unpack_from(data, 3), strict=True))
            if values.get("confirm_tag"):
                return None
            if end < _VALUES_KEY_MAX:
                remember(_VALUES_SEEN, key, values, _VALUES_SEEN_MAX)
            return values
    try:
        values, used = layout(cmd.code, enc).read_values(data, 3, end)
    except DecodeError:
        return None
    if used != end or nul_fields(cmd.code, values) or values.get("confirm_tag"):
        return None
    if end < _VALUES_KEY_MAX:
        remember(_VALUES_SEEN, key, values, _VALUES_SEEN_MAX)
    if rest_key is not None:
        remember(_REST_SEEN, rest_key, values, _REST_SEEN_MAX)
    return values


#: What _hot_command gives for a command a findings-only run leaves out (nothing to show, nothing
#: points at it: an acknowledgement, a command that continues a message), having done the rest.
LEFT_OUT: Final[Any] = object()


def _hot_command(conn: AmqpFastConnection, d: Direction, side: Side, msgs: Messages, data: bytes,
                 offset: int) -> Frame | None:
    """HANDLE SEND or NOTIFY on an open handle of an open channel of an open connection, continuing
    the message in flight there or starting one, in band, unconfirmed, with fragment octets to
    come; or CHANNEL ACK, unconfirmed, on an open channel. None of _command's own checks can speak,
    so only what it does to the state is done (the frame; for a message, its command and fragment
    and the octets due); in a findings-only run LEFT_OUT instead of the frame of an
    acknowledgement or of a command that continues a message. None, having changed nothing, for
    anything else: the general path takes it. (The client's missing initiation is never in
    question here: a side cuts directly only after its first piece went through the framer, which
    settled it.)"""
    cmd = _HOT.get(data[2])
    if cmd is None or data[-1] != COMMAND_END:
        return None
    name = cmd.name
    end = len(data) - 1
    values = _clean_values(cmd, conn.enc, data, end)
    if values is None:
        return None
    fm = conn.frame_max
    if fm and end + 1 > fm:
        return None
    if (conn.hs, d, CHANNEL) not in _QUIET_CONNECTION:
        return None
    if cmd.code == _ACK:
        chan = conn.chans.get(values["channel_id"])
        if chan is None or (chan[0], d, name) not in _QUIET_CHANNEL:
            return None
        if conn.leave_out:
            return LEFT_OUT
        return values_frame(d, data, offset, conn.enc, cmd, values, [])
    size = values["fragment_size"]
    if not size or values["out_of_band"] or (fm and size > fm):
        return None
    h = values["handle_id"]
    rec = conn.handles.get(h)
    if rec is None or (rec[0], d, name) not in _QUIET_HANDLE:
        return None
    ch = rec[1]
    chan = conn.chans.get(ch) if ch is not None else None
    if chan is None or (chan[0], d, COMMAND) not in _QUIET_CHANNEL:
        return None
    nbr: Any = None
    if cmd.code == _NOTIFY:  # on a consuming or browsing handle, a delivered message
        if not rec[3] or not values["delivered"]:
            return None
        nbr = values["message_nbr"]
    key = f"channel {ch}"
    if msgs.continued(name, key, h, nbr):
        frame = LEFT_OUT if conn.leave_out else values_frame(d, data, offset, conn.enc, cmd, values, [])
    else:
        frame = values_frame(d, data, offset, conn.enc, cmd, values, [])
        # What the message sequencing notes (a message interleaved, a stream started wrong), it
        # notes on this frame here as on the general path (Messages.command).
        msgs.start(name, key, h, nbr, values, frame)
    msgs.begin(key, offset + end + 1, size, bool(values["partial"]))
    side.due = size
    return frame
