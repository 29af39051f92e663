"""Message data (RFC 006 §3.4): fragments after HANDLE SEND, NOTIFY and PREPARE, reassembled per channel.

A message is its head (body-size, persistent, priority, expiration, MIME type, encoding,
identifier, headers: no length indicator precedes it) and its body, cut into fragments. Each
fragment follows its command on the stream, fragment-size octets long, and the command's partial
flag says whether more follow. Fragments of one message come one after the other on their channel;
messages on distinct channels may interleave.

The message record (what, expected octets, received octets, the first command's frame) is the kit's
:class:`Sequencer` entry, keyed by ``"channel N"``; ``expected`` is unknown (``UNKNOWN``) until the
head is decoded, and for streamed messages. Beside it, per key, what the frames show. Memory is
bounded: the head is decoded from at most ``HEAD_LIMIT`` buffered octets, and of the body only the
first ``BODY_KEEP`` octets are kept; a fragment is handed over in pieces as they arrive and only its
first ``FRAGMENT_KEEP`` octets are kept for display.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from functools import cache
from typing import Any, Final, Literal, overload

from analyzer.api import Direction, Field, Finding, Frame
from analyzer.bytevalue import printable
from analyzer.jsonout import leaves_json
from analyzer.jsonout import plain as json_plain
from dissectors.amqp_fast import rules as R
from dissectors.amqp_fast.commands import head_layout
from dissectors.amqp_fast.decode import message_head, message_head_values
from dissectors.amqp_fast.wire import Date, Encoding
from dissectors.kit.lazy import QUICK_INFO, QUICK_JSON, LazyField, LazyFrame, add_field, add_info
from dissectors.kit.sequence import Sequencer
from dissectors.kit.state import plain_state
from dissectors.schema import leaves_only

UNKNOWN: Final = 1 << 62
HEAD_LIMIT: Final = (1 << 16) + 1024  # the largest head with 2-octet tables is about 66 KB
BODY_KEEP: Final = 1024
FRAGMENT_KEEP: Final = 4096
FRAGMENT: Final = "MESSAGE FRAGMENT"

# meta[key] = [handle, message-nbr or None, head octets (-1: not yet decoded, -2: never: out of band),
#              head octets buffered so far, body prefix kept, fragments, streaming, octets beyond expected,
#              head display (body-size, mime type) or None, octets of its fragments so far]
_HANDLE: Final = 0
_NBR: Final = 1
_HEADLEN: Final = 2
_HEADBUF: Final = 3
_BODY: Final = 4
_FRAGS: Final = 5
_STREAM: Final = 6
_OVER: Final = 7
_HEAD: Final = 8
_TOTAL: Final = 9
#: Octets kept of a fragment's end, to find a command that starts inside a fragment shorter than
#: its fragment-size.
TAIL_KEEP: Final = 4096


class Messages:
    """One direction's messages in flight, per channel, and the fragment being received."""

    __slots__ = ("seq", "meta", "frag")

    def __init__(self) -> None:
        self.seq = Sequencer()
        self.meta: dict[str, list] = {}
        #: The fragment whose octets are arriving: [key, stream offset, size, received, kept, partial,
        #: [whether the head lies in it from its first octet, the head's octets] (or None), first fragment of its message, findings for its frame as plain
        #: [rule id, message, field] lists (the state stays plain data until the frame is made),
        #: its last octets (at most TAIL_KEEP), octets of it a capture gap lost]. Its octets are
        #: counted into the message when it is finished, once the stream after it showed whether it
        #: really was fragment-size long.
        self.frag: list | None = None

    def idle(self) -> bool:
        return not self.meta and self.frag is None

    def open_on(self, key: str) -> list | None:
        return self.meta.get(key)

    # ------------------------------------------------------------------ a message-carrying command
    def continued(self, name: str, key: str, handle: int, nbr: int | None) -> bool:
        """Whether HANDLE SEND or NOTIFY ``name`` of ``handle`` (message ``nbr``) announces the
        next fragment of the message in flight on ``key``; if so, it is counted. Then it notes
        nothing and is not anchored (a finding about the message names the command that started
        it): a findings-only run may leave it out. Else nothing changes (see :meth:`command`)."""
        meta = self.meta.get(key)
        if (meta is not None and name != "HANDLE PREPARE" and meta[_HANDLE] == handle
                and (nbr is None or meta[_NBR] is None or meta[_NBR] == nbr)):
            meta[_FRAGS] += 1
            return True
        return False

    def command(self, name: str, key: str, handle: int, nbr: int | None, values: dict[str, Any],
                frame: Frame) -> bool:
        """HANDLE SEND, NOTIFY or PREPARE (its ``frame``): a fragment of the message on ``key`` is
        announced. Returns whether it starts a message (False: it continues the one in flight,
        see :meth:`continued`); one that starts it is anchored (see :meth:`start`)."""
        if self.continued(name, key, handle, nbr):
            return False
        self.start(name, key, handle, nbr, values, frame)
        return True

    def start(self, name: str, key: str, handle: int, nbr: int | None, values: dict[str, Any],
              frame: Frame) -> None:
        """:meth:`command` for one that does not continue the message in flight (:meth:`continued`
        said no): it starts a message, anchored on ``frame``, and notes on it what is wrong."""
        findings = frame.findings
        meta = self.meta.get(key)
        if meta is not None:  # another message still has fragments due here
            entry = self.seq.cancel(key)
            got = entry[2] if entry is not None else "all"
            whose = f"handle {meta[_HANDLE]}" + (f" message {meta[_NBR]}" if meta[_NBR] is not None else "")
            findings.append(R.INTERLEAVED(f"{name} (handle {handle}{'' if nbr is None else f' message {nbr}'}) "
                                          f"on {key} while the message of {whose} still has fragments due "
                                          f"({got} octets received)", command=name))
            del self.meta[key]
        streaming = bool(values.get("streaming"))
        if streaming and (values.get("recovery") or not values.get("partial")):
            findings.append(R.STREAMING(f"{name} starts a stream with "
                                        + ("recovery set" if values.get("recovery") else "partial clear"),
                                        command=name))
        self.seq.start(key, f"{name} message", UNKNOWN, frame.anchor())
        self.meta[key] = [handle, nbr, -1, b"", b"", 1, streaming, 0, None, 0]

    def out_of_band(self, key: str, size: int, partial: bool, frame: Frame) -> None:
        """A fragment that travels out of band: counted, never on this stream."""
        meta = self.meta[key]
        if meta[_HEADLEN] == -1 and meta[_FRAGS] == 1:
            meta[_HEADLEN] = -2
        self._count(key, meta, size)
        if not partial:
            self._summarise(frame, *self._finish(key, frame.findings))

    def begin(self, key: str, offset: int, size: int, partial: bool) -> None:
        first = self.meta[key][_FRAGS] == 1
        self.frag = [key, offset, size, 0, b"", partial, None, first, [], b"", 0]

    # ------------------------------------------------------------------ the fragment's octets
    def data(self, chunk: bytes, enc: Encoding) -> None:
        frag = self.frag
        assert frag is not None
        noted = frag[8]
        key = frag[0]
        at = frag[3]
        frag[3] = at + len(chunk)
        if len(frag[4]) < FRAGMENT_KEEP:
            frag[4] += chunk[:FRAGMENT_KEEP - len(frag[4])]
        frag[9] = (frag[9] + chunk)[-TAIL_KEEP:]
        meta = self.meta.get(key)
        if meta is None:
            return
        body = chunk
        if meta[_HEADLEN] == -1:
            room = HEAD_LIMIT - len(meta[_HEADBUF])
            meta[_HEADBUF] += chunk[:room]
            head = message_head_values(meta[_HEADBUF], enc)
            if head is None:
                if len(meta[_HEADBUF]) >= HEAD_LIMIT:
                    meta[_HEADLEN] = -2
                    meta[_HEADBUF] = b""
                    noted.append([R.MESSAGE_SIZE.id, f"the message head on {key} does not end within "
                                                     f"{HEAD_LIMIT} octets", None])
                return
            values, used = head
            buffered = meta[_HEADBUF]
            meta[_HEADLEN] = used
            meta[_HEADBUF] = b""
            body_size = values["body_size"]
            # Head fields sit at their place in this fragment when the head began in it. The head's
            # octets are kept: its fields are made from them when a view shows the frame.
            start_here = at - (len(buffered) - len(chunk))
            frag[6] = [start_here == 0 and frag[7], bytes(buffered[:used])]
            meta[_HEAD] = [body_size, values.get("mime_type") or ""]
            entry = self.seq.expecting(key)
            if entry is not None and not meta[_STREAM]:
                entry[1] = used + body_size
            if meta[_STREAM] and body_size:
                noted.append([R.STREAMING.id, f"a streamed message on {key} announces body-size {body_size} "
                                              f"(must be 0)", "body_size"])
            if values.get("priority", 0) > 9:
                noted.append([R.PRIORITY.id, f"message priority {values['priority']} (0-9)", "priority"])
            body = buffered[used:]
        if body and len(meta[_BODY]) < BODY_KEEP:
            meta[_BODY] += body[:BODY_KEEP - len(meta[_BODY])]

    def _count(self, key: str, meta: list, n: int) -> None:
        meta[_TOTAL] += n
        entry, _done = self.seq.add(key, n)
        if entry is None:
            meta[_OVER] += n  # beyond the size the head announced

    def lost(self, n: int) -> None:
        """A capture gap of ``n`` octets inside the fragment's data."""
        frag = self.frag
        if frag is not None:
            frag[3] += n
            frag[10] += n

    def tail(self) -> bytes:
        return self.frag[9] if self.frag is not None else b""

    @overload
    def finish_fragment(self, d: Direction, enc: Encoding, short: int = 0, extra: bytes = b"",
                        lean: Literal[False] = False) -> Frame: ...

    @overload
    def finish_fragment(self, d: Direction, enc: Encoding, short: int = 0, extra: bytes = b"",
                        lean: bool = False) -> Frame | None: ...

    def finish_fragment(self, d: Direction, enc: Encoding, short: int = 0, extra: bytes = b"",
                        lean: bool = False) -> Frame | None:
        """The fragment's octets are all here: its frame (and the message's, when it was the last).
        ``short``: the fragment really ended that many octets before its fragment-size (a command
        starts there); ``extra``: octets that are no command followed it, and belong to it.
        ``lean`` (a findings-only run): None instead of a frame without findings, which nothing
        points at; the state moves on alike."""
        frag = self.frag
        assert frag is not None
        if extra:
            self.data(extra, enc)
        self.frag = None
        key, offset, size, _received, kept, partial, head, _first, noted, _tail, lost = frag
        announced = size
        size = size - short + len(extra)
        kept = kept[:size]
        meta = self.meta.get(key)
        if meta is not None:
            if short and meta[_HEADLEN] >= 0:
                # The octets of the next command are no body: forget those kept.
                body_len = meta[_TOTAL] + announced - meta[_HEADLEN] - short
                meta[_BODY] = meta[_BODY][:max(body_len, 0)]
            self._count(key, meta, size)
        handle = (meta[_HANDLE],) if meta is not None else None
        shown = tuple(meta[_HEAD]) if meta is not None and head is not None and meta[_HEAD] is not None else None
        findings = [_BY_ID[rid](text, command=FRAGMENT, field=field) for rid, text, field in noted] if noted else []
        if short:
            findings.append(R.FRAGMENT_SHORT(f"fragment-size is {announced} but a command starts after {size} "
                                             f"octets", command=FRAGMENT))
        if extra:
            findings.append(R.FRAGMENT_LONG(f"fragment-size is {announced} but {len(extra)} more octets that "
                                            f"are no command follow before the next command", command=FRAGMENT))
        done = self._finish(key, findings) if meta is not None and not partial else None
        if lean and not findings:
            return None
        # The tree and Info line are made when a view asks: from these values, as they are now.
        frame = LazyFrame(d, offset, size, FRAGMENT, None, findings, kept, _fragment_tree,
                          (key, size, None if head is None else (head[0], head[1], enc), handle, shown, lost))
        if done is not None:
            self._summarise(frame, *done)
        return frame

    def _finish(self, key: str, findings: list[Finding]) -> tuple[list, int, int]:
        """The final fragment of the message on ``key`` (partial clear): what is wrong with the
        message's size into ``findings``; its record, the octets received and the head's length
        for :meth:`_summarise`."""
        meta = self.meta.pop(key)
        entry = self.seq.cancel(key)
        headlen = meta[_HEADLEN]
        if entry is not None:
            expected, received = entry[1], entry[2]
        else:  # the whole size arrived (the Sequencer closed it), maybe more
            expected = received = (headlen + meta[_HEAD][0]) if meta[_HEAD] is not None else 0
        received += meta[_OVER]
        if headlen == -1:
            findings.append(R.MESSAGE_SIZE(f"the message on {key} ends after {received} octets, inside its head",
                                           command=FRAGMENT))
        elif headlen >= 0 and not meta[_STREAM] and received != expected:
            body_size = meta[_HEAD][0]
            findings.append(R.MESSAGE_SIZE(f"the message on {key} carries {received - headlen} body octets, its "
                                           f"head announced body-size {body_size}", command=FRAGMENT))
        return meta, received, headlen

    @staticmethod
    def _summarise(frame: Frame, meta: list, received: int, headlen: int) -> None:
        """The message's summary node and Info on the frame of its final fragment."""
        body = meta[_BODY]
        # The message's summary node, its leaves made when a view reads them (a findings-only run
        # never does), its JSON from the same values.
        leaves = [("handle_id", meta[_HANDLE])]
        if meta[_NBR] is not None:
            leaves.append(("message_nbr", meta[_NBR]))
        leaves += [("size", received), ("fragments", meta[_FRAGS]), ("body", body),
                   ("body_truncated", headlen >= 0 and received - headlen > len(body))]
        add_field(frame, LazyField("message", None, -1, 0, lambda: [Field(n, v) for n, v in leaves], False,
                                   json=lambda: leaves_json(leaves, {})))
        shown = _preview(body)
        add_info(frame, f" [message {received} octets in {meta[_FRAGS]} fragment{'s' * (meta[_FRAGS] != 1)}"
                 + (f": {shown}]" if shown else "]"))

    # ------------------------------------------------------------------ elsewhere on the conversation
    def ready(self, key: str, handle: int, message_size: int) -> None:
        """HANDLE READY from the peer: the prepared message on ``key`` continues after the head and
        the ``message_size`` body octets the peer already holds."""
        meta = self.meta.get(key)
        entry = self.seq.expecting(key)
        if meta is None or entry is None or meta[_HANDLE] != handle or meta[_HEADLEN] < 0:
            return
        entry[2] = meta[_HEADLEN] + message_size

    def drop(self, key: str, handle: int | None = None) -> None:
        """A channel (or, with ``handle``, a handle) closed: its message in flight is gone."""
        meta = self.meta.get(key)
        if meta is not None and (handle is None or meta[_HANDLE] == handle):
            del self.meta[key]
            self.seq.cancel(key)

    def clear(self) -> None:
        """A capture gap: whatever was half-received is lost with the hole."""
        self.meta.clear()
        self.seq.open.clear()
        self.frag = None

    def incomplete(self) -> list[Finding]:
        out = []
        for key, meta in self.meta.items():
            if meta[_STREAM]:
                continue  # a stream ends when its handle or channel does
            entry = self.seq.expecting(key)
            got = entry[2] if entry is not None else "all"
            of = f" of {entry[1]}" if entry is not None and entry[1] != UNKNOWN else ""
            ref = entry[3] if entry is not None else None
            out.append(R.MESSAGE_INCOMPLETE(f"the message of handle {meta[_HANDLE]} on {key} ended after {got}{of} "
                                            f"octets in {meta[_FRAGS]} fragments, without its final fragment",
                                            related=ref, command=FRAGMENT))
        return out


_BY_ID = {r.id: r for r in R.ALL_RULES}

#: A fragment frame's tree and Info line: (key, octets, the head when it lies in this fragment
#: (whether from its first octet, its octets, the encoding) or None, (handle,) or None,
#: (body-size, MIME type) from the head or None, octets lost in capture gaps).
FragmentView = tuple[str, int, tuple[bool, bytes, Encoding] | None, tuple[int] | None, tuple[int, str] | None, int]


def _fragment_tree(frame: LazyFrame, ctx: FragmentView) -> tuple[list[Field], str]:
    _key, size, head, _handle, _shown, _lost = ctx
    kept = frame.data
    assert kept is not None
    fields: list[Field] = [Field("fragment", kept, 0, size,
                                 f"the first {len(kept)} of {size} octets" if len(kept) < size else None)]
    if head is not None:
        in_place, octets, enc = head
        decoded = message_head(octets, enc)
        assert decoded is not None  # these octets were a whole head when the fragment was checked
        children = decoded[0]
        if in_place:
            # A fragment that ended short (a command began inside it) may cut its head: the
            # fields past its end keep their values but have no place in this frame.
            for c in children:
                if c.offset + c.size > size:
                    c.offset, c.size = -1, 0
            size_ = sum(c.size for c in children)
            in_place = size_ > 0
        else:  # the head began in an earlier fragment: no place in this one
            for c in children:
                c.offset, c.size = -1, 0
            size_ = 0
        fields.append(Field("head", None, 0 if in_place else -1, size_, None, children))
    return fields, _fragment_info(frame, ctx)


def _fragment_info(frame: LazyFrame, ctx: FragmentView) -> str:
    key, size, _head, handle, shown, lost = ctx
    info = f"{FRAGMENT} {key}{'' if handle is None else f' handle={handle[0]}'} size={size}"
    if shown is not None:
        info += f" body-size={shown[0]}" + (f" type='{shown[1]}'" if shown[1] else "")
    if lost:
        info += f" ({lost} octets lost)"
    return info


QUICK_INFO[_fragment_tree] = _fragment_info


def _fragment_json(frame: LazyFrame, ctx: FragmentView) -> dict[str, Any] | None:
    """What fields_json makes of _fragment_tree's fields: the fragment's octets, and a message
    head's values when it lies in this fragment (its tree's JSON, whose fields are leaves)."""
    out = {"fragment": json_plain(frame.data, "fragment")}
    head = ctx[2]
    if head is not None:
        _in_place, octets, enc = head
        got = message_head_values(octets, enc) if _head_leaves(enc) else None
        if got is None:
            return None
        out["head"] = leaves_json(got[0].items(), {})
    return out


@cache
def _head_leaves(enc: Encoding) -> bool:
    return leaves_only(head_layout(enc), leaf_types=(Date,))


QUICK_JSON[_fragment_tree] = _fragment_json


def _preview(body: bytes) -> str:
    if not body:
        return ""
    try:
        text = body[:40].decode("utf-8")
    except UnicodeDecodeError:
        return body[:16].hex(" ") + (" …" if len(body) > 16 else "")
    if not printable(text):
        return body[:16].hex(" ") + (" …" if len(body) > 16 else "")
    return repr(text) + (" …" if len(body) > 40 else "")


plain_state(Messages)  # not as a decorator: a decorated class is no native class for mypyc
