"""Which files a pipeline run reads, and how they form chains.

A chain is the files of one capture point rotated by tcpdump (``-C``/``-G``): the files of one
directory, in the order of their first packets (as ``streamproto inspect a b c`` reads several
files). Conversations continue from one file of a chain into the next, never across chains, so
captures of the same traffic from two hosts stay apart when each host has its directory.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass

from analyzer.capture import order_captures
from analyzer.pipeline import remote

#: What a directory's files must look like to be read (anything else there is ignored).
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")


@dataclass(frozen=True)
class Chain:
    name: str  # the directory
    files: tuple[str, ...]  # in capture order


def _is_capture(name: str) -> bool:
    low = name.lower()
    if low.endswith(CAPTURE_SUFFIXES):
        return True
    # tcpdump -C appends a number to the name it was given: capture.pcap1, capture.pcap2, ...
    stem = low.rstrip("0123456789")
    return stem != low and stem.endswith((".pcap", ".pcapng", ".cap"))


def expand(inputs: Sequence[str]) -> tuple[list[str], list[str]]:
    """Files named, found in directories (recursively) or matched by globs; and the inputs that
    named nothing (for one line each on stderr)."""
    found: list[str] = []
    missing: list[str] = []
    for item in inputs:
        if remote.is_uri(item):  # hdfs://, s3a://, file://: listed through pyarrow's filesystems
            got = remote.expand(item, _is_capture)
            found.extend(got)
            if not got:
                missing.append(item)
        elif os.path.isdir(item):
            for root, dirs, files in os.walk(item):
                dirs.sort()
                found.extend(os.path.join(root, f) for f in sorted(files) if _is_capture(f))
        elif os.path.exists(item):
            found.append(item)
        else:
            matches = sorted(glob.glob(item, recursive=True))
            if not matches:
                missing.append(item)
            for m in matches:
                if os.path.isdir(m):
                    more, _ = expand([m])
                    found.extend(more)
                else:
                    found.append(m)
    seen: set[str] = set()
    unique = []
    for f in found:
        key = f if remote.is_uri(f) else os.path.abspath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, missing


def chains(files: Sequence[str]) -> list[Chain]:
    """The files grouped by directory, each group in capture order (first packet's time)."""
    groups: dict[str, list[str]] = {}
    for f in files:
        key = f.rsplit("/", 1)[0] if remote.is_uri(f) else os.path.dirname(os.path.abspath(f))
        groups.setdefault(key, []).append(f)
    return [Chain(name, tuple(_ordered(group))) for name, group in sorted(groups.items())]


def _ordered(group: list[str]) -> list[str]:
    if not any(remote.is_uri(f) for f in group):
        return order_captures(group)
    # As order_captures does, from the first megabyte of each file.
    firsts = [remote.first_ts(f) for f in group]
    return [f for _, _, f in sorted((t, i, f) for i, (t, f) in enumerate(zip(firsts, group, strict=True)))]
