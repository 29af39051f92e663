"""The baseline: the fingerprints of the findings a team has accepted for now.

`--write-baseline FILE` records every finding of the run (after rule selection); `--baseline FILE`
leaves out the findings whose fingerprint it holds, so a check reports only new ones. A
fingerprint names the rule, the conversation (Community ID), the command and the field, never
packet numbers or times, so one entry covers every repetition of the same behaviour."""

from __future__ import annotations

import json
from collections.abc import Iterable

from analyzer.api import Finding
from analyzer.textsafe import json_text

FORMAT = "streamproto-baseline"
VERSION = 1


def load(path: str) -> set[str]:
    """The fingerprints in a baseline file; ValueError (with the reason) when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ValueError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a baseline file (not JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"{path}: not a streamproto baseline (version {VERSION})")
    entries = doc.get("findings")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("fingerprint"), str)
                                                 for e in entries):
        raise ValueError(f"{path}: a baseline's findings must be objects with a fingerprint")
    return {e["fingerprint"] for e in entries}


def dump(findings: Iterable[tuple[str, Finding]]) -> str:
    """The baseline of (capture, finding) pairs: one entry per fingerprint, with the rule and the
    first message seen for it so that a person reviewing the file knows what was accepted."""
    entries: dict[str, dict[str, str]] = {}
    for capture, f in findings:
        fp = f.fingerprint
        if fp not in entries:
            entries[fp] = {"fingerprint": fp, "rule": f.id, "severity": str(f.severity),
                           "capture": capture, "community_id": f.community_id or "", "message": f.message}
    doc = {"format": FORMAT, "version": VERSION,
           "findings": sorted(entries.values(), key=lambda e: (e["rule"], e["fingerprint"]))}
    return json_text(json.dumps(doc, ensure_ascii=False, indent=1)) + "\n"  # lone surrogates as \xNN text
