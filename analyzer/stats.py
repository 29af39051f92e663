"""`streamproto stats`: what tshark's ``-z`` statistics give, for any protocol the engine decodes.

- ``commands``: frames and bytes per protocol, command and direction;
- ``srt``: service response times per request/response pair (count, min, mean, p50, p95, max), from
  :attr:`Frame.latency`, which a dissector sets when it pairs a response with its request (by
  correlation id or in order); Wireshark's "Service Response Time";
- ``expert``: findings by rule id and severity (``-z expert``);
- ``conversations``: one row per conversation, with its duration (``-z conv,tcp``);
- ``io``: frames, bytes and findings per interval of capture time (``-z io,stat``).

Everything is computed from values the engine and dissectors already produced (command names,
sizes, latencies, findings); no frame's field tree is built.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Any

from analyzer.api import Finding, Frame

SECTIONS = ("commands", "srt", "expert", "conversations", "io")
#: Requests remembered (by anchor) to name the request a response answers; the oldest go first.
_REQUESTS_KEPT = 100_000
#: Time buckets kept while counting frames over time (see Stats._tick).
_MAX_BUCKETS = 2000


def percentile(sorted_values: Any, q: float) -> float:
    """Nearest-rank percentile (as Wireshark's SRT tables and most monitoring tools give it)."""
    n = len(sorted_values)
    if not n:
        return math.nan
    rank = max(1, math.ceil(q / 100 * n))
    return sorted_values[rank - 1]


class Stats:
    """Feed every event (:meth:`add`), then read the tables (:meth:`tables`)."""

    def __init__(self, interval: float | None = None) -> None:
        self.interval = interval
        # (protocol, command, direction) -> [frames, bytes]
        self.commands: dict[tuple[str, str, str], list[int]] = {}
        # (protocol, request command, response command) -> latencies in seconds
        self.srt: dict[tuple[str, str, str], array] = {}
        # (rule id, severity) -> count
        self.expert: dict[tuple[str, str], int] = {}
        self._requests: dict[int, tuple[list, str]] = {}
        self._io: dict[int, list[int]] = {}
        self._first: float | None = None
        self._width = interval or 0.001
        self._old_width = self._width

    def add(self, ev: Any) -> None:
        if isinstance(ev, Frame):
            self._frame(ev)
        else:
            self._finding(ev)

    def _frame(self, fr: Frame) -> None:
        key = (fr.protocol, fr.command, str(fr.direction))
        row = self.commands.get(key)
        if row is None:
            row = self.commands[key] = [0, 0]
        row[0] += 1
        row[1] += fr.size
        ref = fr.ref
        if ref is not None:
            kept = self._requests
            if len(kept) >= _REQUESTS_KEPT:
                del kept[next(iter(kept))]
            kept[id(ref)] = (ref, fr.command)
        request = getattr(fr, "request", None)
        latency = getattr(fr, "latency", None)
        if request is not None and latency is not None:
            known = self._requests.pop(id(request), None)
            # The same list object, not a newer one at a reused address.
            name = known[1] if known is not None and known[0] is request else "?"
            pair = (fr.protocol, name, fr.command)
            values = self.srt.get(pair)
            if values is None:
                values = self.srt[pair] = array("d")
            values.append(latency)
        for f in fr.findings:
            self._finding(f)
        self._tick(fr.ts, 1, fr.size, len(fr.findings))

    def _finding(self, f: Finding) -> None:
        key = (f.id, str(f.severity))
        self.expert[key] = self.expert.get(key, 0) + 1

    def _tick(self, ts: float, frames: int, size: int, findings: int) -> None:
        # Online buckets, so memory stays flat: with no interval asked for, they start at 1 ms and
        # grow tenfold (merging) whenever there would be more than _MAX_BUCKETS of them.
        if self._first is None:
            self._first = ts
        i = int((ts - self._first) // self._width)
        if self.interval is None and i >= _MAX_BUCKETS:
            while i >= _MAX_BUCKETS:
                self._width *= 10
                i = int((ts - self._first) // self._width)
            merged: dict[int, list[int]] = {}
            for j, row in self._io.items():
                into = merged.setdefault(j // 10 ** round(math.log10(self._width / self._old_width)), [0, 0, 0])
                for k in range(3):
                    into[k] += row[k]
            self._io = merged
            self._old_width = self._width
        row = self._io.get(i)
        if row is None:
            row = self._io[i] = [0, 0, 0]
        row[0] += frames
        row[1] += size
        row[2] += findings

    # ---------------------------------------------------------------- tables
    def io_rows(self) -> tuple[float, list[dict[str, Any]]]:
        """Frames, bytes and findings per interval from the first frame; without an interval asked
        for, a round one that makes about 20 rows."""
        if not self._io:
            return self.interval or 1.0, []
        width = self._width
        span = (max(self._io) + 1) * width
        interval = self.interval or max(width, _nice(span / 20))
        factor = max(1, round(interval / width))
        buckets: dict[int, list[int]] = {}
        for i, row in self._io.items():
            into = buckets.setdefault(i // factor, [0, 0, 0])
            for k in range(3):
                into[k] += row[k]
        rows = []
        for i in range(max(buckets) + 1):
            frames, size, findings = buckets.get(i, (0, 0, 0))
            rows.append({"start": round(i * interval, 6), "end": round((i + 1) * interval, 6), "frames": frames,
                         "bytes": size, "findings": findings})
        return interval, rows

    def srt_rows(self) -> list[dict[str, Any]]:
        rows = []
        for (protocol, request, response), values in sorted(self.srt.items()):
            ordered = sorted(values)
            rows.append({"protocol": protocol, "request": request, "response": response, "count": len(ordered),
                         "min": ordered[0], "mean": sum(ordered) / len(ordered),
                         "p50": percentile(ordered, 50), "p95": percentile(ordered, 95), "max": ordered[-1]})
        return rows

    def command_rows(self) -> list[dict[str, Any]]:
        return [{"protocol": p, "command": c, "direction": d, "frames": n, "bytes": b}
                for (p, c, d), (n, b) in sorted(self.commands.items())]

    def expert_rows(self) -> list[dict[str, Any]]:
        rank = {"error": 0, "warning": 1, "note": 2}
        return [{"id": i, "severity": s, "count": n}
                for (i, s), n in sorted(self.expert.items(), key=lambda kv: (rank.get(kv[0][1], 3), kv[0][0]))]


def _nice(x: float) -> float:
    """A round interval near ``x``: 1, 2 or 5 times a power of ten."""
    if x <= 0:
        return 1.0
    exp = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * 10 ** exp >= x:
            return float(m * 10 ** exp)
    return float(10 ** (exp + 1))


def conversation_rows(flows: Iterable[Any]) -> list[dict[str, Any]]:
    from analyzer.engine import fmt_endpoint

    return [{"flow": f.id, "client": fmt_endpoint(f.client), "server": fmt_endpoint(f.server),
             "protocol": f.protocol, "dialect": f.dialect, "start": f.first_ts,
             "duration": round(f.last_ts - f.first_ts, 6), "packets": f.packets, "frames": f.frames,
             "bytes_c2s": f.bytes_c2s, "bytes_s2c": f.bytes_s2c, "errors": f.errors, "warnings": f.warnings,
             "notes": f.notes} for f in flows]
