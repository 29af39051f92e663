"""inspect --only-findings lets the analyzer keep back the frames it cannot show
(Analyzer.findings_only): the output must be exactly the full output's frames with findings and its
free-standing findings, links included, on every bundled capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.api import Frame
from analyzer.engine import Analyzer
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").rglob("*") if p.suffix in (".pcap", ".pcapng", ".gz"))


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_only_findings_is_the_full_output_filtered(capture: Path):
    runner = CliRunner()
    full = runner.invoke(cli.app, ["inspect", "-j", "1", "-T", "jsonl", str(capture)], catch_exceptions=False)
    only = runner.invoke(cli.app, ["inspect", "-j", "1", "--only-findings", "-T", "jsonl", str(capture)],
                         catch_exceptions=False)
    assert (only.exit_code, only.stderr) == (full.exit_code, full.stderr)
    lines = full.stdout_bytes.splitlines()
    want = [x for x in lines if json.loads(x)["type"] == "finding" or json.loads(x)["findings"]]
    assert only.stdout_bytes.splitlines() == want


def test_the_frames_kept_back_are_still_counted():
    capture = ROOT / "captures" / "amqp091" / "pika_consume.pcap"
    counts = []
    for only in (False, True):
        analyzer = Analyzer(dissectors=load_dissectors())
        analyzer.findings_only = only
        frames = [ev for ev in analyzer.run_files([str(capture)]) if isinstance(ev, Frame)]
        counts.append((len(frames), [(f.id, f.frames, f.errors, f.warnings, f.notes) for f in analyzer.flows]))
    (all_frames, rows), (kept, rows_kept) = counts
    assert rows == rows_kept and kept < all_frames // 2


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_every_frame_is_counted_on_every_capture(capture: Path):
    # Including the frames a connection left out instead of making them (leave_out_plain_frames).
    rows = []
    for only in (False, True):
        analyzer = Analyzer(dissectors=load_dissectors())
        analyzer.findings_only = only
        for _ in analyzer.run_files([str(capture)]):
            pass
        rows.append([(f.id, f.frames, f.errors, f.warnings, f.notes, f.dialect) for f in analyzer.flows])
    assert rows[0] == rows[1]
