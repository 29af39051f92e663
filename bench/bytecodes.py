#!/usr/bin/env python3
"""How many Python bytecodes each function executes in one ``streamproto`` command, and its share.

Callgrind's instruction counts (the figures in the commit messages) weigh a C loop's instructions
like the interpreter's, but a tight C loop runs several instructions per cycle and the interpreter's
dispatch few: a change that saved 1.5-2 % of a summary's instructions by no longer encoding lines
made wide by their arrow (2.3 % of AMQP/Fast's instructions in the UTF-8 encoder) gave no
wall-clock change at all (0.5 % less time at most, within noise), so it was not kept. What the
interpreter executes is where the time of a run goes (a third to a half of a summary's cycles on
`perf record` are in the bytecode loop itself); this counts it per function, to tell the view's,
the engine's and a dissector's parts of it apart. Compiled modules (analyzer/native.py) run no
bytecodes: they count nothing, so run it on the build to measure. Tracing makes the run some 15
times slower.

Usage: python bench/bytecodes.py [--top N] inspect --jobs 1 -T summary FILE
(--jobs 1: the workers of --jobs are other processes, not counted here).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

Key = tuple[str, int, str]


def count(run: Callable[[], Any]) -> Counter[Key]:
    """The bytecodes ``run`` executes, by function (file, first line, name)."""
    counts: Counter[Key] = Counter()

    def opcode(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        return opcode

    def call(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return opcode

    sys.settrace(call)
    try:
        run()
    finally:
        sys.settrace(None)
    return counts


def report(counts: Counter[Key], top: int) -> list[str]:
    total = sum(counts.values())
    lines = [f"{total:,} bytecodes"]
    for (file, line, name), n in counts.most_common(top):
        path = Path(file)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        lines.append(f"{n:12,} {100 * n / max(total, 1):5.1f} %  {shown}:{line} {name}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=30, help="functions listed (default 30)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="a streamproto command and its arguments")
    args = parser.parse_args(argv)
    if not args.command:
        parser.error("name a streamproto command, e.g. inspect --jobs 1 -T summary FILE")
    sys.path.insert(0, str(ROOT))
    from analyzer import cli  # imported before counting: the start-up is not the run

    sys.argv = ["streamproto", *args.command]
    stdout = sys.stdout

    def run() -> None:
        try:
            cli.main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise

    counts = count(run)
    sys.stdout = stdout
    sys.stdout.flush()
    print("\n".join(report(counts, args.top)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
