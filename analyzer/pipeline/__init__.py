"""`streamproto pipeline`: fleets of captures into Parquet tables (frames, findings,
conversations, files), on this machine (``local``: worker processes, pyarrow) or on Spark.

Modules: :mod:`.inputs` (which files, which chains), :mod:`.schema` (the tables' Arrow schemas
from the field catalogue), :mod:`.tables` (rows into record batches), :mod:`.decode` (the two
stages, shared by every engine), :mod:`.plan` (edges grouped between the stages), :mod:`.local`
and :mod:`.spark` (the engines), :mod:`.report` (`streamproto pipeline-report`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from analyzer.pipeline.decode import Settings
from analyzer.pipeline.inputs import chains, expand

__all__ = ["Outcome", "Settings", "run"]

TABLE_DIRS = ("frames", "findings", "conversations", "files")


@dataclass
class Outcome:
    files: int
    failed: list[tuple[str, str]]  # (file, error)
    missing: list[str]  # inputs that named no file


def prepare(out: str) -> None:
    """A clean output directory: the tables of an earlier run there are replaced, nothing else."""
    os.makedirs(out, exist_ok=True)
    for name in TABLE_DIRS:
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)


def run(inputs: list[str], out: str, settings: Settings, engine: str = "local", jobs: int | None = None,
        master: str | None = None) -> Outcome:
    files, missing = expand(inputs)
    groups = chains(files)
    if engine == "spark":
        from analyzer.pipeline import spark

        results = spark.run(groups, out, settings, master or "local[*]")
    else:
        from analyzer.pipeline import local

        prepare(out)
        results = local.run(groups, out, settings, jobs or os.cpu_count() or 1)
    failed = [(r.capture, r.error) for r in results if r.error]
    return Outcome(len(files), failed, missing)
