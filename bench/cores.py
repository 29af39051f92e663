#!/usr/bin/env python3
"""What this machine lets ``inspect --jobs 2`` reach: how much two processes running at once slow
each other, and the start-up a second worker cannot share.

For each workload named (default: the two with many conversations), in turn, --runs times:
``streamproto inspect --jobs 1 --only-findings -T jsonl F`` alone, then two of them at the same
time (each its own process, as --jobs' workers are), and once a run on a capture of a few frames
(the start-up: interpreter, imports, command line). Prints the medians of one run alone, of the
slower of two at once, and of the start-up, and two ceilings:

  cores    = 2 * alone / together       what two halves of the work could reach, done at once
                                        as two whole runs are done at once here (2.0 on a
                                        machine whose cores do not slow each other)
  ceiling  = alone / (start + (alone - start) / cores)
                                        the same with the start-up paid once before the halves
                                        (--jobs forks its workers after it): the most --jobs 2
                                        can give on this machine, with nothing else to do (no
                                        packets read twice, no merge). Issue 15's goal is 1.7x.

Usage: python bench/cores.py [NAME ...] [--runs N] [--src DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import workloads  # noqa: E402
from bench.vs_tshark import run  # noqa: E402

DEFAULT = ("amqp091_short_connections", "amqp_fast_fragmented")
#: A capture of a few frames: its run is the start-up.
TINY = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap"


def together(cmd: list[str], src: Path) -> float:
    """Two runs of ``cmd`` started at once: the seconds of the slower one."""
    took: list[float] = []

    def one() -> None:
        took.append(run(cmd, cwd=src).seconds)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(took) != 2:
        raise SystemExit("a run failed")
    return max(took)


def measure(path: Path, src: Path, runs: int) -> dict[str, float]:
    sp = [sys.executable, "-m", "analyzer", "inspect", "--jobs", "1"]
    cmd = [*sp, "--only-findings", "-T", "jsonl", str(path)]
    alone, both, start = [], [], []
    for _ in range(runs):
        alone.append(run(cmd, cwd=src).seconds)
        both.append(together(cmd, src))
        start.append(run([*sp, str(TINY)], cwd=src).seconds)
    a, b, s = statistics.median(alone), statistics.median(both), statistics.median(start)
    cores, most = ceilings(a, b, s)
    return {"alone": a, "together": b, "start": s, "cores": cores, "ceiling": most}


def ceilings(alone: float, together: float, start: float) -> tuple[float, float]:
    """(cores, ceiling) of the module's docstring, from the seconds of one run alone, of the slower
    of two at once, and of the start-up."""
    cores = 2 * alone / together
    return cores, alone / (start + (alone - start) / cores)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"workloads (default: {', '.join(DEFAULT)})")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--src", type=Path, default=ROOT, help="source tree whose analyzer is run (default: this one)")
    ap.add_argument("--work", type=Path, default=workloads.DEFAULT_DIR, help="workload capture cache directory")
    args = ap.parse_args(argv)
    names = args.names or list(DEFAULT)
    for n in names:
        workloads.module(n)
    paths = workloads.ensure(names, args.work, log=lambda m: print(m, file=sys.stderr))
    print(f"inspect --jobs 1 --only-findings -T jsonl, medians of {args.runs}; "
          "together: the slower of two runs at once")
    for name in names:
        r = measure(paths[name], args.src.resolve(), args.runs)
        print(f"{name:<28} alone {r['alone']:.3f} s  together {r['together']:.3f} s  start-up {r['start']:.3f} s  "
              f"cores {r['cores']:.2f}x  ceiling of --jobs 2 {r['ceiling']:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
