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
imported twice. Memory stays flat: the parent holds at most READ_AHEAD bytes of a worker's batches
in memory (and one batch more, whatever its size), the rest in a temporary file until the merge
takes them (:class:`_Spool`), so a worker never waits for the others.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import io
import itertools
import multiprocessing
import os
import pickle
import struct
import sys
import tempfile
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection as Pipe
from typing import Any

from analyzer.api import Frame
from analyzer.engine import Analyzer
from analyzer.linking import Linker

#: Rendered events a worker sends at once, or fewer when their text reaches BATCH_BYTES characters
#: (a RabbitMQ Stream Deliver's JSON can be a hundred kilobytes: 256 of them would fill READ_AHEAD).
BATCH = 256
BATCH_BYTES = 1 << 20
#: Bytes of a worker's batches (as they came through its pipe) the parent keeps in memory ahead of
#: the merge; more go to a temporary file (see _Spool). Counted in bytes, not batches: a summary
#: line is a hundred bytes, a JSON frame can be a hundred kilobytes.
READ_AHEAD = 16 << 20

Item = tuple[tuple, bool, str]
#: The length before each batch in a spool's file.
_LENGTH = struct.Struct("<Q")


class _Text(io.StringIO):
    """A worker's standard output: text kept for the parent, which reports the parent's terminal
    and encoding so that the views make the same text (colours, arrows) they would make there."""

    def __init__(self, tty: bool, encoding: str | None) -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding
        #: What was written since the last take. ``write`` is the list's own append: a view writes
        #: once or twice per event, and a StringIO's getvalue, seek and truncate per event cost more
        #: than the writes.
        self.parts: list[str] = []
        self.write = self.parts.append  # type: ignore[method-assign,assignment]

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str | None:  # type: ignore[override]
        return self._encoding

    def take(self) -> str:
        parts = self.parts
        if not parts:
            return ""
        text = parts[0] if len(parts) == 1 else "".join(parts)
        parts.clear()
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
        put_run = display.put_run

        def counts() -> tuple[int, int]:
            return min(reached[0::2]), min(reached[1::2])

        line = progress(counts) if progress is not None else None
        with line if line is not None else contextlib.nullcontext():
            for batch, i, j in _runs([_batches(p, states[k], k) for k, p in enumerate(pipes)]):
                put_run(batch[i:j] if i or j < len(batch) else batch)
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


def _runs(sources: list[Iterator[list[Item]]]) -> Iterator[tuple[list[Item], int, int]]:
    """The workers' batches merged in the order of their items' keys (each worker's own come in
    order), as runs ``(batch, i, j)``: ``batch[i:j]`` comes next. Like ``heapq.merge`` of the items,
    without a step per item: a run is every item of the batch with the smallest head up to the
    smallest head of the others, found by bisection."""
    heap: list[tuple[Item, int]] = []
    current: list[list[Any]] = []  # per source: [batch, position]
    for k, source in enumerate(sources):
        batch = next(source, None)
        current.append([batch, 0])
        if batch:
            heap.append((batch[0], k))
    heapq.heapify(heap)
    while heap:
        k = heap[0][1]
        state = current[k]
        batch, i = state
        if len(heap) == 1:
            j = len(batch)
        else:
            # The second smallest head is a child of the root. Items equal to it may go first:
            # equal items are the same text.
            other = heap[1][0] if len(heap) == 2 or heap[1] < heap[2] else heap[2][0]
            j = bisect.bisect_right(batch, other, i)
        yield batch, i, j
        if j < len(batch):
            state[1] = j
            heapq.heapreplace(heap, (batch[j], k))
            continue
        batch = next(sources[k], None)
        if batch:
            state[0], state[1] = batch, 0
            heapq.heapreplace(heap, (batch[0], k))
        else:
            heapq.heappop(heap)


def _batches(pipe: Pipe, state: dict[str, Any], k: int) -> Iterator[list[Item]]:
    """A worker's batches of keyed texts in order; its closing state into ``state``. A thread
    takes the batches from the worker's pipe as they come, into a :class:`_Spool`: without it a
    worker could run ahead of the others by no more than a pipe's buffer, and the workers of a
    capture whose conversations take turns (a producer's, then a consumer's) would mostly wait for
    each other."""
    spool = _Spool(READ_AHEAD)

    def read() -> None:
        try:
            while True:
                spool.put(pipe.recv_bytes())
        except (EOFError, OSError):
            spool.end()

    threading.Thread(target=read, daemon=True).start()
    try:
        while True:
            data = spool.get()
            if data is None:
                raise RuntimeError(f"--jobs worker {k} ended without its results")
            kind, body = pickle.loads(data)
            if kind == "items":
                yield body
            elif kind == "done":
                state.update(body)
                return
            else:
                raise RuntimeError(f"--jobs worker {k} failed:\n{body}")
    finally:
        spool.close()


class _Spool:
    """One worker's batches between its pipe's reader and the merge, first in, first out: up to
    ``size`` bytes in memory, the rest in a temporary file, so that a worker never waits for the
    merge and memory stays flat. The merge takes a worker's output only in the capture's order,
    so a worker whose conversations come later (a consumer's, after a producer's) would otherwise
    stop once its read-ahead is full, until the other worker is done. Once a batch goes to the file,
    the ones after it follow it there until the file is read up, so the order holds. When the file
    cannot be written (the disk is full), the reader waits for room instead, as it did before
    spooling (one batch is always taken, whatever its size)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.memory: deque[bytes] = deque()
        self.held = 0  # bytes in memory
        self.file: Any = None  # the spilled batches, each a length and its bytes, read from `read_at`
        self.spilled = 0  # batches in the file not read yet
        self.write_at = self.read_at = 0
        self.ended = self.closed = False
        self.changed = threading.Condition()

    def put(self, data: bytes) -> None:
        with self.changed:
            if self.closed:  # the merge stopped early: nobody reads any more
                return
            if self.spilled:  # older batches are in the file: this one goes after them
                if self._spill(data):
                    self.changed.notify()
                    return
                while self.spilled and not self.closed:  # no disk: wait until the file is read up
                    self.changed.wait()
            while self.held and self.held + len(data) > self.size:
                if self._spill(data):
                    self.changed.notify()
                    return
                self.changed.wait()  # no room and no disk: wait for the merge
            self.memory.append(data)
            self.held += len(data)
            self.changed.notify()

    def _spill(self, data: bytes) -> bool:
        """Write ``data`` after the file's other batches; False when it cannot be written."""
        if self.closed:
            return False
        try:
            if self.file is None:
                self.file = tempfile.TemporaryFile(prefix="streamproto-jobs-")
            fd = self.file.fileno()
            os.pwrite(fd, _LENGTH.pack(len(data)) + data, self.write_at)
        except OSError:
            return False
        self.write_at += _LENGTH.size + len(data)
        self.spilled += 1
        return True

    def end(self) -> None:
        with self.changed:
            self.ended = True
            self.changed.notify()

    def get(self) -> bytes | None:
        """The next batch; None once the reader ended and everything was taken."""
        with self.changed:
            while not self.memory and not self.spilled and not self.ended:
                self.changed.wait()
            if self.memory:
                data = self.memory.popleft()
                self.held -= len(data)
                self.changed.notify()
                return data
            if not self.spilled:
                return None
            fd = self.file.fileno()
            (n,) = _LENGTH.unpack(os.pread(fd, _LENGTH.size, self.read_at))
            data = os.pread(fd, n, self.read_at + _LENGTH.size)
            self.read_at += _LENGTH.size + n
            self.spilled -= 1
            if not self.spilled:  # read up: the file starts again from its beginning
                self.file.truncate(0)
                self.write_at = self.read_at = 0
                self.changed.notify()
            return data

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify()
            if self.file is not None:
                self.file.close()
                self.file = None


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
    # What the view wrote for the event, taken here rather than through out.take(): this loop
    # runs once per event, and a call costs more than its few steps.
    parts = out.parts
    size = 0  # the batch's characters of text
    silent = 0  # events that made no text

    # The held events after the last (flush runs only when link is exhausted).
    for ev, links in itertools.chain(linker.link(keyed()), linker.flush()):
        key = keys.popleft()
        show(ev, links)
        if parts:
            text = parts[0] if len(parts) == 1 else "".join(parts)
            parts.clear()
        else:
            text = ""
        if text:
            seq += 1
            batch.append(((*key, seq), isinstance(ev, Frame), text))
            size += len(text)
        elif shown:
            for frame, t in shown:
                seq += 1
                batch.append(((*key, seq), frame, t))
                size += len(t)
            shown.clear()
        else:
            # Where the worker is, for the progress line, also while it shows nothing.
            silent += 1
            if not silent & 0x3FF:
                reached[2 * k], reached[2 * k + 1] = analyzer.packets, analyzer.conversations
            continue
        if len(batch) >= BATCH or size >= BATCH_BYTES:
            pipe.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
            reached[2 * k], reached[2 * k + 1] = analyzer.packets, analyzer.conversations
            batch = []
            size = 0
    if batch:
        pipe.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
    reached[2 * k], reached[2 * k + 1] = analyzer.packets, analyzer.conversations
    state = {"analyzer": analyzer.shard_state(), "shown": display.shown, "error": error}
    pipe.send_bytes(pickle.dumps(("done", state), pickle.HIGHEST_PROTOCOL))
