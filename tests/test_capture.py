"""Capture file input: pcap and pcapng variants, gzip, and every kind of bad file."""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import pytest

from analyzer import capture
from analyzer.capture import CaptureError, read_opened, read_packets
from analyzer.pcapwrite import CaptureWriter, TcpConversation, ip_packet

TS = 1_700_000_000.25


def one_conv() -> TcpConversation:
    c = TcpConversation(ts=TS)
    c.handshake()
    c.send("c2s", b"x" * 3000, mss=1000)
    c.close()
    return c


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nano", [False, True])
def test_formats_byte_orders_and_resolutions(tmp_path: Path, fmt, big_endian, nano):
    p = tmp_path / "c.cap"
    conv = one_conv()
    with open(p, "wb") as f:
        CaptureWriter(f, fmt=fmt, big_endian=big_endian, nanosecond=nano).write_segments(conv.segments)
    pkts = list(read_packets(str(p)))
    assert [x.number for x in pkts] == list(range(1, len(conv.segments) + 1))
    assert all(x.linktype == 1 for x in pkts)
    assert pkts[0].ts == pytest.approx(TS, abs=1e-6)
    assert pkts[3].data[14:] == ip_packet(conv.segments[3])


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def test_pcapng_several_interfaces_with_own_linktype_and_resolution(tmp_path: Path):
    seg = one_conv().segments[3]
    ip = ip_packet(seg)
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    # Interface 0: Ethernet, microseconds. Interface 1: raw IP, nanoseconds, 100 s offset.
    idb0 = _block(1, struct.pack("<HHI", 1, 0, 65535))
    idb1 = _block(1, struct.pack("<HHI", 101, 0, 65535) + struct.pack("<HHB3x", 9, 1, 9)
                  + struct.pack("<HHq", 14, 8, 100) + struct.pack("<HH", 0, 0))
    eth = b"\x00" * 12 + b"\x08\x00" + ip
    t_us, t_ns = 1_700_000_000_500_000, 1_700_000_000_000_000_123
    epb0 = _block(6, struct.pack("<IIIII", 0, t_us >> 32, t_us & 0xFFFFFFFF, len(eth), len(eth)) + eth)
    epb1 = _block(6, struct.pack("<IIIII", 1, t_ns >> 32, t_ns & 0xFFFFFFFF, len(ip), len(ip)) + ip)
    spb = _block(3, struct.pack("<I", len(eth)) + eth)
    p = tmp_path / "multi.pcapng"
    p.write_bytes(shb + idb0 + idb1 + epb0 + epb1 + spb + _block(5, b"stats"))
    pkts = list(read_packets(str(p)))
    assert [(x.number, x.linktype) for x in pkts] == [(1, 1), (2, 101), (3, 1)]
    assert pkts[0].ts == pytest.approx(1_700_000_000.5)
    assert pkts[1].ts == pytest.approx(1_700_000_100.000000123)
    assert pkts[1].data == ip and pkts[2].data == eth


def test_gzip_compressed(tmp_path: Path):
    buf = io.BytesIO()
    CaptureWriter(buf).write_segments(one_conv().segments)
    p = tmp_path / "c.pcap.gz"
    p.write_bytes(gzip.compress(buf.getvalue()))
    assert len(list(read_packets(str(p)))) == len(one_conv().segments)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_truncated_file_yields_what_was_readable_then_fails(tmp_path: Path, fmt):
    buf = io.BytesIO()
    CaptureWriter(buf, fmt=fmt).write_segments(one_conv().segments)
    p = tmp_path / "cut.cap"
    p.write_bytes(buf.getvalue()[:-30])
    got = []
    with pytest.raises(CaptureError, match="truncated"):
        for pkt in read_packets(str(p)):
            got.append(pkt)
    assert len(got) == len(one_conv().segments) - 1


@pytest.mark.parametrize("how", ["whole", "whole.gz", "pcapng", "stopped", "stopped.gz", "cut", "not a capture"])
def test_the_file_opened_is_closed_however_reading_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str):
    """read_packets opens nothing until the first packet is asked for, and closes the file it
    opened (not the decompressor of a .gz) when the packets end, when the reader is closed early
    and when the file turns out bad."""
    buf = io.BytesIO()
    CaptureWriter(buf, fmt="pcapng" if how == "pcapng" else "pcap").write_segments(one_conv().segments)
    data = {"cut": buf.getvalue()[:-30], "not a capture": b"not a capture at all"}.get(how, buf.getvalue())
    p = tmp_path / "c.cap"
    p.write_bytes(gzip.compress(data) if how.endswith(".gz") else data)
    opened: list[io.BufferedReader] = []

    def tracked(*args, **kwargs):
        f = open(*args, **kwargs)
        opened.append(f)
        return f

    monkeypatch.setattr(capture, "open", tracked, raising=False)
    packets = read_packets(str(p))
    assert not opened
    if how.startswith("stopped"):
        next(packets)
        assert not opened[0].closed
        packets.close()
    elif how in ("cut", "not a capture"):
        with pytest.raises(CaptureError):
            list(packets)
    else:
        assert len(list(packets)) == len(one_conv().segments)
    assert len(opened) == 1 and opened[0].closed


def test_snaplen_cut_packet_keeps_original_length(tmp_path: Path):
    buf = io.BytesIO()
    CaptureWriter(buf, snaplen=100).write_segments(one_conv().segments)
    p = tmp_path / "snap.pcap"
    p.write_bytes(buf.getvalue())
    big = [x for x in read_packets(str(p)) if x.orig_len > 100]
    assert big and all(len(x.data) == 100 for x in big)


@pytest.mark.parametrize("content,match", [
    (b"", "too short"),
    (b"hello, this is not a capture", "not a pcap"),
    (b"\xd4\xc3\xb2\xa1\x02\x00", "truncated pcap file header"),
    (b"\x0a\x0d\x0d\x0a\x05\x00\x00\x00" + b"\x4d\x3c\x2b\x1a", "corrupt"),
])
def test_bad_files(tmp_path: Path, content, match):
    p = tmp_path / "bad"
    p.write_bytes(content)
    with pytest.raises(CaptureError, match=match):
        list(read_packets(str(p)))


def test_missing_and_unreadable(tmp_path: Path):
    with pytest.raises(CaptureError, match="cannot open"):
        list(read_packets(str(tmp_path / "nope.pcap")))
    with pytest.raises(CaptureError, match="cannot"):
        list(read_packets(str(tmp_path)))  # a directory


def test_absurd_record_length_is_an_error_not_an_allocation(tmp_path: Path):
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    p = tmp_path / "huge.pcap"
    p.write_bytes(hdr + struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 0xFFFFFFF0) + b"x" * 100)
    with pytest.raises(CaptureError, match="corrupt"):
        list(read_packets(str(p)))


def test_pcapng_obsolete_packet_block(tmp_path: Path):
    ip = ip_packet(one_conv().segments[3])
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _block(1, struct.pack("<HHI", 101, 0, 65535))
    t = 1_700_000_001_000_000
    pb = _block(2, struct.pack("<HHIIII", 0, 0, t >> 32, t & 0xFFFFFFFF, len(ip), len(ip)) + ip)
    p = tmp_path / "old.pcapng"
    p.write_bytes(shb + idb + pb)
    (pkt,) = read_packets(str(p))
    assert pkt.data == ip and pkt.ts == pytest.approx(1_700_000_001.0) and pkt.linktype == 101


@pytest.mark.parametrize("where", [0.05, 0.5, 0.95])
def test_corrupt_gzip_data_is_a_capture_error_after_what_was_readable(tmp_path: Path, where: float):
    import subprocess
    import sys

    src = Path(__file__).resolve().parent.parent / "captures" / "amqp091" / "pika_confirms.pcap"
    packed = bytearray(gzip.compress(src.read_bytes(), compresslevel=9))
    at = 10 + int((len(packed) - 18) * where)  # inside the deflate data (10-byte header, 8-byte trailer)
    for i in range(at, min(at + 16, len(packed) - 8)):
        packed[i] ^= 0x5A
    p = tmp_path / "bad.pcap.gz"
    p.write_bytes(bytes(packed))
    with pytest.raises(CaptureError, match="bad.pcap.gz"):
        for _ in read_packets(str(p)):
            pass
    r = subprocess.run([sys.executable, "-m", "analyzer", "inspect", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("streamproto: ") and r.stderr.count("\n") == 1, r.stderr
    if where > 0.5:  # corrupt late: the packets before it were shown
        assert r.stdout.count("\n#") > 5


def _read_all(data: bytes) -> tuple[list[tuple], str | None]:
    """Every packet read from ``data`` (as plain tuples), then the error message or None."""
    got: list[tuple] = []
    packets = read_opened(io.BytesIO(data), "f")
    try:
        for p in packets:
            got.append(tuple(p))
    except CaptureError as exc:
        return got, str(exc)
    return got, None


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_every_read_size_reads_the_same(fmt: str, monkeypatch: pytest.MonkeyPatch):
    """Records straddling two reads are stitched from their pieces, and the window then goes on in
    the later read: whatever the read size, the same packets, the same error at the same byte."""
    c = TcpConversation(ts=TS)
    c.handshake()
    for i in range(12):
        c.send("c2s" if i % 2 else "s2c", bytes(range(256)) * (i + 1), mss=300 + 37 * i)
    c.close()
    buf = io.BytesIO()
    CaptureWriter(buf, fmt=fmt).write_segments(c.segments)
    whole = buf.getvalue()
    bad = bytearray(whole)
    at = len(whole) // 2
    if fmt == "pcapng":
        # a block length that is not a multiple of 4, at the block found from the middle on
        at = whole.index(b"\x06\x00\x00\x00", at)
        bad[at + 4:at + 8] = struct.pack("<I", 0x101)
    else:
        # a record length past any limit, in the record header found from the middle on
        pos = 24
        while pos < at:
            pos += 16 + struct.unpack_from("<I", whole, pos + 8)[0]
        bad[pos + 8:pos + 12] = struct.pack("<I", 0xFFFFFFF0)
    cases = [whole, whole[:-7], whole[:len(whole) // 3], bytes(bad)]
    expect = [_read_all(data) for data in cases]
    assert all(got for got, _ in expect), "some packets are read before the end or the error"
    assert [err is None or err.split(":")[1].split()[0] for _, err in expect] == [True, "truncated", "truncated",
                                                                                  "corrupt"]
    for chunk in (1, 5, 16, 17, 100, 301, 1000, 4096):
        monkeypatch.setattr(capture, "CHUNK", chunk)
        assert [_read_all(data) for data in cases] == expect, chunk
