"""``inspect --jobs N``: one capture's conversations decoded by N worker processes, the output
written by this one in the order, and with the bytes, of a single process.

Every worker reads the whole capture with its own analyzer (:meth:`Analyzer.set_shard`): it
follows every conversation far enough to number them all as one analyzer would (SYN, FIN, RST,
idle expiry), but reassembles, decodes and renders only its own share of them (the conversations
the parent's samples of the capture saw, placed so that the work spreads; the others dealt out in
turn), and the capture's own findings only in shard 0. Each event it shows leaves as
the text the chosen view makes of it, keyed by :meth:`Analyzer.order_key`; the parent merges the workers'
streams by key, which is the order one analyzer gives events in, and writes the text as it
comes. The request/response linker runs in the workers: its bounds are the request's own
conversation's business (see :mod:`analyzer.linking`), so a link does not depend on the shard.
At the end each worker gives its own conversations' rows and counters (:meth:`Analyzer.shard_state`),
which the parent adopts for the closing part (footer, the JSON document's flows).

The workers are forked: they start with the parent's loaded dissectors and options, nothing is
imported twice. Memory stays flat: the parent holds at most READ_AHEAD batches of a worker, and a
worker blocks while the parent has not taken them.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import itertools
import multiprocessing
import os
import pickle
import queue
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection as Pipe
from typing import Any

from analyzer.api import Frame
from analyzer.engine import Analyzer
from analyzer.linking import Linker

#: Rendered events a worker sends at once.
BATCH = 256
#: Batches the parent takes from a worker ahead of the merge (memory: a few MB per worker).
READ_AHEAD = 64

Item = tuple[tuple, bool, str]


class _Text(io.StringIO):
    """A worker's standard output: text kept for the parent, which reports the parent's terminal
    and encoding so that the views make the same text (colours, arrows) they would make there."""

    def __init__(self, tty: bool, encoding: str | None) -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        return self._encoding

    def take(self) -> str:
        text = self.getvalue()
        if text:
            self.seek(0)
            self.truncate()
        return text


def run(jobs: int, analyzer: Analyzer, display: Any, paths: list[str], make_display: Callable[[Analyzer], Any],
        events_of: Callable[[Analyzer, list[str]], tuple[Iterator[Any], list[str]]], tty: bool,
        progress: Callable[[Callable[[], tuple[int, int]]], Any] | None = None,
        placed: dict[bytes, int] | None = None) -> list[str]:
    """Run the capture over ``jobs`` workers and write their text through ``display``, made for
    ``analyzer`` (fresh: it takes the merged totals for the display's closing part); each worker
    makes its own with ``make_display``; ``tty``: whether standard output is a terminal (the
    workers' views make the text they would make for it). ``progress``, given a function of (packets, conversations)
    so far, makes a progress line (a context manager) or None; ``placed``: the worker of each conversation
    known beforehand (see :meth:`Analyzer.set_shard`). Gives back the reading error, if any."""
    ctx = multiprocessing.get_context("fork")
    # Where the slowest worker is (packets read, conversations seen), for the progress line.
    reached = ctx.RawArray("q", 2 * jobs)
    encoding = getattr(sys.stdout, "encoding", None)
    pipes: list[Pipe] = []
    procs = []
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for k in range(jobs):
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(k, jobs, send, analyzer, paths, make_display, events_of,
                                                     tty, encoding, reached, placed), daemon=True)
            proc.start()
            send.close()
            pipes.append(receive)
            procs.append(proc)
        states: list[dict[str, Any]] = [{} for _ in range(jobs)]
        put = display.put

        def counts() -> tuple[int, int]:
            return min(reached[0::2]), min(reached[1::2])

        line = progress(counts) if progress is not None else None
        with line if line is not None else contextlib.nullcontext():
            for _key, frame, text in heapq.merge(*(_items(p, states[k], k) for k, p in enumerate(pipes))):
                put(frame, text)
        for proc in procs:
            proc.join()
        analyzer.adopt_shards([st["analyzer"] for st in states])
        display.shown = sum(st["shown"] for st in states)
        return states[0]["error"]
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        for p in pipes:
            p.close()


def _items(pipe: Pipe, state: dict[str, Any], k: int) -> Iterator[Item]:
    """A worker's keyed texts in order; its closing state into ``state``. A thread takes the
    worker's batches from its pipe as they come, up to READ_AHEAD of them: without it a worker
    could run ahead of the others by no more than a pipe's buffer, and the workers of a capture
    whose conversations take turns would mostly wait for each other."""
    batches: queue.Queue[bytes | None] = queue.Queue(READ_AHEAD)

    def read() -> None:
        try:
            while True:
                batches.put(pipe.recv_bytes())
        except (EOFError, OSError):
            batches.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        data = batches.get()
        if data is None:
            raise RuntimeError(f"--jobs worker {k} ended without its results")
        kind, body = pickle.loads(data)
        if kind == "items":
            yield from body
        elif kind == "done":
            state.update(body)
            return
        else:
            raise RuntimeError(f"--jobs worker {k} failed:\n{body}")


def _worker(k: int, n: int, pipe: Pipe, analyzer: Analyzer, paths: list[str], make_display: Callable[[Analyzer], Any],
            events_of: Callable[[Analyzer, list[str]], tuple[Iterator[Any], list[str]]], tty: bool,
            encoding: str | None, reached: Any, placed: dict[bytes, int] | None) -> None:
    try:
        _work(k, n, pipe, analyzer, paths, make_display, events_of, tty, encoding, reached, placed)
    except BaseException:  # noqa: BLE001 - whatever it was, the parent reports it
        try:
            pipe.send_bytes(pickle.dumps(("crash", traceback.format_exc())))
        finally:
            os._exit(1)
    pipe.close()
    os._exit(0)  # a forked child leaves without running the parent's exit handlers


def _work(k: int, n: int, pipe: Pipe, analyzer: Analyzer, paths: list[str], make_display: Callable[[Analyzer], Any],
          events_of: Callable[[Analyzer, list[str]], tuple[Iterator[Any], list[str]]], tty: bool,
          encoding: str | None, reached: Any, placed: dict[bytes, int] | None) -> None:
    os.environ["STREAMPROTO_NO_PROGRESS"] = "1"  # the parent's terminal is not a worker's
    out = sys.stdout = _Text(tty, encoding)
    analyzer.set_shard(k, n, placed)
    display = make_display(analyzer)
    out.take()  # what the display writes first (the JSON document's head) is the parent's
    shown: list[tuple[bool, str]] = []

    def keep(frame: bool, text: str) -> None:  # the JSON document's frames and findings
        shown.append((frame, text))

    display.keep = keep
    events, error = events_of(analyzer, paths)
    keys: deque[tuple] = deque()
    order_key = analyzer.order_key

    def keyed() -> Iterator[Any]:
        for ev in events:
            keys.append(order_key(ev))
            yield ev

    linker = Linker(analyzer.place, position=lambda: analyzer.packets)
    batch: list[Item] = []
    seq = 0
    show = display.show
    take = out.take

    seen = 0
    # The held events after the last (flush runs only when link is exhausted).
    for ev, links in itertools.chain(linker.link(keyed()), linker.flush()):
        key = keys.popleft()
        seen += 1
        if not seen & 0x3FF:
            reached[2 * k], reached[2 * k + 1] = analyzer.packets, analyzer.conversations
        show(ev, links)
        text = take()
        if text:
            seq += 1
            batch.append(((*key, seq), isinstance(ev, Frame), text))
        elif shown:
            for frame, t in shown:
                seq += 1
                batch.append(((*key, seq), frame, t))
            shown.clear()
        else:
            continue
        if len(batch) >= BATCH:
            pipe.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
            batch = []
    if batch:
        pipe.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
    reached[2 * k], reached[2 * k + 1] = analyzer.packets, analyzer.conversations
    state = {"analyzer": analyzer.shard_state(), "shown": display.shown, "error": error}
    pipe.send_bytes(pickle.dumps(("done", state), pickle.HIGHEST_PROTOCOL))
