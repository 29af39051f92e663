"""Each conversation's byte counts (``streamproto flows``: bytes client to server and back) against
an oracle outside the engine: scapy reads the capture, and a direction's bytes are the union of
the sequence ranges its TCP segments carry (a retransmission counts once, a hole not at all)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("scapy")
from scapy.layers.inet import IP, TCP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.utils import PcapReader  # noqa: E402

from analyzer.engine import Analyzer  # noqa: E402
from analyzer.registry import load_dissectors  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng"))


def _covered(ranges: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(ranges):
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _oracle(path: Path) -> dict[tuple[tuple[str, int], tuple[str, int]], int]:
    """(source, destination) endpoints -> bytes of that direction, over the whole capture."""
    ranges: dict[tuple[tuple[str, int], tuple[str, int]], list[tuple[int, int]]] = defaultdict(list)
    base: dict[tuple[tuple[str, int], tuple[str, int]], int] = {}
    with PcapReader(str(path)) as reader:
        for pkt in reader:
            ip = pkt.getlayer(IP) or pkt.getlayer(IPv6)
            tcp = pkt.getlayer(TCP)
            if ip is None or tcp is None:
                continue
            n = len(bytes(tcp.payload))
            if isinstance(ip, IP):  # the IP header's length, not a link layer's padding
                n = min(n, ip.len - ip.ihl * 4 - tcp.dataofs * 4)
            if n <= 0:
                continue
            key = ((ip.src, tcp.sport), (ip.dst, tcp.dport))
            first = base.setdefault(key, tcp.seq)
            start = (tcp.seq - first + 2**31) % 2**32 - 2**31  # relative, across a wrap
            ranges[key].append((start, start + n))
    return {key: _covered(r) for key, r in ranges.items()}


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_each_direction_counts_the_bytes_its_segments_carry(capture: Path):
    analyzer = Analyzer(dissectors=load_dissectors())
    for _ in analyzer.run_files([str(capture)]):
        pass
    counted: dict[tuple[tuple[str, int], tuple[str, int]], int] = defaultdict(int)
    for info in analyzer.flows:
        client, server = (info.client_ip, info.client_port), (info.server_ip, info.server_port)
        counted[(client, server)] += info.bytes_c2s
        counted[(server, client)] += info.bytes_s2c
    expected = _oracle(capture)
    assert {k: v for k, v in counted.items() if v} == expected
