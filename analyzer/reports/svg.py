"""Inline SVG for the HTML report: ladder diagrams of conversations and two small charts (frames
over time, latency distribution). Plain strings, no scripts, nothing fetched."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from html import escape as html_escape

from analyzer.api import Finding
from analyzer.reports.results import Arrow
from analyzer.textsafe import safe

COLOR = {"error": "#c62828", "warning": "#e08a00", "note": "#1f6fb2", None: "#555"}
DIRECTION_COLOR = {"c2s": "#3b6fb6", "s2c": "#2e8b57"}

# Ladder geometry (pixels): a column for packet numbers and times, the two lanes, then the findings.
ROW = 28
TOP = 56
X_CLIENT = 170
X_SERVER = 560
X_NOTES = 580
WIDTH = 1180
#: Characters of finding text beside an arrow (the whole text is its tooltip and in the findings table).
NOTE_CHARS = 70


def escape(text: str) -> str:
    """Text for the page: control characters and bidi overrides from the wire made visible (a
    browser would drop or apply them), lone surrogates (undecodable bytes) as ``\\xNN`` (UTF-8
    cannot encode them), then HTML-escaped."""
    return html_escape(safe(text))


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def worst(findings: Sequence[Finding]) -> str | None:
    return str(max(findings, key=lambda f: f.severity.rank).severity) if findings else None


def _defs() -> str:
    markers = "".join(
        f'<marker id="ah-{name}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{color}"/></marker>'
        for name, color in (("error", COLOR["error"]), ("warning", COLOR["warning"]), ("note", COLOR["note"]),
                            ("plain", COLOR[None])))
    return f"<defs>{markers}</defs>"


def ladder(arrows: Sequence[Arrow], client: str, server: str, protocol: str, t0: float,
           events: Sequence[Finding] = ()) -> str:
    """Client and server lanes, one arrow per frame kept (``arrows``, with their conversation
    positions; the last frame is always kept), gaps of frames not kept drawn as one collapsed row
    saying how many. ``events``:
    findings about a packet but no frame (capture loss, ...), drawn as rows across the lanes
    where their packet falls."""
    rows: list[str] = []
    y = TOP
    previous = 0
    pending = sorted(events, key=lambda f: f.frame or 0)
    for a in arrows:
        if a.index > previous + 1:
            rows.append(_gap(y, a.index - previous - 1))
            y += ROW
        while pending and (pending[0].frame or 0) <= a.packet:
            rows.append(_event(pending.pop(0), y))
            y += ROW
        rows.append(_arrow(a, y, t0))
        y += ROW
        previous = a.index
    for f in pending:
        rows.append(_event(f, y))
        y += ROW
    height = y + 10
    head = (f'<text x="{X_CLIENT}" y="18" class="lane">client {escape(client)}</text>'
            f'<text x="{X_SERVER}" y="18" class="lane">server {escape(server)}</text>'
            f'<text x="{(X_CLIENT + X_SERVER) // 2}" y="38" class="proto">{escape(protocol)}</text>'
            f'<text x="8" y="38" class="hdr">packet  time</text>'
            f'<text x="{X_NOTES}" y="38" class="hdr" text-anchor="start">findings</text>')
    lanes = (f'<line x1="{X_CLIENT}" y1="{TOP - 14}" x2="{X_CLIENT}" y2="{height}" class="lanel"/>'
             f'<line x1="{X_SERVER}" y1="{TOP - 14}" x2="{X_SERVER}" y2="{height}" class="lanel"/>')
    return (f'<svg class="ladder" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" role="img" aria-label="ladder diagram">{_defs()}{head}{lanes}'
            + "".join(rows) + "</svg>")


def _gap(y: int, n: int) -> str:
    mid = (X_CLIENT + X_SERVER) // 2
    return (f'<g class="gap"><line x1="{X_CLIENT}" y1="{y}" x2="{X_SERVER}" y2="{y}" stroke-dasharray="2 6"/>'
            f'<text x="{mid}" y="{y - 4}">⋯ {n:,} frame{"s" if n != 1 else ""} not drawn ⋯</text></g>')


def _arrow(a: Arrow, y: int, t0: float) -> str:
    sev = worst(a.findings)
    color = COLOR[sev]
    x1, x2 = (X_CLIENT, X_SERVER) if a.direction == "c2s" else (X_SERVER, X_CLIENT)
    label = a.info or a.command
    if a.latency is not None:
        label += f"  ({fmt_seconds(a.latency)})"
    title = escape(f"#{a.packet} {a.direction} {a.command}: {a.info} ({a.size} bytes)")
    parts = [f'<g class="frame {sev or ""}"><title>{title}</title>',
             f'<text x="8" y="{y + 4}" class="pkt">#{a.packet}</text>',
             f'<text x="64" y="{y + 4}" class="ts">+{a.ts - t0:.6f}</text>',
             f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{color}" '
             f'stroke-width="{2.2 if sev else 1.4}" marker-end="url(#ah-{sev or "plain"})"/>',
             f'<text x="{(X_CLIENT + X_SERVER) // 2}" y="{y - 5}" class="lbl">{escape(_short(label, 52))}</text>']
    if a.findings:
        parts.append(f'<circle cx="{x2}" cy="{y}" r="5" fill="{color}"/>')
        text = "; ".join(f"{f.id}: {f.message}" for f in a.findings)
        parts.append(f'<text x="{X_NOTES}" y="{y + 4}" class="note" fill="{color}">'
                     f'{"▲" if sev != "note" else "●"} {escape(_short(text, NOTE_CHARS))}</text>')
    parts.append("</g>")
    return "".join(parts)


def _event(f: Finding, y: int) -> str:
    """A finding about a packet rather than a frame: a dashed marker across both lanes."""
    sev = str(f.severity)
    color = COLOR[sev]
    return (f'<g class="event {sev}"><title>{escape(f"packet {f.frame}: {f.id}: {f.message}")}</title>'
            f'<text x="8" y="{y + 4}" class="pkt">#{f.frame}</text>'
            f'<line x1="{X_CLIENT}" y1="{y}" x2="{X_SERVER}" y2="{y}" stroke="{color}" stroke-width="1.5" '
            f'stroke-dasharray="7 4"/>'
            f'<text x="{(X_CLIENT + X_SERVER) // 2}" y="{y - 5}" class="lbl" fill="{color}">{escape(f.id)}</text>'
            f'<text x="{X_NOTES}" y="{y + 4}" class="note" fill="{color}">▲ {escape(_short(f.message, NOTE_CHARS))}'
            f"</text></g>")


def fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1 and round(s * 1e3) == s * 1e3:
        return f"{s * 1e3:.0f} ms"  # the histogram's ticks: 1 ms, 10 ms, 100 ms
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.0f} s" if s == int(s) else f"{s:.3f} s"


def _axes(w: int, h: int, left: int, bottom: int, ymax: int) -> str:
    return (f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" class="axis"/>'
            f'<line x1="{left}" y1="10" x2="{left}" y2="{h - bottom}" class="axis"/>'
            f'<text x="{left - 6}" y="16" class="tick" text-anchor="end">{ymax:,}</text>'
            f'<text x="{left - 6}" y="{h - bottom}" class="tick" text-anchor="end">0</text>')


def frames_over_time(c2s: Sequence[float], s2c: Sequence[float], t0: float, t1: float, buckets: int = 60) -> str:
    """Stacked bars of frames per time slice, client-to-server and server-to-client."""
    w, h, left, bottom = 720, 200, 56, 34
    span = max(t1 - t0, 1e-6)
    edges = [t0 + span * i / buckets for i in range(buckets + 1)]
    counts = []
    for times in (sorted(c2s), sorted(s2c)):
        at = [bisect_left(times, e) for e in edges[1:-1]]
        cuts = [0, *at, len(times)]
        counts.append([cuts[i + 1] - cuts[i] for i in range(buckets)])
    ymax = max([a + b for a, b in zip(*counts, strict=True)] + [1])
    bw = (w - left - 10) / buckets
    bars = []
    for i in range(buckets):
        base = h - bottom
        for d, n in (("c2s", counts[0][i]), ("s2c", counts[1][i])):
            if n:
                bh = (h - bottom - 10) * n / ymax
                base -= bh
                bars.append(f'<rect x="{left + i * bw:.1f}" y="{base:.1f}" width="{max(bw - 1, 1):.1f}" '
                            f'height="{bh:.1f}" fill="{DIRECTION_COLOR[d]}"><title>{n} {d} frames at '
                            f'+{edges[i] - t0:.3f} s</title></rect>')
    labels = (f'<text x="{left}" y="{h - bottom + 16}" class="tick">+0 s</text>'
              f'<text x="{w - 10}" y="{h - bottom + 16}" class="tick" text-anchor="end">+{span:.3f} s</text>'
              f'<text x="{w // 2}" y="{h - 4}" class="tick" text-anchor="middle">capture time '
              f'(<tspan fill="{DIRECTION_COLOR["c2s"]}">■ client→server</tspan> '
              f'<tspan fill="{DIRECTION_COLOR["s2c"]}">■ server→client</tspan>)</text>')
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
            f'height="{h}" role="img" aria-label="frames over time">{_axes(w, h, left, bottom, ymax)}'
            + "".join(bars) + labels + "</svg>")


#: Latency histogram: four buckets per decade from 1 µs to 100 s.
_DECADES = range(-6, 2)
_PER_DECADE = 4


def latency_histogram(samples: Sequence[float]) -> str:
    w, h, left, bottom = 720, 200, 56, 34
    lo, n = _DECADES[0], len(_DECADES) * _PER_DECADE
    counts = [0] * n
    for s in samples:
        i = int((math.log10(s) - lo) * _PER_DECADE) if s > 0 else 0
        counts[min(max(i, 0), n - 1)] += 1
    ymax = max(counts + [1])
    bw = (w - left - 10) / n
    bars = []
    for i, k in enumerate(counts):
        if k:
            bh = (h - bottom - 10) * k / ymax
            lo_s = 10 ** (lo + i / _PER_DECADE)
            hi_s = 10 ** (lo + (i + 1) / _PER_DECADE)
            bars.append(f'<rect x="{left + i * bw:.1f}" y="{h - bottom - bh:.1f}" width="{bw - 1:.1f}" '
                        f'height="{bh:.1f}" fill="#7b52ab"><title>{k} responses in {fmt_seconds(lo_s)} – '
                        f'{fmt_seconds(hi_s)}</title></rect>')
    ticks = "".join(f'<text x="{left + d * _PER_DECADE * bw:.1f}" y="{h - bottom + 16}" class="tick" '
                    f'text-anchor="middle">{fmt_seconds(10.0 ** (lo + d))}</text>' for d in range(len(_DECADES)))
    caption = (f'<text x="{w // 2}" y="{h - 4}" class="tick" text-anchor="middle">request-to-response latency '
               f'(log scale; {len(samples):,} responses)</text>')
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
            f'height="{h}" role="img" aria-label="latency distribution">{_axes(w, h, left, bottom, ymax)}'
            + "".join(bars) + ticks + caption + "</svg>")
