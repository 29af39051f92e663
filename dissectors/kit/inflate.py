"""Bounded decompression: every codec a dissector meets, never producing more than the caller allows.

A compressed payload on the wire is an instruction to allocate: a few kilobytes of gzip or zstd
can expand to gigabytes, and a length field that states the uncompressed size is just as
untrusted. So every decoder here works incrementally with an output limit and stops there:

- gzip, zlib, raw deflate: :func:`zlib.decompressobj` with ``max_length`` (32 KiB window);
- snappy: the raw format states its size in a varint preamble, read (and checked against the
  limit) before the library is called; the framing format is walked chunk by chunk here, each
  chunk at most 64 KiB by the format, so the limit applies between chunks (the chunks' CRC-32C
  is not verified: there is no CRC-32C in the standard library and a pure-Python one would cost
  more than the decoding);
- lz4 (frame format): the library's decompressor with ``max_length``;
- zstd: a stream reader read in 64 KiB steps, with the decoder's window (the memory a frame can
  ask for before producing anything) held to the limit as well.

Callers that need to know whether the data expands past their limit ask for one byte more than
they want and compare. The global cap on what one frame may expand to is :func:`limit` (16 MiB by
default, set with the environment variable ``STREAMPROTO_MAX_DECOMPRESSED``, e.g. ``64M``, read
once per process): a kit-level setting rather than a dissector option because the layouts that
decode compressed entries are stateless and every dissector that decompresses must obey the same
bound.
"""

from __future__ import annotations

import functools
import importlib
import os
import zlib
from collections.abc import Callable

#: What one frame may expand to when nothing else is configured (bytes).
DEFAULT_LIMIT = 16 << 20
ENV = "STREAMPROTO_MAX_DECOMPRESSED"
#: Output is produced in steps of this size, so memory follows what the data really holds.
STEP = 64 << 10
#: The largest chunk the snappy framing format allows (uncompressed).
SNAPPY_CHUNK = 65536
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
#: The zstd window always allowed (what compressors use below their "ultra" levels).
ZSTD_WINDOW = 8 << 20

CODECS = ("gzip", "zlib", "deflate", "snappy", "lz4", "zstd")


class InflateError(ValueError):
    """The data does not decompress: corrupt, cut off, or a feature the decoder refuses."""


class CodecUnavailable(LookupError):
    """The codec's library is not installed (the ``compression`` extra)."""


class Excess(Exception):
    """The data states up front that it expands past the limit (raw snappy's size preamble), and
    its format cannot be decoded in part: nothing was decoded."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the data states {size} bytes uncompressed")
        self.size = size


def parse_size(text: str) -> int:
    """``"16M"``, ``"512k"``, ``"1G"`` or plain bytes; ValueError when it is none of these."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    n = int(t[:-1] if scale > 1 else t)
    if n < 0:
        raise ValueError(f"a size cannot be negative: {text!r}")
    return n * scale


@functools.cache
def limit() -> int:
    """The configured cap on what one frame may expand to (bytes), read from the environment when
    first asked and kept (``limit.cache_clear()`` reads it again): a frame with compressed entries
    asks, and a lookup that misses in ``os.environ`` raises and catches two KeyErrors, 3.5 % of a
    RabbitMQ Stream run's checks when asked per frame."""
    raw = os.environ.get(ENV)
    if not raw:
        return DEFAULT_LIMIT
    try:
        return parse_size(raw)
    except ValueError:
        return DEFAULT_LIMIT  # a bad setting must not turn decoding off: the default bound holds


#: The library each optional codec needs (the ``compression`` extra).
_LIBRARIES = {"snappy": "snappy", "lz4": "lz4.frame", "zstd": "zstandard"}


def available(codec: str) -> bool:
    """Whether ``codec`` can be decoded here (its library is installed)."""
    if codec not in _DECODERS:
        raise _unknown(codec)
    lib = _LIBRARIES.get(codec)
    if lib is None:
        return True
    try:
        importlib.import_module(lib)
    except ImportError:
        return False
    return True


def inflate(codec: str, data: bytes, limit: int) -> bytes:
    """``data`` decompressed with ``codec``, at most ``limit`` bytes of it.

    To learn whether the data expands past what it wants, a caller asks for one byte more.
    Raises :class:`InflateError` when the data is corrupt or ends early (only judged when the
    output stayed under ``limit``: past it, the rest is never looked at), :class:`Excess` when
    it states a larger size up front, and :class:`CodecUnavailable` when the codec's library
    is missing."""
    dec = _DECODERS.get(codec)
    if dec is None:
        raise _unknown(codec)
    if limit <= 0:
        return b""
    try:
        return dec(bytes(data), limit)
    except (InflateError, CodecUnavailable, Excess, MemoryError):
        raise
    except Exception as exc:  # every library has its own error class: all mean bad data here
        raise InflateError(str(exc) or type(exc).__name__) from exc


def _unknown(codec: str) -> ValueError:
    return ValueError(f"unknown codec {codec!r} (known: {', '.join(CODECS)})")


# ------------------------------------------------------------------------------ deflate family
def _zlib_family(wbits: int, name: str) -> Callable[[bytes, int], bytes]:
    def dec(data: bytes, limit: int) -> bytes:
        d = zlib.decompressobj(wbits)
        first = d.decompress(data, limit)
        if len(first) >= limit or (d.eof and not d.unused_data):
            return first  # the usual: one whole member (or the limit reached), without a copy
        out = bytearray(first)
        while True:
            if not d.eof:
                raise InflateError(f"{name} data ends early (after {len(out)} bytes)")
            data = d.unused_data
            # gzip allows several members one after the other; anything else after the end is junk.
            if not data or wbits < 16 + 8:
                if data:
                    raise InflateError(f"{len(data)} bytes after the end of the {name} data")
                return bytes(out)
            d = zlib.decompressobj(wbits)
            out += d.decompress(data, limit - len(out))
            if len(out) >= limit:
                return bytes(out)

    return dec


# ------------------------------------------------------------------------------ snappy
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Snappy's little-endian base-128 length (at most 32 bits): (value, next position)."""
    value = shift = 0
    for i in range(pos, min(pos + 5, len(data))):
        b = data[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i + 1
        shift += 7
    raise InflateError("snappy length preamble is cut off or longer than 5 bytes")


def _snappy(data: bytes, limit: int) -> bytes:
    try:
        import snappy  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CodecUnavailable("snappy (python-snappy) is not installed") from exc
    if data.startswith(SNAPPY_STREAM_ID):
        return _snappy_framed(snappy.uncompress, data, limit)
    return _snappy_raw(snappy.uncompress, data, limit)


def _snappy_raw(uncompress: Callable[[bytes], bytes], data: bytes, limit: int) -> bytes:
    size, _ = _varint(data, 0)
    if size > limit:
        # The library allocates what the preamble says before it reads on, and cannot stop early.
        raise Excess(size)
    out = uncompress(data)
    if len(out) != size:
        raise InflateError(f"snappy data holds {len(out)} bytes, its preamble says {size}")
    return out


def _snappy_framed(uncompress: Callable[[bytes], bytes], data: bytes, limit: int) -> bytes:
    out = bytearray()
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise InflateError(f"snappy frame chunk header cut off at byte {pos}")
        kind = data[pos]
        n = int.from_bytes(data[pos + 1:pos + 4], "little")
        body = pos + 4
        if body + n > len(data):
            raise InflateError(f"snappy frame chunk at byte {pos} needs {n} bytes, {len(data) - body} left")
        chunk = data[body:body + n]
        pos = body + n
        if kind == 0xFF:
            if chunk != SNAPPY_STREAM_ID[4:]:
                raise InflateError("bad snappy stream identifier")
        elif kind in (0x00, 0x01):
            if n < 4:
                raise InflateError(f"snappy frame chunk at byte {body - 4} is too short for its CRC")
            if kind == 0x01:
                piece = chunk[4:]
            else:
                size, _ = _varint(chunk, 4)
                if size > SNAPPY_CHUNK:
                    raise InflateError(f"snappy frame chunk states {size} bytes, the format allows {SNAPPY_CHUNK}")
                piece = uncompress(chunk[4:])
            if len(piece) > SNAPPY_CHUNK:
                raise InflateError(f"snappy frame chunk holds {len(piece)} bytes, the format allows {SNAPPY_CHUNK}")
            out += piece[:limit - len(out)]
            if len(out) >= limit:
                return bytes(out)
        elif 0x02 <= kind <= 0x7F:
            raise InflateError(f"snappy frame chunk type {kind:#04x} is reserved and cannot be skipped")
        # 0x80..0xfe: padding and skippable chunks
    return bytes(out)


# ------------------------------------------------------------------------------ lz4 and zstd
def _lz4(data: bytes, limit: int) -> bytes:
    try:
        import lz4.frame  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CodecUnavailable("lz4 is not installed") from exc
    out = bytearray()
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(data, max_length=limit - len(out))
        if len(out) >= limit:
            return bytes(out)
        if not d.eof:
            raise InflateError(f"lz4 data ends early (after {len(out)} bytes)")
        data = d.unused_data
        if not data:
            return bytes(out)


def _zstd(data: bytes, limit: int) -> bytes:
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CodecUnavailable("zstandard is not installed") from exc
    # The window is allocated before the first byte comes out, and a frame may ask for up to 2 GiB.
    # Compressors choose at most 8 MiB below their "ultra" levels, and honest data never needs a
    # window larger than itself: more than both is refused (the library reports it as an error).
    window = min(max(ZSTD_WINDOW, 1 << (limit - 1).bit_length()), 1 << 31)
    zd = zstandard.ZstdDecompressor(max_window_size=window)
    # The library's stream objects have no output limit and its reader cannot tell a cut-off
    # frame from a finished one, so the input is fed in small steps: a zstd block produces at
    # most 128 KiB from at least 4 bytes, so a step of n bytes yields at most 32 KiB * n, and the
    # step is chosen to fit the room left (a bomb overshoots the limit by at most 2 MiB).
    out = bytearray()
    obj = zd.decompressobj(write_size=STEP)
    pos = 0
    while True:
        if obj.eof:
            rest = obj.unused_data + data[pos:]
            if not rest:
                return bytes(out)
            data, pos = rest, 0
            obj = zd.decompressobj(write_size=STEP)
        if pos >= len(data):
            raise InflateError(f"zstd data ends early (after {len(out)} bytes)")
        step = max(64, (limit - len(out)) >> 15)
        out += obj.decompress(data[pos:pos + step])
        pos += step
        if len(out) >= limit:
            del out[limit:]
            return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _zlib_family(16 + zlib.MAX_WBITS, "gzip"),
    "zlib": _zlib_family(zlib.MAX_WBITS, "zlib"),
    "deflate": _zlib_family(-zlib.MAX_WBITS, "deflate"),
    "snappy": _snappy,
    "lz4": _lz4,
    "zstd": _zstd,
}
