"""The pcap reader's hot loop (analyzer/capture_records.py, compiled where it can be: the records
whole in the window, BATCH at a time) reads exactly what its general path reads: the same packets,
then the same error, on every bundled capture in both byte orders and both timestamp units, and on
files cut and corrupted at every byte, with windows that split records anywhere. The plain tuples
the engine asks for (``read_packets(..., plain=True)``) hold the same values as the RawPackets.
tests/test_capture_pcapng.py holds the same for pcapng."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import pytest

from analyzer import capture, capture_records
from analyzer.capture import RawPacket, read_packets
from tests.capture_reading import corrupted_alike, read, same

ROOT = Path(__file__).parent.parent
BUNDLED = sorted(p for p in (ROOT / "captures").rglob("*.pcap") if p.read_bytes()[:4] == b"\xd4\xc3\xb2\xa1")
MAGIC = {("<", 6): 0xA1B2C3D4, (">", 6): 0xA1B2C3D4, ("<", 9): 0xA1B23C4D, (">", 9): 0xA1B23C4D}


def as_pcap(packets: Iterable[RawPacket], endian: str = "<", digits: int = 6, linktype: int = 1) -> bytes:
    out = [struct.pack(endian + "IHHiIII", MAGIC[endian, digits], 2, 4, 0, 0, 262144, linktype)]
    for p in packets:
        units = round(p.ts * 10**digits)
        sec, frac = divmod(units, 10**digits)
        out.append(struct.pack(endian + "IIII", sec, frac, len(p.data), p.orig_len) + p.data)
    return b"".join(out)


def small() -> bytes:
    """More records than one call of pcap_records reads, of every size from 0 bytes on, one cut by
    the snap length."""
    packets = [RawPacket(i + 1, 1_700_000_000 + i / 7, 1, bytes(range(i % 200)) * (1 + i // 200), i % 200 + (i == 5))
               for i in range(3 * capture_records.BATCH + 5)]
    return as_pcap(packets)


@pytest.mark.parametrize("path", BUNDLED[::3], ids=lambda p: p.name)
def test_bundled_captures_in_every_byte_order_and_unit(path: Path) -> None:
    packets = list(read_packets(str(path)))
    assert [tuple(p) for p in packets] == [tuple(p) for p in read_packets(str(path), plain=True)]
    for endian in "<>":
        for digits in (6, 9):
            got, err = same(as_pcap(packets, endian, digits, packets[0].linktype))
            assert err is None
            assert [(p[0], p[2], p[3], p[4]) for p in got] == [(p[0], p[2], p[3], p[4]) for p in packets]
            assert all(abs(a[1] - b.ts) < 1e-6 for a, b in zip(got, packets, strict=True))


def test_windows_that_split_records_anywhere() -> None:
    data = small()
    for chunk in (None, 1, 7, 16, 31, 100, 333, 4096):
        got, err = same(data, chunk)
        assert err is None and len(got) == 3 * capture_records.BATCH + 5
    assert [p[0] for p in got] == list(range(1, len(got) + 1))


def test_cut_anywhere_reads_the_same() -> None:
    data = small()[:6000]
    errors = 0
    for n in range(4, len(data)):
        errors += same(data[:n], chunk=97 if n % 2 else None)[1] is not None
    assert errors > 1000  # the cuts do reach the checks


def test_corruption_anywhere_reads_the_same() -> None:
    assert corrupted_alike(small()[:3000], 2) > 100  # the corruptions do reach the checks


def test_a_huge_length_is_the_same_error() -> None:
    data = bytearray(small())
    struct.pack_into("<I", data, 24 + 16 + 8, capture.MAX_RECORD + 1)  # the second record's length
    got, err = same(bytes(data))
    assert len(got) == 1 and err is not None and "claims" in err


def test_records_stop_at_the_batch_and_at_a_record_not_whole() -> None:
    data = small()
    out: list[tuple] = []
    pos = capture_records.pcap_records(data, 24, 0, False, 1e-6, 1, tuple.__new__, None, out)
    assert len(out) == capture_records.BATCH and out[0][0] == 1 and out[-1][0] == capture_records.BATCH
    assert read(data[:pos], True)[0] == out
    out = []
    cut = data[:pos - 3]  # the BATCH-th record lacks its last bytes
    assert capture_records.pcap_records(cut, 24, 0, False, 1e-6, 1, tuple.__new__, None, out) < len(cut)
    assert len(out) == capture_records.BATCH - 1
