"""RabbitMQ Stream protocol dissector (port 5552).

Decodes every command of today's protocol (keys 0x0001-0x001f, requests and responses, Publish and
Deliver v1/v2, the Osiris chunk with CRC check, sub-batches, AMQP 1.0 messages) and of the 2020
pre-release draft (keys 0-15, 998, 999).

Dialects (``Frame.dialect`` / ``Connection.dialect``):

- ``current``: the protocol as released since RabbitMQ 3.9 (Version 1/2, response bit 0x8000).
  The broker version, when the server announces it in its PeerProperties response (property
  ``version``), is shown in that frame's Info line as ``broker=X.Y.Z``.
- ``2020-draft``: Version 0 frames of the 2020 draft (no response bit, 0-based response codes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analyzer.api import CommandDoc, Connection, Dissector, Rule, Sniff

if TYPE_CHECKING:
    from dissectors.kit import Machine
    from dissectors.kit.catalog import FieldDef

__all__ = ["RabbitMQStreamDissector"]

# The decoder's modules are imported by the methods that need them: a run loads every dissector
# but decodes with those its conversations' ports or heuristics choose (tens of milliseconds of
# start-up each otherwise).

class RabbitMQStreamDissector(Dissector):
    name = "rabbitmq_stream"
    title = "RabbitMQ Stream"
    default_ports = (5552,)

    def sniff(self, data: bytes) -> Sniff:
        # Evidence, not a plausible header: see heuristic.py (a Kafka request header reads as one).
        from dissectors.rabbitmq_stream import heuristic

        return heuristic.sniff(data)

    def connection(self, midstream: bool) -> Connection:
        from dissectors.rabbitmq_stream.connection import StreamConnection

        return StreamConnection(midstream)

    def resume(self, state: dict[str, Any]) -> Connection:
        from dissectors.kit import state as kit_state
        from dissectors.rabbitmq_stream.connection import StreamConnection

        return kit_state.resume(state, StreamConnection)

    def rules(self) -> Sequence[Rule]:
        from dissectors.rabbitmq_stream.rules import RULES

        return RULES

    def machines(self) -> Sequence[Machine]:
        from dissectors.rabbitmq_stream.handshake import MACHINE

        return (MACHINE,)

    def fields(self) -> Sequence[FieldDef]:
        # Imported here: building the catalogue costs tens of milliseconds that decoding never needs.
        from dissectors.rabbitmq_stream.catalog import CATALOG

        return tuple(CATALOG)

    def commands(self) -> Sequence[CommandDoc]:
        from dissectors.rabbitmq_stream.draft import DRAFT_COMMANDS
        from dissectors.rabbitmq_stream.layouts import COMMANDS, RESPONSE_BIT

        docs: list[CommandDoc] = []
        for cmd in COMMANDS.values():
            versions = ", ".join(str(v) for v in sorted(cmd.requests))
            for v, layout in sorted(cmd.requests.items()):
                docs.append(CommandDoc(f"{cmd.key:#06x}", cmd.name, cmd.sender, str(v), layout.describe()))
            if cmd.response is not None:
                docs.append(CommandDoc(f"{cmd.key | RESPONSE_BIT:#06x}", cmd.name + "Response",
                                       _flip(cmd.sender), versions, cmd.response.describe()))
        for cmd in DRAFT_COMMANDS.values():
            layout = cmd.requests[0]
            docs.append(CommandDoc(f"draft {cmd.key}", cmd.name, cmd.sender, "0 (2020 draft)", layout.describe()))
            if cmd.response is not None:
                docs.append(CommandDoc(f"draft {cmd.key}", cmd.name + "Response", _flip(cmd.sender),
                                       "0 (2020 draft)", cmd.response.describe()))
        return docs


def _flip(sender: str) -> str:
    return {"c2s": "s2c", "s2c": "c2s"}.get(sender, sender)
