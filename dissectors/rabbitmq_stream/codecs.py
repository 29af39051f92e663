"""Sub-batch compression: the codes RabbitMQ Stream gives codecs, and a decompressor for each the
kit can decode (:mod:`dissectors.kit.inflate`), looked up when first needed."""

from __future__ import annotations

import functools
from collections.abc import Callable

from dissectors.kit import inflate

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd", 5: "reserved", 6: "reserved",
               7: "user-defined"}
#: Codec of each compression code the kit decodes.
CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _none(data: bytes, limit: int) -> bytes:
    return data[:limit]


def _codec(name: str) -> Callable[[bytes, int], bytes] | None:
    """At most ``limit`` bytes of ``data`` decompressed (None: the codec's library is missing)."""
    if not inflate.available(name):
        return None
    return functools.partial(inflate.inflate, name)  # not a lambda: a Python call less per sub-batch


class _Decompressors(dict):  # type: ignore[type-arg]
    """Compression code -> decompressor (None: the codec's library is missing), each looked up when
    first needed: importing snappy, lz4 and zstandard costs 30 ms, on every start otherwise."""

    def __missing__(self, code: int) -> Callable[[bytes, int], bytes] | None:
        dec = self[code] = _codec(CODECS[code])
        return dec


DECOMPRESSORS: dict[int, Callable[[bytes, int], bytes] | None] = _Decompressors({0: _none})


def gzip_compress(data: bytes) -> bytes:
    import gzip  # the encoder's alone: kept off the start of every run

    # mtime 0: the same bytes every time (gzip's header otherwise holds the current second, and a
    # test that encodes one session twice saw two chunk CRCs when a second turned between them).
    return gzip.compress(data, mtime=0)
