"""Captures named by URI (``hdfs://``, ``s3a://``, ``file://``, any filesystem pyarrow knows), for
the Spark engine on a cluster: listed on the driver, copied to a local temporary file by the
executor that decodes them (streamed, never held in memory), so the sans-IO decoder and the capture
reader stay the same. Hadoop's ``s3a://`` is pyarrow's ``s3://``; names in the tables stay as given.
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from analyzer.capture import CaptureError, read_packets

#: Bytes read from the start of a file to find its first packet's time (for ordering a chain).
HEAD_BYTES = 1 << 20


def is_uri(name: str) -> bool:
    return "://" in name


def _filesystem(uri: str) -> tuple[Any, str, str]:
    """(pyarrow filesystem, path in it, the prefix that makes a path of it a URI again). Only the
    scheme and authority go through pyarrow's URI parser: a path may hold glob characters."""
    from pyarrow import fs

    scheme, rest = uri.split("://", 1)
    authority, _, remainder = rest.partition("/")
    filesystem, base = fs.FileSystem.from_uri(f"{'s3' if scheme == 's3a' else scheme}://{authority}/")
    if base.strip("/"):  # object stores: the bucket is the path's first part (s3://bucket/key -> bucket/key)
        return filesystem, f"{base.strip('/')}/{remainder}".rstrip("/"), f"{scheme}://"
    return filesystem, "/" + remainder, f"{scheme}://{authority}"


def _join(prefix: str, path: str) -> str:
    return prefix + path if path.startswith("/") or prefix.endswith("//") else f"{prefix}/{path}"


def expand(item: str, wanted: Any) -> list[str]:
    """The capture files a URI names: a file, a directory (recursively; names ``wanted`` accepts)
    or a glob (``*``, ``?``, ``[...]`` in any part)."""
    from pyarrow import fs

    filesystem, path, prefix = _filesystem(item)
    if not any(c in path for c in "*?["):
        info = filesystem.get_file_info(path)
        if info.type == fs.FileType.File:
            return [item]
        if info.type != fs.FileType.Directory:
            return []
        found = filesystem.get_file_info(fs.FileSelector(path, recursive=True))
        return sorted(_join(prefix, f.path) for f in found if f.type == fs.FileType.File and wanted(f.base_name))
    parts = path.split("/")
    fixed = "/".join(p for p in parts[:next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))])
    base = fixed or "/"
    found = filesystem.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
    out = []
    for f in found:
        if f.type == fs.FileType.File and fnmatch.fnmatchcase(f.path, path):
            out.append(_join(prefix, f.path))
        elif f.type == fs.FileType.Directory and fnmatch.fnmatchcase(f.path, path):
            out.extend(expand(_join(prefix, f.path), wanted))
    return sorted(set(out))


def size(uri: str) -> int | None:
    try:
        filesystem, path, _ = _filesystem(uri)
        return int(filesystem.get_file_info(path).size)
    except Exception:  # unreachable or gone: the decoder's error will say what is wrong
        return None


@contextlib.contextmanager
def local_copy(uri: str, limit: int | None = None) -> Iterator[str]:
    """A local temporary copy of the file (of its first ``limit`` bytes), removed afterwards.
    Raises CaptureError when the file cannot be read."""
    fd, tmp = tempfile.mkstemp(prefix="streamproto-", suffix=".capture")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                filesystem, path, _ = _filesystem(uri)
                with filesystem.open_input_stream(path) as src:
                    if limit is None:
                        shutil.copyfileobj(src, out, 1 << 20)
                    else:
                        out.write(src.read(limit))
            except (OSError, ValueError) as exc:
                raise CaptureError(f"cannot open {uri}: {exc}") from None
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def first_ts(uri: str) -> float:
    """The time of the file's first packet (inf when it has none or cannot be read)."""
    try:
        with local_copy(uri, HEAD_BYTES) as tmp:
            packets = read_packets(tmp)
            try:
                first = next(packets, None)
            finally:
                packets.close()
    except CaptureError:
        return math.inf
    return math.inf if first is None else first.ts
