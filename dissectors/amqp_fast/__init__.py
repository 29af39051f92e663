"""AMQP/Fast 0.7 (iMatix AMQ RFC 006, 2005) on TCP port 3018, the RFC's example port.

The client opens with two octets (protocol id 128, version 1); then both sides exchange commands:
a size (2 octets, or 0xFFFF and 4 octets), a command type octet, fields, and the command-end
0xCE, which the size counts. HANDLE SEND, NOTIFY and PREPARE are followed by fragment-size octets
of message data outside the command. One module per responsibility: commands (every command as
data), wire (wire types and the open encoding choices), framing, decode, messages (fragments and
reassembly), machines (the flow summaries as transition tables), connection, rules, catalog,
codes (reply codes by their digits), encode (the test and capture encoder).

Encoding choices (RFC 006 leaves them open; each an option, ``-o amqp_fast.NAME=VALUE``):

- ``bit_order`` (default ``lsb``): "Bits are packed into octets" (§3.1.2) without saying in which
  order. The default puts the first bit field in the lowest bit, as AMQP 0-8 and 0-9-1, the
  protocols that followed, define it; ``msb`` puts it in the highest.
- ``long_string_length`` (default ``2``): the ABNF defines ``long-string = short-integer *OCTET``
  (a 2-octet length) and §3.1.1 says empty strings take "one or two octets depending on the type of
  string", so the default is 2; ``4`` is what the name "long" suggests and AMQP 0-9-1 uses.
- ``field_table_length`` (default ``2``): field tables are "to be defined later"; the ABNF gives
  the one it uses (CONNECTION CHALLENGE ``challenges``) as a long-string, so a table is taken as a
  length-prefixed block of octets, the prefix 2 octets by default, or ``4``.

Other choices where the RFC is silent or contradicts itself: HANDLE BROWSE has a confirm-tag
(§3.5.9; the ABNF lacks it, and a 6-octet BROWSE without it is accepted and noted); the 4096-octet
limit applies to the three commands the RFC gives it (CONNECTION CHALLENGE, RESPONSE and TUNE) and
counts the whole frame (size header to command-end); frame-max is the client's TUNE value once sent
(before it, the server's) and bounds every command frame and every fragment-size; CHANNEL ACK is
confirmed by CHANNEL REPLY, or by HANDLE REPLY as §3.3.9 has it (with the same confirm-tag); the message
head, which has no length of its own, is the start of a message's first fragment (or of HANDLE
PREPARE's data), and HANDLE SEND or NOTIFY after HANDLE READY continue that prepared message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analyzer.api import CommandDoc, Connection, Dissector, Option, Rule, Sniff

__all__ = ["AmqpFastConnection", "AmqpFastDissector"]

# The decoder's modules are imported by the methods that need them: a run loads every dissector
# but decodes with those its conversations' ports or heuristics choose (tens of milliseconds of
# start-up each otherwise).

OPTIONS = (
    Option("bit_order", "order of bit fields packed into an octet: lsb (first field in the lowest bit, as AMQP "
                        "0-9-1) or msb", "lsb", ("lsb", "msb")),
    Option("long_string_length", "octets of a long string's length prefix (the RFC's ABNF: 2)", "2", ("2", "4")),
    Option("field_table_length", "octets of a field table's length prefix (the RFC's ABNF: 2)", "2", ("2", "4")),
)


class AmqpFastDissector(Dissector):
    name = "amqp_fast"
    title = "AMQP/Fast 0.7 (iMatix AMQ RFC 006)"
    default_ports = (3018,)
    options = OPTIONS

    def __init__(self, *, hot: bool = True) -> None:
        #: hot=False: every piece through the kit's framer (the reference the hot path is tested against).
        self.hot = hot

    def chosen(self) -> dict[str, str]:
        return {o.name: self.setting(o.name) for o in OPTIONS}

    def sniff(self, data: bytes) -> Sniff:
        """The client's initiation (128 1), alone or followed by a well-formed command; or the server's
        first CONNECTION CHALLENGE, whole and well-formed. Anything else (HTTP, TLS, random octets) is
        not AMQP/Fast."""
        from dissectors.amqp_fast.commands import PROTOCOL_ID, PROTOCOL_VERSION
        from dissectors.amqp_fast.connection import encoding
        from dissectors.amqp_fast.framing import DEFAULT_CAP, believable, header

        enc = encoding(self.chosen())
        if len(data) >= 2 and data[0] == PROTOCOL_ID and data[1] == PROTOCOL_VERSION:
            if len(data) == 2:
                return Sniff(0.6, True)
            verdict = believable(data, 2, enc, DEFAULT_CAP)
            if verdict > 0 and data[4 if data[2:4] != b"\xff\xff" else 8] == 11:  # CONNECTION RESPONSE
                return Sniff(0.95, True)
            if verdict == 0:
                # Not whole yet: it must still look like the CONNECTION RESPONSE (type 11, at most
                # 4096 octets) that follows the initiation.
                hs, size = header(data, 2)
                if hs and (size > 4096 or (len(data) > 2 + hs and data[2 + hs] != 11)):
                    return Sniff(0.0)
                return Sniff(0.6, True)
            return Sniff(0.0)
        if len(data) >= 6 and believable(data, 0, enc, 4096) > 0:
            hs = 6 if data[:2] == b"\xff\xff" else 2
            if data[hs] == 10 and data[hs + 1] == PROTOCOL_VERSION:  # CONNECTION CHALLENGE v1
                return Sniff(0.9, False)
        return Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        from dissectors.amqp_fast.connection import AmqpFastConnection

        return AmqpFastConnection(midstream, self.chosen(), hot=self.hot)

    def resume(self, state: dict[str, Any]) -> Connection:
        from dissectors.amqp_fast.connection import AmqpFastConnection
        from dissectors.kit import state as kit_state

        return kit_state.resume(state, AmqpFastConnection)

    def rules(self) -> Sequence[Rule]:
        from dissectors.amqp_fast.rules import ALL_RULES

        return ALL_RULES

    def machines(self) -> Sequence[Any]:
        from dissectors.amqp_fast.machines import MACHINES

        return MACHINES

    def fields(self) -> Sequence[Any]:
        from dissectors.amqp_fast.catalog import FIELDS

        return FIELDS

    def commands(self) -> Sequence[CommandDoc]:
        from dissectors.amqp_fast.commands import COMMANDS, MESSAGE_HEAD, describe

        docs = [CommandDoc("128 1", "INITIATION", "c2s", "0.7", "protocol_id:octet, protocol_version:octet")]
        for c in COMMANDS:
            extra = []
            if c.data:
                extra.append("+fragment-size octets of message data" + (", unless out-of-band"
                                                                        if c.has("out_of_band") else ""))
            if c.reply:
                extra.append(f"confirm-tag -> {c.reply}")
            if c.limit:
                extra.append(f"at most {c.limit} octets")
            fields = describe(c.fields) + (f" [{'; '.join(extra)}]" if extra else "")
            docs.append(CommandDoc(str(c.code), c.name, c.sender, "0.7", fields))
        docs.append(CommandDoc("-", "MESSAGE FRAGMENT", "both", "0.7",
                               f"message head on the first fragment: {describe(MESSAGE_HEAD)}; then body octets"))
        return docs


def __getattr__(name: str) -> Any:
    # The connection class stays importable from the package, loaded when asked for.
    if name == "AmqpFastConnection":
        from dissectors.amqp_fast.connection import AmqpFastConnection

        return AmqpFastConnection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
