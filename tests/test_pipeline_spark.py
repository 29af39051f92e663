"""`streamproto pipeline --engine spark` in Spark's local mode: the same tables as the local engine on
the same inputs (rotated files with a conversation and a frame cut across them, unreadable files),
schema for schema and row for row. One SparkSession for the module, local[2]."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analyzer.pipeline import Settings
from analyzer.pipeline import run as pipeline_run
from tests.test_pipeline import ROOT, inspect_chains, norm, rows, split, table_findings, table_frames

pytestmark = pytest.mark.spark
TABLES = ("frames", "findings", "conversations", "files")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from analyzer.pipeline.spark import local_python

    before = os.environ.get("PYSPARK_PYTHON")
    local_python("local[2]")  # as the pipeline's own session does, for a venv not activated
    session = (SparkSession.builder.master("local[2]").appName("streamproto tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    if before is None:
        os.environ.pop("PYSPARK_PYTHON", None)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("captures")
    # One AMQP connection over three files, a frame cut between the second and the third.
    split(str(ROOT / "captures" / "amqp091" / "pika_large.pcap"), [30, 43], base / "host1")
    # Four RabbitMQ Stream connections over three files.
    split(str(ROOT / "captures" / "rabbitmq_stream" / "rstream_consume.pcap"), [40, 90], base / "host2")
    bad = base / "bad"
    bad.mkdir()
    (bad / "notes.pcap").write_text("not a capture\n")
    data = (ROOT / "captures" / "rabbitmq_stream" / "rstream_errors.pcap").read_bytes()
    (bad / "cut.pcap").write_bytes(data[:len(data) // 2])
    return base


@pytest.fixture(scope="module")
def outputs(spark: Any, inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Any, Any]:
    local = str(tmp_path_factory.mktemp("local"))
    on_spark = str(tmp_path_factory.mktemp("spark"))
    local_outcome = pipeline_run([str(inputs)], local, Settings(), "local", jobs=2)
    spark_outcome = pipeline_run([str(inputs)], on_spark, Settings(), "spark", master="local[2]")
    return local, on_spark, local_outcome, spark_outcome


def canonical(out: str, table: str) -> list[str]:
    return sorted(repr(sorted((k, norm(v)) for k, v in r.items())) for r in rows(out, table))


def schemas(out: str, table: str) -> dict[str, Any]:
    """The schema of every Parquet file of a table, by partition directory."""
    found: dict[str, Any] = {}
    for path in glob.glob(os.path.join(out, table, "**", "*.parquet"), recursive=True):
        key = os.path.relpath(os.path.dirname(path), out)
        schema = pq.read_schema(path).remove_metadata()
        assert found.setdefault(key, schema) == schema
    return found


@pytest.mark.parametrize("table", TABLES)
def test_both_engines_write_identical_tables(outputs: tuple[str, str, Any, Any], table: str) -> None:
    local, on_spark, _, _ = outputs
    local_rows = canonical(local, table)
    assert local_rows, table
    assert canonical(on_spark, table) == local_rows
    assert schemas(on_spark, table) == schemas(local, table)


def test_spark_tables_hold_what_inspect_decodes(outputs: tuple[str, str, Any, Any], inputs: Path) -> None:
    _, on_spark, _, _ = outputs
    good = [str(inputs / "host1"), str(inputs / "host2")]
    frames, findings, _, _ = inspect_chains(good)
    got_frames = table_frames(on_spark)
    assert {k: v for k, v in got_frames.items() if "/bad/" not in k[0]} == frames
    assert {k: v for k, v in table_findings(on_spark).items() if "/bad/" not in (k[0] or "")} == findings
    (conv,) = [r for r in rows(on_spark, "conversations") if "host1" in r["files"][0]]
    assert [os.path.basename(f) for f in conv["files"]] == ["rot.pcap", "rot.pcap1", "rot.pcap2"]
    (cut,) = [r for r in rows(on_spark, "frames") if "host1" in r["capture"] and r["packet_first"] == 13
              and r["packet_last"] == 1]
    assert cut["capture"].endswith("rot.pcap2")


def test_unreadable_inputs_are_reported_by_both_engines(outputs: tuple[str, str, Any, Any]) -> None:
    _, on_spark, local_outcome, spark_outcome = outputs
    assert sorted(local_outcome.failed) == sorted(spark_outcome.failed)
    assert {os.path.basename(p) for p, _ in spark_outcome.failed} == {"notes.pcap", "cut.pcap"}
    status = {os.path.basename(r["capture"]): r["status"] for r in rows(on_spark, "files")}
    assert status["notes.pcap"] == status["cut.pcap"] == "error" and status["rot.pcap1"] == "ok"


def test_spark_sql_report_equals_duckdb(outputs: tuple[str, str, Any, Any]) -> None:
    from analyzer.pipeline.report import duckdb_sections, spark_sections

    local, on_spark, _, _ = outputs
    expected = duckdb_sections(local, 1000)
    assert sum(len(s.rows) for s in expected) > 20
    for got in (spark_sections(local, "local[2]", 1000), spark_sections(on_spark, "local[2]", 1000)):
        assert [s.name for s in got] == [s.name for s in expected]
        for g, e in zip(got, expected, strict=True):
            assert g.columns == e.columns
            assert [[pytest.approx(v, abs=1e-9) if isinstance(v, float) else v for v in r] for r in g.rows] \
                == e.rows, g.name


def test_local_workers_run_this_interpreter_without_an_activated_venv(tmp_path: Path) -> None:
    """PySpark starts its Python workers with PYSPARK_PYTHON, else `python3` from PATH: another
    interpreter, without streamproto or pyarrow, when the venv's is run by its path. Here the
    `python3` first on PATH fails at once; the pipeline's local Spark must not start it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not the python3 to run' >&2\nexit 3\n")
    (fake / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PATH"] = f"{fake}{os.pathsep}{env.get('PATH', '')}"
    capture = str(ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap")
    out = tmp_path / "tables"
    done = subprocess.run([sys.executable, "-m", "analyzer", "pipeline", "--engine", "spark", "--master",
                           "local[1]", "--out", str(out), capture], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    frames, _, _, _ = inspect_chains([capture])
    assert table_frames(str(out)) == frames
    assert sum(frames.values()) == 40
