"""SARIF 2.1.0, the format code-scanning dashboards read (GitHub, GitLab, Azure DevOps).

Every rule the analyzer knows is a reportingDescriptor in every run, with its description, help
text and default level, so a dashboard sees a fixed alert's rule still declared and closes the
alert. Every finding is a result located in its capture file: the artifact is the file and the
region's `startLine` is the packet number (a capture has no lines; packets are numbered the way
tshark and `inspect --format summary` list them, one per line, and code-scanning uploads reject
results without a region). `partialFingerprints` carries the finding's fingerprint, which names
the rule, conversation, command and field but no packet number or time, so an alert survives a
re-recording of the same behaviour."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from analyzer.api import Finding, Rule
from analyzer.engine import fmt_endpoint
from analyzer.reports.results import CaptureResult, CheckResult
from analyzer.textsafe import json_text, safe

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: The key of our fingerprint in partialFingerprints (versioned, as the spec suggests).
FINGERPRINT_KEY = "streamprotoFindingFingerprint/v1"
SRCROOT = "%SRCROOT%"


def _version() -> str:
    try:
        return metadata.version("streamproto")
    except metadata.PackageNotFoundError:
        return "0"


def artifact_location(path: str) -> dict[str, Any]:
    """A relative path stays relative to the directory the check ran in (%SRCROOT%), which is
    what code-scanning matches against the repository; an absolute one becomes a file URI."""
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    # surrogateescape: a file name that is not UTF-8 is percent-encoded as the bytes it is.
    return {"uri": quote(PurePath(path).as_posix(), errors="surrogateescape"), "uriBaseId": SRCROOT}


def _descriptor(owner: str, rule: Rule, active: bool) -> dict[str, Any]:
    help_text = (f"{rule.description}.\n\nChecked by {'the engine' if owner == 'engine' else owner}; category "
                 f"{rule.category}, {rule.severity} by default. `streamproto inspect CAPTURE --only-findings` "
                 f"shows the frames with their findings; `streamproto check --disable {rule.id}` turns the rule "
                 f"off and `--severity {rule.id}=LEVEL` reports it at another level.")
    return {
        "id": rule.id,
        "shortDescription": {"text": rule.description},
        "fullDescription": {"text": f"{rule.description} ({owner}, {rule.category})"},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": str(rule.severity), "enabled": active},
        "properties": {"category": str(rule.category), "owner": owner, "tags": [owner, str(rule.category)]},
    }


def _result(f: Finding, c: CaptureResult, artifact: int, rule_index: dict[str, int]) -> dict[str, Any]:
    conv = c.conversation(f.flow)
    where = f"packet {f.frame}" if f.frame is not None else "no single packet"
    context = f"{where} of {c.path}"
    props: dict[str, Any] = {"capture": c.path, "packet": f.frame, "category": str(f.category),
                             "fingerprint": f.fingerprint}
    if conv is not None:
        i = conv.info
        context += (f", conversation {fmt_endpoint(i.client)} -> {fmt_endpoint(i.server)} "
                    f"({i.protocol or 'undecoded'}, Community ID {i.community_id})")
        props.update(flow=i.id, communityId=i.community_id, client=fmt_endpoint(i.client),
                     server=fmt_endpoint(i.server), protocol=i.protocol)
    location = {"physicalLocation": {
        "artifactLocation": {**artifact_location(c.path), "index": artifact},
        # Packet numbers count from 1, as lines do; a finding about no single packet points at the start.
        "region": {"startLine": f.frame if f.frame is not None and f.frame > 0 else 1}}}
    if conv is not None:
        location["logicalLocations"] = [{"name": conv.endpoints, "fullyQualifiedName": conv.name,
                                         "kind": "conversation"}]
    return {
        "ruleId": f.id,
        "ruleIndex": rule_index[f.id],
        "level": str(f.severity),
        # A dashboard shows this text: wire text's control characters and bidi overrides escaped.
        "message": {"text": safe(f"{f.message} ({context})")},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
        "properties": props,
    }


def sarif_document(result: CheckResult) -> dict[str, Any]:
    policy = result.policy
    rules = [_descriptor(owner, r, policy.active(r.id)) for owner, r in result.rules]
    rule_index = {r["id"]: i for i, r in enumerate(rules)}
    for c in result.captures:  # a rule a dissector reports without declaring it still gets a descriptor
        for f in c.findings:
            if f.id not in rule_index:
                rule_index[f.id] = len(rules)
                rules.append({"id": f.id, "shortDescription": {"text": f.id},
                              "defaultConfiguration": {"level": str(f.severity)}})
    artifacts = []
    results = []
    notifications = []
    for k, c in enumerate(result.captures):
        artifact: dict[str, Any] = {"location": artifact_location(c.path), "roles": ["analysisTarget"],
                                    "mimeType": "application/vnd.tcpdump.pcap"}
        if os.path.isfile(c.path):
            artifact["length"] = os.path.getsize(c.path)
        artifacts.append(artifact)
        results += [_result(f, c, k, rule_index) for f in c.findings]
        if c.error is not None:
            notifications.append({"level": "error", "message": {"text": safe(c.error)},
                                  "locations": [{"physicalLocation": {
                                      "artifactLocation": {**artifact_location(c.path), "index": k}}}],
                                  "properties": {"unusableInput": True}})
    overrides = []
    for i, (_, r) in enumerate(result.rules):
        config: dict[str, Any] = {}
        if not policy.active(r.id):
            config["enabled"] = False
        elif r.id in policy.severity and policy.severity[r.id] != r.severity:
            config["level"] = str(policy.severity[r.id])
        if config:
            overrides.append({"descriptor": {"id": r.id, "index": i}, "configuration": config})
    invocation: dict[str, Any] = {"executionSuccessful": not result.unusable, "exitCode": result.exit_code,
                                  "toolExecutionNotifications": notifications,
                                  "properties": {"failOn": str(result.threshold),
                                                 "baselineSuppressed": result.suppressed}}
    if overrides:
        invocation["ruleConfigurationOverrides"] = overrides
    run = {
        "tool": {"driver": {"name": "streamproto", "version": _version(), "rules": rules,
                            "shortDescription": {"text": "Protocol conformance checks for message-streaming "
                                                         "protocols, from packet captures"}}},
        "invocations": [invocation],
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri() + "/"}},
        "artifacts": artifacts,
        "results": results,
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def sarif_json(result: CheckResult) -> str:
    # json_text: lone surrogates (undecodable wire bytes, file names) as \xNN text, encodable as UTF-8.
    return json_text(json.dumps(sarif_document(result), ensure_ascii=False, indent=1)) + "\n"
