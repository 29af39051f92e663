"""The local engine: worker processes decode, pyarrow writes Parquet. No JVM.

Stage 1 runs one task per capture file over a process pool (largest files first, so the long
ones do not start last); each task writes its own Parquet files and sends back only its edges and
timeline. Stage 2 runs the conversation groups over the same pool, a chain's groups in batches.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.pipeline import plan
from analyzer.pipeline.decode import FileResult, Settings, Timeline, continue_address, decode_file, file_size
from analyzer.pipeline.inputs import Chain
from analyzer.pipeline.tables import Tables

TABLES = ("frames", "findings", "conversations", "files")


class ParquetSink:
    """Writes each batch as one Parquet file under ``out/TABLE/protocol=P/date=D/`` (files: no
    partitions), named after the task so that concurrent tasks never collide."""

    def __init__(self, out: str, task: str) -> None:
        self.out = out
        self.task = task
        self.seq = itertools.count()
        self.rows = 0

    def __call__(self, table: str, protocol: str | None, date: str | None, batch: pa.RecordBatch) -> None:
        parts = [self.out, table]
        if table == "frames":
            parts.append(f"protocol={protocol}")
        elif table != "files":
            parts.append(f"protocol={protocol}")
        if table != "files":
            parts.append(f"date={date}")
        directory = os.path.join(*parts)
        os.makedirs(directory, exist_ok=True)
        drop = [n for n in ("protocol", "date") if n in batch.schema.names]
        t = pa.Table.from_batches([batch]).drop_columns(drop)
        pq.write_table(t, os.path.join(directory, f"part-{self.task}-{next(self.seq):05d}.parquet"))
        self.rows += batch.num_rows


def _stage1(out: str, chain: str, position: int, path: str, last: bool, settings: Settings) -> FileResult:
    sink = ParquetSink(out, "f" + hashlib.blake2b(f"{chain}\x1f{path}".encode(), digest_size=6).hexdigest())
    tables = Tables(settings.dissectors(), sink)
    result = decode_file(path, chain, position, last, settings, tables, file_size(path))
    tables.flush()
    return result


def _stage2(out: str, task: int, chain: Chain, groups: list[plan.Group], timelines: dict[int, Timeline],
            settings: Settings) -> int:
    sink = ParquetSink(out, f"c{task:06d}")
    tables = Tables(settings.dissectors(), sink)
    for g in groups:
        continue_address(chain.name, list(chain.files), g.edges, plan.timelines_for(g, timelines), settings,
                         tables)
    tables.flush()
    return len(groups)


@dataclass
class Progress:
    """Files and bytes done, rate and ETA on stderr, when stderr is a terminal."""

    total_files: int
    total_bytes: int
    done_files: int = 0
    done_bytes: int = 0
    start: float = field(default_factory=time.monotonic)
    enabled: bool = field(default_factory=lambda: sys.stderr.isatty())

    def step(self, size: int) -> None:
        self.done_files += 1
        self.done_bytes += size
        if not self.enabled:
            return
        elapsed = max(time.monotonic() - self.start, 1e-6)
        rate = self.done_bytes / elapsed
        left = (self.total_bytes - self.done_bytes) / rate if rate else 0.0
        width = 30
        filled = int(width * self.done_bytes / self.total_bytes) if self.total_bytes else width
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done_files}/{self.total_files} files "
                         f"{self.done_bytes / 2**20:.1f}/{self.total_bytes / 2**20:.1f} MiB "
                         f"{rate / 2**20:.1f} MiB/s ETA {left:.0f}s ")
        sys.stderr.flush()

    def close(self, message: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r{message}\033[K\n")
            sys.stderr.flush()


def run(chains: list[Chain], out: str, settings: Settings, jobs: int,
        on_file: Callable[[FileResult], None] | None = None) -> list[FileResult]:
    """Both stages over a process pool of ``jobs`` workers; the stage 1 result of every file."""
    tasks = [(c, i, f) for c in chains for i, f in enumerate(c.files)]
    sizes = {f: file_size(f) or 0 for _, _, f in tasks}
    progress = Progress(len(tasks), sum(sizes.values()))
    results: dict[tuple[str, int], FileResult] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        pending: dict[Future[FileResult], tuple[Chain, int, str]] = {}
        for c, i, f in sorted(tasks, key=lambda t: -sizes[t[2]]):
            fut = pool.submit(_stage1, out, c.name, i, f, i == len(c.files) - 1, settings)
            pending[fut] = (c, i, f)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                c, i, f = pending.pop(fut)
                result = fut.result()
                results[(c.name, i)] = result
                progress.step(sizes[f])
                if on_file is not None:
                    on_file(result)
        progress.close(f"{progress.done_files} files, {progress.done_bytes / 2**20:.1f} MiB decoded; "
                       f"joining conversations across files")
        futures = []
        task = itertools.count()
        for c in chains:
            timelines = {i: r.timeline for i in range(len(c.files))
                         if (r := results[(c.name, i)]).timeline is not None}
            gs = list(plan.groups((c.name, i, results[(c.name, i)]) for i in range(len(c.files))))
            # Batches of groups per task: one group is often a single conversation's few packets.
            for k in range(0, len(gs), 256):
                batch = gs[k:k + 256]
                first = min(g.first for g in batch)
                needed = {p: t for p, t in timelines.items() if p >= first}
                futures.append(pool.submit(_stage2, out, next(task), c, batch, needed, settings))
        for fut in futures:
            fut.result()
    return [results[(c.name, i)] for c in chains for i in range(len(c.files))]
