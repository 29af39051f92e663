"""The command flow summaries of RFC 006 as transition tables: the connection (§2.2.8.1, §3.2.10),
a channel (§3.3.9) and a handle (§3.5.17).

Each summary says, per side, which commands are expected when, and which are "never expected"
(a fatal error): those are the machines' illegal transitions under ``flow.never_expected``, in
every state, and the machine stays where it was. The close handshakes (§3.2.9, §3.3.7, §3.5.16)
are part of each machine: after sending CLOSE a side sends nothing but CLOSE (it may repeat it to
answer commands in flight), while the peer's commands in flight are still legal until it answers.
"""

from __future__ import annotations

from typing import Final

from analyzer.api import Rule
from dissectors.amqp_fast import rules as R
from dissectors.amqp_fast.commands import COMMANDS
from dissectors.amqp_fast.decode import INITIATION
from dissectors.kit.machine import ANY, Key, Machine

D = ("c2s", "s2c")
_OTHER = {"c2s": "s2c", "s2c": "c2s"}


def senders(level: str) -> dict[str, tuple[str, ...]]:
    """Command name -> the directions that may send it, for the commands of ``level``."""
    return {c.name: D if c.sender == "both" else (c.sender,) for c in COMMANDS if c.level == level}


# --------------------------------------------------------------------------------- connection
CHALLENGE, RESPONSE, TUNE = "CONNECTION CHALLENGE", "CONNECTION RESPONSE", "CONNECTION TUNE"
OPEN, REPLY, CLOSE, PING = "CONNECTION OPEN", "CONNECTION REPLY", "CONNECTION CLOSE", "CONNECTION PING"
CHANNEL: Final = "channel"  # any channel or destination command, or message data
CLOSING = {"c2s": "closing_c2s", "s2c": "closing_s2c"}
#: The negotiation in order; a step taken early moves the machine forward, never back.
STEPS = ("initiation", "challenge", "response", "responded", "tune", "connect", "open")
CONN_STATES = (*STEPS, "open_untuned", CLOSING["c2s"], CLOSING["s2c"], "closed")
CONN_LABELS = {
    "initiation": "waiting for the initiation", "challenge": "waiting for CONNECTION CHALLENGE",
    "response": "waiting for CONNECTION RESPONSE",
    "responded": "waiting for CONNECTION CHALLENGE or the server's CONNECTION TUNE",
    "tune": "waiting for the client's CONNECTION TUNE", "connect": "waiting for CONNECTION OPEN", "open": "open",
    "open_untuned": "open before the client's CONNECTION TUNE", CLOSING["c2s"]: "closing (by the client)",
    CLOSING["s2c"]: "closing (by the server)", "closed": "closed"}


def _connection() -> Machine:
    rows: dict[Key, str] = {
        ("initiation", "c2s", INITIATION): "challenge",
        ("challenge", "s2c", CHALLENGE): "response",
        ("response", "c2s", RESPONSE): "responded",
        ("responded", "s2c", CHALLENGE): "response",  # another round of the security dialogue
        ("responded", "s2c", TUNE): "tune",
        ("tune", "c2s", TUNE): "connect",
        ("connect", "c2s", OPEN): "open",
        ("open", "s2c", REPLY): "open",
        ("open", "c2s", CHANNEL): "open",
        ("open", "s2c", CHANNEL): "open",
        ("open_untuned", "c2s", TUNE): "open",
        ("open_untuned", "s2c", REPLY): "open_untuned",
        ("open_untuned", "c2s", CHANNEL): "open_untuned",
        ("open_untuned", "s2c", CHANNEL): "open_untuned",
    }
    illegal: dict[Key, tuple[Rule, str]] = {}
    sends = senders("connection")
    sends[INITIATION] = ("c2s",)
    del sends[PING]  # expected at any time: the machine ignores it
    events = [*sends, CHANNEL]
    for d in D:
        o = _OTHER[d]
        rows[ANY, d, CLOSE] = CLOSING[d]
        rows[CLOSING[o], d, CLOSE] = "closed"
        rows[CLOSING[d], d, CLOSE] = CLOSING[d]  # repeated to answer commands in flight
        for e in events:
            if e == CLOSE or d not in sends.get(e, D):
                continue
            rows[CLOSING[o], d, e] = CLOSING[o]  # in flight before this side saw the close
            illegal[CLOSING[d], d, e] = (R.CONNECTION_AFTER_CLOSE, CLOSING[d])
            illegal["closed", d, e] = (R.CONNECTION_AFTER_CLOSE, "closed")
        for e, who in sends.items():
            if d not in who:
                for s in CONN_STATES:
                    illegal[s, d, e] = (R.NEVER_EXPECTED, s)
    for s in STEPS[:5]:
        illegal[s, "c2s", OPEN] = (R.OPEN_BEFORE_TUNE, "open_untuned")
    # Other steps out of order: reported under handshake.order; the connection is followed as the
    # peers see it, so a step taken early moves the machine on to where it leads.
    recover: dict[Key, str] = {}
    steps = [(k, nxt) for k, nxt in rows.items() if k[0] in STEPS[:6]]
    for (_s, d, e), nxt in steps:
        for s in STEPS:
            key = (s, d, e)
            if key not in rows and key not in illegal and STEPS.index(nxt) > STEPS.index(s):
                recover[key] = nxt
    return Machine("amqp_fast connection", "initiation", rows, R.HANDSHAKE_ORDER, ignore=frozenset({PING}),
                   final=frozenset({"initiation", "open", "open_untuned", *CLOSING.values(), "closed"}),
                   incomplete=R.HANDSHAKE_INCOMPLETE, labels=CONN_LABELS, illegal=illegal, recover=recover)


CONNECTION = _connection()

# --------------------------------------------------------------------------------- channels and handles
NEW, LIVE, CLOSED = "new", "open", "closed"
LEVEL_STATES = (NEW, LIVE, CLOSING["c2s"], CLOSING["s2c"], CLOSED)
COMMAND: Final = "command"  # on a channel: a destination command or message data of one of its handles


def _lifecycle(level: str, rules: tuple[Rule, Rule, Rule]) -> Machine:
    not_open, already_open, after_close = rules
    word = level.upper()
    open_, close = f"{word} OPEN", f"{word} CLOSE"
    sends = senders(level)
    if level == "channel":
        sends[COMMAND] = D
    rows: dict[Key, str] = {}
    illegal: dict[Key, tuple[Rule, str]] = {}
    for s in (NEW, CLOSED):
        rows[s, "c2s", open_] = LIVE
    for s in (LIVE, CLOSING["c2s"], CLOSING["s2c"]):
        illegal[s, "c2s", open_] = (already_open, LIVE)
    for d in D:
        o = _OTHER[d]
        rows[LIVE, d, close] = CLOSING[d]
        rows[CLOSING[o], d, close] = CLOSED
        rows[CLOSING[d], d, close] = CLOSING[d]  # repeated to answer commands in flight
        for s in (NEW, CLOSED):
            illegal[s, d, close] = (not_open, CLOSING[d])
        for e, who in sends.items():
            if d not in who:
                for s in LEVEL_STATES:
                    illegal[s, d, e] = (R.NEVER_EXPECTED, s)
                continue
            if e in (open_, close):
                continue
            rows[LIVE, d, e] = LIVE
            rows[CLOSING[o], d, e] = CLOSING[o]  # in flight before this side saw the close
            illegal[CLOSING[d], d, e] = (after_close, CLOSING[d])
            for s in (NEW, CLOSED):
                illegal[s, d, e] = (not_open, LIVE)  # reported once, then followed as open
    labels = {NEW: "never opened", LIVE: "open", CLOSING["c2s"]: "closing (by the client)",
              CLOSING["s2c"]: "closing (by the server)", CLOSED: "closed"}
    return Machine(f"amqp_fast {level}", NEW, rows, not_open, labels=labels, illegal=illegal)


CHANNEL_MACHINE = _lifecycle("channel", (R.CHANNEL_NOT_OPEN, R.CHANNEL_ALREADY_OPEN, R.CHANNEL_AFTER_CLOSE))
HANDLE_MACHINE = _lifecycle("handle", (R.HANDLE_NOT_OPEN, R.HANDLE_ALREADY_OPEN, R.HANDLE_AFTER_CLOSE))

MACHINES = (CONNECTION, CHANNEL_MACHINE, HANDLE_MACHINE)
