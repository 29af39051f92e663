"""The summary printed when a live capture stops: what was captured, conversations, frames per
protocol, findings per severity."""

from __future__ import annotations

from analyzer.engine import Analyzer
from analyzer.live.sources import CaptureStats

_REASONS = {"interrupted": "interrupted", "duration": "--duration reached", "count": "-c frames shown"}


def summary_lines(analyzer: Analyzer, source_name: str, stats: CaptureStats, seconds: float, reason: str | None,
                  open_at_stop: int) -> list[str]:
    why = _REASONS.get(reason or "", reason or "stopped")
    dropped = "drops unknown" if stats.dropped is None else f"{stats.dropped:,} dropped"
    # From the analyzer's totals, not its rows: a live analyzer drops old finished conversations' rows.
    frames = analyzer.frames_per_protocol()
    totals = analyzer.findings_per_severity()
    per_protocol = ", ".join(f"{name} {n:,}" for name, n in sorted(frames.items())) or "none"
    return [
        f"-- live capture on {source_name} stopped ({why}) after {seconds:.1f} s: "
        f"{stats.received:,} packets captured, {dropped}",
        f"-- conversations: {analyzer.conversations:,} ({open_at_stop:,} still open at stop)",
        f"-- frames: {sum(frames.values()):,} ({per_protocol})",
        f"-- findings: {totals['error']:,} errors, {totals['warning']:,} warnings, {totals['note']:,} notes",
    ]
