"""The connection handshake as a transition table (:class:`~dissectors.kit.Machine`).

PeerProperties, SaslHandshake, SaslAuthenticate (repeated while the server answers with a
challenge), the server's Tune once authentication succeeded, the client's Tune, Open; nothing else
before Open. Events are command names; ``SaslAuthenticateOk`` is the server's successful
SaslAuthenticate response and ``Tune`` from the client is its Tune (keyed as a response).

A server Tune that arrives before authentication succeeded is reported and remembered: the
``…+tuned`` states continue the client's steps without reporting the same mistake again. After
any other out-of-order event the conversation is taken to be where that event leads (the
machine's ``recover``), so one mistake is one finding. Open straight after the server's Tune is
legal but noted (the machine's ``noted``), in words of its own (:func:`message`).
"""

from __future__ import annotations

from analyzer.api import Rule
from dissectors.kit import Machine
from dissectors.rabbitmq_stream import rules as R
from dissectors.rabbitmq_stream.dialects import CURRENT, DRAFT

C, S = "c2s", "s2c"
#: Client progress, in order (the rank decides where an out-of-order event leaves the machine).
ORDER = ("start", "peer_properties", "sasl_handshake", "authenticating", "authenticated", "tuned", "client_tuned",
         "open")
RANK = {s: i for i, s in enumerate(ORDER)}
PRE_AUTH = ORDER[:4]
HANDSHAKE_EVENTS = frozenset({"PeerProperties", "SaslHandshake", "SaslAuthenticate", "SaslAuthenticateOk", "Tune",
                              "Open"})
#: Where a client step leads.
TARGET = {"PeerProperties": "peer_properties", "SaslHandshake": "sasl_handshake", "SaslAuthenticate": "authenticating",
          "Tune": "client_tuned", "Open": "open"}


def _tuned(state: str) -> str:
    return state + "+tuned"


def _base(state: str) -> str:
    return state.removesuffix("+tuned")


def _rows() -> dict[tuple[str, str, str], str]:
    rows = {
        ("start", C, "PeerProperties"): "peer_properties",
        ("peer_properties", C, "SaslHandshake"): "sasl_handshake",
        ("sasl_handshake", C, "SaslAuthenticate"): "authenticating",
        ("authenticating", C, "SaslAuthenticate"): "authenticating",
        ("authenticating", S, "SaslAuthenticateOk"): "authenticated",
        ("authenticated", S, "Tune"): "tuned",
        ("tuned", C, "Tune"): "client_tuned",
        ("tuned", C, "Open"): "open",  # without the client's Tune: legal, noted
        ("client_tuned", C, "Open"): "open",
        ("open", C, "SaslAuthenticate"): "open",  # re-authentication
        ("open", S, "SaslAuthenticateOk"): "open",
    }
    # The server tuned early (reported once): the client's steps go on as usual.
    for (state, d, event), nxt in list(rows.items()):
        if state in PRE_AUTH and d == C:
            rows[(_tuned(state), d, event)] = _tuned(nxt) if nxt in PRE_AUTH else nxt
    rows[(_tuned("authenticating"), S, "SaslAuthenticateOk")] = "tuned"
    # Nothing but the handshake before Open; every other command after it, from either side.
    others = {c.name for dialect in (CURRENT, DRAFT) for c in dialect.commands.values()}
    for name in sorted(others - HANDSHAKE_EVENTS - {"Heartbeat", "Close"}):
        rows[("open", C, name)] = "open"
        rows[("open", S, name)] = "open"
    return rows


def _recover(rows: dict[tuple[str, str, str], str]) -> dict[tuple[str, str, str], str]:
    """Where an out-of-order event leaves the machine (absent: where it was)."""
    out: dict[tuple[str, str, str], str] = {}
    for state in ORDER + tuple(_tuned(s) for s in PRE_AUTH):
        base = _base(state)
        for event, target in TARGET.items():
            # Only for steps the table lacks: a legal step simply goes where its row says.
            if RANK[target] > RANK[base] and (state, C, event) not in rows:
                out[(state, C, event)] = _tuned(target) if state != base and target in PRE_AUTH else target
        if state in PRE_AUTH:
            out[(state, S, "Tune")] = _tuned(state)
    return out


_ROWS = _rows()
MACHINE = Machine(
    "handshake", "start", _ROWS, R.HANDSHAKE_ORDER, ignore=frozenset({"Heartbeat", "Close"}),
    labels={s: s.replace("_", " ").replace("+tuned", " (server already tuned)") for s in
            ORDER + tuple(_tuned(s) for s in PRE_AUTH)},
    recover=_recover(_ROWS),
    noted={("tuned", C, "Open"): R.NO_CLIENT_TUNE},
)


def message(rule: Rule, state: str, direction: str, event: str) -> str:
    """The text of a finding the machine decided on: the machine's own, but for the note."""
    if rule is R.NO_CLIENT_TUNE:
        return "Open without the client's Tune"
    return MACHINE.message(state, direction, event)
