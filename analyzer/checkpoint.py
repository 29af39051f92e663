"""The checkpoint format: an open conversation, the link decoder's counters and a dissector
connection's snapshot as JSON types, and back. :meth:`Analyzer.checkpoint` and
:meth:`Analyzer.restore` put these together with the analyzer's own counters."""

from __future__ import annotations

from typing import Any

from analyzer.api import Connection, Direction
from analyzer.flows import Conversation, FlowInfo
from analyzer.packets import LinkDecoder
from analyzer.reassembly import Data, Gap, b64, unb64

#: 2: conversations keyed by flow keys (hex in "closed"), the out-of-order buffer and the sniffing
#: buffer may be absent.
CHECKPOINT_VERSION = 2


def snapshot(conn: Connection) -> dict[str, Any]:
    """The connection's :meth:`Connection.snapshot`; NotImplementedError when it cannot save its state."""
    method = getattr(conn, "snapshot", None)
    if method is None:  # a duck-typed connection without the method cannot snapshot either
        raise NotImplementedError(f"{type(conn).__name__} cannot be snapshotted")
    return method()  # type: ignore[no-any-return]


def conversation_to_plain(conv: Conversation) -> dict[str, Any]:
    """An open conversation: reassembly, undecided sniffing, held-back events, wake-up, dissector state."""
    snap = snapshot(conv.conn) if conv.conn is not None else None
    return {
        "flow": conv.info.id, "sides": {d.value: side.to_plain() for d, side in conv.sides.items()},
        "dissector": conv.dissector.name if conv.dissector is not None else None, "conn": snap,
        "pending": [[d.value, "data" if type(ev) is Data else "gap", ev.offset,
                     b64(ev.data) if type(ev) is Data else ev.length, ev.packet, ev.ts]  # type: ignore[union-attr]
                    for d, ev in conv.pending or ()],
        "undecided": conv.undecided, "midstream": conv.midstream, "isn_client": conv.isn_client,
        "timed": conv.timed, "deadline": conv.deadline, "wake_at": conv.wake_at, "wake_seq": conv.wake_seq,
    }


def conversation_from_plain(c: dict[str, Any], info: FlowInfo, max_buffer: int) -> Conversation:
    """The conversation back, all but its dissector and connection (``c["dissector"]`` and
    ``c["conn"]``): resuming those can fail, which the analyzer reports as a finding."""
    conv = Conversation(info, max_buffer, c["midstream"])
    for d, side in conv.sides.items():
        side.load(c["sides"][d.value])
    conv.pending = [(Direction(d), Data(off, unb64(x), pkt, ts) if kind == "data" else Gap(off, x, pkt, ts))
                    for d, kind, off, x, pkt, ts in c["pending"]] or None
    conv.undecided, conv.isn_client = c["undecided"], c["isn_client"]
    conv.timed, conv.deadline = c["timed"], c["deadline"]
    if c["wake_at"] is not None:
        conv.wake = (c["wake_at"], info.id, c["wake_seq"], conv)
    return conv


def linkdec_to_plain(ld: LinkDecoder) -> dict[str, Any]:
    return {"non_tcp": ld.non_tcp, "unsupported": ld.unsupported, "malformed": ld.malformed,
            "fragments": ld.fragments, "unknown_linktype": sorted(ld.unknown_linktype)}


def load_linkdec(ld: LinkDecoder, lds: dict[str, Any]) -> None:
    ld.non_tcp, ld.unsupported, ld.malformed, ld.fragments = (
        lds["non_tcp"], lds["unsupported"], lds["malformed"], lds["fragments"])
    ld.unknown_linktype = set(lds["unknown_linktype"])
