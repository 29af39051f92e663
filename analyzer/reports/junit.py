"""JUnit XML (the Apache Ant format that Jenkins and GitLab read): one testsuite per capture, one
testcase per conversation, failing when one of its findings reaches the --fail-on threshold.

Shaped by that schema: the root `testsuites` carries no attributes, each testsuite has its
`package` and `id`, its properties, system-out and system-err, and a testcase holds at most one
failure or error, so one failure lists every finding of its conversation, one per line. Findings
below the threshold are listed in the suite's system-out (a passing testcase has no text)."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from analyzer.api import Finding
from analyzer.reports.results import CaptureResult, CheckResult, ConversationResult, count
from analyzer.reports.summary import plural
from analyzer.textsafe import safe


def _line(f: Finding) -> str:
    # safe(): XML 1.0 cannot carry most control characters, and wire text can hold any.
    at = f"packet {f.frame}" if f.frame is not None else "no single packet"
    return safe(f"{f.severity} {f.id} at {at}: {f.message} [fingerprint {f.fingerprint}]")


def _counts(findings: list[Finding]) -> str:
    c = count(findings)
    return ", ".join(plural(c[s], s) for s in ("error", "warning", "note") if c[s])


def _testcase(suite: ET.Element, name: str, classname: str, seconds: float, findings: list[Finding],
              rank: int, below: list[str]) -> bool:
    """A testcase that fails when a finding reaches ``rank``; True when it failed."""
    name, classname = safe(name), safe(classname)
    case = ET.SubElement(suite, "testcase", name=name, classname=classname, time=f"{max(seconds, 0.0):.6f}")
    worst = max(findings, key=lambda f: f.severity.rank, default=None)
    if worst is None or worst.severity.rank < rank:
        below += [f"{name}: {_line(f)}" for f in findings]
        return False
    failure = ET.SubElement(case, "failure", type=worst.id,
                            message=safe(f"{_counts(findings)}; first: {worst.message}"))
    failure.text = "\n".join(_line(f) for f in findings) + "\n"
    return True


def _suite(root: ET.Element, index: int, c: CaptureResult, result: CheckResult, stamp: str, host: str) -> None:
    path = safe(c.path)
    suite = ET.SubElement(root, "testsuite", name=path, package="streamproto.check", id=str(index),
                          timestamp=stamp, hostname=host)
    props = ET.SubElement(suite, "properties")
    for k, v in (("capture", path), ("packets", c.packets), ("frames", c.frames),
                 ("conversations", len(c.conversations)), ("fail-on", result.threshold),
                 ("baseline-suppressed", c.suppressed)):
        ET.SubElement(props, "property", name=k, value=safe(str(v)))
    rank = result.threshold.rank
    tests = failures = errors = 0
    below: list[str] = []
    if c.error is not None:
        tests += 1
        errors += 1
        case = ET.SubElement(suite, "testcase", name="read capture", classname=path, time="0")
        ET.SubElement(case, "error", type="unusable-input", message=safe(c.error)).text = safe(c.error) + "\n"
    conv: ConversationResult
    for conv in c.conversations:
        tests += 1
        failures += _testcase(suite, conv.name, path, conv.info.last_ts - conv.info.first_ts, conv.findings,
                              rank, below)
    loose = [f for f in c.findings if c.conversation(f.flow) is None]
    if loose:  # findings about the capture itself (truncated packets, unknown link types)
        tests += 1
        failures += _testcase(suite, "capture (findings about no conversation)", path, 0.0, loose, rank, below)
    ET.SubElement(suite, "system-out").text = "".join(line + "\n" for line in below)
    ET.SubElement(suite, "system-err").text = ""
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", "0")
    suite.set("time", f"{c.elapsed:.6f}")


def junit_xml(result: CheckResult, now: datetime | None = None) -> bytes:
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S")  # the schema allows no time zone
    host = socket.gethostname() or "localhost"
    root = ET.Element("testsuites")
    for i, c in enumerate(result.captures):
        _suite(root, i, c, result, stamp, host)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
