"""Packets sampled across a capture (analyzer/capture_sample.py, used by --jobs to tell how the work
spreads): every sampled packet is a packet of the file, as reading it whole gives it, and the
samples come from all over the file, in every format the reader reads, whatever the blocks land
on."""

from __future__ import annotations

import gzip
import itertools
import random
from pathlib import Path

import pytest

from analyzer import capture_sample
from analyzer.capture import CaptureError, RawPacket, read_packets
from analyzer.capture_sample import sample_windows
from analyzer.pcapwrite import CaptureWriter

ROOT = Path(__file__).parent.parent


def sample_packets(path: str, head: int) -> list[RawPacket]:
    return [pkt for window in sample_windows(path, head) for pkt in window]


def _big(path: Path, *, start: float = 1_700_000_000.0, step: float = 0.01, n: int = 6000, **kw: object) -> Path:
    """A capture of ``n`` frames of random sizes (up to a loopback's 64 KiB) and random bytes,
    each frame numbered in its first bytes so that a sample names where it comes from."""
    rng = random.Random(7)
    with open(path, "wb") as f:
        w = CaptureWriter(f, **kw)  # type: ignore[arg-type]
        for i in range(n):
            size = rng.choice((60, 200, 1514, 9000, 65535)) if i % 50 else 65535
            body = i.to_bytes(4, "big") + rng.randbytes(size - 4)
            w.write_raw(start + i * step, body, size + (i % 3))  # some cut by a snap length
    return path


@pytest.mark.parametrize("kw", [
    {}, {"big_endian": True}, {"nanosecond": True}, {"big_endian": True, "nanosecond": True},
    {"fmt": "pcapng"}, {"fmt": "pcapng", "big_endian": True}, {"fmt": "pcapng", "nanosecond": True},
])
def test_samples_are_the_files_packets_from_all_over_it(tmp_path: Path, kw: dict) -> None:
    path = _big(tmp_path / "big.cap", **kw)
    whole = {pkt.data[:4]: pkt for pkt in read_packets(str(path))}
    sampled = list(sample_packets(str(path), 100))
    numbers = [int.from_bytes(pkt.data[:4], "big") for pkt in sampled]
    for pkt in sampled:
        same = whole[pkt.data[:4]]
        assert (pkt.ts, pkt.linktype, pkt.data, pkt.orig_len) == (same.ts, same.linktype, same.data, same.orig_len)
    assert numbers == sorted(set(numbers))  # in file order, none twice
    assert numbers[0] == 0 and numbers[-1] > len(whole) * 0.9
    # Every block gave packets: no gap between samples wider than two blocks' share of the file.
    assert max(b - a for a, b in zip(numbers, numbers[1:], strict=False)) < 2 * len(whole) / capture_sample.WINDOWS
    assert len(sampled) < len(whole) / 2


def test_seconds_crossing_a_multiple_of_65536(tmp_path: Path) -> None:
    """A pcap record is found by the upper 16 bits of its seconds: those of the records before,
    or one more."""
    path = _big(tmp_path / "cross.pcap", start=float((26_000 << 16) - 30), step=0.02)
    sampled = list(sample_packets(str(path), 100))
    seconds = {int(pkt.ts) >> 16 for pkt in sampled}
    assert seconds == {25_999, 26_000}
    assert int.from_bytes(sampled[-1].data[:4], "big") > 5000


def test_small_compressed_and_other_files_are_read_from_their_start(tmp_path: Path) -> None:
    small = ROOT / "captures/amqp091/pika_large.pcap"
    head = [pkt.data for pkt in read_packets(str(small))][:40]
    assert [pkt.data for pkt in sample_packets(str(small), 40)] == head
    big = _big(tmp_path / "big.pcap", n=400)
    packed = tmp_path / "big.pcap.gz"
    packed.write_bytes(gzip.compress(big.read_bytes(), compresslevel=1))
    assert packed.stat().st_size >= 2 * capture_sample.WINDOWS * capture_sample.SPAN  # not small: packed
    head = [p.data for p in itertools.islice(read_packets(str(big)), 30)]
    assert [pkt.data for pkt in sample_packets(str(packed), 30)] == head
    with pytest.raises(CaptureError):
        list(sample_packets(str(tmp_path / "missing.pcap"), 10))


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_garbage_after_a_good_start_samples_the_start_only(tmp_path: Path, fmt: str) -> None:
    """Blocks that land on bytes no record chain fits give nothing (never an error or a hang): the
    file's good part is still sampled."""
    path = _big(tmp_path / f"g.{fmt}", n=40, fmt=fmt)
    good = [pkt.data for pkt in read_packets(str(path))]
    with open(path, "ab") as f:
        f.write(random.Random(3).randbytes(4 << 20))
    sampled = [pkt.data for pkt in sample_packets(str(path), 100)]
    assert sampled[0] == good[0] and len(sampled) > 1
    assert sampled == [data for data in good if data in sampled]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_block_near_the_end_takes_the_last_records(tmp_path: Path, fmt: str) -> None:
    """A block with fewer than CHAIN records left before the end of the file still finds them:
    the last block lands inside the second of three large records that end the file, so the
    third is all it has."""
    path = tmp_path / f"end.{fmt}"
    with open(path, "wb") as f:
        w = CaptureWriter(f, fmt=fmt)
        for i in range(7000):
            w.write_raw(1_700_000_000 + i * 0.001, i.to_bytes(4, "big") + bytes(130))
        for i in range(7000, 7003):
            w.write_raw(1_700_000_010 + i * 0.001, i.to_bytes(4, "big") + bytes(20_000))
    size = path.stat().st_size
    last_block = size - (size - 24) // capture_sample.WINDOWS  # about where the last block starts
    assert size - 2 * 20_050 < last_block < size - 20_050
    sampled = sample_packets(str(path), 100)
    assert int.from_bytes(sampled[-1].data[:4], "big") == 7002
