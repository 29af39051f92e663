"""Human output: the annotated tree and the one-line summary, coloured only on a terminal."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from analyzer.api import Field, Finding, Frame, Severity

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.NOTE: "cyan"}
SEVERITY_MARK = {Severity.ERROR: "E", Severity.WARNING: "W", Severity.NOTE: "N"}
ARROW = {"c2s": "→", "s2c": "←"}

Part = tuple[str, str | None]


class Output:
    """Writes styled lines: through rich on a terminal, as plain text otherwise."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        if color is None:
            color = self.stream.isatty()
        self.console = None
        if color:
            from rich.console import Console

            self.console = Console(file=self.stream, highlight=False, soft_wrap=True, emoji=False)

    def line(self, *parts: Part) -> None:
        if self.console is None:
            self.stream.write("".join(p[0] for p in parts) + "\n")
            return
        from rich.text import Text

        text = Text()
        for s, style in parts:
            text.append(s, style=style)
        self.console.print(text)


def show_value(f: Field, limit: int = 64) -> str:
    v = f.value
    if isinstance(v, (bytes, bytearray)):
        raw = bytes(v)
        try:
            text = raw.decode("utf-8")
            if all(c.isprintable() or c in "\r\n\t" for c in text):
                shown = text if len(text) <= limit else text[:limit] + "…"
                return repr(shown) + (f" ({len(raw)} bytes)" if len(raw) > limit else "")
        except UnicodeDecodeError:
            pass
        h = raw[:limit // 2].hex(" ")
        return f"{h}{' …' if len(raw) > limit // 2 else ''} ({len(raw)} bytes)"
    if isinstance(v, str):
        return repr(v if len(v) <= limit * 2 else v[:limit * 2] + "…")
    if v is None:
        return "null" if f.display is None else ""
    return str(v)


def endpoints(fr: Frame) -> str:
    """Client always on the left, the arrow saying which way the frame went (a ladder diagram's reading)."""
    if fr.direction == "s2c":
        return f"{fr.dst} {ARROW['s2c']} {fr.src}"
    return f"{fr.src} {ARROW['c2s']} {fr.dst}"


def _hex_span(data: bytes | None, f: Field) -> str:
    if data is None or f.offset < 0 or f.size <= 0:
        return ""
    span = data[f.offset:f.offset + min(f.size, 16)]
    more = " …" if f.size > 16 else ""
    return f"  | {span.hex(' ')}{more}"


class TreeRenderer:
    def __init__(self, out: Output, t0: float, hexdump: bool = False) -> None:
        self.out = out
        self.t0 = t0
        self.hexdump = hexdump

    def frame(self, fr: Frame) -> None:
        o = self.out
        first, last = fr.packets
        pk = f"#{last}" if first == last else f"#{last} [{first}-{last}]"
        if fr.file is not None:  # several files: packet numbers count within each file
            pk = f"{fr.file} {pk}"
        rel = fr.ts - self.t0
        o.line((f"{pk} ", "bold"), (f"+{rel:.6f}s ", "dim"), (f"flow {fr.flow} ", "dim"),
               (endpoints(fr) + " ", None),
               (f"{fr.protocol}{'/' + fr.dialect if fr.dialect else ''} ", "magenta"),
               (f"len={fr.size}", "dim"))
        # The Info line names the command in the protocol's own words; without one, the command name.
        head, _, rest = (fr.info or fr.command).partition(" ")
        o.line(("  ", None), (head, "bold green"), (" " + rest if rest else "", None))
        for f in fr.fields:
            self._field(f, 2, fr.data)
        for finding in fr.findings:
            self.finding(finding, indent=2)
        if self.hexdump and fr.data:
            for row in hexdump_lines(fr.data):
                o.line(("    " + row, "dim"))

    def _field(self, f: Field, depth: int, data: bytes | None) -> None:
        pad = "  " * depth
        where = f"[{f.offset}+{f.size}] " if f.offset >= 0 else ""
        if f.children is not None:
            count = f" [{f.value}]" if f.is_list and f.value is not None else ""
            extra = f" ({f.display})" if f.display else ""
            self.out.line((pad, None), (where, "dim"), (f.name, "blue"), (count + extra, None))
            for c in f.children:
                self._field(c, depth + 1, data)
            return
        shown = show_value(f)
        disp = f" ({f.display})" if f.display else ""
        hx = _hex_span(data, f) if self.hexdump else ""
        self.out.line((pad, None), (where, "dim"), (f.name, "blue"), (": " + shown + disp, None), (hx, "dim"))

    def finding(self, f: Finding, indent: int = 0) -> None:
        pad = "  " * indent
        where = ""
        if indent == 0:
            where = f"flow {f.flow} " if f.flow is not None else "capture "
            if f.frame is not None:
                where += f"{f.file} #{f.frame} " if f.file is not None else f"#{f.frame} "
        self.out.line((pad, None), (f"[{SEVERITY_MARK[f.severity]}] {f.severity}: ", SEVERITY_STYLE[f.severity]),
                      (where, "dim"), (f.message, None), (f"  <{f.id}>", "dim"))


class SummaryRenderer:
    def __init__(self, out: Output, t0: float) -> None:
        self.out = out
        self.t0 = t0

    def frame(self, fr: Frame) -> None:
        worst = max((f.severity for f in fr.findings), key=lambda s: s.rank, default=None)
        mark: list[Part] = []
        if worst is not None:
            mark = [(f"  [{len(fr.findings)} finding{'s' * (len(fr.findings) != 1)}]", SEVERITY_STYLE[worst])]
        file: list[Part] = [(f"{fr.file} ", "dim")] if fr.file is not None else []
        self.out.line(*file, (f"{fr.packets[1]:>7} ", None), (f"{fr.ts - self.t0:>11.6f} ", "dim"),
                      (endpoints(fr) + " ", None),
                      (f"{fr.protocol:<16}", "magenta"), (f"{fr.size:>7} ", "dim"),
                      (fr.info or fr.command, None), *mark)

    def finding(self, f: Finding) -> None:
        where = f"flow {f.flow}" if f.flow is not None else "capture"
        if f.frame:
            where += f" {f.file} #{f.frame}" if f.file is not None else f" #{f.frame}"
        self.out.line((f"{'':>7} ", None), (f"[{SEVERITY_MARK[f.severity]}] {f.severity}: ", SEVERITY_STYLE[f.severity]),
                      (f"{where}: {f.message}", None), (f"  <{f.id}>", "dim"))


def hexdump_lines(data: bytes, limit: int = 65536) -> list[str]:
    rows = []
    for off in range(0, min(len(data), limit), 16):
        chunk = data[off:off + 16]
        hx = chunk.hex(" ")
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{off:06x}  {hx:<47}  {asc}")
    if len(data) > limit:
        rows.append(f"… {len(data) - limit} more bytes")
    return rows


def table(out: Output, headers: list[str], rows: list[list[Any]]) -> None:
    """A plain aligned table (works the same on terminals and pipes)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out.line(("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), "bold"))
    for r in cells:
        out.line(("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), None))
