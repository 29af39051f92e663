"""Reading a capture file's bytes both ways, for the tests of the readers' hot loops
(test_capture_records.py: pcap, test_capture_pcapng.py): the compiled loops that read whole records
from the window against the general path, and plain tuples against RawPackets."""

from __future__ import annotations

import io
import random

from analyzer import capture
from analyzer.capture import CaptureError, RawPacket


def read(data: bytes, hot: bool, chunk: int | None = None, plain: bool = False) -> tuple[list[tuple], str | None]:
    """Every packet read from ``data`` (a pcap or pcapng file, as plain tuples), then the error
    message or None; ``chunk``: the reads' size (windows that split records anywhere)."""
    old = capture.CHUNK
    if chunk is not None:
        capture.CHUNK = chunk
    got: list[tuple] = []
    try:
        for p in capture._read(None, io.BytesIO(data), "f", "capture file", None, hot=hot, plain=plain):
            assert type(p) is (tuple if plain else RawPacket)
            got.append(tuple(p))
    except CaptureError as exc:
        return got, str(exc)
    finally:
        capture.CHUNK = old
    return got, None


def same(data: bytes, chunk: int | None = None) -> tuple[list[tuple], str | None]:
    """What the hot loop reads, once the general path and the engine's plain tuples read the same."""
    hot = read(data, True, chunk)
    assert hot == read(data, False, chunk)
    assert hot == read(data, True, chunk, plain=True)
    return hot


def corrupted_alike(data: bytes, seed: int) -> int:
    """``same`` on ``data`` with each byte after the magic set to 0, 0xFF and a random value in
    turn (a third of them read through windows of 61 bytes); how many of those gave an error."""
    rng = random.Random(seed)
    errors = 0
    for at in range(4, len(data)):
        for value in (0, 0xFF, rng.randrange(256)):
            bad = bytearray(data)
            bad[at] = value
            _, err = same(bytes(bad), chunk=61 if at % 3 == 0 else None)
            errors += err is not None
    return errors
