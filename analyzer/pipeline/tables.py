"""Rows of the pipeline's tables, collected into Arrow record batches per (table, protocol, date).

Both engines build their rows here, so their tables cannot differ: the local engine writes each
batch as a Parquet file, the Spark engine hands it to Spark, which writes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from analyzer.api import Dissector, Finding, Frame
from analyzer.flows import FlowInfo, fmt_endpoint
from analyzer.pipeline import schema as S

#: Rows per record batch (and so at most per Parquet file written by one task).
BATCH_ROWS = 20_000

#: What a finished batch is handed to: (table, protocol or None, date or None, batch).
Emit = Callable[[str, str | None, str | None, pa.RecordBatch], None]


def conversation_id(chain: str, community_id: str | None, first_ts: float) -> str:
    """Names one TCP conversation across files and engines: its chain, Community ID and first
    packet's time (the Community ID alone repeats when a client reuses its port)."""
    key = f"{chain}\x1f{community_id}\x1f{first_ts!r}"
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


class _Builder:
    """Columns of one batch: the leading columns dense, catalogue fields sparse (most frames
    carry a few dozen of a protocol's hundreds)."""

    def __init__(self, schema: pa.Schema, dense: int) -> None:
        self.schema = schema
        self.names = schema.names[:dense]
        self.cols: list[list[Any]] = [[] for _ in self.names]
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {}
        self.n = 0

    def add(self, row: tuple[Any, ...], fields: dict[str, Any] | None = None) -> None:
        for col, v in zip(self.cols, row, strict=True):
            col.append(v)
        if fields:
            n = self.n
            sparse = self.sparse
            for name, v in fields.items():
                got = sparse.get(name)
                if got is None:
                    sparse[name] = ([n], [v])
                else:
                    got[0].append(n)
                    got[1].append(v)
        self.n += 1

    def batch(self, date: str | None, protocol: str | None) -> pa.RecordBatch:
        n = self.n
        arrays = []
        for field in self.schema:
            name = field.name
            if name == "date":
                arrays.append(pa.array([date] * n, pa.string()))
            elif name == "protocol":
                arrays.append(pa.array([protocol] * n, pa.string()))
            elif name in self.sparse:
                rows, values = self.sparse[name]
                full: list[Any] = [None] * n
                for i, v in zip(rows, values, strict=True):
                    full[i] = v
                arrays.append(pa.array(full, field.type))
            else:
                try:
                    i = self.names.index(name)
                except ValueError:
                    arrays.append(pa.nulls(n, field.type))
                    continue
                arrays.append(pa.array(self.cols[i], field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class Tables:
    """Turns events and conversation summaries into rows; ``emit`` gets each full batch."""

    def __init__(self, dissectors: dict[str, Dissector], emit: Emit, batch_rows: int = BATCH_ROWS) -> None:
        self.dissectors = dissectors
        self.emit = emit
        self.batch_rows = batch_rows
        self._frames_schema: dict[str, pa.Schema] = {}
        self._flatteners: dict[str, S.Flattener] = {}
        self._open: dict[tuple[str, str | None, str | None], _Builder] = {}

    def _builder(self, table: str, protocol: str | None, date: str | None) -> _Builder:
        key = (table, protocol, date)
        b = self._open.get(key)
        if b is None:
            if table == "frames":
                assert protocol is not None
                sch = self.frames_schema(protocol)
                b = _Builder(sch, len(S.FRAME_COLUMNS))
            else:
                sch = {"findings": S.FINDINGS, "conversations": S.CONVERSATIONS, "files": S.FILES}[table]
                b = _Builder(sch, len(sch) - (2 if table != "files" else 0))
            self._open[key] = b
        return b

    def frames_schema(self, protocol: str) -> pa.Schema:
        sch = self._frames_schema.get(protocol)
        if sch is None:
            sch = self._frames_schema[protocol] = S.frames_schema(self.dissectors[protocol])
        return sch

    def _add(self, table: str, protocol: str | None, date: str | None, row: tuple[Any, ...],
             fields: dict[str, Any] | None = None) -> None:
        b = self._builder(table, protocol, date)
        b.add(row, fields)
        if b.n >= self.batch_rows:
            self._flush(table, protocol, date)

    def _flush(self, table: str, protocol: str | None, date: str | None) -> None:
        b = self._open.pop((table, protocol, date))
        if b.n:
            self.emit(table, protocol, date, b.batch(date, protocol if table != "frames" else None))

    def flush(self) -> None:
        for key in list(self._open):
            self._flush(*key)

    # ------------------------------------------------------------------ rows
    def frame(self, ev: Frame, capture: str, chain: str, conv_id: str,
              request: tuple[str | None, int] | None) -> None:
        protocol = ev.protocol
        flat = self._flatteners.get(protocol)
        if flat is None:
            flat = self._flatteners[protocol] = S.Flattener(self.dissectors[protocol])
        fields, extra = flat.flatten(ev.command, ev.fields)
        corr = resp = None
        for f in ev.fields:  # top-level only: what pairs requests and answers, where the protocol has it
            name = f.name
            if name == "correlation_id" and type(f.value) is int and 0 <= f.value <= S.INT64_MAX:
                corr = f.value
            elif name in ("response_code", "reply_code") and type(f.value) is int and 0 <= f.value <= S.INT64_MAX:
                resp = f.value
        date = S.date_of(ev.ts)
        first, last = ev.packets
        row = (capture, chain, first, last, ev.ts, ev.community_id, conv_id, ev.src, ev.dst, str(ev.direction),
               ev.dialect, ev.command, ev.code, ev.size, ev.info, corr, resp, ev.offset,
               request[0] if request else None, request[1] if request else None,
               ev.request[1] if ev.request is not None else None, ev.latency,
               [f.id for f in ev.findings] if ev.findings else [],
               json.dumps(extra, ensure_ascii=False, default=str) if extra else None)
        self._add("frames", protocol, date, row, fields)
        for f in ev.findings:
            self.finding(f, f.file or capture, chain, ev.ts, conv_id, protocol)

    def finding(self, f: Finding, capture: str | None, chain: str, ts: float, conv_id: str | None,
                protocol: str | None) -> None:
        row = (f.id, str(f.severity), str(f.category), f.message, f.fingerprint, capture, chain, f.frame, ts,
               f.community_id, conv_id, f.command, f.field)
        self._add("findings", protocol or S.NO_PROTOCOL, S.date_of(ts), row)

    def conversation(self, info: FlowInfo, chain: str, files: list[str]) -> None:
        row = (conversation_id(chain, info.community_id, info.first_ts), chain, info.community_id,
               fmt_endpoint(info.client), fmt_endpoint(info.server), info.dialect, info.packets, info.frames,
               info.bytes_c2s, info.bytes_s2c, info.errors, info.warnings, info.notes, info.first_ts, info.last_ts,
               info.complete, files)
        self._add("conversations", info.protocol or S.NO_PROTOCOL, S.date_of(info.first_ts), row)

    def file(self, capture: str, chain: str, position: int, size: int | None, packets: int, first_ts: float | None,
             last_ts: float | None, error: str | None) -> None:
        self._add("files", None, None, (capture, chain, position, size, packets, first_ts, last_ts,
                                        "error" if error else "ok", error))
