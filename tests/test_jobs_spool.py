"""The parent's spool of a ``--jobs`` worker's batches (analyzer/jobs.py ``_Spool``): first in,
first out across memory and its temporary file, memory bounded, and waiting for room again when the
file cannot be written; and ``inspect --jobs 2`` writing what one process writes when nearly every
batch goes through the file."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analyzer import cli, jobs
from tests.test_jobs import interleave


def _batches(n: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    return [bytes([i % 251]) * rnd.randint(1, 300) + i.to_bytes(4, "little") for i in range(n)]


def _through(spool: jobs._Spool, batches: list[bytes], slow_every: int = 0) -> tuple[list[bytes], int]:
    """``batches`` put from a thread and taken here (slowly every ``slow_every`` batches, so that the
    writer runs ahead): what came out, and the most bytes memory held at once."""
    def write() -> None:
        for b in batches:
            spool.put(b)
        spool.end()

    t = threading.Thread(target=write)
    t.start()
    out: list[bytes] = []
    most = 0
    while True:
        most = max(most, spool.held)
        data = spool.get()
        if data is None:
            break
        out.append(data)
        if slow_every and len(out) % slow_every == 0:
            threading.Event().wait(0.002)
    t.join()
    return out, most


def test_batches_come_out_in_order_through_memory_and_file() -> None:
    batches = _batches(2000)
    spool = jobs._Spool(1000)
    spilled: list[int] = []
    spill = spool._spill
    spool._spill = lambda data: spilled.append(len(data)) or spill(data)  # type: ignore[method-assign]
    out, most = _through(spool, batches, slow_every=50)
    assert out == batches
    assert spilled, "the writer ran ahead: some batches went through the file"
    assert most <= 1000 + 304  # the room, and one batch more at most
    assert spool.spilled == 0 and spool.write_at == spool.read_at == 0  # read up: the file starts over
    spool.close()


def test_a_batch_larger_than_the_room_still_goes() -> None:
    spool = jobs._Spool(10)
    spool.put(b"x" * 100)  # nothing held: taken, whatever its size
    spool.end()
    assert spool.get() == b"x" * 100 and spool.get() is None


def test_without_a_disk_the_writer_waits_for_room(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_disk(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jobs.tempfile, "TemporaryFile", no_disk)
    batches = _batches(500)
    spool = jobs._Spool(1000)
    out, most = _through(spool, batches, slow_every=25)
    assert out == batches
    assert spool.file is None and most <= 1000 + 304


def test_a_closed_spool_takes_nothing_more() -> None:
    spool = jobs._Spool(1)
    spool.put(b"ab")
    spool.put(b"cd")  # no room: to the file
    assert spool.spilled == 1
    spool.close()
    spool.put(b"ef")  # the merge stopped: dropped, no error, no new file
    assert spool.file is None and spool.spilled == 1


def test_jobs_write_what_one_process_writes_through_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = str(interleave(tmp_path / "interleaved.pcap"))
    runner = CliRunner()
    one = runner.invoke(cli.app, ["inspect", capture, "-T", "jsonl", "--jobs", "1"])
    assert one.exit_code == 0 and one.stdout.count("\n") > 500
    # Batches of a few events, and no room in memory: nearly every batch goes through the file.
    monkeypatch.setattr(jobs, "BATCH", 4)
    monkeypatch.setattr(jobs, "READ_AHEAD", 1)
    spilled: list[int] = []
    spill = jobs._Spool._spill

    def counted(self: jobs._Spool, data: bytes) -> bool:
        spilled.append(len(data))
        return spill(self, data)

    monkeypatch.setattr(jobs._Spool, "_spill", counted)
    two = runner.invoke(cli.app, ["inspect", capture, "-T", "jsonl", "--jobs", "2"])
    assert two.exit_code == 0
    assert two.stdout == one.stdout
    assert len(spilled) > 10


@pytest.mark.parametrize("sources", [1, 2, 3, 5])
def test_runs_give_the_items_in_heapq_merge_order(sources: int) -> None:
    """The parent's merge of the workers' batches (``_runs``) gives the items in the order
    ``heapq.merge`` of them does, ties included (equal keys across workers, as timers firing at
    one packet make), every run from one batch and never empty."""
    import heapq

    rnd = random.Random(sources)
    streams = []
    for _k in range(sources):
        keys = sorted((rnd.randint(0, 300), rnd.randint(0, 2), 0, 0, n) for n in range(rnd.randint(0, 400)))
        items = [(key, bool(key[1]), f"{key}") for key in keys]
        cut = sorted(rnd.sample(range(1, len(items)), min(len(items) - 1, 20))) if len(items) > 1 else []
        streams.append([items[a:b] for a, b in zip([0, *cut], [*cut, len(items)], strict=True) if items[a:b]])
    out = []
    for batch, i, j in jobs._runs([iter(s) for s in streams]):
        assert 0 <= i < j <= len(batch)
        out += batch[i:j]
    assert out == list(heapq.merge(*[sum(s, []) for s in streams]))
