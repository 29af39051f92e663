"""Build the AMQP/Fast captures with the dissector's own encoder (dissectors/amqp_fast/encode.py).

No implementation of AMQP/Fast 0.7 survives, so nothing can be recorded: every capture here is a
conversation written by the encoder from the same command table the decoder reads, then cut into
TCP segments by analyzer.pcapwrite. Run ``python captures/amqp_fast/make_captures.py`` from the
repository root to rebuild them all (byte-identical: timestamps and sequence numbers are fixed).

``SESSION`` is a realistic client/server conversation using every command at least once;
``RFC_EXAMPLE`` the example dialogue of RFC 006 §3.2.13; ``RULES`` one conversation per
conformance rule, each with the rule ids it must raise (tests/test_amqp_fast_rules.py checks that
each fires exactly there and nowhere on the clean ones).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from analyzer.pcapwrite import TcpConversation, write_capture  # noqa: E402
from dissectors.amqp_fast import encode as E  # noqa: E402

PORT = 3018
C = E.command


def session() -> E.Script:
    """A day in the life of a client: negotiation with two security rounds, two channels (one
    transacted and restartable), queue and topic handles, a temporary queue, a message sent in
    three fragments and one out of band, consuming a message the server sends in four HANDLE NOTIFY
    fragments, acknowledgement, flow control, unget, query with a HANDLE INDEX large enough for the
    0xFFFF long-size escape, browsing (found and not found), a restartable upload with HANDLE
    PREPARE/READY, cancelling a durable subscription, heartbeats, and every close handshake."""
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN TLS", challenges=b"login")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN", challenges=b"password")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"password:guest@home")
    s.sc("CONNECTION TUNE", frame_max=131072, channel_max=16, handle_max=64, heartbeat=30)
    s.cc("CONNECTION TUNE", frame_max=131072, channel_max=4, handle_max=16, heartbeat=30)
    s.cc("CONNECTION OPEN", confirm_tag=1, virtual_path="/finance", client_name="ticker-7")
    s.sc("CONNECTION REPLY", confirm_tag=1, reply_code=200, reply_text="OK")
    # Channel 1: transacted and restartable, confirmed. Channel 2: plain, with out-of-band transfers.
    s.cc("CHANNEL OPEN", channel_id=1, confirm_tag=2, transacted=True, restartable=True)
    s.sc("CHANNEL REPLY", channel_id=1, confirm_tag=2, reply_code=200, reply_text="OK")
    s.cc("CHANNEL OPEN", channel_id=2, out_of_band="shm:/amq/2")
    s.cc("HANDLE OPEN", channel_id=1, handle_id=1, service_type=1, confirm_tag=3, producer=True, consumer=True,
         browser=True, dest_name="orders", mime_type="text/plain", encoding="utf-8")
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=3, reply_code=200, reply_text="OK")
    s.cc("HANDLE OPEN", channel_id=2, handle_id=2, service_type=1, consumer=True, temporary=True)
    s.sc("HANDLE CREATED", handle_id=2, dest_name="tmp.ticker-7.1")
    s.cc("HANDLE OPEN", channel_id=2, handle_id=3, service_type=2, producer=True, consumer=True,
         dest_name="prices.")
    # A message of 200 body octets sent in three fragments (dest-name on the last), then committed.
    body = b"".join(b"order %03d: 10 x ACME @ 12.50\n" % i for i in range(7))[:200]
    head = E.head(len(body), persistent=True, priority=5, expiration=1767225600, mime_type="text/plain",
                  encoding="utf-8", identifier="order-1", headers=b"desk=fx")
    s.c(E.message("HANDLE SEND", 1, body, fragment=90, head_bytes=head, dest_name="orders"))
    s.cc("CHANNEL COMMIT", channel_id=1, confirm_tag=4)
    s.sc("CHANNEL REPLY", channel_id=1, confirm_tag=4, reply_code=200, reply_text="committed")
    # A message out of band: the command only, the data goes through shared memory.
    s.cc("HANDLE SEND", handle_id=3, fragment_size=4096, out_of_band=True, dest_name="eur.usd")
    # Consume from 'orders': the server delivers a 300-octet message in four HANDLE NOTIFY fragments.
    s.cc("HANDLE CONSUME", handle_id=1, confirm_tag=5, prefetch=10, dest_name="")
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=5, reply_code=200, reply_text="consuming")
    notified = bytes(range(256)) + b"-the end of a binary payload-" + b"." * 15
    s.s(E.message("HANDLE NOTIFY", 1, notified, fragment=100, message_nbr=41, delivered=True,
                  head_bytes=E.head(len(notified), mime_type="application/octet-stream"), dest_name="orders"))
    s.cc("CHANNEL ACK", channel_id=1, message_nbr=41)
    s.cc("HANDLE FLOW", handle_id=1, flow_pause=True)
    s.s(E.message("HANDLE NOTIFY", 1, b"late", message_nbr=42, delivered=True, dest_name="orders"))
    s.cc("HANDLE UNGET", handle_id=1, message_nbr=42)
    s.cc("HANDLE FLOW", handle_id=1, flow_pause=False)
    s.cc("CHANNEL ROLLBACK", channel_id=1)
    # Browse: the index of waiting messages needs the long-size escape (over 65534 octets).
    s.cc("HANDLE QUERY", handle_id=1, message_nbr=0, dest_name="", selector=b"", mime_type="")
    numbers = ".".join(str(n) for n in range(100, 40000, 2))[:65535].rsplit(".", 1)[0]
    assert len(numbers) + 10 > 0xFFFE, "HANDLE INDEX must need the long-size escape"
    s.sc("HANDLE INDEX", handle_id=1, message_nbr=int(numbers.rsplit(".", 1)[1]), message_list=numbers.encode())
    s.cc("HANDLE BROWSE", handle_id=1, confirm_tag=6, message_nbr=100)
    s.s(E.message("HANDLE NOTIFY", 1, b"browsed, not delivered", message_nbr=100, delivered=False,
                  dest_name="orders"))
    s.cc("HANDLE BROWSE", handle_id=1, confirm_tag=7, message_nbr=102)
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=7, reply_code=310, reply_text="message not found")
    # A restartable upload: the head and the first 500 octets, then the rest after HANDLE READY.
    big = bytes((i * 7) & 0xFF for i in range(3000))
    big_head = E.head(len(big), persistent=True, identifier="report.pdf", mime_type="application/pdf")
    first = big_head + big[:500]
    s.cc("HANDLE PREPARE", handle_id=1, fragment_size=len(first), content_hash="a9993e364706816aba3e25717850c26c9cd0d89d")
    s.c(first)
    s.sc("HANDLE READY", handle_id=1, message_size=500)
    s.cc("HANDLE SEND", handle_id=1, fragment_size=1500, partial=True, recovery=True)
    s.c(big[500:2000])
    s.cc("HANDLE SEND", handle_id=1, fragment_size=1000, partial=False, recovery=True, dest_name="reports")
    s.c(big[2000:])
    # A durable topic subscription, ended.
    s.cc("HANDLE CONSUME", handle_id=3, prefetch=1, no_local=True, dest_name="eur.", identifier="fx-feed",
         selector=b"price > 1.05", mime_type="text/x-sql")
    s.cc("HANDLE CANCEL", handle_id=3, confirm_tag=8, dest_name="eur.", identifier="fx-feed")
    s.sc("HANDLE REPLY", handle_id=3, confirm_tag=8, reply_code=200, reply_text="cancelled")
    # Heartbeats both ways.
    s.cc("CONNECTION PING", respond=True)
    s.sc("CONNECTION PING", respond=False)
    # Closing: a handle, both channels (the server closes channel 2), the connection.
    s.cc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="done")
    s.sc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="done")
    s.sc("CHANNEL CLOSE", channel_id=2, reply_code=200, reply_text="idle")
    s.cc("CHANNEL CLOSE", channel_id=2, reply_code=200, reply_text="idle")
    s.cc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.sc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def rfc_example() -> E.Script:
    """RFC 006 §3.2.13, command by command (the client's initiation first, as §3.2.2 requires)."""
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN TLS")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest password:guest@home")
    s.sc("CONNECTION TUNE", frame_max=48000, channel_max=1024)
    s.cc("CONNECTION TUNE", frame_max=16384, channel_max=1)
    s.sc("CONNECTION CLOSE", reply_code=540, reply_text="Not implemented")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


# ------------------------------------------------------------------------------ one per rule
def _open(**tune: int) -> E.Script:
    """Negotiated, channel 1 open, handle 1 (a queue) open on it."""
    return E.Script().negotiate(**tune).open_channel(1).open_handle(1, 1)


def _closed(s: E.Script) -> E.Script:
    return s.close()


def resync() -> E.Script:
    s = _open()
    s.c(b"\x00\x01junk")
    return _closed(s)


def incomplete() -> E.Script:
    s = _open()
    s.c(C("HANDLE SEND", handle_id=1, fragment_size=10)[:-4])
    return s


def truncated() -> E.Script:
    s = _open()
    s.c(E.frame(21, C("CHANNEL ACK", channel_id=1, message_nbr=9)[3:-1][:5]))  # message-nbr cut short
    return _closed(s)


def trailing() -> E.Script:
    s = _open()
    s.c(E.frame(14, b"\x00\xaa\xbb"))  # CONNECTION PING with two octets after its bit
    return _closed(s)


def end_missing() -> E.Script:
    s = _open()
    s.c(C("CONNECTION PING", end=0x00))
    return _closed(s)


def unknown_command() -> E.Script:
    s = _open()
    s.c(E.frame(99, b"\x00\x01"))
    return _closed(s)


def long_size_unneeded() -> E.Script:
    s = _open()
    s.c(C("CONNECTION PING", long_size=True))
    return _closed(s)


def browse_without_tag() -> E.Script:
    s = _open()
    s.c(E.frame(37, b"\x00\x01\x00\x00\x00\x05"))  # handle 1, message 5: the ABNF's form
    return _closed(s)


def short_string_nul() -> E.Script:
    s = E.Script().negotiate().open_channel(1)
    s.cc("HANDLE OPEN", channel_id=1, handle_id=1, service_type=1, dest_name="orders\0evil")
    return _closed(s)


def frame_max() -> E.Script:
    s = _open(frame_max=4096)
    s.c(E.message("HANDLE SEND", 1, b"x" * 5000))
    return _closed(s)


def connection_limit() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"t" * 5000)
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def initiation_missing() -> E.Script:
    s = E.Script()
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def initiation_other() -> E.Script:
    s = E.Script()
    s.c(E.initiation(128, 2))
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def handshake_order() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION TUNE", frame_max=131072, channel_max=16)  # before any CHALLENGE
    s.cc("CONNECTION TUNE", frame_max=131072, channel_max=16)
    s.cc("CONNECTION OPEN", virtual_path="/")
    return _closed(s.open_channel(1))


def open_before_tune() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    s.sc("CONNECTION TUNE", frame_max=131072, channel_max=16)
    s.cc("CONNECTION OPEN", virtual_path="/")
    s.cc("CONNECTION TUNE", frame_max=131072, channel_max=16)
    return _closed(s.open_channel(1))


def handshake_incomplete() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    return s


def handshake_version() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=2, mechanisms="PLAIN")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def handshake_mechanism() -> E.Script:
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN TLS")
    s.cc("CONNECTION RESPONSE", mechanism="KERBEROS_V4", responses=b"ticket")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def channel_too_many() -> E.Script:
    s = E.Script().negotiate(channel_max=2).open_channel(1).open_channel(2).open_channel(3)
    return _closed(s)


def handle_too_many() -> E.Script:
    s = E.Script().negotiate(handle_max=1).open_channel(1).open_handle(1, 1).open_handle(1, 2, dest="queue.b")
    return _closed(s)


def handshake_tune() -> E.Script:
    return _closed(_open(frame_max=8192, client_frame_max=16384))


def never_expected() -> E.Script:
    s = _open()
    s.sc("CONNECTION RESPONSE", mechanism="PLAIN")
    return _closed(s)


def connection_after_close() -> E.Script:
    s = _open()
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.cc("CHANNEL ACK", channel_id=1, message_nbr=1)
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def connection_close_unanswered() -> E.Script:
    s = _open()
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def channel_not_open() -> E.Script:
    s = _open()
    s.cc("CHANNEL ACK", channel_id=7, message_nbr=1)
    return _closed(s)


def channel_already_open() -> E.Script:
    return _closed(_open().open_channel(1))


def channel_after_close() -> E.Script:
    s = _open()
    s.cc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.cc("CHANNEL ACK", channel_id=1, message_nbr=1)
    s.sc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def channel_close_unanswered() -> E.Script:
    s = _open()
    s.cc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    return s


def not_transacted() -> E.Script:
    s = _open()
    s.cc("CHANNEL COMMIT", channel_id=1)
    return _closed(s)


def channel_zero() -> E.Script:
    s = E.Script().negotiate().open_channel(0)
    return _closed(s.open_channel(1))


def not_restartable() -> E.Script:
    s = _open()
    s.cc("HANDLE PREPARE", handle_id=1, fragment_size=0)
    s.sc("HANDLE READY", handle_id=1, message_size=0)
    return _closed(s)


def handle_not_open() -> E.Script:
    s = _open()
    s.cc("HANDLE FLOW", handle_id=9, flow_pause=True)
    return _closed(s)


def handle_already_open() -> E.Script:
    return _closed(_open().open_handle(1, 1))


def handle_after_close() -> E.Script:
    s = _open()
    s.cc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="Ok")
    s.cc("HANDLE FLOW", handle_id=1, flow_pause=True)
    s.sc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="Ok")
    return _closed(s)


def handle_close_unanswered() -> E.Script:
    s = _open()
    s.cc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="Ok")
    return s


def service_type() -> E.Script:
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1, service=7)
    return _closed(s)


def notify_unrequested() -> E.Script:
    s = _open()
    s.s(E.message("HANDLE NOTIFY", 1, b"unasked", message_nbr=1, delivered=True))
    return _closed(s)


def created_not_temporary() -> E.Script:
    s = _open()
    s.sc("HANDLE CREATED", handle_id=1, dest_name="tmp.1")
    return _closed(s)


def unanswered() -> E.Script:
    # The capture ends with the connection open: a close would make the confirmation moot.
    return _open().cc("HANDLE FLOW", handle_id=1, confirm_tag=9, flow_pause=True)


def unknown_response() -> E.Script:
    s = _open()
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=9, reply_code=200, reply_text="OK")
    return _closed(s)


def mismatch() -> E.Script:
    s = E.Script().negotiate().open_channel(1, transacted=True).open_handle(1, 1)
    s.cc("CHANNEL COMMIT", channel_id=1, confirm_tag=9)
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=9, reply_code=200, reply_text="OK")
    return _closed(s)


def duplicate() -> E.Script:
    s = _open()
    s.cc("HANDLE FLOW", handle_id=1, confirm_tag=9, flow_pause=True)
    s.cc("HANDLE FLOW", handle_id=1, confirm_tag=9, flow_pause=False)
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=9, reply_code=200, reply_text="OK")
    return _closed(s)


def interleaved() -> E.Script:
    s = _open().open_handle(1, 2, dest="queue.b")
    one = E.head(20) + b"a" * 20
    s.cc("HANDLE SEND", handle_id=1, fragment_size=30, partial=True)
    s.c(one[:30])
    s.c(E.message("HANDLE SEND", 2, b"b" * 10))  # the rest of handle 1's message never comes
    return _closed(s)


def message_size() -> E.Script:
    s = _open()
    s.c(E.message("HANDLE SEND", 1, b"y" * 50, head_bytes=E.head(60)))
    return _closed(s)


def message_incomplete() -> E.Script:
    s = _open()
    data = E.head(100) + b"z" * 100
    s.cc("HANDLE SEND", handle_id=1, fragment_size=60, partial=True)
    s.c(data[:60])
    return s  # the capture ends with the message half sent (a channel close would abandon it)


def fragment_short() -> E.Script:
    s = _open()
    data = E.head(20) + b"s" * 20
    s.cc("HANDLE SEND", handle_id=1, fragment_size=len(data) + 3)
    s.c(data)
    s.cc("CONNECTION PING", respond=False)
    return _closed(s)


def fragment_long() -> E.Script:
    s = _open()
    data = E.head(20) + b"l" * 20
    s.cc("HANDLE SEND", handle_id=1, fragment_size=len(data))
    s.c(data + b"\x07\x07\x07")
    return _closed(s)


def streaming() -> E.Script:
    s = E.Script().negotiate().open_channel(1).open_handle(1, 1, service=3)
    s.c(E.message("HANDLE SEND", 1, b"frame-1", head_bytes=E.head(0), streaming=True))
    return _closed(s)


def priority() -> E.Script:
    s = _open()
    s.c(E.message("HANDLE SEND", 1, b"urgent", head_bytes=E.head(6, priority=12)))
    return _closed(s)


def heartbeat_silence() -> E.Script:
    s = _open(heartbeat=2)
    for i in range(8):  # the client pings every 1.5 s; the server answers twice, then falls silent
        s.c(C("CONNECTION PING", respond=True), dt=1.5)
        if i < 2:
            s.sc("CONNECTION PING", respond=False)
    return s


def reply_error() -> E.Script:
    s = _open()
    s.sc("CHANNEL CLOSE", channel_id=1, reply_code=542, reply_text="invalid message contents")
    s.cc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def reply_unknown() -> E.Script:
    s = _open()
    s.cc("HANDLE CLOSE", handle_id=1, reply_code=999, reply_text="?")
    s.sc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="Ok")
    return _closed(s)


#: capture name -> (conversation, [(rule id, command of the frame carrying it, or None: not on a frame)]).
RULES: dict[str, tuple[Callable[[], E.Script], list[tuple[str, str | None]]]] = {
    "framing_resync": (resync, [("framing.resync", None)]),
    "framing_incomplete": (incomplete, [("framing.incomplete", None)]),
    "framing_truncated": (truncated, [("framing.truncated", "CHANNEL ACK")]),
    "framing_trailing": (trailing, [("framing.trailing", "CONNECTION PING")]),
    "command_end_missing": (end_missing, [("command.end_missing", "CONNECTION PING")]),
    "command_unknown": (unknown_command, [("command.unknown", "UNKNOWN(99)")]),
    "command_long_size_unneeded": (long_size_unneeded, [("command.long_size_unneeded", "CONNECTION PING")]),
    "command_browse_without_tag": (browse_without_tag, [("command.browse_without_tag", "HANDLE BROWSE")]),
    "value_short_string_nul": (short_string_nul, [("value.short_string_nul", "HANDLE OPEN")]),
    "size_frame_max": (frame_max, [("size.frame_max", "HANDLE SEND")]),
    "size_connection_limit": (connection_limit, [("size.connection_limit", "CONNECTION RESPONSE")]),
    "initiation_missing": (initiation_missing, [("initiation.missing", "CONNECTION RESPONSE"),
                                                ("handshake.order", "CONNECTION RESPONSE")]),
    "initiation_other_protocol": (initiation_other, [("initiation.other_protocol", "INITIATION")]),
    "handshake_order": (handshake_order, [("handshake.order", "CONNECTION TUNE")]),
    "handshake_open_before_tune": (open_before_tune, [("handshake.open_before_tune", "CONNECTION OPEN")]),
    "handshake_incomplete": (handshake_incomplete, [("handshake.incomplete", None)]),
    "handshake_version": (handshake_version, [("handshake.version", "CONNECTION CHALLENGE")]),
    "handshake_mechanism": (handshake_mechanism, [("handshake.mechanism", "CONNECTION RESPONSE")]),
    "channel_too_many": (channel_too_many, [("channel.too_many", "CHANNEL OPEN")]),
    "handle_too_many": (handle_too_many, [("handle.too_many", "HANDLE OPEN")]),
    "handshake_tune": (handshake_tune, [("handshake.tune", "CONNECTION TUNE")]),
    "flow_never_expected": (never_expected, [("flow.never_expected", "CONNECTION RESPONSE")]),
    "connection_after_close": (connection_after_close, [("connection.after_close", "CHANNEL ACK")]),
    "connection_close_unanswered": (connection_close_unanswered, [("connection.close_unanswered", None)]),
    "channel_not_open": (channel_not_open, [("channel.not_open", "CHANNEL ACK")]),
    "channel_already_open": (channel_already_open, [("channel.already_open", "CHANNEL OPEN")]),
    "channel_after_close": (channel_after_close, [("channel.after_close", "CHANNEL ACK")]),
    "channel_close_unanswered": (channel_close_unanswered, [("channel.close_unanswered", None)]),
    "channel_not_transacted": (not_transacted, [("channel.not_transacted", "CHANNEL COMMIT")]),
    "channel_zero": (channel_zero, [("channel.zero", "CHANNEL OPEN")]),
    "channel_not_restartable": (not_restartable, [("channel.not_restartable", "HANDLE PREPARE")]),
    "handle_not_open": (handle_not_open, [("handle.not_open", "HANDLE FLOW")]),
    "handle_already_open": (handle_already_open, [("handle.already_open", "HANDLE OPEN")]),
    "handle_after_close": (handle_after_close, [("handle.after_close", "HANDLE FLOW")]),
    "handle_close_unanswered": (handle_close_unanswered, [("handle.close_unanswered", None)]),
    "handle_service_type": (service_type, [("handle.service_type", "HANDLE OPEN")]),
    "handle_notify_unrequested": (notify_unrequested, [("handle.notify_unrequested", "HANDLE NOTIFY")]),
    "handle_created_not_temporary": (created_not_temporary, [("handle.created_not_temporary", "HANDLE CREATED")]),
    "correlation_unanswered": (unanswered, [("correlation.unanswered", None)]),
    "correlation_unknown_response": (unknown_response, [("correlation.unknown_response", "HANDLE REPLY")]),
    "correlation_mismatch": (mismatch, [("correlation.mismatch", "HANDLE REPLY")]),
    "correlation_duplicate": (duplicate, [("correlation.duplicate", "HANDLE FLOW")]),
    "message_interleaved": (interleaved, [("message.interleaved", "HANDLE SEND")]),
    "message_size": (message_size, [("message.size", "MESSAGE FRAGMENT")]),
    "content_incomplete": (message_incomplete, [("content.incomplete", None)]),
    "fragment_short": (fragment_short, [("fragment.short", "MESSAGE FRAGMENT")]),
    "fragment_long": (fragment_long, [("fragment.long", "MESSAGE FRAGMENT")]),
    "message_streaming": (streaming, [("message.streaming", "HANDLE SEND")]),
    "message_priority": (priority, [("message.priority", "MESSAGE FRAGMENT")]),
    "heartbeat_silence": (heartbeat_silence, [("heartbeat.silence", None)]),
    "reply_error": (reply_error, [("reply.error", "CHANNEL CLOSE")]),
    "reply_unknown_code": (reply_unknown, [("reply.unknown_code", "HANDLE CLOSE")]),
}


def conversation(script: E.Script, index: int = 0) -> TcpConversation:
    """The script as one TCP connection (client port by index), each step its own segments; a pause
    of the script (a step more than a second after the one before) is a pause of the capture."""
    conv = TcpConversation(("10.30.18.2", 41000 + index), ("10.30.18.1", PORT), ts=1_767_225_600.0 + index,
                           step=0.0005)
    conv.handshake()
    before = 0.0
    for direction, data, ts in script.steps:
        if ts - before > 1.0:
            conv.ts += ts - before
        before = ts
        conv.send(str(direction), data)
    conv.close()
    return conv


def build(out: Path = HERE) -> list[Path]:
    written = []
    for i, (name, make) in enumerate((("amqp_fast_session", session), ("rfc_example", rfc_example))):
        path = out / f"{name}.pcap"
        write_capture(str(path), [conversation(make(), i)])
        written.append(path)
    for i, (name, (make, _expected)) in enumerate(RULES.items(), start=10):
        path = out / "rules" / f"{name}.pcap"
        path.parent.mkdir(exist_ok=True)
        write_capture(str(path), [conversation(make(), i)])
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build():
        print(p.relative_to(HERE))
