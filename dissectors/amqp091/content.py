"""Content sequencing (spec §4.2.6): on each channel and direction, a content-bearing method is
followed by exactly one content header, then body frames until the header's body size is reached.

The header stage is kept here (``awaiting``); the body stage is the kit's :class:`Sequencer`, so
"a message stopped short" is the same mechanism as in every protocol. A channel with no message in
flight costs nothing, and a direction with none in flight on any channel has no
:class:`ContentSide` at all (the connection creates it on the first content-bearing method). The bytes kept for display (``kept``) are a bounded prefix of the body.
"""

from __future__ import annotations

from analyzer.api import Finding, FrameRef
from dissectors.amqp091 import rules as R
from dissectors.amqp091.decode import BODY_KEEP, complete
from dissectors.kit.lazy import LazyFrame
from dissectors.kit.sequence import Sequencer
from dissectors.kit.state import plain_state


@plain_state
class ContentSide:
    """One direction of every channel of a connection."""

    __slots__ = ("awaiting", "seq", "meta", "body")
    TRANSIENT = ("body",)

    def __init__(self) -> None:
        #: channel -> [method name, class id, method frame ref]: the content header is due.
        self.awaiting: dict[int, list] = {}
        #: channel -> the body stage (what = method name, expected = body size, received, method frame ref).
        self.seq = Sequencer()
        #: channel -> [content type, body frames so far, kept prefix of the body]; beside ``seq``.
        self.meta: dict[int, list] = {}
        self._rebuild()

    def _rebuild(self) -> None:
        #: The Sequencer's table itself (the hot path reads it directly: one attribute less).
        self.body: dict[int, list] = self.seq.open

    def idle(self, ch: int) -> bool:
        return ch not in self.awaiting and ch not in self.seq.open

    def empty(self) -> bool:
        """No message in flight on any channel: the connection may let this side go."""
        return not self.awaiting and not self.seq.open

    def on_method(self, ch: int, name: str, content: bool, class_id: int, ref: FrameRef | None,
                  findings: list[Finding]) -> None:
        """A method frame on ``ch``: it ends nothing that is due, and may begin a message."""
        due = self.awaiting.pop(ch, None)
        if due is not None:
            findings.append(R.CONTENT_HEADER_EXPECTED(f"{name} on channel {ch} where the content header of "
                                                      f"{due[0]} was due"))
        else:
            entry = self.seq.cancel(ch)
            if entry is not None:
                self.meta.pop(ch, None)
                findings.append(R.CONTENT_INTERLEAVED(f"{name} on channel {ch} while {entry[1] - entry[2]} body "
                                                      f"bytes of {entry[0]} are still due"))
        if content:
            self.awaiting[ch] = [name, class_id, ref]

    def on_header(self, ch: int, frame: LazyFrame, head: tuple[int, int, int, str, list[str]] | None,
                  findings: list[Finding]) -> None:
        due = self.awaiting.pop(ch, None)
        if due is not None:
            if head is None:  # too short to say anything: the message is abandoned
                return
            class_id, weight, body_size, content_type, problems = head
            name, want_class, ref = due
            if class_id != want_class or weight or problems:
                bad = []
                if class_id != want_class:
                    bad.append(f"class {class_id} but {name} is class {want_class}")
                if weight:
                    bad.append(f"weight {weight} (must be 0)")
                findings.append(R.CONTENT_HEADER_BAD("; ".join(bad + problems)))
            if body_size == 0:
                complete(frame, name, 0, 0, b"", content_type)
            else:
                self.seq.start(ch, name, body_size, ref)
                self.meta[ch] = [content_type, 0, b""]
            return
        entry = self.seq.cancel(ch)
        if entry is not None:
            self.meta.pop(ch, None)
            findings.append(R.CONTENT_INTERLEAVED(f"content header on channel {ch} while {entry[1] - entry[2]} body "
                                                  f"bytes of the previous message are still due"))
        else:
            findings.append(R.CONTENT_UNEXPECTED(f"content header on channel {ch} without a content-bearing method"))

    def on_body(self, ch: int, frame: LazyFrame, data: bytes, size: int, findings: list[Finding]) -> None:
        due = self.awaiting.pop(ch, None)
        if due is not None:
            findings.append(R.CONTENT_HEADER_EXPECTED(f"body frame on channel {ch} before the content header of "
                                                      f"{due[0]}"))
            return
        if ch not in self.seq.open:
            findings.append(R.CONTENT_UNEXPECTED(f"body frame on channel {ch} without a content-bearing method "
                                                 f"and header"))
            return
        self.add_body(ch, frame, data, size, findings)

    def add_body(self, ch: int, frame: LazyFrame | None, data: bytes, size: int, findings: list[Finding]) -> None:
        """Count a body frame into the message on ``ch`` (whose body is due); complete it when whole.
        ``frame`` None: a frame the hot path left out (its bytes still kept, for a later frame that
        completes the message and is shown)."""
        meta = self.meta[ch]
        entry, done = self.seq.add(ch, size)
        assert entry is not None
        frames = meta[1] = meta[1] + 1
        kept = meta[2]
        if done and frames == 1:
            # The whole message in one frame (the common case): no accumulation, and nothing kept
            # when nobody will show it.
            kept = data[7:7 + min(size, BODY_KEEP)] if frame is not None else b""
        elif len(kept) < BODY_KEEP:
            kept = meta[2] = kept + data[7:7 + min(size, BODY_KEEP - len(kept))]
        if done:
            del self.meta[ch]
            received, expected = entry[2], entry[1]
            if received > expected:
                findings.append(R.CONTENT_BODY_SIZE(f"body frames carry {received} bytes, the header announced "
                                                    f"{expected}"))
            if frame is not None:
                complete(frame, entry[0], received, frames, bytes(kept), meta[0])

    def drop(self, ch: int) -> None:
        """The channel was closed or reopened: whatever was due on it is gone."""
        self.awaiting.pop(ch, None)
        self.seq.cancel(ch)
        self.meta.pop(ch, None)

    def clear(self) -> None:
        """A capture gap: whatever was half-received on any channel is lost with the hole."""
        self.awaiting.clear()
        self.seq.open.clear()
        self.meta.clear()

    def incomplete(self) -> list[Finding]:
        out = [R.CONTENT_INCOMPLETE(f"{name} on channel {ch}: the content header never arrived", related=ref,
                                    command=name)
               for ch, (name, _cls, ref) in self.awaiting.items()]
        return out + self.seq.incomplete(R.CONTENT_INCOMPLETE)
