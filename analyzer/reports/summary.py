"""The short text summary `streamproto check` prints on stdout."""

from __future__ import annotations

from analyzer.api import Finding
from analyzer.reports.results import CaptureResult, CheckResult
from analyzer.textsafe import safe

#: Findings listed per capture (the worst first); the reports have all of them.
WORST = 5
_MARK = {"error": "E", "warning": "W", "note": "N"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def where(f: Finding) -> str:
    return f"#{f.frame}" if f.frame is not None else "-"


def capture_lines(c: CaptureResult, threshold_rank: int) -> list[str]:
    counts = c.counts()
    protocols: dict[str, int] = {}
    for conv in c.conversations:
        name = conv.info.protocol or "undecoded"
        protocols[name] = protocols.get(name, 0) + 1
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(protocols.items()))
    lines = [f"{c.path}: {plural(len(c.conversations), 'conversation')}" + (f" ({kinds})" if kinds else "")
             + f", {plural(c.frames, 'frame')}, {plural(c.packets, 'packet')}; findings: "
             + ", ".join(plural(counts[s], s) for s in ("error", "warning", "note"))]
    if c.error is not None:
        lines.append(f"  unusable: {c.error}")
    worst = sorted(c.findings, key=lambda f: -f.severity.rank)[:WORST]
    for f in worst:
        flow = f" flow {f.flow}" if f.flow is not None else ""
        lines.append(f"  {_MARK[f.severity]} {where(f):>7}{flow} {f.id}: {f.message}")
    if len(c.findings) > len(worst):
        lines.append(f"  … and {len(c.findings) - len(worst)} more (see the reports)")
    for conv in c.undecoded:
        i = conv.info
        lines.append(f"  undecoded: flow {i.id} {conv.endpoints} ({i.bytes_c2s + i.bytes_s2c} bytes not checked)")
    return lines


def summary(result: CheckResult) -> str:
    lines: list[str] = []
    for c in result.captures:
        lines += capture_lines(c, result.threshold.rank)
    if result.suppressed:
        lines.append(f"baseline: {plural(result.suppressed, 'finding')} left out (known)")
    failing = result.failing()
    code = result.exit_code
    if code == 2:
        verdict = f"unusable input: {', '.join(c.path for c in result.unusable)}"
    elif failing:
        verdict = f"FAIL: {plural(len(failing), 'finding')} at or above {result.threshold}"
    else:
        verdict = f"pass: no finding at or above {result.threshold}"
    lines.append(f"-- {plural(len(result.captures), 'capture')}; {verdict} (exit {code})")
    # Messages hold text from the wire (and paths whatever the file system gave): no terminal escapes.
    return "".join(safe(line) + "\n" for line in lines)
