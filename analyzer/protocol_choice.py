"""Which dissector for a conversation, and who is the client: the dissectors' default ports (or
``--decode-as``), the first segment's flags, and failing those the dissectors' heuristics."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from analyzer.api import Dissector
from analyzer.packets import ACK, SYN

#: Bytes of one direction kept for heuristics before giving up on recognising the protocol.
SNIFF_LIMIT = 4096
SNIFF_THRESHOLD = 0.5

Endpoint = tuple[str, int]


def port_table(dissectors: Iterable[Dissector]) -> dict[int, str]:
    """Default port -> dissector name; where two claim a port, the first loaded keeps it."""
    by_port: dict[int, str] = {}
    for d in dissectors:
        for p in d.default_ports:
            by_port.setdefault(p, d.name)
    return by_port


def roles(a: Endpoint, b: Endpoint, flags: int,
          port_proto: Callable[[int], str | None]) -> tuple[Endpoint, Endpoint]:
    """(client, server) of a conversation whose first segment went from ``a`` to ``b``."""
    if flags & SYN:
        return (a, b) if not flags & ACK else (b, a)
    # Mid-stream: the side on a known protocol's port is the server, else the lower port.
    if port_proto(b[1]) or not port_proto(a[1]) and b[1] < a[1]:
        return a, b
    return b, a


def best_guess(dissectors: Iterable[Dissector], data: bytes) -> tuple[float, Dissector | None, bool | None]:
    """The most confident heuristic verdict on one direction's first bytes: (confidence, dissector,
    whether those bytes came from the client, if it can tell); (0.0, None, None) when none claims them."""
    best: tuple[float, Dissector | None, bool | None] = (0.0, None, None)
    for d in dissectors:
        try:
            verdict = d.sniff(data)
        except Exception:  # a heuristic must never take the engine down
            continue
        if verdict.confidence > best[0]:
            best = (verdict.confidence, d, verdict.from_client)
    return best
