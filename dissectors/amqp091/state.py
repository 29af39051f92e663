"""Per-channel state of one AMQP 0-9-1 connection: lifecycle, content sequencing, pending requests,
delivery tags and publisher confirms (spec §4.3, §7.3, §7.4)."""

from __future__ import annotations

from collections import deque

from analyzer.api import Direction, Frame
from dissectors.amqp091.methods import Method

# Channel lifecycle (spec §7.3).
NEW, OPENING, OPEN, CLOSING, CLOSED = range(5)
STATE_NAMES = ("never opened", "opening", "open", "closing", "closed")

# Content sequencing, kept per channel and per direction (spec §7.4).
EXPECT_METHOD, EXPECT_HEADER, EXPECT_BODY = range(3)

#: How many bytes of one message body are kept for display; every byte is still counted.
BODY_KEEP = 64 * 1024
#: Above this many outstanding delivery tags / publishes on a channel, stop tracking (memory bound).
TRACK_LIMIT = 1_000_000


class Content:
    """One direction of one channel: where it is in method -> header -> body*."""

    __slots__ = ("expect", "method", "frame", "body_size", "received", "kept", "frames", "content_type")

    def __init__(self) -> None:
        self.expect = EXPECT_METHOD
        self.method: Method | None = None
        self.frame: Frame | None = None
        self.body_size = 0
        self.received = 0
        self.kept = bytearray()
        self.frames = 0
        self.content_type = ""

    def start(self, method: Method, frame: Frame) -> None:
        self.expect = EXPECT_HEADER
        self.method = method
        self.frame = frame
        self.body_size = 0
        self.received = 0
        if self.kept:
            self.kept = bytearray()
        self.frames = 0
        self.content_type = ""

    def reset(self) -> None:
        self.expect = EXPECT_METHOD
        self.method = None
        self.frame = None
        if self.kept:
            self.kept = bytearray()


class Channel:
    __slots__ = ("number", "state", "closer", "content", "pending", "confirm", "tx", "publish_seq", "unconfirmed",
                 "unacked", "noack_consumers", "noack_pending", "tag_floor", "opened_by")

    def __init__(self, number: int, state: int = NEW) -> None:
        self.number = number
        self.state = state
        self.closer: set[Direction] = set()
        self.content = {Direction.C2S: Content(), Direction.S2C: Content()}
        # Synchronous requests sent by each direction, waiting for the peer's reply.
        self.pending: dict[Direction, deque[tuple[Method, Frame]]] = {Direction.C2S: deque(),
                                                                      Direction.S2C: deque()}
        self.confirm = False
        self.tx = False
        self.publish_seq = 0
        self.unconfirmed: dict[int, Frame] = {}
        self.unacked: set[int] = set()
        self.noack_consumers: set[str] = set()
        # no-ack flags of consume/get requests waiting for consume-ok/get-ok.
        self.noack_pending: dict[str, deque[bool]] = {"consume": deque(), "get": deque()}
        # Midstream: tags at or below this were delivered before the capture started.
        self.tag_floor = -1
        self.opened_by: Frame | None = None
