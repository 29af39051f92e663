#!/usr/bin/env python3
"""`streamproto pipeline` on a fleet of rotated captures: both engines and tshark, in one run.

Builds H hosts' captures with the AMQP 0-9-1 generator of ``bench/amqp091_vs_tshark.py`` (one
publisher with confirms, one consumer acking each delivery: about 7 frames per message), each host's
capture cut into F rotated files as ``tcpdump -C`` names them (so both connections of a host run
through all its files and the second stage joins them), 50 files and 1,000,000 frames by default.
Then, one after the other on the same files:

  * ``--engine local`` with 1 worker and with all cores,
  * ``--engine spark`` with ``local[1]`` and ``local[2]`` (the session's start, mostly the JVM, timed
    apart from the job),
  * ``tshark -r FILE -T ek`` on every file, one after the other (every packet's dissection as JSON:
    the like-for-like baseline of decoding every frame into a table),

and prints wall time, frames per second, and frames per second per core for each. The machine's
speed drifts (it is shared), so each figure is one run; the load average is printed with them.

Usage: python bench/pipeline.py [--hosts 10] [--files 5] [--messages 15000] [--keep DIR] [--no-spark]
       [--quick-local]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amqp091_vs_tshark import build  # noqa: E402 - the bench scripts are not a package

from analyzer.capture import read_packets  # noqa: E402
from analyzer.pcapwrite import write_packets  # noqa: E402
from analyzer.pipeline import Settings  # noqa: E402
from analyzer.pipeline import run as pipeline_run  # noqa: E402


def make_fleet(root: str, hosts: int, files: int, messages: int) -> list[str]:
    paths = []
    for h in range(hosts):
        host = os.path.join(root, f"host{h:02d}")
        os.makedirs(host)
        whole = os.path.join(root, f"whole{h}.pcap")
        build(whole, messages)
        packets = list(read_packets(whole))
        os.remove(whole)
        size = -(-len(packets) // files)
        for i in range(files):
            path = os.path.join(host, "amqp.pcap" + (str(i) if i else ""))
            write_packets(path, packets[i * size:(i + 1) * size], "ethernet")
            paths.append(path)
    return paths


def frames_in(out: str) -> int:
    return sum(pq.read_metadata(p).num_rows for p in glob.glob(os.path.join(out, "frames", "**", "*.parquet"),
                                                                recursive=True))


def timed(label: str, cores: int, fn, frames: int | None, rows: list) -> float:
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    rows.append((label, cores, wall, frames))
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--messages", type=int, default=15_000, help="published (and consumed) per host")
    ap.add_argument("--keep", help="build the captures here and keep them")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--quick-local", action="store_true", help="the local engine with all cores only")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="pipeline-bench-")
    cores = os.cpu_count() or 1
    t = time.perf_counter()
    paths = make_fleet(os.path.join(root, "captures"), args.hosts, args.files, args.messages)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"{len(paths)} files, {size / 2**20:.1f} MiB, built in {time.perf_counter() - t:.1f} s; "
          f"{cores} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    inputs = [os.path.join(root, "captures")]
    rows: list = []
    frames = None
    for jobs in [cores] if args.quick_local else sorted({1, cores}):
        out = os.path.join(root, f"local{jobs}")
        timed(f"pipeline --engine local --jobs {jobs}", jobs,
              lambda out=out, jobs=jobs: pipeline_run(inputs, out, Settings(), "local", jobs=jobs), None, rows)
        frames = frames_in(out)
        rows[-1] = (*rows[-1][:3], frames)
        print(f"  {rows[-1][0]}: {rows[-1][2]:.1f} s", flush=True)
    if not args.no_spark:
        from pyspark.sql import SparkSession

        for n in (1, 2):
            t = time.perf_counter()
            spark = (SparkSession.builder.master(f"local[{n}]").config("spark.ui.showConsoleProgress", "false")
                     .getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            start = time.perf_counter() - t
            out = os.path.join(root, f"spark{n}")
            timed(f"pipeline --engine spark --master local[{n}]", n,
                  lambda out=out, n=n: pipeline_run(inputs, out, Settings(), "spark", master=f"local[{n}]"),
                  None, rows)
            got = frames_in(out)
            rows[-1] = (*rows[-1][:3], got)
            print(f"  {rows[-1][0]}: {rows[-1][2]:.1f} s (+{start:.1f} s session start); frames {got} "
                  f"{'=' if got == frames else '!='} local", flush=True)
            spark.stop()
    if shutil.which("tshark"):
        def ek() -> None:
            for p in paths:
                subprocess.run(["tshark", "-r", p, "-T", "ek"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)
        timed("tshark -T ek, file after file", 1, ek, frames, rows)
        print(f"  {rows[-1][0]}: {rows[-1][2]:.1f} s", flush=True)
    print()
    print(f"{'run':48} {'cores':>5} {'wall s':>8} {'frames':>9} {'frames/s':>10} {'per core':>10}")
    for label, n, wall, count in rows:
        count = count or frames or 0
        print(f"{label:48} {n:>5} {wall:>8.1f} {count:>9} {count / wall:>10,.0f} {count / wall / n:>10,.0f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
