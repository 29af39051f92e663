"""The JSON contract, fixed by the JSON Schemas in analyzer/json_schema.py: every line of every
bundled capture validates; dialect is the conversation's (as flows --json says); AMQP's code is
readable as class and method ids; links agree both ways; --format json carries the same objects
as JSON Lines; several files add `file`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import analyzer.cli as cli
from analyzer.json_schema import FINDING, FRAME
from analyzer.registry import load_dissectors

ROOT = Path(__file__).parent.parent
CAPTURES = sorted(p for folder in ("rabbitmq_stream", "amqp091") for p in (ROOT / "captures" / folder).iterdir()
                  if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))
FRAME_V = jsonschema.Draft202012Validator(FRAME)
FINDING_V = jsonschema.Draft202012Validator(FINDING)


@pytest.fixture(autouse=True)
def known_dissectors(monkeypatch):
    # The two finished dissectors (others may be half-built in a working tree).
    known = load_dissectors()
    monkeypatch.setattr(cli, "load_dissectors", lambda: {k: known[k] for k in ("rabbitmq_stream", "amqp091")})


def invoke(*args: str) -> str:
    r = CliRunner().invoke(cli.app, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout


def test_schemas_are_valid_schemas():
    jsonschema.Draft202012Validator.check_schema(FRAME)
    jsonschema.Draft202012Validator.check_schema(FINDING)
    assert json.loads(invoke("schema", "frame")) == FRAME


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_line_validates_and_dialects_agree(capture: Path):
    lines = [json.loads(x) for x in invoke("inspect", str(capture), "-T", "jsonl").splitlines()]
    assert lines
    for line in lines:
        (FRAME_V if line["type"] == "frame" else FINDING_V).validate(line)
    flows = {f["flow"]: f for f in map(json.loads, invoke("flows", str(capture), "--json").splitlines())}
    frames = [x for x in lines if x["type"] == "frame"]
    by_packet = {}
    for f in frames:
        # Every frame names its conversation's dialect (AMQP frames used to say null after the header).
        assert f["dialect"] == flows[f["flow"]]["dialect"], (f["frame"], f["command"])
        if f["protocol"] == "amqp091" and f["code"] is not None:
            parts = f["code_parts"]
            assert parts["class_id"] << 16 | parts["method_id"] == f["code"]
        by_packet.setdefault((f["flow"], f["frame"]), []).append(f)
    # Links agree both ways: a request names its response and that response names it back.
    for f in frames:
        if f["response_frame"] is not None:
            answers = [r for r in by_packet[(f["flow"], f["response_frame"])] if r["request_frame"] == f["frame"]]
            assert answers and answers[0]["latency"] == f["latency"] >= 0
        if f["request_frame"] is not None:
            assert (f["flow"], f["request_frame"]) in by_packet and f["latency"] is not None


def test_amqp_code_parts_read_as_class_and_method():
    lines = [json.loads(x) for x in invoke("inspect", str(ROOT / "captures/amqp091/pika_get.pcap"), "-T", "jsonl",
                                           "-Y", "command == Basic.Get").splitlines()]
    get = [x for x in lines if x["type"] == "frame"][0]
    assert get["code"] == 60 << 16 | 70 and get["code_parts"] == {"class_id": 60, "method_id": 70}
    assert get["dialect"] == "0-9-1" and get["response_frame"] is not None


def test_json_document_has_the_same_objects_as_json_lines():
    path = str(ROOT / "captures/rabbitmq_stream/rstream_publish_confirm_snaplen96.pcap")  # has both kinds
    lines = [json.loads(x) for x in invoke("inspect", path, "-T", "jsonl").splitlines()]
    doc = json.loads(invoke("inspect", path, "--format", "json"))
    assert doc["capture"] == path
    assert doc["frames"] == [x for x in lines if x["type"] == "frame"]
    assert doc["findings"] == [x for x in lines if x["type"] == "finding"] and doc["findings"]
    assert doc["flows"] == [json.loads(x) for x in invoke("flows", path, "--json").splitlines()]


def test_several_files_add_file_everywhere(tmp_path: Path):
    a = ROOT / "captures/amqp091/pika_get.pcap"
    b = ROOT / "captures/amqp091/pika_bad_login.pcap"
    lines = [json.loads(x) for x in invoke("inspect", str(a), str(b), "-T", "jsonl").splitlines()]
    assert {x["file"] for x in lines} == {str(a), str(b)}
    for line in lines:
        (FRAME_V if line["type"] == "frame" else FINDING_V).validate(line)
        if line["type"] == "frame" and line["request_frame"] is not None:
            assert line["request_file"] == line["file"]


def test_long_values_are_cut_and_listed(tmp_path: Path):
    path = str(ROOT / "captures/amqp091/pika_large.pcap")
    full = [json.loads(x) for x in invoke("inspect", path, "-T", "jsonl", "--max-value-size", "0").splitlines()]
    cut = [json.loads(x) for x in invoke("inspect", path, "-T", "jsonl", "--max-value-size", "100").splitlines()]
    marked = [x for x in cut if x.get("truncated")]
    assert marked and not [x for x in full if x.get("truncated")]
    for line in marked:
        FRAME_V.validate(line)
        for t in line["truncated"]:
            assert t["kept"] == 100 and t["size"] > 100
