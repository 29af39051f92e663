"""Reading a capture through pyshark for the tshark oracles, again when pyshark's cleanup fails.

pyshark (0.6, Python 3.11) sometimes loses its tshark child at close after every packet was read:
asyncio logs "Unknown child process pid ..., will report returncode 255" (the child was reaped
before asyncio's child watcher asked for it) and pyshark raises TSharkCrashException for that
made-up return code. Measured on the machine of the 2026-11-28 session: 2 of 40 reads of one small
capture in a plain script, 38 of 60 from a thread (asyncio's thread-based watcher), and now and
then a failed oracle test in a full run. A real crash of tshark on a capture is not a matter of
chance: it fails every attempt, and a read that was cut short gives rows the comparisons reject.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
ATTEMPTS = 3


def pyshark_rows(read: Callable[[], T]) -> T:
    """``read()`` (which opens, reads and closes one pyshark capture), again when pyshark reports
    its tshark crashed, at most ATTEMPTS times in all; the last failure is raised."""
    from pyshark.capture.capture import TSharkCrashException

    for attempt in range(1, ATTEMPTS + 1):
        try:
            return read()
        except TSharkCrashException:
            if attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")
