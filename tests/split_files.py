"""One capture as several files: packets written out in pieces at given packet boundaries, and the
engine's events in a form to compare the pieces' output with the whole file's."""

from __future__ import annotations

import json
from pathlib import Path

from analyzer.api import Event, Frame
from analyzer.capture import RawPacket
from analyzer.jsonout import finding_json, frame_json
from analyzer.pcapwrite import write_packets


def split(packets: list[RawPacket], cuts: list[int], tmp: Path, link: str = "ethernet") -> list[str]:
    """``packets`` written to ``tmp/partNN.pcap``, a new file at every index in ``cuts``; the paths."""
    paths = []
    bounds = [0, *cuts, len(packets)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        path = tmp / f"part{i:02d}.pcap"
        write_packets(str(path), packets[a:b], link)
        paths.append(str(path))
    return paths


def normal(events: list[Event]) -> list[str]:
    """Frames and findings as their JSON output, one string each."""
    out = []
    for ev in events:
        j = frame_json(ev) if isinstance(ev, Frame) else finding_json(ev)
        out.append(json.dumps(j, sort_keys=True, default=str))
    return out
