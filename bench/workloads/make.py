#!/usr/bin/env python3
"""Build the workload captures of issue #15 that are missing.

    python -m bench.workloads [--out DIR] [--scale X] [--force] [NAME ...]   (default: all)
    python bench/workloads/make.py ...                                      (the same)

Real-client workloads need root (tcpdump on lo) and Debian's rabbitmq-server (a private broker is
started on 127.0.0.1 for the run and stopped after); the Iggy one makes a venv with apache-iggy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import workloads  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.workloads", description=__doc__.split("\n")[1])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"workloads (default: all): {', '.join(workloads.NAMES)}")
    ap.add_argument("--out", type=Path, default=workloads.DEFAULT_DIR, help="cache directory (default: bench/work)")
    ap.add_argument("--scale", type=float, default=1.0, help="size factor (1.0: 20k-150k packets each)")
    ap.add_argument("--force", action="store_true", help="rebuild even when the capture exists")
    args = ap.parse_args(argv)
    names = args.names or list(workloads.NAMES)
    for name in names:
        workloads.module(name)
        if args.force:
            workloads.path(name, args.out, args.scale).unlink(missing_ok=True)
    for name, p in workloads.ensure(names, args.out, args.scale).items():
        print(f"{name}: {p} ({p.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
