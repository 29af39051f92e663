"""The Spark engine: the same two stages on executors, Spark writes the tables.

Stage 1 is ``mapInArrow`` over a DataFrame of capture file paths, one file per partition: each
executor opens its file itself and streams it through the sans-IO decoder (never ``binaryFile``,
whose whole-file rows fail beyond 2 GiB). It yields "blobs": each finished record batch of a table
as Arrow IPC bytes, and each edge and timeline pickled. Stage 2 groups the edges by (chain,
Community ID) with the timelines their replay needs and runs ``applyInArrow`` per group. Then for
each table the blobs are unpacked by ``mapInArrow`` into the table's schema and written by Spark,
partitioned as the local engine partitions them (``frames/protocol=P/date=D``, ...).

Plain paths must be readable under the same path on every executor (a shared or mounted filesystem);
files named by URI (``hdfs://``, ``s3a://``) are copied to the executor first (:mod:`.remote`).
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from analyzer.pipeline import plan
from analyzer.pipeline import schema as S
from analyzer.pipeline.decode import (
    Edge,
    FileResult,
    Settings,
    Timeline,
    continue_address,
    decode_file,
    file_size,
)
from analyzer.pipeline.inputs import Chain
from analyzer.pipeline.tables import Tables

#: What the stages yield: table batches and edges, one row each.
BLOB = pa.schema([("kind", pa.string()), ("protocol", pa.string()), ("date", pa.string()), ("chain", pa.string()),
                  ("cid", pa.string()), ("position", pa.int32()), ("replay", pa.bool_()), ("data", pa.binary())])
_TABLE_KINDS = ("frames", "findings", "conversations", "files")
#: Rows per table batch on Spark: each batch is one row (a blob) there, kept to a few megabytes.
SPARK_BATCH_ROWS = 2_000


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


class _Blobs:
    """Collects a task's output rows in BLOB's shape."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {n: [] for n in BLOB.names}

    def add(self, kind: str, protocol: str | None = None, date: str | None = None, chain: str | None = None,
            cid: str | None = None, position: int | None = None, replay: bool = False, data: bytes = b"") -> None:
        for name, value in zip(BLOB.names, (kind, protocol, date, chain, cid, position, replay, data), strict=True):
            self.cols[name].append(value)

    def table(self, table: str, protocol: str | None, date: str | None, batch: pa.RecordBatch) -> None:
        # Most of a protocol's hundreds of field columns are null in any batch, yet each would cost
        # its offsets and bitmaps in the IPC bytes (tens of MB per batch): only the others travel,
        # and _unpack puts the null columns back.
        keep = [i for i, col in enumerate(batch.columns) if col.null_count < len(col)]
        self.add(table, protocol, date, data=_ipc(batch.select(keep)))

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array(self.cols[n], BLOB.field(n).type) for n in BLOB.names], schema=BLOB)


def _stage1(settings: Settings) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                blobs = _Blobs()
                tables = Tables(settings.dissectors(), blobs.table, SPARK_BATCH_ROWS)
                result = decode_file(row["path"], row["chain"], row["position"], row["last"], settings, tables,
                                     row["size"])
                tables.flush()
                for cid, edge in result.edges.items():
                    replay = bool(edge.raw) or edge.state is not None and bool(edge.state["live"])
                    blobs.add("edge", chain=row["chain"], cid=cid, position=row["position"], replay=replay,
                              data=pickle.dumps(edge, protocol=pickle.HIGHEST_PROTOCOL))
                if result.timeline is not None:
                    blobs.add("timeline", chain=row["chain"], position=row["position"],
                              data=pickle.dumps(result.timeline, protocol=pickle.HIGHEST_PROTOCOL))
                blobs.add("status", chain=row["chain"], position=row["position"],
                          data=pickle.dumps((result.capture, result.error)))
                yield blobs.batch()
    return run


def _stage2(settings: Settings, files: dict[str, list[str]]) -> Any:
    def run(table: pa.Table) -> pa.Table:
        blobs = _Blobs()
        tables = Tables(settings.dissectors(), blobs.table, SPARK_BATCH_ROWS)
        rows = table.to_pylist()
        if rows:
            chain, cid = rows[0]["chain"], rows[0]["cid"]
            edges: dict[int, Edge] = {}
            timelines: dict[int, Timeline] = {}
            for r in rows:
                if r["kind"] == "edge":
                    edges[r["position"]] = pickle.loads(r["data"])
                else:
                    timelines[r["position"]] = pickle.loads(r["data"])
            group = plan.Group(chain, cid, edges)
            if not group.trivial():
                continue_address(chain, files[chain], edges, timelines, settings, tables)
        tables.flush()
        return pa.Table.from_batches([blobs.batch()])
    return run


def _unpack(target: pa.Schema) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for data in batch.column("data").to_pylist():
                for b in pa.ipc.open_stream(data):
                    n = b.num_rows
                    have = set(b.schema.names)
                    yield pa.RecordBatch.from_arrays(
                        [b.column(f.name) if f.name in have else pa.nulls(n, f.type) for f in target], schema=target)
    return run


def session(master: str | None, app: str = "streamproto pipeline") -> Any:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    # Under spark-submit the master comes from there; otherwise local[*] unless told.
    conf = SparkConf()
    url = master or conf.get("spark.master", "local[*]")
    if master or not conf.contains("spark.master"):
        builder = builder.master(url)
    local_python(url)
    if not sys.stderr.isatty():  # Spark's progress bars are for terminals, not logs
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    try:
        return builder.getOrCreate()
    except Exception as exc:  # no Java, a master that does not answer, ...: one line for the CLI
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"cannot start Spark ({first}); the Spark engine needs Java 17 "
                               f"(apt-get install openjdk-17-jre-headless)") from exc


def local_python(master: str) -> None:
    """Before a SparkContext starts: with a local master, its Python workers run this interpreter
    (the one that has streamproto and pyarrow) unless PYSPARK_PYTHON says otherwise. PySpark would
    start `python3` from PATH, another interpreter when the venv is not activated, and every task
    would fail to import them."""
    if master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = sys.executable


class SparkUnavailable(RuntimeError):
    """Spark could not be started."""


def run(chains: list[Chain], out: str, settings: Settings, master: str | None) -> list[FileResult]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = session(master)
    blob_type = from_arrow_schema(BLOB)
    tasks = [{"path": f, "chain": c.name, "position": i, "last": i == len(c.files) - 1, "size": file_size(f)}
             for c in chains for i, f in enumerate(c.files)]
    # Timestamps as the local engine writes them (Spark's default INT96 reads back as another type).
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    # The shuffle (edges by address) is small next to decoding: as many partitions as the cluster
    # has cores, not Spark's 200, each of which costs a Python worker round trip in every write.
    parallel = max(1, spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(min(max(len(tasks), 1), parallel * 2)))
    # A blob row is a whole record batch or a file's held-back packets (megabytes): Spark's cache
    # builds 10,000 rows per columnar batch by default, which exhausts a default 1 GiB heap.
    spark.conf.set("spark.sql.inMemoryColumnarStorage.batchSize", "4")
    if "://" not in out:
        from analyzer.pipeline import prepare

        prepare(out)
    task_schema = "path string, chain string, position int, last boolean, size long"
    # One file per partition: files are the unit of work, and a big one must not wait behind others.
    rdd = spark.sparkContext.parallelize([tuple(t.values()) for t in tasks], max(1, len(tasks)))
    paths = spark.createDataFrame(rdd, task_schema)
    # Persisted on disk, not in the JVM heap: the blobs add up to more than the decoded captures.
    stage1 = paths.mapInArrow(_stage1(settings), blob_type).persist(StorageLevel.DISK_ONLY)

    edges = stage1.where(F.col("kind") == "edge")
    groups = edges.groupBy("chain", "cid").agg(F.min("position").alias("first"), F.max("replay").alias("replay"))
    timelines = stage1.where(F.col("kind") == "timeline").select(
        "chain", F.col("position").alias("tpos"), F.col("data").alias("tdata"))
    needed = (groups.where("replay").join(timelines, "chain").where(F.col("tpos") >= F.col("first"))
              .select(F.lit("timeline").alias("kind"), F.lit(None).cast("string").alias("protocol"),
                      F.lit(None).cast("string").alias("date"), "chain", "cid", F.col("tpos").alias("position"),
                      F.lit(True).alias("replay"), F.col("tdata").alias("data")))
    files = {c.name: list(c.files) for c in chains}
    stage2 = edges.unionByName(needed).groupBy("chain", "cid").applyInArrow(_stage2(settings, files), blob_type)
    blobs = (stage1.where(F.col("kind").isin(*_TABLE_KINDS)).unionByName(stage2)
             .coalesce(parallel * 2).persist(StorageLevel.DISK_ONLY))

    dissectors = settings.dissectors()
    protocols = [r["protocol"] for r in blobs.where(F.col("kind") == "frames").select("protocol").distinct().collect()]
    for protocol in sorted(protocols):
        target = S.frames_schema(dissectors[protocol])
        (blobs.where((F.col("kind") == "frames") & (F.col("protocol") == protocol)).select("data")
         .mapInArrow(_unpack(target), from_arrow_schema(target))
         .write.mode("overwrite").partitionBy("date").parquet(os.path.join(out, "frames", f"protocol={protocol}")))
    for table, target in (("findings", S.FINDINGS), ("conversations", S.CONVERSATIONS)):
        (blobs.where(F.col("kind") == table).select("data").mapInArrow(_unpack(target), from_arrow_schema(target))
         .write.mode("overwrite").partitionBy("protocol", "date").parquet(os.path.join(out, table)))
    (blobs.where(F.col("kind") == "files").select("data").mapInArrow(_unpack(S.FILES), from_arrow_schema(S.FILES))
     .coalesce(1).write.mode("overwrite").parquet(os.path.join(out, "files")))

    status = {(r["chain"], r["position"]): pickle.loads(r["data"])
              for r in stage1.where(F.col("kind") == "status").select("chain", "position", "data").collect()}
    blobs.unpersist()
    stage1.unpersist()
    results = []
    for t in tasks:
        capture, error = status[(t["chain"], t["position"])]
        results.append(FileResult(capture, {}, None, 0, error))
    return results
