"""Captures that can be read only once: standard input (``-``), pipes and other non-regular files
(``/dev/stdin``, ``<(zcat f.pcap.gz)``).

:func:`analyzer.capture.read_packets` opens a path, and reading several files opens each one
twice (once to order them by their first packet); a pipe cannot be opened again. Here the stream
is opened once and handed to the same reader (:func:`analyzer.capture.read_opened`), which reads
it once from its start, gzip included.
"""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from analyzer.capture import CaptureError, RawPacket, read_opened

STDIN = "-"


def is_stream(path: str) -> bool:
    """Standard input, or an existing path that is not a regular file (a FIFO, a character device):
    something to read once, from its start, without seeking."""
    if path == STDIN:
        return True
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return False  # missing: the ordinary reader says so
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def read_stream(path: str) -> Iterator[RawPacket]:
    """Every packet of a pcap or pcapng stream (gzip-compressed too), read once. Raises CaptureError."""
    name = "<stdin>" if path == STDIN else path
    try:
        f: BinaryIO = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise CaptureError(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        yield from read_opened(f, name, "capture")
    finally:
        if path != STDIN:
            f.close()
