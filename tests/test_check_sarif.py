"""`streamproto check --sarif`: validated against the SARIF 2.1.0 JSON schema (tests/data), every
rule declared in every run, every result located in its capture with the packet as its region,
and fingerprints that survive a re-recording."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pcapwrite import TcpConversation, write_capture
from analyzer.reports.policy import catalogue

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json").read_text())
CLEAN = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap"
ERRS = ROOT / "captures" / "amqp091" / "pika_bad_login.pcap"
SNAP = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm_snaplen96.pcap"
runner = CliRunner()


def sarif(tmp_path: Path, *args: object) -> tuple[dict, int]:
    out = tmp_path / "report.sarif"
    r = runner.invoke(app, ["check", *(str(a) for a in args), "--sarif", str(out)])
    assert r.exit_code in (0, 1, 2), r.output
    doc = json.loads(out.read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    return doc, r.exit_code


def test_schema_catches_a_broken_report(tmp_path):
    # The validation below would notice a report the schema forbids.
    doc, _ = sarif(tmp_path, ERRS)
    doc["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(doc)
    del doc["runs"][0]["results"][0]["level"]
    doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(doc)


def test_every_rule_declared_even_without_findings(tmp_path):
    doc, code = sarif(tmp_path, CLEAN)
    assert code == 0
    (run,) = doc["runs"]
    assert run["results"] == []
    rules = run["tool"]["driver"]["rules"]
    known = catalogue()
    assert [r["id"] for r in rules] == [r.id for _, r in known]
    assert len(rules) > 80
    for desc, (owner, rule) in zip(rules, known, strict=True):
        assert desc["shortDescription"]["text"] == rule.description
        assert rule.description in desc["help"]["text"] and f"--disable {rule.id}" in desc["help"]["text"]
        assert desc["defaultConfiguration"] == {"level": str(rule.severity), "enabled": True}
        assert desc["properties"]["owner"] == owner
    assert run["invocations"][0]["executionSuccessful"] is True


def test_results_located_by_capture_and_packet(tmp_path):
    doc, code = sarif(tmp_path, ERRS, SNAP)
    assert code == 1
    (run,) = doc["runs"]
    assert run["artifacts"][0]["location"] == {"uri": ERRS.as_uri()}
    assert run["artifacts"][0]["length"] == ERRS.stat().st_size
    rules = run["tool"]["driver"]["rules"]
    # The JSON Lines contract gives the same findings, packet numbers and fingerprints.
    expected = []
    for cap in (ERRS, SNAP):
        lines = runner.invoke(app, ["inspect", "--only-findings", "--format", "jsonl", str(cap)]).stdout
        for obj in map(json.loads, lines.splitlines()):
            found = obj["findings"] if obj["type"] == "frame" else [obj]
            expected += [(str(cap), f["id"], obj["frame"], f["fingerprint"], f["message"]) for f in found]
    got = []
    for res in run["results"]:
        loc = res["locations"][0]["physicalLocation"]
        art = run["artifacts"][loc["artifactLocation"]["index"]]["location"]["uri"]
        assert loc["artifactLocation"]["uri"] == art
        props = res["properties"]
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        if props["packet"] is not None:
            assert loc["region"] == {"startLine": props["packet"]}
            assert f"packet {props['packet']} of " in res["message"]["text"]
        assert res["partialFingerprints"] == {"streamprotoFindingFingerprint/v1": props["fingerprint"]}
        got.append((props["capture"], res["ruleId"], props["packet"], props["fingerprint"],
                    res["message"]["text"].rsplit(" (packet", 1)[0].rsplit(" (no single packet", 1)[0]))
    assert sorted(got, key=str) == sorted(expected, key=str)
    first = run["results"][0]
    assert first["ruleId"] == "amqp091.reply.connection_error" and first["level"] == "error"
    assert first["properties"]["communityId"] == "1:dTJ4RBx+NIERmVfginCW4FwqGsE="
    assert "conversation 127.0.0.1:35060 -> 127.0.0.1:5672 (amqp091, Community ID 1:dTJ4" in first["message"]["text"]
    assert first["locations"][0]["logicalLocations"][0]["name"] == "127.0.0.1:35060 -> 127.0.0.1:5672"


def test_relative_paths_are_relative_to_srcroot(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    doc, _ = sarif(tmp_path, "captures/amqp091/pika_bad_login.pcap")
    (run,) = doc["runs"]
    assert run["artifacts"][0]["location"] == {"uri": "captures/amqp091/pika_bad_login.pcap", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == ROOT.as_uri() + "/"
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"


def test_unusable_input_is_a_tool_notification(tmp_path):
    bogus = tmp_path / "bogus.pcap"
    bogus.write_bytes(b"\x00" * 64)
    doc, code = sarif(tmp_path, ERRS, bogus)
    assert code == 2
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False and inv["exitCode"] == 2
    (note,) = inv["toolExecutionNotifications"]
    assert note["level"] == "error" and "not a pcap or pcapng capture" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == bogus.as_uri()
    assert len(doc["runs"][0]["results"]) == 1  # the good capture's finding is still there


def test_rule_selection_is_declared_as_overrides(tmp_path):
    doc, code = sarif(tmp_path, ERRS, "--severity", "amqp091.reply.connection_error=warning",
                      "--disable", "amqp091.heartbeat.*")
    assert code == 0
    (run,) = doc["runs"]
    (res,) = run["results"]
    assert res["level"] == "warning"
    overrides = {o["descriptor"]["id"]: o["configuration"] for o in run["invocations"][0]["ruleConfigurationOverrides"]}
    assert overrides["amqp091.reply.connection_error"] == {"level": "warning"}
    assert overrides["amqp091.heartbeat.silence"] == {"enabled": False}
    rules = run["tool"]["driver"]["rules"]
    for o in run["invocations"][0]["ruleConfigurationOverrides"]:
        assert rules[o["descriptor"]["index"]]["id"] == o["descriptor"]["id"]
    silence = next(r for r in rules if r["id"] == "amqp091.heartbeat.silence")
    assert silence["defaultConfiguration"]["enabled"] is False


def _refused_header(path: Path, extra_first: bool, ts: float, client_port: int = 40000) -> Path:
    convs = []
    if extra_first:  # another conversation first: packet numbers and flow ids shift
        other = TcpConversation(("10.4.0.9", 41000), ("10.4.0.2", 5672), ts=ts - 5)
        other.handshake()
        other.close()
        convs.append(other)
    c = TcpConversation(("10.4.0.1", client_port), ("10.4.0.2", 5672), ts=ts, isn_client=4242 if extra_first else 1000)
    c.handshake()
    c.send("c2s", b"AMQP\x00\x00\x09\x01")
    c.send("s2c", b"AMQP\x00\x00\x09\x01")  # the server refuses the version
    c.close()
    convs.append(c)
    write_capture(str(path), convs)
    return path


def test_fingerprints_survive_a_re_recording(tmp_path):
    one, _ = sarif(tmp_path, _refused_header(tmp_path / "a.pcap", False, 1_700_000_000.0))
    # Re-recorded later, after another conversation, from another ephemeral client port.
    two, _ = sarif(tmp_path, _refused_header(tmp_path / "b.pcap", True, 1_750_000_000.0, client_port=51234))
    r1, r2 = one["runs"][0]["results"], two["runs"][0]["results"]
    assert r1 and [r["ruleId"] for r in r1] == [r["ruleId"] for r in r2]
    assert [r["locations"][0]["physicalLocation"]["region"] for r in r1] != \
        [r["locations"][0]["physicalLocation"]["region"] for r in r2]
    assert [r["partialFingerprints"] for r in r1] == [r["partialFingerprints"] for r in r2]
