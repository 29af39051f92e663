"""`streamproto pipeline-report` (DuckDB) answers with the numbers `streamproto inspect --format jsonl`
and `streamproto flows --json` give on the same captures: findings by rule and protocol, commands per
protocol, latency percentiles per request command, conversations with the most findings."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pipeline import Settings
from analyzer.pipeline import run as pipeline_run
from analyzer.pipeline.inputs import chains, expand
from analyzer.pipeline.tables import conversation_id
from tests.test_pipeline import ROOT, split

runner = CliRunner()


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (DuckDB's quantile_cont, Spark's percentile)."""
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def from_jsonl(inputs: list[str]) -> dict[str, Any]:
    """The report's numbers, counted from inspect's JSON Lines and flows' JSON, chain by chain."""
    files, _ = expand(inputs)
    findings: collections.Counter = collections.Counter()
    commands: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    latency: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    conversations = []
    for chain in chains(files):
        result = runner.invoke(app, ["inspect", *chain.files, "--format", "jsonl"])
        assert result.exit_code == 0, result.output
        flows = runner.invoke(app, ["flows", *chain.files, "--json"])
        assert flows.exit_code == 0, flows.output
        protocol_of = {}
        for line in flows.stdout.splitlines():
            f = json.loads(line)
            protocol_of[f["flow"]] = f["protocol"] or "none"
            n = f["findings"]
            if n["error"] + n["warning"] + n["note"]:
                conversations.append((conversation_id(chain.name, f["community_id"], f["first_ts"]),
                                      n["error"] + n["warning"] + n["note"]))
        for line in result.stdout.splitlines():
            ev = json.loads(line)
            if ev["type"] == "frame":
                key = (ev["protocol"], ev["command"])
                commands[key][0] += 1
                commands[key][1] += ev["size"]
                if ev.get("latency") is not None and ev.get("response_frame") is not None:  # a request
                    latency[key].append(ev["latency"])
                for f in ev["findings"]:
                    findings[(ev["protocol"], f["id"], f["severity"])] += 1
            else:
                findings[(protocol_of.get(ev["flow"], "none"), ev["id"], ev["severity"])] += 1
    return {"findings": findings, "commands": commands, "latency": latency, "conversations": conversations}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    base = tmp_path_factory.mktemp("in")
    # Bundled captures as they are, and one cut into rotated files (a conversation over three).
    inputs = [str(ROOT / "captures" / "amqp091"), str(ROOT / "captures" / "rabbitmq_stream"), str(base)]
    split(str(ROOT / "captures" / "rabbitmq_stream" / "rstream_consume.pcap"), [40, 90], base / "host")
    out = str(tmp_path_factory.mktemp("out"))
    pipeline_run(inputs, out, Settings(), jobs=2)
    return inputs, out


def report(out: str, *args: str) -> dict[str, list[dict[str, Any]]]:
    result = runner.invoke(app, ["pipeline-report", out, "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_report_numbers_equal_counts_from_inspect_jsonl(tables: tuple[list[str], str]) -> None:
    inputs, out = tables
    expected = from_jsonl(inputs)
    got = report(out, "--top", "1000")
    assert {(r["protocol"], r["rule_id"], r["severity"]): r["findings"] for r in got["findings"]} \
        == dict(expected["findings"])
    assert sum(expected["findings"].values()) > 50
    assert {(r["protocol"], r["command"]): [r["frames"], r["bytes"]] for r in got["commands"]} \
        == {k: v for k, v in expected["commands"].items()}
    lat = {(r["protocol"], r["command"]): r for r in got["latency"]}
    assert set(lat) == set(expected["latency"]) and len(lat) > 20
    for key, values in expected["latency"].items():
        row = lat[key]
        assert row["answered"] == len(values), key
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert row[name] == pytest.approx(quantile(values, q), abs=1e-9), (key, name)
        assert row["max"] == pytest.approx(max(values), abs=1e-9)
    convs = got["conversations"]
    assert sorted((r["conversation_id"], r["findings"]) for r in convs) == sorted(expected["conversations"])
    assert [r["findings"] for r in convs] == sorted((r["findings"] for r in convs), reverse=True)


def test_report_formats_and_top(tables: tuple[list[str], str]) -> None:
    _, out = tables
    assert len(report(out, "--top", "2")["conversations"]) == 2
    text = runner.invoke(app, ["pipeline-report", out])
    assert text.exit_code == 0
    assert "Latency per request command" in text.stdout and "Findings by rule and protocol" in text.stdout
    csv = runner.invoke(app, ["pipeline-report", out, "--format", "csv"]).stdout
    assert csv.startswith("# findings: Findings by rule and protocol\nprotocol,rule_id,severity,findings\n")
    assert "\n# conversations: Conversations with the most findings\nconversation_id,protocol," in csv


def test_report_on_a_directory_without_tables(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pipeline-report", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == (f"streamproto: {tmp_path}: no pipeline tables there (run `streamproto "
                                     f"pipeline ... --out {tmp_path}`)")
    assert not os.listdir(tmp_path)
