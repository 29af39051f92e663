"""Delivery and confirm tracking of one channel: delivery tags awaiting the client's ack, publishes
awaiting the broker's confirm, no-ack consumers (spec §1.8.3.13, RabbitMQ's publisher confirms).

Tags and publish sequence numbers are kept as ranges (:class:`Ranges`), so a channel with a
million unacknowledged deliveries in a row costs two integers, and ``basic.ack multiple=1`` is a
binary search plus the removal of whole ranges. A channel that never uses any of this has no
:class:`Tracking` at all.
"""

# streamproto: compiled (setup.py builds it with mypyc where it can; analyzer/native.py)

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from analyzer.api import Frame
from dissectors.amqp091 import methods as M
from dissectors.amqp091 import rules as R
from dissectors.amqp091.methods import Method
from dissectors.kit.lazy import add_computed
from dissectors.kit.state import plain_state

if TYPE_CHECKING:
    from dissectors.amqp091.connection import Amqp091Connection


class Ranges:
    """A set of integers as sorted disjoint half-open ranges, flat: ``[s0, e0, s1, e1, ...]``."""

    __slots__ = ("r", "count")

    def __init__(self) -> None:
        self.r: list[int] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __contains__(self, x: int) -> bool:
        return bisect_right(self.r, x) & 1 == 1

    def spans(self) -> int:
        return len(self.r) >> 1

    def first(self) -> int | None:
        return self.r[0] if self.r else None

    def add(self, x: int) -> None:
        r = self.r
        if r and x >= r[-1]:  # the common case: the next tag or sequence number
            if x == r[-1]:
                r[-1] = x + 1
            else:
                r += (x, x + 1)
            self.count += 1
            return
        i = bisect_right(r, x)
        if i & 1:
            return  # already in
        self.count += 1
        # Between ranges i-2..i-1 (before) and i..i+1 (after): merge with either or both.
        joins_before = i > 0 and r[i - 1] == x
        joins_after = i < len(r) and r[i] == x + 1
        if joins_before and joins_after:
            del r[i - 1:i + 1]
        elif joins_before:
            r[i - 1] = x + 1
        elif joins_after:
            r[i] = x
        else:
            r[i:i] = (x, x + 1)

    def discard(self, x: int) -> bool:
        r = self.r
        if r and r[0] == x:  # the common case: the oldest (acks and confirms come in order)
            if r[1] == x + 1:
                del r[:2]
            else:
                r[0] = x + 1
            self.count -= 1
            return True
        i = bisect_right(r, x)
        if not i & 1:
            return False
        s, e = r[i - 1], r[i]
        if s == x and e == x + 1:
            del r[i - 1:i + 1]
        elif s == x:
            r[i - 1] = x + 1
        elif e == x + 1:
            r[i] = x
        else:
            r[i:i] = (x, x + 1)
        self.count -= 1
        return True

    def pop_upto(self, x: int) -> list[tuple[int, int]]:
        """Remove every member <= ``x``; returns the removed ranges ``(start, stop)``."""
        r = self.r
        i = bisect_right(r, x)
        if i == 0:
            return []
        out = [(r[k], r[k + 1]) for k in range(0, i - (i & 1), 2)]
        if i & 1:  # x is inside the range starting at r[i-1]
            out.append((r[i - 1], x + 1))
            if r[i] == x + 1:
                del r[:i + 1]
            else:
                del r[:i - 1]
                r[0] = x + 1
        else:
            del r[:i]
        self.count -= sum(e - s for s, e in out)
        return out

    def clear(self) -> None:
        self.r = []
        self.count = 0

    def text(self, limit: int = 20) -> str:
        """``#1-3,#5`` (at most ``limit`` ranges, then ``…``)."""
        r = self.r
        parts = [f"#{r[k]}" if r[k + 1] == r[k] + 1 else f"#{r[k]}-{r[k + 1] - 1}" for k in range(0, min(len(r),
                                                                                                         2 * limit), 2)]
        return ",".join(parts) + (",…" if len(r) > 2 * limit else "")


plain_state(Ranges)  # not as a decorator: a decorated class is no native class for mypyc


def ranges_text(spans: list[tuple[int, int]]) -> str:
    if not spans:
        return "-"
    return ",".join(f"#{s}" if e == s + 1 else f"#{s}-{e - 1}" for s, e in spans)


def expand(spans: list[tuple[int, int]]) -> list[int]:
    return [x for s, e in spans for x in range(s, e)]


class Tracking:
    """What one channel's deliveries and publishes still owe. Created on the channel's first
    basic/confirm/tx method that needs it; dropped when the channel closes."""

    __slots__ = ("confirm", "tx", "publish_seq", "unconfirmed", "unacked", "noack_consumers", "noack_get",
                 "noack_consume", "tag_floor", "untracked")

    def __init__(self) -> None:
        self.confirm = False
        self.tx = False
        self.publish_seq = 0
        self.unconfirmed = Ranges()
        self.unacked = Ranges()
        self.noack_consumers: set[str] = set()
        # no-ack flags of basic.get / basic.consume requests waiting for get-ok|get-empty / consume-ok.
        self.noack_get: list[bool] = []
        self.noack_consume: list[bool] = []
        # Midstream: tags at or below this were delivered before the capture started.
        self.tag_floor = -1
        # Tables that reached their limit and are no longer followed: "unacked", "unconfirmed".
        self.untracked: set[str] = set()


plain_state(Tracking)


_DELIVER = M.BASIC_DELIVER


# ---------------------------------------------------------------------------------------------
# What each method does to the tracking (dispatched by ACTIONS, from the general and the hot
# path alike); each returns text for the Info line.

def publish(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tr = conn.tracks.get(ch) if conn.tracks else None
    if tr is None or not tr.confirm:
        return ""
    tr.publish_seq += 1
    seq = tr.publish_seq
    rs = tr.unconfirmed
    r = rs.r
    if r and r[-1] == seq:  # the common case, inline: the next publish in a row
        r[-1] = seq + 1
        rs.count += 1
    else:
        _add_bounded(conn, frame, tr, rs, seq, "unconfirmed", f"channel {ch}", "unconfirmed publishes; its confirms")
    add_computed(frame, "publish_seq", seq, "publisher-confirm sequence number")
    return f" seq={seq}"


def _add_bounded(conn: Amqp091Connection, frame: Frame, tr: Tracking, rs: Ranges, value: int, table: str,
                 where: str, what: str) -> None:
    """Off the in-row case: add ``value`` to the ``table`` ranges (``unconfirmed`` or ``unacked``)
    unless that table was given up; past the ranges limit, give it up with one finding."""
    if table in tr.untracked:
        return
    # Every publish after a clear comes this way (its ranges are empty): the next close-ok clears again.
    conn.unconfirmed_cleared = False
    if len(rs.r) >= 2 * conn.limits["ranges"] and value not in rs:
        conn.over_limit(frame, "ranges", f"{where}: more than {conn.limits['ranges']} ranges of {what} are no "
                                         f"longer checked")
        tr.untracked.add(table)
        rs.clear()
    else:
        rs.add(value)


def deliver(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tracks = conn.tracks
    tr = tracks.get(ch) if tracks else None
    if tr is None:
        tr = conn.track(ch)
    tag = values.get("delivery_tag")
    noack = False
    if meth.code == _DELIVER:
        noack = values.get("consumer_tag") in tr.noack_consumers
    elif tr.noack_get:
        noack = tr.noack_get.pop(0)
    if isinstance(tag, int):
        if tr.tag_floor < 0 and conn.midstream:
            tr.tag_floor = tag - 1
        rs = tr.unacked
        r = rs.r
        if noack:
            pass
        elif r and r[-1] == tag:  # the common case, inline: the next delivery in a row
            r[-1] = tag + 1
            rs.count += 1
        else:
            _add_bounded(conn, frame, tr, rs, tag, "unacked", f"channel {ch}", "unacknowledged delivery tags; its acks")
    return ""


def get(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    if values.get("no_ack") is not None:
        _push(conn, frame, ch, conn.track(ch).noack_get, bool(values.get("no_ack")))
    return ""


def consume(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tr = conn.track(ch)
    if values.get("no_ack"):
        ctag = values.get("consumer_tag") or ""
        if ctag:
            _add_consumer(conn, frame, ch, tr, ctag)
    if not values.get("nowait") and not values.get("consumer_tag"):
        _push(conn, frame, ch, tr.noack_consume, bool(values.get("no_ack")))
    return ""


def consume_ok(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tr = conn.tracks.get(ch) if conn.tracks else None
    if tr is not None and tr.noack_consume and tr.noack_consume.pop(0):
        _add_consumer(conn, frame, ch, tr, values.get("consumer_tag") or "")
    return ""


def _push(conn: Amqp091Connection, frame: Frame, ch: int, flags: list[bool], flag: bool) -> None:
    if len(flags) >= conn.limits["pending"]:
        conn.over_limit(frame, "pending", f"channel {ch}: more than {conn.limits['pending']} basic.get/consume "
                                   f"requests waiting for their reply; the oldest are forgotten")
        del flags[0]
    flags.append(flag)


def _add_consumer(conn: Amqp091Connection, frame: Frame, ch: int, tr: Tracking, ctag: str) -> None:
    if len(tr.noack_consumers) >= conn.limits["consumers"] and ctag not in tr.noack_consumers:
        conn.over_limit(frame, "consumers", f"channel {ch}: more than {conn.limits['consumers']} no-ack consumers; "
                                     f"the others' deliveries are expected to be acked")
        return
    tr.noack_consumers.add(ctag)


def select_mode(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    """confirm.select and tx.select: a channel may be in one of the two modes, not both."""
    tr = conn.track(ch)
    tx = meth.code == M.TX_SELECT
    if tr.confirm if tx else tr.tx:
        now, before = ("tx.select", "in confirm mode (confirm.select)") if tx else \
            ("confirm.select", "transactional (tx.select)")
        frame.findings.append(R.TX_AND_CONFIRM(f"{now} on channel {ch}, which is {before}"))
    if tx:
        tr.tx = True
    else:
        tr.confirm = True
    return ""


def get_empty(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tr = conn.tracks.get(ch) if conn.tracks else None
    if tr is not None and tr.noack_get:  # the pending get's no-ack flag is used up
        tr.noack_get.pop(0)
    return ""


def settle(conn: Amqp091Connection, d: str, ch: int, meth: Method, values: dict[str, Any], frame: Frame) -> str:
    tag = values.get("delivery_tag")
    multiple = bool(values.get("multiple"))
    if not isinstance(tag, int):
        return ""
    tr = conn.tracks.get(ch) if conn.tracks else None
    if d == "c2s":
        if tr is None:
            tr = conn.track(ch)
        tracked = tr.unacked
        r = tracked.r
        if not multiple and r and r[0] == tag:  # Ranges.discard's common case, inline: the oldest tag
            if r[1] == tag + 1:
                del r[:2]
            else:
                r[0] = tag + 1
            tracked.count -= 1
            return ""
        if conn.midstream and (tr.tag_floor < 0 or tag <= tr.tag_floor):
            return ""  # deliveries before the capture started are unknown
        if "unacked" in tr.untracked:
            return " multiple" if multiple else ""
        if multiple:
            if tag == 0:
                tracked.clear()
                return " multiple"
            if not tracked.pop_upto(tag) and tag > tr.tag_floor:
                frame.findings.append(R.ACK_UNKNOWN_TAG(f"{meth.name} multiple up to delivery tag {tag} on "
                                                        f"channel {ch}: no unacknowledged delivery"))
            return " multiple"
        if not tracked.discard(tag):
            frame.findings.append(R.ACK_UNKNOWN_TAG(f"{meth.name} of delivery tag {tag} on channel {ch}, which "
                                                    f"is not an unacknowledged delivery"))
        return ""
    # Server to client: publisher confirms.
    if meth.code == M.BASIC_REJECT:
        return ""
    if tr is None or not tr.confirm:
        if not conn.midstream:
            frame.findings.append(R.CONFIRM_NOT_SELECTED(f"{meth.name} from the server on channel {ch}, which is "
                                                         f"not in confirm mode"))
        return ""
    if "unconfirmed" in tr.untracked:
        return ""
    pending = tr.unconfirmed
    if multiple:
        spans = pending.pop_upto(tag)
    elif pending.discard(tag):
        # The common case, one publish confirmed: what ranges_text and expand give for its span.
        add_computed(frame, "confirms", [tag], f"#{tag}")
        return f" confirms #{tag}"
    else:
        spans = []
    if not spans and tag > 0:
        if not conn.midstream:
            frame.findings.append(R.CONFIRM_UNKNOWN_TAG(f"{meth.name} confirms publish #{tag} on channel {ch}, "
                                                        f"which is not outstanding"))
        return ""
    text = ranges_text(spans)
    add_computed(frame, "confirms", expand(spans), text)
    return f" confirms {text}" + (" multiple" if multiple else "")


#: Method code -> what it does to the tracking, after the channel checks.
ACTIONS = {
    M.BASIC_PUBLISH: publish,
    M.BASIC_DELIVER: deliver,
    M.BASIC_GET_OK: deliver,
    M.BASIC_GET: get,
    M.BASIC_CONSUME: consume,
    M.BASIC_CONSUME_OK: consume_ok,
    M.BASIC_ACK: settle,
    M.BASIC_NACK: settle,
    M.BASIC_REJECT: settle,
    M.CONFIRM_SELECT: select_mode,
    M.TX_SELECT: select_mode,
    M.BASIC_GET_EMPTY: get_empty,
}
