"""Per-conversation memory of open conversations, split engine vs dissector (issue 8, section 6).

Generates N established AMQP 0-9-1 connections (handshake done, never closed; the same capture as
``bench/hostile.py``'s ``amqp-100k-connections`` at a smaller size), runs them through the
analyzer with ``final=False`` so every conversation is still open, and measures with
:mod:`tracemalloc` what stays allocated afterwards, divided by N. Each allocation is attributed by
the source file that made it: ``analyzer/`` is the engine, ``dissectors/`` the dissectors.

Usage: python bench/engine_memory.py [--connections N] [--top K]
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import tempfile
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from hostile import gen_amqp_connections  # noqa: E402

from analyzer.capture import read_packets  # noqa: E402
from analyzer.engine import Analyzer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--top", type=int, default=15, help="lines shown per part")
    args = ap.parse_args()
    n = args.connections
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "conns.pcap")
        gen_amqp_connections(path, n / 100_000)
        a = Analyzer()
        gc.collect()
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        events = 0
        for _ in a.run(read_packets(path), final=False):
            events += 1
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
    assert a.live == n, (a.live, n)
    stats = after.compare_to(before, "lineno")
    parts: dict[str, int] = collections.Counter()
    lines: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for s in stats:
        frame = s.traceback[0]
        rel = os.path.relpath(frame.filename, ROOT)
        part = rel.split(os.sep)[0] if not rel.startswith("..") else "other"
        part = {"analyzer": "engine", "dissectors": "dissector"}.get(part, "other")
        parts[part] += s.size_diff
        lines[part].append((s.size_diff, f"{rel}:{frame.lineno}"))
    print(f"{n} open conversations, {a.packets} packets, {events} events")
    for part in ("engine", "dissector", "other"):
        print(f"{part:>9}: {parts[part] / n:8.0f} bytes per conversation ({parts[part] / 2**20:.1f} MiB)")
    for part in ("engine", "dissector"):
        print(f"-- {part}, biggest lines (bytes per conversation)")
        for size, where in sorted(lines[part], reverse=True)[:args.top]:
            print(f"   {size / n:8.0f}  {where}")


if __name__ == "__main__":
    main()
