"""`check --json FILE`: the whole result as one JSON document, in the JSON Lines contract's terms
(findings as `finding_json` writes them, conversations as `flows --json` does)."""

from __future__ import annotations

import json

from analyzer.jsonout import finding_json
from analyzer.reports.results import CaptureResult, CheckResult
from analyzer.textsafe import json_text


def _flow(c: CaptureResult, flow: int) -> dict:
    from analyzer.cli import flow_json

    conv = c.conversations[flow - 1]
    return {**flow_json(conv.info), "name": conv.name, "findings": conv.counts()}


def json_report(result: CheckResult) -> str:
    doc = {
        "fail_on": str(result.threshold),
        "exit_code": result.exit_code,
        "baseline_suppressed": result.suppressed,
        "captures": [{
            "capture": c.path, "error": c.error, "packets": c.packets, "frames": c.frames,
            "findings_by_severity": c.counts(), "baseline_suppressed": c.suppressed,
            "conversations": [_flow(c, conv.info.id) for conv in c.conversations],
            "findings": [finding_json(f) for f in c.findings],
        } for c in result.captures],
    }
    return json_text(json.dumps(doc, ensure_ascii=False, indent=1)) + "\n"  # lone surrogates as \xNN text
