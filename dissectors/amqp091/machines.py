"""The connection handshake and the channel lifecycle as transition tables (spec §2.2.4, §7.1, §7.3).

Each machine is the whole machine: the connection steps it and reports what it lacks,
``streamproto protocols`` prints it. The channel machine's illegal transitions are reported under
several rules (a frame on a channel never opened, after its sender closed it, ...): its
``illegal`` maps each one to its rule and to the state the channel is followed in, and
:func:`channel_message` words the finding.
"""

from __future__ import annotations

from analyzer.api import Rule
from dissectors.amqp091 import rules as R
from dissectors.kit.machine import ANY, Machine

D = ("c2s", "s2c")

# --------------------------------------------------------------------------------- handshake
HS_START = "header"
HS_DONE = "open"
_HS = {
    ("header", "c2s", "ProtocolHeader"): "start",
    ("start", "s2c", "Connection.Start"): "start_ok",
    ("start_ok", "c2s", "Connection.StartOk"): "securing",
    ("securing", "s2c", "Connection.Secure"): "secure_ok",
    ("secure_ok", "c2s", "Connection.SecureOk"): "securing",
    ("securing", "s2c", "Connection.Tune"): "tune_ok",
    ("tune_ok", "c2s", "Connection.TuneOk"): "connect",
    ("connect", "c2s", "Connection.Open"): "open_ok",
    ("open_ok", "s2c", "Connection.OpenOk"): "open",
    # Once open: channel traffic and the connection methods that are not handshake steps.
    ("open", "c2s", "channel"): "open",
    ("open", "s2c", "channel"): "open",
    ("open", "s2c", "Connection.Blocked"): "open",
    ("open", "s2c", "Connection.Unblocked"): "open",
    ("open", "c2s", "Connection.UpdateSecret"): "open",
    ("open", "s2c", "Connection.UpdateSecretOk"): "open",
    # Either side may close at any time (the server refuses a login with connection.close); after a
    # close, frames already in flight still come.
    (ANY, "c2s", "Connection.Close"): "closed",
    (ANY, "s2c", "Connection.Close"): "closed",
    ("closed", "c2s", "channel"): "closed",
    ("closed", "s2c", "channel"): "closed",
}
#: Handshake steps: event -> the state it leads to, where it is taken even out of order (the
#: connection is followed as the peers see it, and the out-of-order step reported once).
_HS_RECOVER = {(ANY, d, e): nxt for (s, d, e), nxt in _HS.items() if s not in (ANY, "open", "closed")}
HANDSHAKE = Machine(
    "amqp091 connection", HS_START, _HS, R.HANDSHAKE_ORDER,
    ignore=frozenset({"Connection.CloseOk"}),  # judged by correlation (close-ok without close)
    final=frozenset({"header", "open", "closed"}), incomplete=R.HANDSHAKE_INCOMPLETE,
    labels={"header": "waiting for the protocol header", "start": "waiting for connection.start",
            "start_ok": "waiting for connection.start-ok",
            "securing": "waiting for connection.secure or connection.tune",
            "secure_ok": "waiting for connection.secure-ok", "tune_ok": "waiting for connection.tune-ok",
            "connect": "waiting for connection.open", "open_ok": "waiting for connection.open-ok",
            "open": "open", "closed": "closed"},
    recover=_HS_RECOVER)


# --------------------------------------------------------------------------------- channels
NEW, OPENING, OPEN, CLOSED = "new", "opening", "open", "closed"
#: closing_c2s: the client sent channel.close; closing_s2c: the server did; closing_both: both.
CLOSING = {"c2s": "closing_c2s", "s2c": "closing_s2c"}
BOTH = "closing_both"
STATES = (NEW, OPENING, OPEN, CLOSING["c2s"], CLOSING["s2c"], BOTH, CLOSED)
LABELS = {NEW: "never opened", OPENING: "opening", OPEN: "open", CLOSING["c2s"]: "closing (by the client)",
          CLOSING["s2c"]: "closing (by the server)", BOTH: "closing (by both sides)", CLOSED: "closed"}
# Events: the four channel methods, and "frame" for any other method or content frame.
OPEN_M, OPEN_OK, CLOSE, CLOSE_OK, FRAME = "Channel.Open", "Channel.OpenOk", "Channel.Close", "Channel.CloseOk", "frame"


def _channel_rows() -> dict[tuple[str, str, str], str]:
    rows: dict[tuple[str, str, str], str] = {}
    for d in D:
        o = "s2c" if d == "c2s" else "c2s"
        for s in (NEW, CLOSED, CLOSING["c2s"], CLOSING["s2c"], BOTH):
            rows[s, d, OPEN_M] = OPENING
        for s in STATES:  # open-ok only moves an opening channel; elsewhere correlation judges it
            rows[s, d, OPEN_OK] = OPEN if s == OPENING else s
        rows[OPENING, d, CLOSE] = CLOSING[d]
        rows[OPEN, d, CLOSE] = CLOSING[d]
        rows[CLOSING[o], d, CLOSE] = BOTH
        rows[CLOSING[o], d, CLOSE_OK] = CLOSED
        rows[BOTH, d, CLOSE_OK] = CLOSING[d]
        rows[OPEN, d, FRAME] = OPEN
        rows[CLOSING[o], d, FRAME] = CLOSING[o]  # the peer's frames in flight before it saw the close
    return rows


def _illegal() -> dict[tuple[str, str, str], tuple[Rule, str]]:
    out: dict[tuple[str, str, str], tuple[Rule, str]] = {}
    for d in D:
        for s in (OPENING, OPEN):
            out[s, d, OPEN_M] = (R.CHANNEL_ALREADY_OPEN, OPENING)
        for s in (NEW, CLOSED):
            out[s, d, CLOSE] = (R.CHANNEL_NOT_OPEN, CLOSING[d])
            out[s, d, FRAME] = (R.CHANNEL_NOT_OPEN, OPEN)  # reported once, then followed as open
        out[OPENING, d, FRAME] = (R.CHANNEL_NOT_OPEN, OPENING)
        for s in (CLOSING[d], BOTH):
            out[s, d, CLOSE] = (R.CHANNEL_AFTER_CLOSE, s)
            out[s, d, FRAME] = (R.CHANNEL_AFTER_CLOSE, s)
        for s in (NEW, OPENING, OPEN, CLOSED):
            out[s, d, CLOSE_OK] = (R.CHANNEL_CLOSE_OK, CLOSED)
        out[CLOSING[d], d, CLOSE_OK] = (R.CHANNEL_CLOSE_OK, CLOSING[d])
    return out


CHANNEL = Machine("amqp091 channel", NEW, _channel_rows(), R.CHANNEL_NOT_OPEN, labels=LABELS, illegal=_illegal())
# Every transition is legal or has its rule: the default rule (and staying put) is never used.
assert len(CHANNEL.illegal) + len(CHANNEL.rows) == len(STATES) * len(D) * 5, "every transition is legal or mapped"


def channel_message(rule: Rule, event: str, ch: int, state: str, what: str) -> str:
    if rule is R.CHANNEL_ALREADY_OPEN:
        return f"channel {ch} is already {LABELS[state]}"
    if rule is R.CHANNEL_CLOSE_OK:
        return f"channel.close-ok on channel {ch} but the peer did not close it"
    if rule is R.CHANNEL_AFTER_CLOSE:
        return (f"second channel.close on channel {ch}" if event == CLOSE else
                f"{what} on channel {ch} after this side sent channel.close")
    if state == OPENING:
        return f"{what} on channel {ch} before channel.open-ok"
    return f"{what} on channel {ch}, which is {LABELS[state]}"


MACHINES = (HANDSHAKE, CHANNEL)
