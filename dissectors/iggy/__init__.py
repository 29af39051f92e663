"""Apache Iggy binary TCP protocol dissector (port 8090).

Decodes every command of every wire dialect of Iggy (iggy.md, and the 2023 page for L0):
requests with their payloads (identifiers, consumers, partitioning, polling strategies, users and
permissions, personal access tokens, consumer groups, offsets, segments, flush, cluster metadata,
snapshots), SEND_MESSAGES and polled messages in every message format with their checksums
verified (:mod:`.messages`), and responses decoded by the request they answer (:mod:`.responses`),
with their status by name. Responses pair with requests strictly in order (dialects L0-C have no
correlation id); each paired response names its request (``Frame.request``) and its latency.

Dialects (``Frame.dialect``), as named in iggy.md section 0, and how they are told apart:

- ``V`` (server 0.9 edge): every frame starts with a 256-byte consensus header whose ``size`` (u32
  at offset 48) is the whole frame; a client frame's checksum is zero. Recognised from the first
  bytes. Requests carry an operation (and for reads the classic command code), replies the request
  number they answer, the status and the operation; evictions their reason. LOGIN_REGISTER carries
  the ClientVersionInfo (protocol version packed major<<20|minor<<10|patch, SDK name and version).
- ``L0``, ``L1``, ``Z1``, ``Z2``, ``C`` (the classic framing: ``length, code, payload`` requests and
  ``status, length, payload`` responses). Every one starts as a candidate; a request whose payload
  one candidate's layout cannot decode exactly, while another's can, removes it: the consumer id
  (u32 in L0, an Identifier later), CREATE_STREAM/TOPIC/CONSUMER_GROUP with or without their id
  (gone in Z2), the optional partition id (u32 up to Z1, flag + u32 from Z2), LOGIN_USER with or
  without its version fields (from server-0.3), SEND_MESSAGES with or without ``metadata_length``
  and an index table (L vs Z/C), and message headers of 56 (Z1, Z2) or 64 bytes (C); polled
  messages do the same, and their checksums tell CRC32 (Z1) from XXH3-64 (Z2 on). The SDK version
  in LOGIN_USER (``0.7.0`` Z1, ``0.8.0`` Z2, ``0.9``/``0.10`` C, up to ``0.6`` L1) decides while the
  bytes do not. A frame is decoded with the most likely dialect at the time, and labelled with it
  once anything in the bytes has pointed at one (the PINGs a client opens with carry no dialect).

Options: ``-o iggy.dialect=NAME`` (or ``--dialect iggy=NAME``) fixes the dialect, for a capture
that starts mid-stream or holds too little to tell; ``auto`` (the default) detects it.

Not decoded, for want of a layout: the bodies of DESCRIBE_OPTIONS (13) and LOGIN_REGISTER_WITH_PAT
(45) of V (shown as ``body``); L0's login and logout of 0.0.4-0.0.7 (codes 32 and 33, which 0.0.8
gave to GET_USERS and CREATE_USER: L0 here is the 0.0.8 numbering). Inside L1, CREATE_TOPIC,
UPDATE_TOPIC and CREATE_PERSONAL_ACCESS_TOKEN changed with the server: the 0.3.0 - 0.4.300 layout
is tried first, then the older ones (iggy.md 4.5); LOGIN_USER's version fields are optional there.
V's StoreConsumerOffset ``ack`` byte is taken to follow the offset (iggy.md names it, not its place).

Heuristics recognise Iggy on other ports from a first client frame (a known command code with a
plausible length, or a V request header); HTTP, TLS and random bytes are never claimed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analyzer.api import CommandDoc, Connection, Dissector, Option, Rule, Sniff
from dissectors.iggy.names import DIALECT_NAMES

if TYPE_CHECKING:
    from dissectors.kit import Machine
    from dissectors.kit.catalog import FieldDef

__all__ = ["IggyDissector"]

# The decoder's modules are imported by the methods that need them: a run loads every dissector
# but decodes with those its conversations' ports or heuristics choose (tens of milliseconds of
# start-up each otherwise).

_PAIR = struct.Struct("<II")
#: A first request larger than this is not taken as Iggy by the heuristic (SEND_MESSAGES with a
#: big payload still is on port 8090).
SNIFF_MAX = 1 << 20
#: Commands a conversation starts with.
OPENERS = frozenset({1, 38, 40, 44})


class IggyDissector(Dissector):
    name = "iggy"
    title = "Apache Iggy (binary TCP)"
    default_ports = (8090,)
    options = (Option("dialect", "Wire dialect: auto (detect from the bytes) or one of L0, L1, Z1, Z2, C, V",
                      "auto", ("auto", *DIALECT_NAMES)),)

    def sniff(self, data: bytes) -> Sniff:
        from dissectors.iggy.commands import COMMANDS, V_REQUEST
        from dissectors.iggy.status import known

        if len(data) < 8:
            return Sniff(0.0)
        length, code = _PAIR.unpack_from(data, 0)
        if 4 <= length <= SNIFF_MAX and code in COMMANDS:
            end = length + 4
            if end == len(data):
                return Sniff(0.8 if code in OPENERS else 0.6, from_client=True)
            if end + 8 <= len(data):
                nlen, ncode = _PAIR.unpack_from(data, end)
                if 4 <= nlen <= SNIFF_MAX and ncode in COMMANDS:
                    return Sniff(0.8, from_client=True)
                return Sniff(0.0)
            return Sniff(0.55 if code in OPENERS else 0.3, from_client=True)
        if len(data) >= 128 and _v_start(data):
            return Sniff(0.9 if data[60] == V_REQUEST and not any(data[:16]) else 0.6,
                         from_client=data[60] == V_REQUEST)
        # A server's first frame: an empty OK or an error status with nothing after it. Eight
        # bytes are too little to claim a conversation alone.
        status, length = _PAIR.unpack_from(data, 0)
        if known(status) and length + 8 == len(data) and (status == 0 or length == 0):
            return Sniff(0.3, from_client=False)
        return Sniff(0.0)

    def connection(self, midstream: bool) -> Connection:
        from dissectors.iggy.connection import IggyConnection

        chosen = self.setting("dialect")
        return IggyConnection(midstream, None if chosen == "auto" else chosen)

    def resume(self, state: dict[str, Any]) -> Connection:
        from dissectors.iggy.connection import IggyConnection
        from dissectors.kit import state as kit_state

        return kit_state.resume(state, IggyConnection)

    def rules(self) -> Sequence[Rule]:
        from dissectors.iggy.rules import RULES

        return RULES

    def machines(self) -> Sequence[Machine]:
        from dissectors.iggy.login import MACHINE

        return (MACHINE,)

    def fields(self) -> Sequence[FieldDef]:
        from dissectors.iggy.catalog import CATALOG

        return tuple(CATALOG)

    def commands(self) -> Sequence[CommandDoc]:
        from dissectors.iggy.commands import COMMANDS
        from dissectors.schema import Struct

        docs: list[CommandDoc] = []
        for cmd in COMMANDS.values():
            for dialects, layout in cmd.layouts:
                versions = ", ".join(dialects)
                if isinstance(layout, Struct) and layout.doc not in ("struct", "empty"):
                    versions += f" ({layout.doc})"
                docs.append(CommandDoc(str(cmd.code), cmd.name, "c2s", versions, layout.describe()))
        return docs


def _v_start(data: bytes) -> bool:
    """A V header: size at 48 within bounds, a known command at 60, zero reserved bytes 62..128."""
    from dissectors.iggy.commands import V_COMMANDS
    from dissectors.iggy.framing import MAX_FRAME, V_HEADER

    (size,) = struct.unpack_from("<I", data, 48)
    return V_HEADER <= size <= MAX_FRAME and data[60] in V_COMMANDS and not any(data[62:128])
