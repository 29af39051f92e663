"""`streamproto pipeline-report`: answers from the pipeline's tables, with DuckDB (embedded, no
server) or Spark SQL. Both run the same SQL text (the dialects differ only in the percentile
function), which the README shows for users to run themselves."""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

#: (name, title, SQL). ``{pct}`` is the percentile function of the engine; ``{top}`` the row limit.
QUERIES: tuple[tuple[str, str, str], ...] = (
    ("findings", "Findings by rule and protocol", """
SELECT protocol, rule_id, severity, count(*) AS findings
FROM findings
GROUP BY protocol, rule_id, severity
ORDER BY findings DESC, protocol, rule_id"""),
    ("commands", "Commands per protocol", """
SELECT protocol, command, count(*) AS frames, sum(size) AS bytes
FROM frames
GROUP BY protocol, command
ORDER BY protocol, frames DESC, command"""),
    ("latency", "Latency per request command (seconds from the request to its response)", """
SELECT q.protocol, q.command, count(*) AS answered,
       {pct}(r.latency, 0.5) AS p50, {pct}(r.latency, 0.9) AS p90, {pct}(r.latency, 0.99) AS p99,
       max(r.latency) AS max
FROM frames r
JOIN frames q ON q.conversation_id = r.conversation_id AND q.direction <> r.direction
             AND q.stream_offset = r.request_offset
WHERE r.latency IS NOT NULL
GROUP BY q.protocol, q.command
ORDER BY q.protocol, answered DESC, q.command"""),
    ("conversations", "Conversations with the most findings", """
SELECT conversation_id, protocol, client, server, community_id, errors + warnings + notes AS findings,
       errors, warnings, notes, frames, size(files) AS files
FROM conversations
WHERE errors + warnings + notes > 0
ORDER BY findings DESC, errors DESC, conversation_id
LIMIT {top}"""),
)


@dataclass
class Section:
    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]


def _parquet(directory: str, table: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, table, "**", "*.parquet"), recursive=True))


# The columns every report query reads, with their types: an empty table (no findings at all)
# still answers, with no rows.
_EMPTY = {
    "frames": "protocol VARCHAR, command VARCHAR, size BIGINT, latency DOUBLE, conversation_id VARCHAR, "
              "direction VARCHAR, stream_offset BIGINT, request_offset BIGINT",
    "findings": "protocol VARCHAR, rule_id VARCHAR, severity VARCHAR",
    "conversations": "conversation_id VARCHAR, protocol VARCHAR, client VARCHAR, server VARCHAR, community_id VARCHAR, "
                     "errors BIGINT, warnings BIGINT, notes BIGINT, frames BIGINT, files VARCHAR[]",
}


def duckdb_sections(directory: str, top: int) -> list[Section]:
    import duckdb

    con = duckdb.connect()
    for table, empty in _EMPTY.items():
        files = _parquet(directory, table)
        if files:
            # Each protocol's frames carry their own field columns: union_by_name lines them up.
            pattern = os.path.join(directory, table, "**", "*.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}', hive_partitioning = true, "
                        f"union_by_name = true)")
        else:
            con.execute(f"CREATE TABLE {table} ({empty})")
    con.execute("CREATE MACRO size(l) AS len(l)")
    out = []
    for name, title, sql in QUERIES:
        cur = con.execute(sql.format(pct="quantile_cont", top=int(top)))
        out.append(Section(name, title, [d[0] for d in cur.description], [list(r) for r in cur.fetchall()]))
    return out


def spark_sections(directory: str, master: str | None, top: int) -> list[Section]:
    from analyzer.pipeline.spark import session

    spark = session(master, "streamproto pipeline-report")
    # Partition values stay text (a date partition would otherwise become a DATE).
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    for table, empty in _EMPTY.items():
        if _parquet(directory, table):
            reader = spark.read.option("basePath", os.path.join(directory, table))
            # Each protocol's frames carry their own field columns; the queries read only the shared ones.
            reader.option("mergeSchema", "true").parquet(os.path.join(directory, table)).createOrReplaceTempView(table)
        else:
            spark.createDataFrame([], empty.replace("VARCHAR[]", "ARRAY<STRING>").replace("VARCHAR", "STRING")
                                  ).createOrReplaceTempView(table)
    out = []
    for name, title, sql in QUERIES:
        df = spark.sql(sql.format(pct="percentile", top=int(top)))
        out.append(Section(name, title, df.columns, [list(r) for r in df.collect()]))
    return out


def run(directory: str, engine: str, master: str | None, top: int) -> list[Section]:
    if engine == "spark":
        return spark_sections(directory, master, top)
    return duckdb_sections(directory, top)


def _plain(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9)
    if hasattr(v, "item"):  # numpy scalars from some drivers
        return v.item()
    return v


def write(sections: list[Section], fmt: str) -> None:
    if fmt == "json":
        doc = {s.name: [dict(zip(s.columns, map(_plain, r), strict=True)) for r in s.rows] for s in sections}
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    elif fmt == "csv":
        # One CSV block per section, each with its header row, after a "# title" line.
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        for i, s in enumerate(sections):
            if i:
                buf.write("\n")
            buf.write(f"# {s.name}: {s.title}\n")
            writer.writerow(s.columns)
            writer.writerows([[_plain(v) for v in r] for r in s.rows])
        sys.stdout.write(buf.getvalue())
    else:
        from analyzer.render import Output, table

        out = Output()
        for s in sections:
            out.line((s.title, "bold"))
            rows = [[_cell(v) for v in r] for r in s.rows]
            if rows:
                table(out, s.columns, rows)
            else:
                out.line(("  (none)", "dim"))
            out.line(("", None))


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6f}" if v < 1000 else f"{v:.1f}"
    return str(v)
