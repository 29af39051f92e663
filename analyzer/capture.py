"""Reading capture files: pcap (both byte orders, µs and ns) and pcapng, optionally gzip-compressed.

Streaming: the file is read in large chunks and parsed with ``struct.unpack_from``, so memory does
not grow with the file and no per-packet object is built beyond :class:`RawPacket`.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Generator, Sequence
from typing import BinaryIO, NamedTuple

from analyzer.capture_records import pcap_records, pcapng_records

CHUNK = 1 << 20
#: A record claiming more than this is corrupt; no real link layer carries it, and trusting it would
#: make a broken length read the rest of the file into memory.
MAX_RECORD = 64 << 20

PCAP_MAGIC = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"


class CaptureError(Exception):
    """The file cannot be read as a capture (missing, unreadable, not a capture, truncated, corrupt)."""


class RawPacket(NamedTuple):
    number: int  # 1-based, counting every packet record of the file
    ts: float  # epoch seconds
    linktype: int
    data: bytes  # the captured bytes
    orig_len: int  # length on the wire (larger than len(data) when cut by the snap length)


class _Chunks:
    """A window over a binary file that hands out byte ranges without re-reading.

    The window is one read of the file, used as it is: only a record that straddles two reads is
    copied, stitched from its two pieces, and the window then moves on to the rest of the later
    read (``spare`` from ``spare_at``). Copying every read onto the previous one's leftover copied
    the whole file once more."""

    __slots__ = ("f", "buf", "pos", "consumed", "eof", "spare", "spare_at")

    def __init__(self, f: BinaryIO, head: bytes = b"") -> None:
        self.f = f
        self.buf = head
        self.pos = 0
        self.consumed = 0  # file offset of buf[0]
        self.eof = False
        # Read but not yet in the window; buf always ends where spare[spare_at] begins in the file.
        self.spare = b""
        self.spare_at = 0

    def need(self, n: int) -> bool:
        """Make ``n`` bytes available from ``pos``; False at end of file."""
        while len(self.buf) - self.pos < n:
            left = len(self.buf) - self.pos
            spare, at = self.spare, self.spare_at
            if at == len(spare):
                if self.eof:
                    return False
                spare = self.f.read(max(CHUNK, n - left))
                if not spare:
                    self.eof = True
                    return False
                self.spare, at = spare, 0
            if left:
                piece = spare[at:at + n - left]
                self.consumed += self.pos
                self.buf = self.buf[self.pos:] + piece
                self.pos = 0
                self.spare_at = at + len(piece)
            else:
                self.consumed += len(self.buf) - at
                self.buf, self.pos = spare, at
                self.spare, self.spare_at = b"", 0
        return True

    @property
    def file_offset(self) -> int:
        return self.consumed + self.pos


def read_packets(path: str, counts: list[int] | None = None, *, plain: bool = False) -> Generator[RawPacket, None, int]:
    """Every packet of a pcap or pcapng file (gzip-compressed too), and at the end how many there
    were (the generator's return value, also appended to ``counts`` if given: for a reader of
    several files that chains them without a generator of its own in between). Raises
    CaptureError. Nothing is opened before the first packet is asked for. ``plain``: each packet
    as a plain tuple of RawPacket's fields, in its order, for a reader that only unpacks them (the
    engine): a named tuple costs a call of tuple.__new__ per packet."""
    return _read(path, None, path, "capture file", counts, plain=plain)


def read_opened(f: BinaryIO, name: str, what: str = "capture file") -> Generator[RawPacket, None, int]:
    """Every packet of an opened capture, read once from its start without seeking: the format told
    by its first bytes, gzip decompressed. Errors name ``name`` (``what`` is what a too short input
    is not). Raises CaptureError; the caller closes ``f``."""
    return _read(None, f, name, what, None)


def _read(path: str | None, f: BinaryIO | None, name: str, what: str,
          counts: list[int] | None, hot: bool = True, plain: bool = False) -> Generator[RawPacket, None, int]:
    """read_packets (``path``, opened and closed here) and read_opened (``f``) in one generator:
    a pcap file's records are read in this frame. Each generator that delegates to another with
    ``yield from`` is resumed once more for every packet; two such levels cost the engine alone
    1.5-4.5 % of its time. ``hot=False`` reads every record through the general path
    (tests/test_capture_records.py proves both read the same); ``plain``: see read_packets."""
    owned = None  # the file opened here, closed here (f becomes the decompressor of a .gz)
    if f is None:
        try:
            f = owned = open(path, "rb")  # type: ignore[arg-type]  # noqa: SIM115 - closed in the finally below
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
            raise CaptureError(f"{name}: not a {what} (too short)")
        if head == PCAPNG_SHB:
            number = yield from _read_pcapng(name, _Chunks(f, head), hot, plain)
            if counts is not None:
                counts.append(number)
            return number
        if head not in PCAP_MAGIC:
            raise CaptureError(f"{name}: not a pcap or pcapng capture (magic {head.hex()})")
        ch = _Chunks(f, head)
        if not ch.need(24):
            raise CaptureError(f"{name}: truncated pcap file header")
        endian, unit = PCAP_MAGIC[ch.buf[:4]]
        _, _, _, _, _, _snaplen, network = struct.unpack_from(endian + "IHHiIII", ch.buf, 0)
        linktype = network & 0x03FFFFFF  # upper bits carry FCS information
        ch.pos = 24
        unpack = struct.Struct(endian + "IIII").unpack_from
        new = tuple.__new__  # skips the named tuple's Python-level constructor
        shape = tuple if plain else RawPacket
        kind = None if plain else RawPacket  # pcap_records' name for a plain tuple: None
        big = endian == ">"
        number = 0
        # Hot loop: the window is kept in locals and handed back to ``ch`` only to refill it. The
        # records whole in it are read by pcap_records (compiled) and yielded from its list; the
        # one that is not, here, which refills the window.
        buf, pos = ch.buf, 24
        have = len(buf)
        while True:
            if pos + 16 > have:
                ch.buf, ch.pos = buf, pos
                if not ch.need(16):
                    if len(ch.buf) - ch.pos:
                        raise CaptureError(f"{name}: truncated capture file (partial record header after packet "
                                           f"{number})")
                    if counts is not None:
                        counts.append(number)
                    return number
                buf, pos, have = ch.buf, ch.pos, len(ch.buf)
            if hot:
                batch: list[RawPacket] = []
                pos = pcap_records(buf, pos, number, big, unit, linktype, new, kind, batch)
                if batch:
                    number += len(batch)
                    yield from batch
                    continue
            sec, frac, incl, orig = unpack(buf, pos)
            start = pos + 16
            end = start + incl
            if end > have:
                if incl > MAX_RECORD:
                    raise CaptureError(f"{name}: corrupt record after packet {number} (claims {incl} bytes)")
                ch.buf, ch.pos = buf, pos
                if not ch.need(16 + incl):
                    raise CaptureError(f"{name}: truncated capture file (packet {number + 1} is cut short)")
                buf, pos, have = ch.buf, ch.pos, len(ch.buf)
                start = pos + 16
                end = start + incl
            number += 1
            yield new(shape, (number, sec + frac * unit, linktype, buf[start:end], orig))
            pos = end
    except (OSError, EOFError) as exc:
        raise CaptureError(f"cannot read {name}: {exc}") from None
    except zlib.error as exc:
        # Corrupt deflate data in a .gz, early or late: the packets before it were yielded.
        raise CaptureError(f"cannot read {name}: corrupt compressed data ({exc})") from None
    finally:
        if owned is not None:
            owned.close()


class _Prefixed:
    """A binary stream with bytes already read put back in front (instead of seeking, which a pipe
    does not allow)."""

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


class _Inflate:
    """gzip decompression (several members too) that hands out every byte before a corruption
    and only then raises, so a damaged ``.pcap.gz`` shows what was readable. (``gzip.GzipFile``
    loses a whole read's output when it meets bad data or a bad checksum at the end.)"""

    STEP = 64 * 1024
    SALVAGE = 512  # on an error, the failed input is fed again in pieces this small

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        self.out = bytearray()
        self.error: Exception | None = None
        self.done = False

    def read(self, n: int) -> bytes:
        while len(self.out) < n and not self.done and self.error is None:
            self._more()
        if not self.out and self.error is not None:
            raise self.error
        data = bytes(self.out[:n])
        del self.out[:n]
        return data

    def close(self) -> None:
        self.raw.close()

    def _more(self) -> None:
        d = self.d
        if d.eof:  # end of a member: another may follow
            rest = d.unused_data
            if not rest.strip(b"\x00"):
                rest += self.raw.read(self.STEP)
                if not rest.strip(b"\x00"):
                    self.done = True  # (tools pad with zeros; that is not a member)
                    return
            self.d = d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            chunk = rest
        else:
            chunk = self.raw.read(self.STEP)
            if not chunk:
                self.error = EOFError("compressed file ended before the end-of-stream marker")
                return
        saved = d.copy()
        try:
            self.out += d.decompress(chunk)
        except zlib.error:
            # Feed the same input again in small pieces to keep what precedes the damage.
            self.d = d = saved
            for i in range(0, len(chunk), self.SALVAGE):
                try:
                    self.out += d.decompress(chunk[i:i + self.SALVAGE])
                except zlib.error as exc:
                    self.error = exc
                    return


def order_captures(paths: Sequence[str]) -> list[str]:
    """Files as ``tcpdump -C`` or ``-G`` rotates them, in capture order: by the timestamp of each
    file's first packet (a file without packets, or unreadable from its first packet on, goes last,
    where reading it reports what is wrong), ties in the order given."""
    firsts: list[float] = []
    for path in paths:
        packets = read_packets(path)
        try:
            first = next(packets, None)
        except CaptureError:
            first = None
        finally:
            packets.close()
        firsts.append(math.inf if first is None else first.ts)
    return [p for _, _, p in sorted((t, i, p) for i, (t, p) in enumerate(zip(firsts, paths, strict=True)))]


class _Iface(NamedTuple):
    linktype: int
    snaplen: int
    units: float  # timestamp units per second
    offset: int  # seconds added to every timestamp


def _read_pcapng(path: str, ch: _Chunks, hot: bool = True, plain: bool = False) -> Generator[RawPacket, None, int]:
    """Every packet of a pcapng file. ``hot=False`` reads every block through the general path
    (tests/test_capture_pcapng.py proves both read the same); ``plain``: see read_packets."""
    endian = "<"
    ifaces: list[_Iface] = []
    number = 0
    hdr_le = struct.Struct("<II")
    hdr_be = struct.Struct(">II")
    epb = struct.Struct("<IIIII")
    new = tuple.__new__  # skips the named tuple's Python-level constructor
    shape = tuple if plain else RawPacket
    kind = None if plain else RawPacket  # pcapng_records' name for a plain tuple: None
    # The interfaces' link types, timestamp units and offsets as columns for pcapng_records; None
    # once an interface is added or a section starts.
    columns: tuple[list[int], list[float], list[float]] | None = None
    buf, pos = ch.buf, ch.pos
    have = len(buf)
    while True:
        # Hot loop: nearly every block is an Enhanced Packet Block already whole in the window, on a
        # known interface: pcapng_records (compiled) reads those in a row. Anything else (or
        # anything that would be an error) takes the general path below, which reads it exactly as
        # before.
        if hot and pos + 28 <= have:
            if columns is None:
                columns = ([i.linktype for i in ifaces], [i.units for i in ifaces], [float(i.offset) for i in ifaces])
            batch: list[RawPacket] = []
            pos = pcapng_records(buf, pos, number, endian == ">", *columns, MAX_RECORD, new, kind, batch)
            if batch:
                number += len(batch)
                yield from batch
                continue
        ch.buf, ch.pos = buf, pos
        if not ch.need(12):
            if len(ch.buf) - ch.pos:
                raise CaptureError(f"{path}: truncated capture file (partial block after packet {number})")
            return number
        buf, pos = ch.buf, ch.pos
        if buf[pos:pos + 4] == PCAPNG_SHB:
            bom = buf[pos + 8:pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                raise CaptureError(f"{path}: corrupt pcapng section header")
            epb = struct.Struct(endian + "IIIII")
            ifaces = []
            columns = None
        btype, blen = (hdr_le if endian == "<" else hdr_be).unpack_from(buf, pos)
        if blen < 12 or blen % 4 or blen > MAX_RECORD:
            raise CaptureError(f"{path}: corrupt pcapng block at byte {ch.file_offset} (length {blen})")
        if not ch.need(blen):
            raise CaptureError(f"{path}: truncated capture file (block after packet {number} is cut short)")
        buf, pos = ch.buf, ch.pos
        body = pos + 8
        end = pos + blen - 4
        if btype == 6 or btype == 2:  # Enhanced Packet Block, or the obsolete Packet Block
            if btype == 6:
                iface, hi, lo, cap, orig = epb.unpack_from(buf, body)
            else:
                iface, _drops, hi, lo, cap, orig = struct.unpack_from(endian + "HHIIII", buf, body)
            if iface >= len(ifaces) or body + 20 + cap > end:
                raise CaptureError(f"{path}: corrupt packet block after packet {number}")
            info = ifaces[iface]
            number += 1
            yield new(shape, (number, ((hi << 32) | lo) / info.units + info.offset, info.linktype,
                              buf[body + 20:body + 20 + cap], orig))
        elif btype == 3:  # Simple Packet Block: interface 0, no timestamp
            if not ifaces:
                raise CaptureError(f"{path}: simple packet block before any interface description")
            (orig,) = struct.unpack_from(endian + "I", buf, body)
            cap = min(orig, end - body - 4)
            if ifaces[0].snaplen:
                cap = min(cap, ifaces[0].snaplen)
            number += 1
            yield new(shape, (number, 0.0, ifaces[0].linktype, buf[body + 4:body + 4 + cap], orig))
        elif btype == 1:  # Interface Description Block
            ifaces.append(_parse_idb(buf, body, end, endian))
            columns = None
        pos = pos + blen
        have = len(buf)


def _parse_idb(buf: bytes, body: int, end: int, endian: str) -> _Iface:
    linktype, _reserved, snaplen = struct.unpack_from(endian + "HHI", buf, body)
    units, offset = 1e6, 0
    opt = body + 8
    while opt + 4 <= end:
        code, length = struct.unpack_from(endian + "HH", buf, opt)
        if code == 0:
            break
        val = opt + 4
        if code == 9 and length >= 1:  # if_tsresol
            r = buf[val]
            units = float(2 ** (r & 0x7F)) if r & 0x80 else float(10 ** r)
        elif code == 14 and length >= 8:  # if_tsoffset
            (offset,) = struct.unpack_from(endian + "q", buf, val)
        opt = val + ((length + 3) & ~3)
    return _Iface(linktype, snaplen, units, offset)
