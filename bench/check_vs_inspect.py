#!/usr/bin/env python3
"""`streamproto check` with all three reports against `streamproto inspect --only-findings` on the
AMQP benchmark capture of bench/amqp091_vs_tshark.py (issue 13's goal: at most 1.5x).

Both decode and check every frame; `check` also counts commands, pairs latencies, keeps the frames
of the ladder diagrams and writes JUnit XML, SARIF and the HTML report. Each check run is timed
right next to an inspect run (the machine's speed drifts), and the ratio reported is the median of
the paired ratios. Usage: python bench/check_vs_inspect.py [N] [--keep PATH]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from amqp091_vs_tshark import build  # noqa: E402 - the same capture as that benchmark


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        code = subprocess.run(cmd, stdout=null).returncode
    if code not in (0, 1):  # check exits 1 when findings reach the threshold
        raise SystemExit(f"{' '.join(cmd)} exited {code}")
    return time.perf_counter() - t


def main() -> None:
    args = sys.argv[1:]
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    n = int(args[0]) if args else 50_000
    path = keep or os.path.join(tempfile.gettempdir(), f"amqp091-bench-{n}.pcap")
    facts = build(path, n)
    out = tempfile.mkdtemp(prefix="check-bench-")
    check = ["streamproto", "check", path, "--junit", f"{out}/r.xml", "--sarif", f"{out}/r.sarif",
             "--html", f"{out}/r.html"]
    inspect = ["streamproto", "inspect", "--only-findings", path]
    ratios, t_check, t_inspect = [], [], []
    for _ in range(3):
        a = timed(check)
        b = timed(inspect)
        t_check.append(a)
        t_inspect.append(b)
        ratios.append(a / b)
    sizes = {name: os.path.getsize(f"{out}/{name}") for name in ("r.xml", "r.sarif", "r.html")}
    print(f"capture: {path} ({os.path.getsize(path) / 1e6:.1f} MB, {facts['packets']} packets)")
    print(f"streamproto inspect --only-findings      best {min(t_inspect):6.2f} s")
    print(f"streamproto check --junit --sarif --html best {min(t_check):6.2f} s   "
          f"(reports: {', '.join(f'{k} {v / 1e3:.0f} kB' for k, v in sizes.items())})")
    print(f"ratio check / inspect (median of 3 paired runs): {statistics.median(ratios):.2f}   target <= 1.5")
    if keep is None:
        os.unlink(path)


if __name__ == "__main__":
    main()
