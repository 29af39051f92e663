"""Finding dissectors: every protocol, built-in or third-party, registers through one entry point group."""

from __future__ import annotations

import sys
from functools import cache
from importlib.metadata import entry_points

from analyzer.api import Dissector

GROUP = "streamproto.dissectors"


@cache
def load_dissectors() -> dict[str, Dissector]:
    found: dict[str, Dissector] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            cls = ep.load()
            dissector = cls()
        except Exception as exc:  # a broken plugin must not take the tool down
            print(f"streamproto: cannot load dissector {ep.name!r}: {exc}", file=sys.stderr)
            continue
        found[dissector.name] = dissector
    return found


def parse_decode_as(specs: list[str], known: dict[str, Dissector]) -> dict[int, str]:
    """``["15552=rabbitmq_stream"]`` -> ``{15552: "rabbitmq_stream"}``; ValueError with a clear message."""
    out: dict[int, str] = {}
    for spec in specs:
        port_text, sep, name = spec.partition("=")
        if not sep or not port_text.strip().isdigit():
            raise ValueError(f"--decode-as expects PORT=PROTOCOL, got {spec!r}")
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(f"--decode-as: port {port} is out of range")
        name = name.strip()
        if name not in known:
            raise ValueError(f"--decode-as: unknown protocol {name!r} (known: {', '.join(sorted(known)) or 'none'})")
        out[port] = name
    return out
