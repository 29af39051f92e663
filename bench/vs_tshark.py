#!/usr/bin/env python3
"""Issue 15's ratios against tshark, on every workload shape of bench/workloads.py, in one run.

    python bench/vs_tshark.py [--runs N] [--src DIR] [--work DIR] [--json] [--big MIB] [NAME ...]

For each workload (built by bench/workloads.py where missing) every streamproto run is paired with
the tshark run it is compared with, right next to it (the machine's speed drifts); a ratio is the
median of ``--runs`` pairs (default 3), below 1.0 meaning streamproto took less time:

- checks: ``inspect --only-findings -T jsonl`` (full decoding, every check, the findings printed)
  against ``tshark -r F -q -z expert``; goal <= 0.7;
- summary: ``inspect -T summary`` (one line per frame, with Info) against ``tshark -r F``; goal <= 1.0;
- jsonl: ``inspect -T jsonl`` (every frame's whole tree) against ``tshark -r F -T ek``; goal <= 0.5;
- json: ``inspect -T json`` against the same; goal: as fast as jsonl, memory flat (peak shown);
- engine: the engine alone (reading, link/IP/TCP, reassembly, no dissector) in packets/s; goal
  >= 400,000 (meaningful on packet-heavy workloads; loopback captures carry up to 64 KiB per packet);
- jobs: ``--jobs 2`` against ``--jobs 1``, when inspect has the option.

tshark 4.0 has no dissector for RabbitMQ Stream, Apache Iggy or AMQP/Fast: on those workloads it
dissects TCP only (less work than ours), which the table says. tshark uses one core; so does
streamproto in these runs. ``--big MIB`` also writes a capture of about that size by repeating the
first workload named (shifted ports and times: new conversations) and prints the peak memory of
every output format on it (goal <= 150 MiB for 1 GB). Times are wall clock; peak memory is each
child's own high-water mark (``os.wait4``). No assertion anywhere: this is a report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TSHARK_HAS = {"amqp091": True, "rabbitmq_stream": False, "iggy": False, "amqp_fast": False}
MODES = {  # name: (streamproto inspect arguments, tshark arguments, goal)
    "checks": (["--only-findings", "-T", "jsonl"], ["-q", "-z", "expert"], 0.7),
    "summary": (["-T", "summary"], [], 1.0),
    "jsonl": (["-T", "jsonl"], ["-T", "ek"], 0.5),
    "json": (["-T", "json"], ["-T", "ek"], 0.5),
}
ENGINE = """
import sys, time
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
best = None
for _ in range(3):
    t = time.perf_counter()
    a = Analyzer(dissectors={})
    for _ in a.run(read_packets(sys.argv[1])):
        pass
    s = time.perf_counter() - t
    best = s if best is None else min(best, s)
print(a.packets / best)
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of one child, its output thrown away."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: findings at error severity (inspect)
        raise SystemExit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(cmd)}")
    return took, usage.ru_maxrss / 1024


def streamproto(src: Path | None) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    exe = shutil.which("streamproto")
    return ([exe] if exe and src is None else [sys.executable, "-m", "analyzer"]), env


def has_jobs(sp: list[str], env: dict[str, str]) -> bool:
    out = subprocess.run([*sp, "inspect", "--help"], capture_output=True, text=True, env=env).stdout
    return "--jobs" in out


def measure(path: Path, runs: int, sp: list[str], env: dict[str, str], jobs: bool) -> dict[str, object]:
    tshark = shutil.which("tshark")
    row: dict[str, object] = {}
    for mode, (ours_args, theirs_args, goal) in MODES.items():
        pairs = []
        for _ in range(runs):
            ours = run([*sp, "inspect", *ours_args, str(path)], env)
            theirs = run([tshark, "-r", str(path), *theirs_args], env) if tshark else (float("nan"), 0.0)
            pairs.append((ours, theirs))
        ratio = statistics.median(o[0] / t[0] for o, t in pairs) if tshark else float("nan")
        row[mode] = {"seconds": statistics.median(o[0] for o, _t in pairs),
                     "tshark_seconds": statistics.median(t[0] for _o, t in pairs),
                     "ratio": ratio, "goal": goal, "met": ratio <= goal,
                     "peak_mib": max(o[1] for o, _t in pairs)}
    pps = subprocess.run([sys.executable, "-c", ENGINE, str(path)], capture_output=True, text=True, env=env,
                         check=True).stdout
    row["engine_packets_per_s"] = float(pps)
    if jobs:
        ratios = []
        for _ in range(runs):
            one = run([*sp, "inspect", "--jobs", "1", "-T", "jsonl", str(path)], env)[0]
            two = run([*sp, "inspect", "--jobs", "2", "-T", "jsonl", str(path)], env)[0]
            ratios.append(one / two)
        row["jobs_speedup"] = statistics.median(ratios)
    return row


def repeat_capture(src: Path, out: Path, mib: int) -> int:
    """Write ``src``'s packets again and again (client port + k, times shifted) until ``out`` holds
    about ``mib`` MiB; pcap (microseconds) with Ethernet/IPv4/TCP, as the workloads are written."""
    raw = src.read_bytes()
    magic, _ma, _mi, _tz, _sf, _snap, link = struct.unpack_from("<IHHiIII", raw, 0)
    if magic != 0xA1B2C3D4 or link != 1:
        raise SystemExit(f"{src}: --big needs a little-endian microsecond pcap of Ethernet")
    records = []
    pos = 24
    while pos + 16 <= len(raw):
        sec, usec, incl, orig = struct.unpack_from("<IIII", raw, pos)
        records.append((sec, usec, orig, raw[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    span = records[-1][0] - records[0][0] + 2
    ports = {struct.unpack_from(">H", d, 14 + (d[14] & 15) * 4)[0] for _s, _u, _o, d in records} | {
        struct.unpack_from(">H", d, 16 + (d[14] & 15) * 4)[0] for _s, _u, _o, d in records}
    server_ports = {5672, 5552, 8090, 3018}
    written = 0
    packets = 0
    k = 0
    with out.open("wb") as f:
        f.write(raw[:24])
        while written < mib << 20:
            for sec, usec, orig, d in records:
                b = bytearray(d)
                tcp = 14 + (b[14] & 15) * 4
                for at in (tcp, tcp + 2):
                    port = struct.unpack_from(">H", b, at)[0]
                    if port not in server_ports and port in ports:
                        struct.pack_into(">H", b, at, 1024 + (port + k * 7919) % 64000)
                f.write(struct.pack("<IIII", sec + k * span, usec, len(b), orig) + b)
                written += 16 + len(b)
                packets += 1
            k += 1
    return packets


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from bench import workloads

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--src", type=Path, help="run the analyzer from this source tree")
    ap.add_argument("--work", type=Path, default=workloads.WORK)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--big", type=int, metavar="MIB", help="also the peak memory of every format on a MIB-sized capture")
    args = ap.parse_args()
    names = args.names or workloads.NAMES
    paths = workloads.build(names, args.work)
    sp, env = streamproto(args.src)
    jobs = has_jobs(sp, env)
    results: dict[str, object] = {}
    if not args.json:
        print("tshark: one core; streamproto: one process per run. Ratios: streamproto time / tshark time, "
              f"median of {args.runs} paired runs (below 1.0: streamproto faster).")
        print(f"{'workload':<28}{'packets/s engine':>17}  " + "  ".join(f"{m:>16}" for m in MODES)
              + ("  jobs 2 vs 1" if jobs else "  jobs: not available"))
    for n in names:
        row = measure(paths[n], args.runs, sp, env, jobs)
        proto = n.split("_")[0] if not n.startswith(("rabbitmq_stream", "amqp_fast")) else (
            "rabbitmq_stream" if n.startswith("rabbitmq_stream") else "amqp_fast")
        row["tshark_dissects"] = TSHARK_HAS.get(proto, False)
        row["source"] = workloads.SOURCE[n]
        results[n] = row
        if not args.json:
            cells = []
            for m in MODES:
                r = row[m]
                assert isinstance(r, dict)
                cells.append(f"{r['ratio']:.2f} ({'met' if r['met'] else 'NOT'})".rjust(16))
            note = "" if row["tshark_dissects"] else "  [tshark: TCP only]"
            jobs_cell = f"  {row['jobs_speedup']:.2f}x" if jobs else ""
            print(f"{n:<28}{row['engine_packets_per_s']:>17,.0f}  " + "  ".join(cells) + jobs_cell + note)
            print(f"{'':<28}{'':>17}  " + "  ".join(
                f"{row[m]['seconds']:.2f}s/{row[m]['tshark_seconds']:.2f}s {row[m]['peak_mib']:.0f}M".rjust(16)
                for m in MODES))
    if args.big:
        big = Path(tempfile.gettempdir()) / f"streamproto-big-{names[0]}.pcap"
        packets = repeat_capture(paths[names[0]], big, args.big)
        peaks = {}
        for m, (ours_args, _t, _g) in MODES.items():
            took, peak = run([*sp, "inspect", *ours_args, str(big)], env)
            peaks[m] = {"seconds": took, "peak_mib": peak}
        results["big"] = {"workload": names[0], "bytes": big.stat().st_size, "packets": packets, "formats": peaks}
        if not args.json:
            print(f"\n{big} ({big.stat().st_size / 2**20:,.0f} MiB, {packets:,} packets, from {names[0]}): peak memory "
                  + ", ".join(f"{m} {p['peak_mib']:.0f} MiB in {p['seconds']:.0f} s" for m, p in peaks.items())
                  + " (goal <= 150 MiB)")
        big.unlink()
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
