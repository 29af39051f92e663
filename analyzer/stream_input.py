"""Captures that can be read only once: standard input (``-``), pipes and other non-regular files
(``/dev/stdin``, ``<(zcat f.pcap.gz)``).

:func:`analyzer.capture.read_packets` opens a path and may seek back to decompress, and reading
several files opens each one twice (once to order them by their first packet); a pipe allows
neither. Here the stream is opened once, its first bytes read once and handed on to the same
pcap/pcapng readers, gzip included, without seeking.
"""

from __future__ import annotations

import stat
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from analyzer.capture import (
    PCAP_MAGIC,
    PCAPNG_SHB,
    CaptureError,
    RawPacket,
    _Chunks,
    _Inflate,
    _read_pcap,
    _read_pcapng,
)

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


class _Prefixed:
    """A binary stream with bytes already read put back in front (instead of seeking)."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head = head
        self.rest = rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                data, self.head = self.head + self.rest.read(), b""
                return data
            data, self.head = self.head[:n], self.head[n:]
            if len(data) < n:
                data += self.rest.read(n - len(data))
            return data
        return self.rest.read(n)

    def close(self) -> None:
        self.rest.close()


def read_stream(path: str) -> Iterator[RawPacket]:
    """Every packet of a pcap or pcapng stream (gzip-compressed too), read once. Raises CaptureError."""
    name = "<stdin>" if path == STDIN else path
    try:
        f: BinaryIO = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise CaptureError(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        try:
            head = f.read(4)
            if head[:2] == b"\x1f\x8b":
                f = _Inflate(_Prefixed(head, f))  # type: ignore[arg-type, assignment]
                head = f.read(4)
        except (OSError, EOFError) as exc:
            raise CaptureError(f"cannot read {name}: {exc}") from None
        except zlib.error as exc:
            raise CaptureError(f"cannot read {name}: corrupt compressed data ({exc})") from None
        if len(head) < 4:
            raise CaptureError(f"{name}: not a capture (too short)")
        if head in PCAP_MAGIC:
            yield from _read_pcap(name, _Chunks(f, head))
        elif head == PCAPNG_SHB:
            yield from _read_pcapng(name, _Chunks(f, head))
        else:
            raise CaptureError(f"{name}: not a pcap or pcapng capture (magic {head.hex()})")
    except (OSError, EOFError) as exc:
        raise CaptureError(f"cannot read {name}: {exc}") from None
    except zlib.error as exc:
        raise CaptureError(f"cannot read {name}: corrupt compressed data ({exc})") from None
    finally:
        if path != STDIN:
            f.close()
