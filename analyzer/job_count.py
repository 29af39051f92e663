"""How many processes ``inspect --jobs`` uses: told before :mod:`analyzer.jobs` and its
multiprocessing are imported (15 ms), which a run that takes one process is spared."""

from __future__ import annotations

import os

from analyzer.capture import CaptureError, order_captures
from analyzer.capture_sample import sample_windows
from analyzer.packets import LinkDecoder, reverse_key

#: Captures smaller than this (bytes, all files) are read by one process when --jobs is not given:
#: starting workers would cost more than it gains.
AUTO_MIN_BYTES = 4 << 20
#: Packets looked at in a file too small or too compressed to be sampled across (see spreads).
PEEK = 20_000
#: The share of the work one worker may get for several jobs to be used.
DOMINANT = 0.75


def auto_jobs(paths: list[str]) -> int:
    """--jobs by default: the machine's cores; one for a small capture, and for one whose
    conversations would not spread over them (see spreads)."""
    size = 0
    for p in paths:
        try:
            size += os.path.getsize(p)
        except OSError:
            return 1
    cores = os.cpu_count() or 1
    if size < AUTO_MIN_BYTES or cores == 1:
        return 1
    return cores if spreads(paths, cores) else 1


def jobs_for(paths: list[str], asked: int | None) -> int:
    """The processes to use: ``asked`` (--jobs N) is an upper bound, as make's or xz's is. N of
    them when the capture's conversations spread over N (see spreads), else one: on a capture
    whose work is one conversation's, the other workers would only skip its packets while its
    text makes a detour through the parent, and the run would take longer than one process's.
    Without N, auto_jobs."""
    if asked is None:
        return auto_jobs(paths)
    return asked if asked > 1 and spreads(paths, asked) else 1


def spreads(paths: list[str], n: int) -> bool:
    """Whether the capture's work would not mostly (more than DOMINANT of it) go to one of ``n``
    workers: one conversation carrying nearly all of it, or a busy one sharing its worker with
    others. The work is told by blocks sampled across each file (see capture_sample:
    conversations often come one after another, so the start of a capture says little), each
    block's share going to conversations by their packets' captured bytes: the bytes rather than
    the packets, because a packet carrying many frames costs more than one carrying an
    acknowledgement. Each 4-tuple is a conversation numbered in order of appearance from 1 and
    dealt to worker id % n, as Analyzer.owns deals them (near enough: a conversation the samples
    miss shifts the later ones' numbers there)."""
    dec = LinkDecoder()
    ids: dict[bytes, int] = {}
    per_worker = [0.0] * n
    try:
        for path in order_captures(paths):
            for window in sample_windows(path, PEEK):
                in_window = [0] * n
                for pkt in window:
                    if dec.decode(pkt) is not None:
                        key = dec.key
                        key = min(key, reverse_key(key))
                        conv = ids.get(key)
                        if conv is None:
                            conv = ids[key] = len(ids) + 1
                        in_window[conv % n] += len(pkt.data)
                total = sum(in_window)
                for k in range(n):
                    per_worker[k] += in_window[k] / (total or 1)
    except CaptureError:
        pass
    return len(ids) > 1 and max(per_worker) <= DOMINANT * sum(per_worker)
