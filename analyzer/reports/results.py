"""What one `streamproto check` run found: per capture, its conversations, findings, command
counts, latencies and the frames kept for ladder diagrams. Plain data for the report writers."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from analyzer.api import Finding, Rule, Severity
from analyzer.engine import FlowInfo, fmt_endpoint
from analyzer.reports.policy import RulePolicy

SEVERITIES = (Severity.ERROR, Severity.WARNING, Severity.NOTE)


@dataclass(slots=True)
class Arrow:
    """One frame as a ladder diagram draws it."""

    index: int  # 1-based position of the frame in its conversation
    packet: int
    ts: float
    direction: str  # "c2s" or "s2c"
    command: str
    info: str
    size: int
    latency: float | None
    findings: list[Finding]


@dataclass
class ConversationResult:
    info: FlowInfo
    findings: list[Finding] = field(default_factory=list)
    #: The frames kept for its ladder diagram (the first ones, those with findings, the last
    #: ones), in order; None when no ladder was recorded for it (beyond the per-capture limit).
    arrows: list[Arrow] | None = None

    @property
    def name(self) -> str:
        """Endpoints, protocol and Community ID: how JUnit and the reports name a conversation."""
        i = self.info
        proto = (i.protocol or "undecoded") + (f"/{i.dialect}" if i.dialect else "")
        return f"{fmt_endpoint(i.client)} -> {fmt_endpoint(i.server)} {proto} {i.community_id}"

    @property
    def endpoints(self) -> str:
        return f"{fmt_endpoint(self.info.client)} -> {fmt_endpoint(self.info.server)}"

    def counts(self) -> dict[str, int]:
        return count(self.findings)


def count(findings: list[Finding]) -> dict[str, int]:
    out = {str(s): 0 for s in SEVERITIES}
    for f in findings:
        out[f.severity] += 1
    return out


@dataclass
class CaptureResult:
    path: str
    #: Why the capture could not be read (whole or in part), or None.
    error: str | None = None
    packets: int = 0
    frames: int = 0
    first_ts: float | None = None
    last_ts: float = 0.0
    conversations: list[ConversationResult] = field(default_factory=list)
    #: Every reported finding, in the order the engine gave them (conversation ones included).
    findings: list[Finding] = field(default_factory=list)
    #: (protocol, direction, command) -> frames.
    commands: dict[tuple[str, str, str], int] = field(default_factory=dict)
    #: (protocol, request command or "", response command) -> latencies in seconds.
    latencies: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    #: Capture times of the frames, per direction, for the frames-over-time chart.
    times: dict[str, array] = field(default_factory=lambda: {"c2s": array("d"), "s2c": array("d")})
    #: Findings left out because the baseline holds their fingerprint.
    suppressed: int = 0
    #: Conversations beyond this many have no ladder diagram.
    ladder_limit: int = 0
    elapsed: float = 0.0

    def counts(self) -> dict[str, int]:
        return count(self.findings)

    def conversation(self, flow: int | None) -> ConversationResult | None:
        if flow is None or not 0 < flow <= len(self.conversations):
            return None
        return self.conversations[flow - 1]

    @property
    def undecoded(self) -> list[ConversationResult]:
        return [c for c in self.conversations if c.info.protocol is None and c.info.bytes_c2s + c.info.bytes_s2c]


@dataclass
class CheckResult:
    captures: list[CaptureResult]
    rules: list[tuple[str, Rule]]
    policy: RulePolicy
    threshold: Severity

    def failing(self) -> list[tuple[CaptureResult, Finding]]:
        """The findings at or above the threshold, worst first (then in capture order)."""
        rank = self.threshold.rank
        hits = [(c, f) for c in self.captures for f in c.findings if f.severity.rank >= rank]
        return sorted(hits, key=lambda cf: -cf[1].severity.rank)

    @property
    def unusable(self) -> list[CaptureResult]:
        return [c for c in self.captures if c.error is not None]

    @property
    def exit_code(self) -> int:
        if self.unusable:
            return 2
        return 1 if self.failing() else 0

    @property
    def suppressed(self) -> int:
        return sum(c.suppressed for c in self.captures)
