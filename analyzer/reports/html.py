"""`check --html FILE`: one self-contained page (inline CSS and SVG, no script, nothing fetched)
a person reads after a CI run: the verdict, every finding, and per capture the traffic over time,
the commands with their request-to-response latencies, and a ladder diagram per conversation."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

from analyzer.api import Finding
from analyzer.engine import fmt_endpoint
from analyzer.reports import svg
from analyzer.reports.results import CaptureResult, CheckResult, ConversationResult
from analyzer.reports.summary import plural
from analyzer.reports.svg import escape

#: Rows of the findings table (every finding up to this; the JSON, JUnit and SARIF reports have all).
FINDING_ROWS = 20_000
#: Rows of a capture's conversations table (those with findings first; the JSON report has all).
CONVERSATION_ROWS = 1_000
#: A capture with at most this many conversations shows every ladder open.
OPEN_LADDERS = 4

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2125;background:#f6f7f9}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0 0 6px;font-size:22px}
header p{margin:2px 0;color:#c9d1da}main{padding:8px 28px 40px}
.verdict{display:inline-block;font-weight:700;padding:4px 12px;border-radius:4px;color:#fff !important;margin:6px 0}
.pass{background:#2e7d32}.fail{background:#c62828}.unusable{background:#b26a00}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 18px;margin:16px 0}
h2{font-size:18px;margin:6px 0 10px}h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:4px 0 10px;font-size:13px}
th,td{border-bottom:1px solid #e4e7eb;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.sev{font-weight:700;text-transform:uppercase;font-size:11px;padding:1px 6px;border-radius:3px;color:#fff}
.sev.error{background:#c62828}.sev.warning{background:#e08a00}.sev.note{background:#1f6fb2}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px}
details{border-top:1px solid #e4e7eb;padding:6px 0}summary{cursor:pointer;font-weight:600}
.err{color:#b71c1c;font-weight:600}.muted{color:#667}
svg text{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px;fill:#222}
svg .lane{font-weight:700;text-anchor:middle}svg .proto{text-anchor:middle;fill:#667}
svg .hdr{fill:#667}svg .lanel{stroke:#9aa5b1;stroke-width:2}svg .lbl{text-anchor:middle}
svg .pkt{fill:#445}svg .ts{fill:#778}svg .gap line{stroke:#9aa5b1}svg .gap text{text-anchor:middle;fill:#667}
svg .axis{stroke:#889}svg .tick{font-size:11px;fill:#556}svg text.note{font-weight:600}
.scroll{overflow-x:auto}td.conv{white-space:nowrap}
tr.cap th{padding-top:10px;color:#1d2125;font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12px}
"""


def _sev(s: str) -> str:
    return f'<span class="sev {escape(s)}">{escape(s)}</span>'


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _verdict(result: CheckResult) -> str:
    code = result.exit_code
    failing = result.failing()
    if code == 2:
        return (f'<p class="verdict unusable">UNUSABLE INPUT: {escape(", ".join(c.path for c in result.unusable))} '
                f"(exit 2)</p>")
    if failing:
        return (f'<p class="verdict fail">FAIL: {plural(len(failing), "finding")} at or above '
                f"{escape(str(result.threshold))} (exit 1)</p>")
    return f'<p class="verdict pass">PASS: no finding at or above {escape(str(result.threshold))} (exit 0)</p>'


def _conv_text(c: CaptureResult, f: Finding) -> str:
    conv = c.conversation(f.flow)
    return escape(f"flow {conv.info.id} {conv.endpoints}") if conv is not None else '<span class="muted">capture</span>'


def _findings(result: CheckResult) -> str:
    """Every finding, worst first, under a row naming its capture."""
    body = []
    shown = 0
    for c in result.captures:
        if not c.findings or shown >= FINDING_ROWS:
            continue
        body.append(f'<tr class="cap"><th colspan="5">{escape(c.path)}</th></tr>')
        for f in sorted(c.findings, key=lambda f: -f.severity.rank)[:FINDING_ROWS - shown]:
            shown += 1
            body.append(f"<tr><td>{_sev(str(f.severity))}</td><td><code>{escape(f.id)}</code></td>"
                        f'<td class="n">{f.frame if f.frame is not None else "–"}</td>'
                        f'<td class="conv">{_conv_text(c, f)}</td><td>{escape(f.message)}</td></tr>')
    if not shown:
        return '<section id="findings"><h2>Findings</h2><p>No findings.</p></section>'
    total = sum(len(c.findings) for c in result.captures)
    more = (f'<p class="muted">{total - shown:,} more findings are in the JSON, JUnit and SARIF reports.</p>'
            if total > shown else "")
    head = "".join(f"<th>{h}</th>" for h in ("severity", "rule", "packet", "conversation", "message"))
    return (f'<section id="findings"><h2>Findings</h2><table class="findings"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>{more}</section>")


def _summary(result: CheckResult) -> str:
    rows = []
    for c in result.captures:
        counts = c.counts()
        status = (f'<span class="err">unusable: {escape(c.error)}</span>' if c.error is not None
                  else "fail" if any(f.severity.rank >= result.threshold.rank for f in c.findings) else "pass")
        rows.append([f'<a href="#capture-{id(c)}">{escape(c.path)}</a>', str(len(c.conversations)),
                     f"{c.frames:,}", f"{c.packets:,}", str(counts["error"]), str(counts["warning"]),
                     str(counts["note"]), str(len(c.undecoded)), status])
    return ('<section id="summary"><h2>Summary</h2>'
            + _table(["capture", "conversations", "frames", "packets", "errors", "warnings", "notes", "undecoded",
                      "status"], rows, {1, 2, 3, 4, 5, 6, 7}) + "</section>")


def _latency_rows(c: CaptureResult) -> list[list[str]]:
    rows = []
    for (proto, request, response), samples in sorted(c.latencies.items()):
        ordered = sorted(samples)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        rows.append([escape(proto), escape(request or "–"), escape(response), f"{len(samples):,}",
                     svg.fmt_seconds(ordered[0]), svg.fmt_seconds(statistics.median(ordered)),
                     svg.fmt_seconds(p95), svg.fmt_seconds(ordered[-1])])
    return rows


def _conversation(c: CaptureResult, conv: ConversationResult, t0: float) -> str:
    i = conv.info
    counts = conv.counts()
    found = ", ".join(plural(counts[s], s) for s in ("error", "warning", "note") if counts[s]) or "no findings"
    proto = (i.protocol or "undecoded") + (f"/{i.dialect}" if i.dialect else "")
    opened = " open" if conv.findings or len(c.conversations) <= OPEN_LADDERS else ""
    head = (f"<summary>flow {i.id}: {escape(conv.endpoints)} {escape(proto)}: {plural(i.frames, 'frame')}, "
            f"{found}</summary>")
    body = [f'<p class="muted mono">Community ID {escape(i.community_id)}; {i.packets:,} packets, '
            f"{i.bytes_c2s:,} bytes client→server, {i.bytes_s2c:,} bytes server→client</p>"]
    drawn = {id(f) for a in conv.arrows or () for f in a.findings}
    rest = [f for f in conv.findings if id(f) not in drawn]
    if conv.arrows:
        # Findings about a packet but no drawn frame (capture loss, a frame collapsed away) are rows
        # where their packet falls.
        frameless = [f for f in rest if f.frame is not None]
        body.append('<div class="scroll">' + svg.ladder(conv.arrows, fmt_endpoint(i.client),
                                                        fmt_endpoint(i.server), proto, t0, frameless) + "</div>")
        rest = [f for f in rest if f.frame is None]
    elif i.protocol is None:
        body.append("<p>No dissector decoded this conversation: nothing to draw.</p>")
    if rest:  # about the whole conversation, or on frames the ladder collapsed
        body.append("<p>Findings not on a drawn arrow:</p><ul>" + "".join(
            f"<li>{_sev(str(f.severity))} <code>{escape(f.id)}</code> "
            f"{'packet ' + str(f.frame) + ': ' if f.frame is not None else ''}{escape(f.message)}</li>" for f in rest)
            + "</ul>")
    return f"<details{opened}>{head}{''.join(body)}</details>"


def _capture(c: CaptureResult) -> str:
    out = [f'<section class="capture" id="capture-{id(c)}"><h2>{escape(c.path)}</h2>']
    if c.error is not None:
        out.append(f'<p class="err">Unusable input: {escape(c.error)}</p>')
    t0 = c.first_ts or 0.0
    out.append(f'<p class="muted">{c.packets:,} packets, {c.frames:,} frames, '
               f"{plural(len(c.conversations), 'conversation')}, {c.last_ts - t0:.3f} s of capture time"
               + (f"; {plural(c.suppressed, 'finding')} left out by the baseline" if c.suppressed else "") + "</p>")
    if c.frames:
        out.append("<h3>Frames over time</h3>" + svg.frames_over_time(c.times["c2s"], c.times["s2c"], t0, c.last_ts))
        rows = [[escape(p), "client→server" if d == "c2s" else "server→client", escape(cmd), f"{n:,}"]
                for (p, d, cmd), n in sorted(c.commands.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][2]))]
        out.append("<h3>Commands</h3>" + _table(["protocol", "direction", "command", "frames"], rows, {3}))
    if c.latencies:
        out.append("<h3>Request-to-response latency</h3>"
                   + _table(["protocol", "request", "response", "count", "min", "median", "p95", "max"],
                            _latency_rows(c), {3, 4, 5, 6, 7})
                   + svg.latency_histogram([s for v in c.latencies.values() for s in v]))
    if c.conversations:
        shown = [v for v in c.conversations if v.findings][:CONVERSATION_ROWS]
        shown += [v for v in c.conversations if not v.findings][:CONVERSATION_ROWS - len(shown)]
        shown.sort(key=lambda v: v.info.id)
        rows = [[str(v.info.id), escape(fmt_endpoint(v.info.client)), escape(fmt_endpoint(v.info.server)),
                 escape(v.info.protocol or "undecoded"), f"{v.info.frames:,}",
                 f"{v.info.bytes_c2s + v.info.bytes_s2c:,}", str(len(v.findings)),
                 f'<span class="mono">{escape(v.info.community_id)}</span>'] for v in shown]
        out.append("<h3>Conversations</h3>" + _table(["flow", "client", "server", "protocol", "frames", "bytes",
                                                      "findings", "community id"], rows, {0, 4, 5, 6}))
        if len(shown) < len(c.conversations):
            out.append(f'<p class="muted">{len(c.conversations) - len(shown):,} more conversations without '
                       f"findings are in the JSON report (--json).</p>")
        laddered = [v for v in c.conversations if v.arrows is not None or v.info.protocol is None]
        if len(c.conversations) > c.ladder_limit:
            out.append(f'<p class="muted">Ladder diagrams for the first {c.ladder_limit} conversations; the '
                       f"findings of every conversation are in the findings table.</p>")
        out.append("<h3>Ladder diagrams</h3>" + "".join(_conversation(c, v, t0) for v in laddered))
    out.append("</section>")
    return "".join(out)


def html_report(result: CheckResult, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    verdict = "PASS" if result.exit_code == 0 else "FAIL" if result.exit_code == 1 else "UNUSABLE INPUT"
    suppressed = (f"; {plural(result.suppressed, 'known finding')} left out by the baseline"
                  if result.suppressed else "")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>streamproto check: {verdict}</title><style>{CSS}</style></head><body>"
            f"<header><h1>streamproto check</h1>{_verdict(result)}"
            f"<p>{plural(len(result.captures), 'capture')}, failing on {escape(str(result.threshold))} and above"
            f"{suppressed}; made {stamp}</p></header><main>"
            + _summary(result) + _findings(result) + "".join(_capture(c) for c in result.captures)
            + "</main></body></html>\n")
