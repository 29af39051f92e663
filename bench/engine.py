"""Engine benchmark: reading + TCP reassembly rate, and `streamproto inspect` against tshark.

Builds (once) a capture of at least 100,000 packets: many RabbitMQ Stream connections whose
capture starts mid-stream, each a publisher sending Publish frames and the broker confirming them,
with some segments reordered and duplicated so the reassembler has real work. Then measures in one run:

- the engine alone (pcap reading, link/IP/TCP decoding, reassembly; no dissector) in packets/s;
- `streamproto inspect --format jsonl FILE > /dev/null` and `tshark -r FILE -q -z expert`,
  wall-clock seconds of each and their ratio (below 1.0: streamproto is faster);
- the same JSON Lines run against `tshark -r FILE -T ek` (every packet's dissection as JSON).

Usage: python bench/engine.py [--packets N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analyzer.engine import Analyzer  # noqa: E402
from analyzer.pcapwrite import TcpConversation, write_capture  # noqa: E402


def publish(publisher: int, first_id: int, count: int, body: bytes) -> bytes:
    msgs = b"".join(struct.pack(">QI", first_id + i, len(body)) + body for i in range(count))
    payload = struct.pack(">HHBI", 0x0002, 1, publisher, count) + msgs
    return struct.pack(">I", len(payload)) + payload


def confirm(publisher: int, first_id: int, count: int) -> bytes:
    ids = b"".join(struct.pack(">Q", first_id + i) for i in range(count))
    payload = struct.pack(">HHBI", 0x0003, 1, publisher, count) + ids
    return struct.pack(">I", len(payload)) + payload


def build(path: str, packets: int) -> int:
    convs = []
    per_conv = 2000
    n_conv = packets // per_conv + 1
    body = b'{"order": 12345, "item": "widget", "qty": 3}'
    for c in range(n_conv):
        conv = TcpConversation(("10.9.0.1", 40000 + c), ("10.9.0.2", 5552), ts=1_700_000_000.0 + c * 0.0001,
                               step=0.00001)
        conv.handshake()
        next_id = 0
        while len(conv.segments) < per_conv:
            conv.send("c2s", publish(1, next_id, 4, body), mss=150)
            conv.send("s2c", confirm(1, next_id, 4))
            next_id += 4
        conv.segments = conv.segments[3:]  # mid-stream: no handshake to check
        for i in range(10, len(conv.segments) - 10, 97):
            conv.swap(i, i + 1)
        for i in range(20, len(conv.segments) - 10, 89):
            conv.duplicate(i)
        convs.append(conv)
    return write_capture(path, convs)


def engine_runs(path: str, runs: int = 3) -> tuple[int, list[float]]:
    """The engine alone (reading, link/IP/TCP, reassembly; no dissector) over ``path``, ``runs`` times:
    the packet count and each run's seconds (bench/vs_tshark.py imports this)."""
    times = []
    packets = 0
    for _ in range(runs):
        t = time.perf_counter()
        a = Analyzer(dissectors={})
        for _ in a.run_files([path]):  # as inspect reads a file (read_packets' plain tuples)
            pass
        times.append(time.perf_counter() - t)
        packets = a.packets
    return packets, times


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=120_000)
    ap.add_argument("--out", default="/tmp/streamproto-bench-engine.pcap")
    args = ap.parse_args()
    if not os.path.exists(args.out):
        n = build(args.out, args.packets)
        print(f"built {args.out}: {n} packets, {os.path.getsize(args.out) / 1e6:.1f} MB")

    t = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    print(f"machine calibration: a 10M-iteration Python loop takes {time.perf_counter() - t:.2f}s")

    packets, runs = engine_runs(args.out)
    engine_s = min(runs)  # shared machines are noisy: the best of three is the engine's own speed
    print(f"engine (read + decode + reassembly): {packets} packets in {engine_s:.2f}s = "
          f"{packets / engine_s:,.0f} packets/s (best of 3; runs {', '.join(f'{r:.2f}' for r in runs)} s)")

    sp = shutil.which("streamproto")
    sp_cmd = [sp] if sp else [sys.executable, "-m", "analyzer"]
    tshark = shutil.which("tshark")
    if tshark is None:
        print(f"streamproto inspect --format jsonl: {timed([*sp_cmd, 'inspect', '--format', 'jsonl', args.out]):.2f}s")
        print("tshark not installed: no ratio")
        return
    # Each streamproto run is paired with a tshark run (the machine's speed drifts); median of 3 ratios.
    ratios, ours, theirs = [], [], []
    for _ in range(3):
        ours.append(timed([*sp_cmd, "inspect", "--format", "jsonl", args.out]))
        theirs.append(timed([tshark, "-r", args.out, "-q", "-z", "expert"]))
        ratios.append(ours[-1] / theirs[-1])
    print(f"streamproto inspect --format jsonl: best {min(ours):.2f}s")
    print(f"tshark -r FILE -q -z expert: best {min(theirs):.2f}s")
    print(f"ratio streamproto/tshark (median of 3 paired runs): {statistics.median(ratios):.2f}")
    # The like-for-like comparison for JSON output: tshark writing every packet's dissection as JSON.
    ek_ratios = []
    for _ in range(3):
        t_ours = timed([*sp_cmd, "inspect", "--format", "jsonl", args.out])
        ek_ratios.append(t_ours / timed([tshark, "-r", args.out, "-T", "ek"]))
    print(f"ratio streamproto jsonl / tshark -T ek (median of 3 paired runs): {statistics.median(ek_ratios):.2f}")


if __name__ == "__main__":
    main()
