"""Every AMQP 0-9-1 class and method (with RabbitMQ's extensions), described once as data.

The table drives the decoder, the test encoder (encode.py) and ``Dissector.commands()``. Argument
names follow RabbitMQ's codegen JSON (spec §3.4) in snake_case (``routing-key`` is
``routing_key``), as every field this dissector emits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dissectors.amqp091.wire import LONG, LONGLONG, LONGSTR, OCTET, SHORT, SHORTSTR, TABLE
from dissectors.schema import Bit, F, Struct, WireType

CLASSES: dict[int, str] = {
    10: "Connection", 20: "Channel", 30: "Access", 40: "Exchange", 50: "Queue", 60: "Basic",
    85: "Confirm", 90: "Tx",
}
#: Classes of AMQP 0-8/0-9 that 0-9-1 removed; named so a finding can say what they were.
LEGACY_CLASSES: dict[int, str] = {70: "File", 80: "Stream", 100: "Dtx", 110: "Tunnel", 120: "Test"}


@dataclass(slots=True)
class Method:
    class_id: int
    method_id: int
    name: str  # "Basic.Publish"
    direction: str  # "c2s", "s2c" or "both"
    layout: Struct
    responses: tuple[str, ...] = ()  # synchronous: names of the acceptable replies
    content: bool = False
    info: tuple[tuple[str, str], ...] = ()  # (label, argument) pairs for the Info line
    note: str = ""  # why this method is unusual (deprecated, internal)
    code: int = 0
    has_nowait: bool = False
    response_codes: frozenset[int] = field(default_factory=frozenset)

    @property
    def synchronous(self) -> bool:
        return bool(self.responses)


def _args(*spec: tuple[str, WireType]) -> Struct:
    return Struct(*(F(n, t) for n, t in spec), doc="arguments")


BIT = Bit()

_M: list[Method] = []


def m(cid: int, mid: int, name: str, direction: str, args: tuple[tuple[str, WireType], ...] = (),
      responses: tuple[str, ...] = (), content: bool = False, info: tuple[tuple[str, str], ...] = (),
      note: str = "") -> None:
    cls = CLASSES[cid]
    _M.append(Method(cid, mid, f"{cls}.{name}", direction, _args(*args),
                     tuple(r if "." in r else f"{cls}.{r}" for r in responses), content, info, note))


X, RK, Q = ("x", "exchange"), ("rk", "routing_key"), ("q", "queue")
TAG = ("tag", "delivery_tag")

# --- connection (10) ---------------------------------------------------------------------------
m(10, 10, "Start", "s2c", (("version_major", OCTET), ("version_minor", OCTET), ("server_properties", TABLE),
                           ("mechanisms", LONGSTR), ("locales", LONGSTR)), ("StartOk",))
m(10, 11, "StartOk", "c2s", (("client_properties", TABLE), ("mechanism", SHORTSTR), ("response", LONGSTR),
                             ("locale", SHORTSTR)), info=(("mechanism", "mechanism"),))
m(10, 20, "Secure", "s2c", (("challenge", LONGSTR),), ("SecureOk",))
m(10, 21, "SecureOk", "c2s", (("response", LONGSTR),))
m(10, 30, "Tune", "s2c", (("channel_max", SHORT), ("frame_max", LONG), ("heartbeat", SHORT)), ("TuneOk",),
  info=(("channel-max", "channel_max"), ("frame-max", "frame_max"), ("heartbeat", "heartbeat")))
m(10, 31, "TuneOk", "c2s", (("channel_max", SHORT), ("frame_max", LONG), ("heartbeat", SHORT)),
  info=(("channel-max", "channel_max"), ("frame-max", "frame_max"), ("heartbeat", "heartbeat")))
m(10, 40, "Open", "c2s", (("virtual_host", SHORTSTR), ("capabilities", SHORTSTR), ("insist", BIT)), ("OpenOk",),
  info=(("vhost", "virtual_host"),))
m(10, 41, "OpenOk", "s2c", (("known_hosts", SHORTSTR),))
_CLOSE = (("reply_code", SHORT), ("reply_text", SHORTSTR), ("class_id", SHORT), ("method_id", SHORT))
m(10, 50, "Close", "both", _CLOSE, ("CloseOk",))
m(10, 51, "CloseOk", "both")
m(10, 60, "Blocked", "s2c", (("reason", SHORTSTR),), info=(("reason", "reason"),))
m(10, 61, "Unblocked", "s2c")
m(10, 70, "UpdateSecret", "c2s", (("new_secret", LONGSTR), ("reason", SHORTSTR)), ("UpdateSecretOk",),
  info=(("reason", "reason"),))
m(10, 71, "UpdateSecretOk", "s2c")
# --- channel (20) ------------------------------------------------------------------------------
m(20, 10, "Open", "c2s", (("out_of_band", SHORTSTR),), ("OpenOk",))
m(20, 11, "OpenOk", "s2c", (("channel_id", LONGSTR),))
m(20, 20, "Flow", "both", (("active", BIT),), ("FlowOk",), info=(("active", "active"),))
m(20, 21, "FlowOk", "both", (("active", BIT),), info=(("active", "active"),))
m(20, 40, "Close", "both", _CLOSE, ("CloseOk",))
m(20, 41, "CloseOk", "both")
# --- access (30), removed in 0-9-1 but still answered by RabbitMQ ------------------------------
m(30, 10, "Request", "c2s", (("realm", SHORTSTR), ("exclusive", BIT), ("passive", BIT), ("active", BIT),
                             ("write", BIT), ("read", BIT)), ("RequestOk",), info=(("realm", "realm"),),
  note="the access class was removed in AMQP 0-9-1")
m(30, 11, "RequestOk", "s2c", (("ticket", SHORT),), note="the access class was removed in AMQP 0-9-1")
# --- exchange (40) -----------------------------------------------------------------------------
m(40, 10, "Declare", "c2s", (("ticket", SHORT), ("exchange", SHORTSTR), ("type", SHORTSTR), ("passive", BIT),
                             ("durable", BIT), ("auto_delete", BIT), ("internal", BIT), ("nowait", BIT),
                             ("arguments", TABLE)), ("DeclareOk",), info=(X, ("type", "type")))
m(40, 11, "DeclareOk", "s2c")
m(40, 20, "Delete", "c2s", (("ticket", SHORT), ("exchange", SHORTSTR), ("if_unused", BIT), ("nowait", BIT)),
  ("DeleteOk",), info=(X,))
m(40, 21, "DeleteOk", "s2c")
_XBIND = (("ticket", SHORT), ("destination", SHORTSTR), ("source", SHORTSTR), ("routing_key", SHORTSTR),
          ("nowait", BIT), ("arguments", TABLE))
_XBIND_INFO = (("dx", "destination"), ("sx", "source"), ("bk", "routing_key"))
m(40, 30, "Bind", "c2s", _XBIND, ("BindOk",), info=_XBIND_INFO)
m(40, 31, "BindOk", "s2c")
m(40, 40, "Unbind", "c2s", _XBIND, ("UnbindOk",), info=_XBIND_INFO)
m(40, 51, "UnbindOk", "s2c")  # 51, not 41: RabbitMQ's extension skipped a number
# --- queue (50) --------------------------------------------------------------------------------
m(50, 10, "Declare", "c2s", (("ticket", SHORT), ("queue", SHORTSTR), ("passive", BIT), ("durable", BIT),
                             ("exclusive", BIT), ("auto_delete", BIT), ("nowait", BIT), ("arguments", TABLE)),
  ("DeclareOk",), info=(Q,))
m(50, 11, "DeclareOk", "s2c", (("queue", SHORTSTR), ("message_count", LONG), ("consumer_count", LONG)),
  info=(Q, ("messages", "message_count"), ("consumers", "consumer_count")))
_QBIND = (("ticket", SHORT), ("queue", SHORTSTR), ("exchange", SHORTSTR), ("routing_key", SHORTSTR))
m(50, 20, "Bind", "c2s", (*_QBIND, ("nowait", BIT), ("arguments", TABLE)), ("BindOk",),
  info=(Q, X, ("bk", "routing_key")))
m(50, 21, "BindOk", "s2c")
m(50, 30, "Purge", "c2s", (("ticket", SHORT), ("queue", SHORTSTR), ("nowait", BIT)), ("PurgeOk",), info=(Q,))
m(50, 31, "PurgeOk", "s2c", (("message_count", LONG),), info=(("messages", "message_count"),))
m(50, 40, "Delete", "c2s", (("ticket", SHORT), ("queue", SHORTSTR), ("if_unused", BIT), ("if_empty", BIT),
                            ("nowait", BIT)), ("DeleteOk",), info=(Q,))
m(50, 41, "DeleteOk", "s2c", (("message_count", LONG),), info=(("messages", "message_count"),))
m(50, 50, "Unbind", "c2s", (*_QBIND, ("arguments", TABLE)), ("UnbindOk",), info=(Q, X, ("bk", "routing_key")))
m(50, 51, "UnbindOk", "s2c")
# --- basic (60) --------------------------------------------------------------------------------
m(60, 10, "Qos", "c2s", (("prefetch_size", LONG), ("prefetch_count", SHORT), ("global", BIT)), ("QosOk",),
  info=(("prefetch", "prefetch_count"),))
m(60, 11, "QosOk", "s2c")
m(60, 20, "Consume", "c2s", (("ticket", SHORT), ("queue", SHORTSTR), ("consumer_tag", SHORTSTR),
                             ("no_local", BIT), ("no_ack", BIT), ("exclusive", BIT), ("nowait", BIT),
                             ("arguments", TABLE)), ("ConsumeOk",), info=(Q, ("ctag", "consumer_tag")))
m(60, 21, "ConsumeOk", "s2c", (("consumer_tag", SHORTSTR),), info=(("ctag", "consumer_tag"),))
m(60, 30, "Cancel", "both", (("consumer_tag", SHORTSTR), ("nowait", BIT)), ("CancelOk",),
  info=(("ctag", "consumer_tag"),))
m(60, 31, "CancelOk", "both", (("consumer_tag", SHORTSTR),), info=(("ctag", "consumer_tag"),))
m(60, 40, "Publish", "c2s", (("ticket", SHORT), ("exchange", SHORTSTR), ("routing_key", SHORTSTR),
                             ("mandatory", BIT), ("immediate", BIT)), content=True, info=(X, RK))
m(60, 50, "Return", "s2c", (("reply_code", SHORT), ("reply_text", SHORTSTR), ("exchange", SHORTSTR),
                            ("routing_key", SHORTSTR)), content=True, info=(X, RK))
m(60, 60, "Deliver", "s2c", (("consumer_tag", SHORTSTR), ("delivery_tag", LONGLONG), ("redelivered", BIT),
                             ("exchange", SHORTSTR), ("routing_key", SHORTSTR)), content=True, info=(X, RK, TAG))
m(60, 70, "Get", "c2s", (("ticket", SHORT), ("queue", SHORTSTR), ("no_ack", BIT)), ("GetOk", "GetEmpty"),
  info=(Q,))
m(60, 71, "GetOk", "s2c", (("delivery_tag", LONGLONG), ("redelivered", BIT), ("exchange", SHORTSTR),
                           ("routing_key", SHORTSTR), ("message_count", LONG)), content=True,
  info=(X, RK, TAG, ("left", "message_count")))
m(60, 72, "GetEmpty", "s2c", (("cluster_id", SHORTSTR),))
m(60, 80, "Ack", "both", (("delivery_tag", LONGLONG), ("multiple", BIT)), info=(TAG,))
m(60, 90, "Reject", "c2s", (("delivery_tag", LONGLONG), ("requeue", BIT)), info=(TAG,))
m(60, 100, "RecoverAsync", "c2s", (("requeue", BIT),))
m(60, 110, "Recover", "c2s", (("requeue", BIT),), ("RecoverOk",))
m(60, 111, "RecoverOk", "s2c")
m(60, 120, "Nack", "both", (("delivery_tag", LONGLONG), ("multiple", BIT), ("requeue", BIT)), info=(TAG,))
_INTERNAL = "RabbitMQ-internal credit extension, not for use on the network"
m(60, 200, "Credit", "c2s", (("consumer_tag", SHORTSTR), ("credit", LONG), ("drain", BIT)), ("CreditOk",),
  note=_INTERNAL)
m(60, 201, "CreditOk", "s2c", (("available", LONG),), note=_INTERNAL)
m(60, 202, "CreditDrained", "s2c", (("consumer_tag", SHORTSTR), ("credit_drained", LONG)), note=_INTERNAL)
# --- confirm (85) and tx (90) --------------------------------------------------------------------
m(85, 10, "Select", "c2s", (("nowait", BIT),), ("SelectOk",))
m(85, 11, "SelectOk", "s2c")
m(90, 10, "Select", "c2s", (), ("SelectOk",))
m(90, 11, "SelectOk", "s2c")
m(90, 20, "Commit", "c2s", (), ("CommitOk",))
m(90, 21, "CommitOk", "s2c")
m(90, 30, "Rollback", "c2s", (), ("RollbackOk",))
m(90, 31, "RollbackOk", "s2c")

METHODS: dict[int, Method] = {}
BY_NAME: dict[str, Method] = {}
for _meth in _M:
    _meth.code = _meth.class_id << 16 | _meth.method_id
    _meth.has_nowait = any(f.name == "nowait" for f in _meth.layout.fields)
    METHODS[_meth.code] = _meth
    BY_NAME[_meth.name] = _meth
for _meth in _M:
    _meth.response_codes = frozenset(BY_NAME[r].code for r in _meth.responses)
del _meth

#: Names of methods that answer some synchronous request (an -Ok, get-empty ...).
RESPONSE_CODES: frozenset[int] = frozenset(c for meth in _M for c in meth.response_codes)

CONNECTION_START = BY_NAME["Connection.Start"].code
CONNECTION_START_OK = BY_NAME["Connection.StartOk"].code
CONNECTION_SECURE = BY_NAME["Connection.Secure"].code
CONNECTION_SECURE_OK = BY_NAME["Connection.SecureOk"].code
CONNECTION_TUNE = BY_NAME["Connection.Tune"].code
CONNECTION_TUNE_OK = BY_NAME["Connection.TuneOk"].code
CONNECTION_OPEN = BY_NAME["Connection.Open"].code
CONNECTION_OPEN_OK = BY_NAME["Connection.OpenOk"].code
CONNECTION_CLOSE = BY_NAME["Connection.Close"].code
CONNECTION_CLOSE_OK = BY_NAME["Connection.CloseOk"].code
CHANNEL_OPEN = BY_NAME["Channel.Open"].code
CHANNEL_OPEN_OK = BY_NAME["Channel.OpenOk"].code
CHANNEL_CLOSE = BY_NAME["Channel.Close"].code
CHANNEL_CLOSE_OK = BY_NAME["Channel.CloseOk"].code
BASIC_PUBLISH = BY_NAME["Basic.Publish"].code
BASIC_RETURN = BY_NAME["Basic.Return"].code
BASIC_DELIVER = BY_NAME["Basic.Deliver"].code
BASIC_GET_OK = BY_NAME["Basic.GetOk"].code
BASIC_GET = BY_NAME["Basic.Get"].code
BASIC_GET_EMPTY = BY_NAME["Basic.GetEmpty"].code
BASIC_CONSUME = BY_NAME["Basic.Consume"].code
BASIC_CONSUME_OK = BY_NAME["Basic.ConsumeOk"].code
BASIC_CANCEL = BY_NAME["Basic.Cancel"].code
BASIC_CANCEL_OK = BY_NAME["Basic.CancelOk"].code
BASIC_ACK = BY_NAME["Basic.Ack"].code
BASIC_NACK = BY_NAME["Basic.Nack"].code
BASIC_REJECT = BY_NAME["Basic.Reject"].code
CONFIRM_SELECT = BY_NAME["Confirm.Select"].code
CONFIRM_SELECT_OK = BY_NAME["Confirm.SelectOk"].code
TX_SELECT = BY_NAME["Tx.Select"].code
