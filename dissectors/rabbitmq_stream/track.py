"""What each command does to a connection's state, as a table: ``(command, is_response)`` -> handler.

A handler gets the connection, the decoded frame, its top-level fields by name, the request it
answers (a Correlator entry ``[name, ref, ts, extra]``, or None), the dialect and the time. Response
codes, correlation and the handshake are judged before, for every command alike
(:meth:`StreamConnection._track`).

The connection's publisher and subscription tables are None while empty: a handler that adds the
first entry creates the table, and one that removes the last lets it go (see :func:`_drop`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analyzer.api import Field, Frame
from dissectors.kit.dialect import Dialect
from dissectors.kit.timers import Silence
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.dialects import PUBLISHER_IDS

if TYPE_CHECKING:
    from dissectors.rabbitmq_stream.connection import StreamConnection

Handler = Callable[["StreamConnection", Frame, dict[str, Field], "list[Any] | None", Dialect, float], None]

#: Publishing ids remembered per connection while waiting for confirms.
MAX_TRACKED = 1_000_000
#: One-way commands that carry a response code to judge (responses always do).
CODED = frozenset({("MetadataUpdate", False)})
#: What a request keeps for its response: the value of this field (the Correlator's ``extra``).
REMEMBER = {"DeclarePublisher": "publisher_id", "Subscribe": "subscription_id", "Unsubscribe": "subscription_id"}


def _value(values: dict[str, Field], name: str) -> Any:
    f = values.get(name)
    return f.value if f is not None else None


def _failed(values: dict[str, Field], dia: Dialect) -> bool:
    code = values.get("response_code")
    return code is not None and code.value != dia["ok"]


def _drop(c: StreamConnection, table: str, key: Any) -> None:
    """Remove ``key`` from the connection's set or dict ``table``, letting the table go (None) when
    that empties it: an idle connection holds no empty containers."""
    t = getattr(c, table)
    if t is None or key not in t:
        return
    if type(t) is set:
        t.discard(key)
    else:
        del t[key]
    if not t:
        setattr(c, table, None)


def server_tune(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                ts: float) -> None:
    fm, hb = _value(values, "frame_max"), _value(values, "heartbeat")
    if fm is not None and hb is not None:
        c.server_frame_max = fm
        # Its frame too: the heartbeat timer, created only once the client's Tune negotiates
        # heartbeats, counts the server's silence from the server's last frame, which this is.
        c.server_tune_ref = frame.anchor()


def client_tune(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                ts: float) -> None:
    cfm, hb = _value(values, "frame_max"), _value(values, "heartbeat")
    if cfm is None or hb is None:
        return
    sfm = c.server_frame_max
    c.frame_max = min(sfm, cfm) if sfm and cfm else (sfm or cfm)
    c.heartbeat = hb
    ref, c.server_tune_ref = c.server_tune_ref, None  # it has served its purpose
    silence = c.silence
    if silence is None:
        # A closed connection expects silence, and without heartbeats there is nothing to time.
        if c.closed or hb <= 0:
            return
        silence = c.silence = Silence()
        # The server's last frame so far (the client's is set once this segment is cut).
        silence.ref_s2c = ref
    silence.start(hb, ts)


def peer_properties_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any,
                             dia: Dialect, ts: float) -> None:
    props = values.get("properties")
    v = props.child("version") if props is not None else None
    if v is not None and isinstance(v.value, str):
        c.broker_version = v.value
        frame.info += f" broker={v.value}"


def close(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
          ts: float) -> None:
    code = _value(values, "closing_code")
    if code is not None and code != dia["ok"]:
        rule = R.ERROR_RESPONSE if code in dia["client_mistakes"] else R.REFUSED
        frame.findings.append(rule(f"Close with code {dia.code_name(code)} ({code:#04x})", command="Close",
                                   field="closing_code"))


def close_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                   ts: float) -> None:
    c.closed = True
    c.silence = None  # the conversation is closing: silence is expected (and is never timed again)


def declare_publisher(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                      ts: float) -> None:
    pid = _value(values, "publisher_id")
    if pid is not None:
        if c.publishers is None:
            c.publishers = {pid}
        else:
            c.publishers.add(pid)


def declare_publisher_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any,
                               dia: Dialect, ts: float) -> None:
    if request is not None and _failed(values, dia):
        _drop(c, "publishers", request[3])


def delete_publisher(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                     ts: float) -> None:
    pid = _value(values, "publisher_id")
    if pid is not None:
        _drop(c, "publishers", pid)


def publish(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
            ts: float) -> None:
    pid = _value(values, "publisher_id")
    pubs = c.publishers
    if dia.has(PUBLISHER_IDS) and pid is not None and (pubs is None or pid not in pubs) and not c.lossy:
        frame.findings.append(R.UNKNOWN_PUBLISHER(f"Publish for publisher {pid}, never declared on this connection",
                                                  command="Publish", field="publisher_id"))
    msgs = values.get("messages")
    if msgs is None or not msgs.children:
        return
    track_published(c, pid, [m.value for m in msgs.children])


def track_published(c: StreamConnection, pid: Any, published: list[Any]) -> None:
    """Publisher ``pid`` published these publishing ids: each awaits a confirm (at most MAX_TRACKED)."""
    unconfirmed = c.unconfirmed
    ids = unconfirmed.get(pid) if unconfirmed is not None else None
    for value in published:
        if c.tracked >= MAX_TRACKED:
            break
        if value is not None and (ids is None or value not in ids):
            if ids is None:  # the publisher's first id awaiting a confirm
                if unconfirmed is None:
                    unconfirmed = c.unconfirmed = {}
                ids = unconfirmed[pid] = set()
            ids.add(value)
            c.tracked += 1


def settle_ids(c: StreamConnection, pid: Any, got: list[int]) -> list[int]:
    """Publisher ``pid``'s ids ``got`` are settled (confirmed or failed); gives back those that
    were not awaiting it (the connection's hot path takes a PublishConfirm only when there are none)."""
    unconfirmed = c.unconfirmed
    ids = unconfirmed.get(pid) if unconfirmed is not None else None
    unknown = []
    for i in got:
        if ids is not None and i in ids:
            ids.discard(i)
            c.tracked -= 1
        else:
            unknown.append(i)
    if ids is not None and not ids:  # all of the publisher's ids are settled
        _drop(c, "unconfirmed", pid)
    return unknown


def _settle(c: StreamConnection, frame: Frame, pid: Any, got: list[int]) -> None:
    unknown = settle_ids(c, pid, got)
    if unknown and not c.lossy and c.tracked < MAX_TRACKED:
        shown = ", ".join(map(str, unknown[:5])) + (" …" if len(unknown) > 5 else "")
        frame.findings.append(R.UNKNOWN_PUBLISHING_ID(f"{frame.command} for {len(unknown)} publishing id(s) of "
                                                      f"publisher {pid} never published or already settled: {shown}",
                                                      command=frame.command))


def publish_confirm(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                    ts: float) -> None:
    arr = values.get("publishing_ids")
    _settle(c, frame, _value(values, "publisher_id"), [x.value for x in (arr.children or ())] if arr else [])


def publish_error(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                  ts: float) -> None:
    arr = values.get("errors")
    got: list[int] = []
    by_code: dict[int, int] = {}
    for e in (arr.children or ()) if arr is not None else ():
        pid_c, code_c = e.child("publishing_id"), e.child("response_code")
        if pid_c is not None:
            got.append(pid_c.value)
        if code_c is not None:
            by_code[code_c.value] = by_code.get(code_c.value, 0) + 1
    for code, n in sorted(by_code.items()):
        rule = R.ERROR_RESPONSE if code in dia["client_mistakes"] else R.REFUSED
        frame.findings.append(rule(f"PublishError: {n} message(s) rejected with {dia.code_name(code)} ({code:#04x})",
                                   command="PublishError", field="response_code"))
    _settle(c, frame, _value(values, "publisher_id"), got)


def metadata_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                      ts: float) -> None:
    meta = values.get("stream_metadata")
    for entry in (meta.children or ()) if meta is not None else ():
        st, code = entry.child("stream"), entry.child("response_code")
        if code is not None and code.value != dia["ok"]:
            frame.findings.append(R.REFUSED(f"Metadata for stream {st.value if st else '?'!r}: "
                                            f"{dia.code_name(code.value)} ({code.value:#04x})",
                                            command="MetadataResponse", field="response_code"))


def metadata_update(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                    ts: float) -> None:
    stream = _value(values, "stream")
    if stream is None:
        return
    if c.sub_stream is None:
        return
    for sid, s in list(c.sub_stream.items()):
        if s == stream:
            _gone(c, sid)
            _drop(c, "credit", sid)
            _drop(c, "sub_stream", sid)  # the server dropped it: no subscription to look up any more


def subscribe(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
              ts: float) -> None:
    sid, credit, stream = _value(values, "subscription_id"), _value(values, "credit"), _value(values, "stream")
    if sid is None:
        return
    if c.credit is None:
        c.credit = {}
    c.credit[sid] = credit if credit is not None else (1 << 30)
    _drop(c, "gone", sid)
    if stream is not None:
        if c.sub_stream is None:
            c.sub_stream = {}
        c.sub_stream[sid] = stream


def subscribe_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                       ts: float) -> None:
    if request is not None and _failed(values, dia):
        _drop(c, "credit", request[3])


def unsubscribe(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                ts: float) -> None:
    sid = _value(values, "subscription_id")
    if sid is not None:
        _gone(c, sid)


def _gone(c: StreamConnection, sid: int) -> None:
    if c.gone is None:
        c.gone = {sid}
    else:
        c.gone.add(sid)


def unsubscribe_response(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
                         ts: float) -> None:
    code = values.get("response_code")
    if request is not None and code is not None and code.value == dia["ok"]:
        _drop(c, "credit", request[3])
        _drop(c, "sub_stream", request[3])  # unsubscribed: its stream need not be remembered


def credit(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
           ts: float) -> None:
    sid, cr = _value(values, "subscription_id"), _value(values, "credit")
    if sid is not None and cr is not None:
        add_credit(c, sid, cr)


def add_credit(c: StreamConnection, sid: int, cr: int) -> None:
    """The client grants subscription ``sid`` ``cr`` more chunks; a subscription this connection
    does not track is left alone (nothing here speaks: the connection's hot path relies on it)."""
    table = c.credit
    if table is not None and sid in table:
        # The server reads the value as signed 16-bit.
        table[sid] += cr - 0x10000 if cr >= 0x8000 else cr


def deliver(c: StreamConnection, frame: Frame, values: dict[str, Field], request: Any, dia: Dialect,
            ts: float) -> None:
    sid = _value(values, "subscription_id")
    if sid is None:
        return
    table = c.credit
    left = table.get(sid) if table is not None else None
    if left is None:
        if not c.lossy:
            frame.findings.append(R.UNKNOWN_SUBSCRIPTION(f"Deliver for subscription {sid}, never subscribed on this "
                                                         f"connection", command="Deliver", field="subscription_id"))
        return
    left -= 1
    if left < 0:
        if not c.lossy:
            frame.findings.append(R.NO_CREDIT(f"Deliver for subscription {sid} without credit left (the client "
                                              f"granted none since the last chunk)", command="Deliver"))
        left = 0
    table[sid] = left  # type: ignore[index]


TRACK: dict[tuple[str, bool], Handler] = {
    ("Tune", False): server_tune,
    ("Tune", True): client_tune,
    ("PeerProperties", True): peer_properties_response,
    ("Close", False): close,
    ("Close", True): close_response,
    ("DeclarePublisher", False): declare_publisher,
    ("DeclarePublisher", True): declare_publisher_response,
    ("DeletePublisher", False): delete_publisher,
    ("Publish", False): publish,
    ("PublishConfirm", False): publish_confirm,
    ("PublishError", False): publish_error,
    ("Metadata", True): metadata_response,
    ("MetadataUpdate", False): metadata_update,
    ("Subscribe", False): subscribe,
    ("Subscribe", True): subscribe_response,
    ("Unsubscribe", False): unsubscribe,
    ("Unsubscribe", True): unsubscribe_response,
    ("Credit", False): credit,
    ("Deliver", False): deliver,
}
