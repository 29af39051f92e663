"""Every AMQP/Fast 0.7 command (RFC 006 §3.2-§3.5) and the message head (§3.4.4), once, as data.

The table drives the decoder, the test encoder (encode.py), the field catalogue and
``streamproto protocols``. Field names are the RFC's in snake_case (``frame-max`` is
``frame_max``). Types are named here and bound to wire types per :class:`~.wire.Encoding`
(:func:`layout`), because the RFC leaves the bit order and the long-string prefix open.

Where the RFC contradicts itself, the command's own section wins over the ABNF summary, which
carries the older text: HANDLE BROWSE has a confirm-tag (§3.5.9 explains it; the ABNF lacks it).
A BROWSE without it (6 octets of fields) is still accepted, and noted, see the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

from dissectors.amqp_fast.wire import DATE, LONG, OCTET, SHORT, SHORTSTR, Encoding, field_table, long_string
from dissectors.schema import Bit, F, Struct, WireType

BIT = Bit()

#: Service types of HANDLE OPEN (§3.5.2.1).
SERVICE_TYPES = {1: "queue", 2: "topic", 3: "peer"}
_ENUMS = {"service_type": SERVICE_TYPES}


@dataclass(frozen=True)
class Command:
    code: int
    name: str  # "CONNECTION TUNE": the RFC's mnemonic (not on the wire)
    level: str  # "connection", "channel" or "handle"
    sender: str  # who may send it (the flow summaries): "c2s", "s2c" or "both"
    fields: tuple[tuple[str, str], ...]  # (name, type key) in wire order
    #: Info line pieces: (format, omit when the field is falsy); a piece whose field is absent is left out.
    info: tuple[tuple[str, bool], ...] = ()
    data: bool = False  # fragment-size octets of message data follow the command (unless out-of-band)
    limit: int = 0  # the RFC's maximum size of this command's frame (0: only frame-max)
    reply: str = ""  # the command that confirms a non-zero confirm-tag
    doc: str = ""

    @property
    def path(self) -> str:
        """``CONNECTION TUNE`` -> ``connection.tune`` (the field catalogue's command path)."""
        return self.name.lower().replace(" ", ".")

    def has(self, field: str) -> bool:
        return any(n == field for n, _ in self.fields)


_TAG = ("confirm_tag", "short")
_CH = ("channel_id", "short")
_H = ("handle_id", "short")
_REPLY = (("reply_code", "short"), ("reply_text", "shortstr"))
_REPLY_INFO = (("{reply_code} '{reply_text}'", False),)
_TAG_INFO = ("tag={confirm_tag}", True)

COMMANDS: tuple[Command, ...] = (
    # --- connection (§3.2) -------------------------------------------------------------------------
    Command(10, "CONNECTION CHALLENGE", "connection", "s2c",
            (("version", "octet"), ("mechanisms", "shortstr"), ("challenges", "table")),
            (("v{version} '{mechanisms}'", False),), limit=4096),
    Command(11, "CONNECTION RESPONSE", "connection", "c2s", (("mechanism", "shortstr"), ("responses", "table")),
            (("'{mechanism}' '{responses}'", False),), limit=4096),
    Command(12, "CONNECTION TUNE", "connection", "both",
            (("frame_max", "long"), ("channel_max", "short"), ("handle_max", "short"), ("heartbeat", "short"),
             ("options", "table")),
            (("frame-max={frame_max}", False), ("channel-max={channel_max}", False),
             ("handle-max={handle_max}", True), ("heartbeat={heartbeat}", True)), limit=4096),
    Command(13, "CONNECTION OPEN", "connection", "c2s",
            (_TAG, ("virtual_path", "shortstr"), ("client_name", "shortstr"), ("options", "table")),
            (_TAG_INFO, ("path='{virtual_path}'", False), ("client='{client_name}'", True)),
            reply="CONNECTION REPLY"),
    Command(14, "CONNECTION PING", "connection", "both", (("respond", "bit"),), (("respond={respond}", False),)),
    Command(18, "CONNECTION REPLY", "connection", "s2c", (_TAG, *_REPLY), (_TAG_INFO, *_REPLY_INFO)),
    Command(19, "CONNECTION CLOSE", "connection", "both", _REPLY, _REPLY_INFO),
    # --- channel (§3.3) ----------------------------------------------------------------------------
    Command(20, "CHANNEL OPEN", "channel", "c2s",
            (_CH, _TAG, ("transacted", "bit"), ("restartable", "bit"), ("options", "table"),
             ("out_of_band", "shortstr")),
            (("channel={channel_id}", False), _TAG_INFO, ("transacted={transacted}", True),
             ("restartable={restartable}", True)), reply="CHANNEL REPLY"),
    Command(21, "CHANNEL ACK", "channel", "c2s", (_CH, _TAG, ("message_nbr", "long")),
            (("channel={channel_id}", False), _TAG_INFO, ("message={message_nbr}", False)),
            reply="CHANNEL REPLY"),
    Command(22, "CHANNEL COMMIT", "channel", "c2s", (_CH, _TAG, ("options", "table")),
            (("channel={channel_id}", False), _TAG_INFO), reply="CHANNEL REPLY"),
    Command(23, "CHANNEL ROLLBACK", "channel", "c2s", (_CH, _TAG, ("options", "table")),
            (("channel={channel_id}", False), _TAG_INFO), reply="CHANNEL REPLY"),
    Command(28, "CHANNEL REPLY", "channel", "s2c", (_CH, _TAG, *_REPLY),
            (("channel={channel_id}", False), _TAG_INFO, *_REPLY_INFO)),
    Command(29, "CHANNEL CLOSE", "channel", "both", (_CH, *_REPLY), (("channel={channel_id}", False), *_REPLY_INFO)),
    # --- destinations (§3.5) -----------------------------------------------------------------------
    Command(30, "HANDLE OPEN", "handle", "c2s",
            (_CH, _H, ("service_type", "short"), _TAG, ("producer", "bit"), ("consumer", "bit"), ("browser", "bit"),
             ("temporary", "bit"), ("dest_name", "shortstr"), ("mime_type", "shortstr"), ("encoding", "shortstr"),
             ("options", "table")),
            (("channel={channel_id}", False), ("handle={handle_id}", False), ("service={service_type}", False),
             _TAG_INFO, ("dest='{dest_name}'", False), ("temporary={temporary}", True)), reply="HANDLE REPLY"),
    Command(31, "HANDLE SEND", "handle", "c2s",
            (_H, _TAG, ("fragment_size", "long"), ("partial", "bit"), ("out_of_band", "bit"), ("recovery", "bit"),
             ("streaming", "bit"), ("dest_name", "shortstr")),
            (("handle={handle_id}", False), _TAG_INFO, ("fragment={fragment_size}", False),
             ("partial={partial}", False), ("out-of-band={out_of_band}", True), ("recovery={recovery}", True),
             ("streaming={streaming}", True), ("dest='{dest_name}'", True)), data=True, reply="HANDLE REPLY"),
    Command(32, "HANDLE CONSUME", "handle", "c2s",
            (_H, _TAG, ("prefetch", "short"), ("no_local", "bit"), ("unreliable", "bit"), ("dest_name", "shortstr"),
             ("identifier", "shortstr"), ("selector", "longstr"), ("mime_type", "shortstr")),
            (("handle={handle_id}", False), _TAG_INFO, ("prefetch={prefetch}", False), ("dest='{dest_name}'", True),
             ("identifier='{identifier}'", True)), reply="HANDLE REPLY"),
    Command(33, "HANDLE CANCEL", "handle", "c2s", (_H, _TAG, ("dest_name", "shortstr"), ("identifier", "shortstr")),
            (("handle={handle_id}", False), _TAG_INFO, ("dest='{dest_name}'", True),
             ("identifier='{identifier}'", False)), reply="HANDLE REPLY"),
    Command(34, "HANDLE FLOW", "handle", "c2s", (_H, _TAG, ("flow_pause", "bit")),
            (("handle={handle_id}", False), _TAG_INFO, ("pause={flow_pause}", False)), reply="HANDLE REPLY"),
    Command(35, "HANDLE UNGET", "handle", "c2s", (_H, _TAG, ("message_nbr", "long")),
            (("handle={handle_id}", False), _TAG_INFO, ("message={message_nbr}", False)), reply="HANDLE REPLY"),
    Command(36, "HANDLE QUERY", "handle", "c2s",
            (_H, ("message_nbr", "long"), ("dest_name", "shortstr"), ("selector", "longstr"),
             ("mime_type", "shortstr")),
            (("handle={handle_id}", False), ("after={message_nbr}", True), ("dest='{dest_name}'", True))),
    Command(37, "HANDLE BROWSE", "handle", "c2s", (_H, _TAG, ("message_nbr", "long")),
            (("handle={handle_id}", False), _TAG_INFO, ("message={message_nbr}", False)), reply="HANDLE REPLY"),
    Command(40, "HANDLE CREATED", "handle", "s2c", (_H, ("dest_name", "shortstr")),
            (("handle={handle_id}", False), ("dest='{dest_name}'", False))),
    Command(41, "HANDLE NOTIFY", "handle", "s2c",
            (_H, ("message_nbr", "long"), ("fragment_size", "long"), ("partial", "bit"), ("out_of_band", "bit"),
             ("recovery", "bit"), ("delivered", "bit"), ("redelivered", "bit"), ("streaming", "bit"),
             ("dest_name", "shortstr")),
            (("handle={handle_id}", False), ("message={message_nbr}", False), ("fragment={fragment_size}", False),
             ("partial={partial}", False), ("delivered={delivered}", False), ("redelivered={redelivered}", True),
             ("out-of-band={out_of_band}", True), ("recovery={recovery}", True), ("streaming={streaming}", True),
             ("dest='{dest_name}'", True)), data=True),
    Command(42, "HANDLE INDEX", "handle", "s2c", (_H, ("message_nbr", "long"), ("message_list", "longstr")),
            (("handle={handle_id}", False), ("more-after={message_nbr}", True))),
    Command(43, "HANDLE PREPARE", "handle", "both", (_H, ("fragment_size", "long"), ("content_hash", "shortstr")),
            (("handle={handle_id}", False), ("fragment={fragment_size}", False)), data=True),
    Command(44, "HANDLE READY", "handle", "both", (_H, ("message_size", "long")),
            (("handle={handle_id}", False), ("message-size={message_size}", False))),
    Command(48, "HANDLE REPLY", "handle", "s2c", (_H, _TAG, *_REPLY),
            (("handle={handle_id}", False), _TAG_INFO, *_REPLY_INFO)),
    Command(49, "HANDLE CLOSE", "handle", "both", (_H, *_REPLY), (("handle={handle_id}", False), *_REPLY_INFO)),
)

BY_CODE: dict[int, Command] = {c.code: c for c in COMMANDS}
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}
#: The commands a non-zero confirm-tag asks to be confirmed, and the REPLY commands themselves.
REPLIES = frozenset(c.reply for c in COMMANDS if c.reply)

#: The message head on a message's first fragment (§3.4.4); no length indicator precedes it.
MESSAGE_HEAD: tuple[tuple[str, str], ...] = (
    ("body_size", "long"), ("persistent", "bit"), ("priority", "octet"), ("expiration", "date"),
    ("mime_type", "shortstr"), ("encoding", "shortstr"), ("identifier", "shortstr"), ("headers", "table"))

#: The wire form of a command: the size (2 octets, or 0xFFFF and 4 octets), the command type octet,
#: the fields, the command-end octet (counted in the size).
LONG_SIZE: Final = 0xFFFF
COMMAND_END: Final = 0xCE
#: The client's initiation: protocol id and version (§3.2.2).
PROTOCOL_ID = 128
PROTOCOL_VERSION = 1


def wire_type(key: str, enc: Encoding) -> WireType:
    if key == "bit":
        return BIT
    if key == "longstr":
        return long_string(enc.long_string_length)
    if key == "table":
        return field_table(enc.field_table_length)
    return {"octet": OCTET, "short": SHORT, "long": LONG, "shortstr": SHORTSTR, "date": DATE}[key]


def _struct(fields: tuple[tuple[str, str], ...], enc: Encoding, doc: str) -> Struct:
    return Struct(*(F(n, wire_type(t, enc), _ENUMS.get(n)) for n, t in fields), doc=doc, msb_first=enc.msb_first)


@cache
def layout(code: int, enc: Encoding) -> Struct:
    """The fields of command ``code`` under encoding ``enc``."""
    return _struct(BY_CODE[code].fields, enc, "fields")


@cache
def head_layout(enc: Encoding) -> Struct:
    return _struct(MESSAGE_HEAD, enc, "message head")


@cache
def browse_without_tag(enc: Encoding) -> Struct:
    """HANDLE BROWSE as the ABNF summary has it: handle-id and message-nbr, no confirm-tag."""
    return _struct((_H, ("message_nbr", "long")), enc, "fields")


def describe(fields: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{n}:{t}" for n, t in fields)
