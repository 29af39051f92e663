"""How many processes ``inspect --jobs`` uses: told before :mod:`analyzer.jobs` and its
multiprocessing are imported (15 ms), which a run that takes one process is spared."""

from __future__ import annotations

import os
from typing import NamedTuple

from analyzer.capture import CaptureError, order_captures
from analyzer.capture_sample import sample_windows
from analyzer.packets import LinkDecoder, reverse_key

#: Captures smaller than this (bytes, all files) are read by one process when --jobs is not given:
#: starting workers would cost more than it gains.
AUTO_MIN_BYTES = 4 << 20
#: Packets looked at in a file too small or too compressed to be sampled across (see placement).
PEEK = 20_000
#: The share of the work one worker may get for several jobs to be used.
DOMINANT = 0.75


class Plan(NamedTuple):
    """How ``inspect`` runs a capture: ``jobs`` processes, and with several, the worker each
    conversation seen in the samples goes to, by its 4-tuple (the lesser of its two directions'
    flow keys, as :meth:`Analyzer.set_shard` takes them)."""

    jobs: int
    placed: dict[bytes, int]


ONE = Plan(1, {})


def auto_jobs(paths: list[str]) -> Plan:
    """--jobs by default: the machine's cores; one for a small capture, and for one whose
    conversations would not spread over them (see placement)."""
    size = 0
    for p in paths:
        try:
            size += os.path.getsize(p)
        except OSError:
            return ONE
    cores = os.cpu_count() or 1
    if size < AUTO_MIN_BYTES or cores == 1:
        return ONE
    return _plan(paths, cores)


def jobs_for(paths: list[str], asked: int | None) -> Plan:
    """The processes to use: ``asked`` (--jobs N) is an upper bound, as make's or xz's is. N of
    them when the capture's conversations spread over N (see placement), else one: on a capture
    whose work is one conversation's, the other workers would only skip its packets while its
    text makes a detour through the parent, and the run would take longer than one process's.
    Without N, auto_jobs."""
    if asked is None:
        return auto_jobs(paths)
    return _plan(paths, asked) if asked > 1 else ONE


def _plan(paths: list[str], n: int) -> Plan:
    placed = placement(paths, n)
    return ONE if placed is None else Plan(n, placed)


def placement(paths: list[str], n: int) -> dict[bytes, int] | None:
    """The worker of each conversation the samples see, so that the capture's work spreads over
    ``n`` workers; None when it would not: when one worker would still get most of it (more
    than DOMINANT), as with one conversation carrying nearly all of it.

    The work is told by blocks sampled across each file (see capture_sample: conversations often
    come one after another, so the start of a capture says little), each block's share going to
    conversations by their packets' captured bytes: the bytes rather than the packets, because a
    packet carrying many frames costs more than one carrying an acknowledgement. The busiest
    conversation goes first, each to the worker with the least work so far (ties: the lower
    worker; equal work: the conversation seen first), so two busy conversations get one worker
    each wherever their numbers fall. Conversations the samples miss are few packets each; the
    analyzer deals them out in turn."""
    dec = LinkDecoder()
    work: dict[bytes, float] = {}
    try:
        for path in order_captures(paths):
            for window in sample_windows(path, PEEK):
                in_window: dict[bytes, int] = {}
                for pkt in window:
                    if dec.decode(pkt) is not None:
                        key = dec.key
                        key = min(key, reverse_key(key))
                        in_window[key] = in_window.get(key, 0) + len(pkt.data)
                total = sum(in_window.values()) or 1
                for key, size in in_window.items():  # in order of appearance, as ties want it
                    work[key] = work.get(key, 0.0) + size / total
    except CaptureError:
        pass
    if len(work) < 2:
        return None
    load = [0.0] * n
    placed: dict[bytes, int] = {}
    for key in sorted(work, key=work.__getitem__, reverse=True):  # stable: seen first on ties
        worker = load.index(min(load))
        placed[key] = worker
        load[worker] += work[key]
    return placed if max(load) <= DOMINANT * sum(load) else None
