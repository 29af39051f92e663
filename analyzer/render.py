"""Human output: the annotated tree and the one-line summary, coloured only on a terminal.

Every line goes through :class:`Output`, which passes all of its text through
:func:`analyzer.textsafe.safe`: whatever a capture holds (field names, values, Info lines,
finding messages, file names), no control character or terminal escape reaches the terminal raw.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from analyzer.api import Field, Finding, Frame, Severity
from analyzer.bytevalue import printable
from analyzer.linking import Links
from analyzer.textsafe import clip, encodable, safe

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.NOTE: "cyan"}
SEVERITY_MARK = {Severity.ERROR: "E", Severity.WARNING: "W", Severity.NOTE: "N"}
ARROW = {"c2s": "→", "s2c": "←"}
ASCII_ARROW = {"c2s": "->", "s2c": "<-"}

#: Longest Info line, display text or string value shown in a text view (longer ones say their length).
TEXT_LIMIT = 512

Part = tuple[str, str | None]


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal; ``NO_COLOR`` (no-color.org) turns it off, ``FORCE_COLOR`` on even in a
    pipe (a non-empty value; NO_COLOR wins when both are set)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def arrows_for(stream: TextIO) -> dict[str, str]:
    """The direction arrows, in ASCII when the stream cannot encode them (PYTHONIOENCODING=ascii,
    a C locale)."""
    return ARROW if encodable("→←", getattr(stream, "encoding", None)) else ASCII_ARROW


class Output:
    """Writes styled lines: through rich on a terminal, as plain text otherwise; every part made
    safe first."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        if color is None:
            color = use_color(self.stream)
        self.arrows = arrows_for(self.stream)
        self.console = None
        if color:
            from rich.console import Console

            self.console = Console(file=self.stream, highlight=False, soft_wrap=True, emoji=False,
                                   force_terminal=True, markup=False)

    def line(self, *parts: Part) -> None:
        if self.console is None:
            self.stream.write(safe("".join(p[0] for p in parts)) + "\n")
            return
        from rich.text import Text

        text = Text()
        for s, style in parts:
            text.append(safe(s), style=style)
        self.console.print(text)


def show_value(f: Field, limit: int = 64) -> str:
    v = f.value
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = bytes(v)
        try:
            text = raw.decode("utf-8")
            if printable(text):
                shown = text if len(text) <= limit else text[:limit] + "…"
                return repr(shown) + (f" ({len(raw)} bytes)" if len(raw) > limit else "")
        except UnicodeDecodeError:
            pass
        h = raw[:limit // 2].hex(" ")
        return f"{h}{' …' if len(raw) > limit // 2 else ''} ({len(raw)} bytes)"
    if isinstance(v, str):
        # repr escapes what is not printable; the length says how much a long value was cut.
        return repr(v) if len(v) <= limit * 2 else repr(v[:limit * 2] + "…") + f" ({len(v)} chars)"
    if v is None:
        return "null" if f.display is None else ""
    return clip(str(v), TEXT_LIMIT)


def endpoints(fr: Frame, arrows: dict[str, str] = ARROW) -> str:
    """Client always on the left, the arrow saying which way the frame went (a ladder diagram's reading)."""
    if fr.direction == "s2c":
        return f"{fr.dst} {arrows['s2c']} {fr.src}"
    return f"{fr.src} {arrows['c2s']} {fr.dst}"


def _hex_span(data: bytes | None, f: Field) -> str:
    if data is None or f.offset < 0 or f.size <= 0:
        return ""
    span = data[f.offset:f.offset + min(f.size, 16)]
    more = " …" if f.size > 16 else ""
    return f"  | {span.hex(' ')}{more}"


class Clock:
    """Frame times as tshark's ``-t`` formats them: ``r`` since the first packet (default), ``a``
    local time of day, ``ad`` local date and time, ``u``/``ud`` the same in UTC, ``e`` epoch
    seconds, ``d`` since the previous frame shown."""

    FORMATS = ("r", "a", "ad", "u", "ud", "e", "d")

    def __init__(self, mode: str = "r", t0: float = 0.0) -> None:
        if mode not in self.FORMATS:
            raise ValueError(f"unknown time format {mode!r} (one of {', '.join(self.FORMATS)})")
        self.mode = mode
        self.t0 = t0
        self.prev: float | None = None

    def __call__(self, ts: float) -> str:
        mode = self.mode
        if mode == "r":
            return f"{ts - self.t0:.6f}"
        if mode == "e":
            return f"{ts:.6f}"
        if mode == "d":
            prev, self.prev = self.prev, ts
            return f"{0.0 if prev is None else ts - prev:.6f}"
        t = time.gmtime(ts) if mode in ("u", "ud") else time.localtime(ts)
        micros = f"{ts % 1:.6f}"[1:]
        return time.strftime("%Y-%m-%d %H:%M:%S" if mode in ("ad", "ud") else "%H:%M:%S", t) + micros


def packet_label(frame: int | None, file: str | None) -> str:
    return f"{file} #{frame}" if file is not None else f"#{frame}"


def ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.3f} ms"


class TreeRenderer:
    def __init__(self, out: Output, t0: float, hexdump: bool = False, clock: Clock | None = None) -> None:
        self.out = out
        self.clock = clock or Clock("r", t0)
        self.hexdump = hexdump

    @property
    def t0(self) -> float:
        return self.clock.t0

    @t0.setter
    def t0(self, value: float) -> None:
        self.clock.t0 = value

    def frame(self, fr: Frame, links: Links | None = None) -> None:
        o = self.out
        first, last = fr.packets
        pk = f"#{last}" if first == last else f"#{last} [{first}-{last}]"
        if fr.file is not None:  # several files: packet numbers count within each file
            pk = f"{fr.file} {pk}"
        when = self.clock(fr.ts)
        o.line((f"{pk} ", "bold"), (f"{'+' if self.clock.mode in ('r', 'd') else ''}{when}"
                                    f"{'s' if self.clock.mode in ('r', 'd', 'e') else ''} ", "dim"),
               (f"flow {fr.flow} ", "dim"), (endpoints(fr, o.arrows) + " ", None),
               (f"{fr.protocol}{'/' + fr.dialect if fr.dialect else ''} ", "magenta"),
               (f"len={fr.size}", "dim"))
        # The Info line names the command in the protocol's own words; without one, the command name.
        head, _, rest = clip(fr.info or fr.command, TEXT_LIMIT).partition(" ")
        o.line(("  ", None), (head, "bold green"), (" " + rest if rest else "", None))
        if links is not None:
            for text in link_texts(links):
                o.line(("    ", None), (f"[{text}]", "cyan"))
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
        name = clip(f.name, 128)
        if f.children is not None:
            count = f" [{f.value}]" if f.is_list and f.value is not None else ""
            extra = f" ({clip(f.display, TEXT_LIMIT)})" if f.display else ""
            self.out.line((pad, None), (where, "dim"), (name, "blue"), (count + extra, None))
            for c in f.children:
                self._field(c, depth + 1, data)
            return
        shown = show_value(f)
        disp = f" ({clip(f.display, TEXT_LIMIT)})" if f.display else ""
        hx = _hex_span(data, f) if self.hexdump else ""
        self.out.line((pad, None), (where, "dim"), (name, "blue"), (": " + shown + disp, None), (hx, "dim"))

    def finding(self, f: Finding, indent: int = 0) -> None:
        pad = "  " * indent
        where = ""
        if indent == 0:
            where = f"flow {f.flow} " if f.flow is not None else "capture "
            if f.frame is not None:
                where += f"{f.file} #{f.frame} " if f.file is not None else f"#{f.frame} "
        self.out.line((pad, None), (f"[{SEVERITY_MARK[f.severity]}] {f.severity}: ", SEVERITY_STYLE[f.severity]),
                      (where, "dim"), (clip(f.message, TEXT_LIMIT), None), (f"  <{f.id}>", "dim"))


def link_texts(links: Links) -> list[str]:
    """Wireshark's "[Response in: 12]" and "[Request in: 11]", with the time between them."""
    texts = []
    if links.response_frame is not None:
        texts.append(f"response in {packet_label(links.response_frame, links.response_file)}"
                     + (f" ({ms(links.latency)})" if links.latency is not None else ""))
    if links.request_frame is not None:
        texts.append(f"request in {packet_label(links.request_frame, links.request_file)}"
                     + (f" ({ms(links.latency)} earlier)" if links.latency is not None else ""))
    return texts


def link_suffix(links: Links) -> str:
    """What a summary line adds for a frame's links: "  [...]" of :func:`link_texts`, made safe.
    The usual link (one file, one end, its time) is formatted straight away: a third of the cost
    on a capture where every other line has one (tests/test_summary_line.py holds both alike)."""
    lat = links.latency
    if lat is not None and links.request_file is None and links.response_file is None:
        rf, qf = links.response_frame, links.request_frame
        if qf is None and rf is not None:
            return "  [response in #%d (%.3f ms)]" % (rf, lat * 1000)  # noqa: UP031
        if rf is None and qf is not None:
            return "  [request in #%d (%.3f ms earlier)]" % (qf, lat * 1000)  # noqa: UP031
    return safe(f"  [{'; '.join(link_texts(links))}]")


class SummaryRenderer:
    def __init__(self, out: Output, t0: float, clock: Clock | None = None) -> None:
        self.out = out
        self.clock = clock or Clock("r", t0)
        #: (src, dst, direction, protocol) -> the line's middle, made safe once per direction.
        self._mids: dict[tuple[str, str, str, str], str] = {}
        #: The last line's packet number and relative time ("%7d %11.6f"), with the packet, time
        #: and t0 it was made for: the frames of one packet share it.
        self._head = ("", None, None, None)
        #: frame size -> "%7d " of it: sizes repeat (a producer's messages are alike).
        self._sizes: dict[int, str] = {}

    @property
    def t0(self) -> float:
        return self.clock.t0

    @t0.setter
    def t0(self, value: float) -> None:
        self.clock.t0 = value

    def frame(self, fr: Frame, links: Links | None = None) -> None:
        out = self.out
        if out.console is None:
            # Plain text (a pipe or file, the bulk case): the same line as below, written at once.
            # safe() escapes character by character, so the parts that cannot need it (numbers, the
            # time) skip it and the endpoints and protocol go through it once per direction.
            key = (fr.src, fr.dst, fr.direction, fr.protocol)
            mid = self._mids.get(key)
            if mid is None:
                if len(self._mids) >= 4096:  # many short conversations: keep the table small
                    self._mids.clear()
                mid = self._mids[key] = safe(f" {endpoints(fr, out.arrows)} {fr.protocol:<16}")
            clock = self.clock
            info = fr.info or fr.command
            if len(info) > TEXT_LIMIT:
                info = clip(info, TEXT_LIMIT)
            if not info.isprintable():  # safe()'s own first test, without the call for most lines
                info = safe(info)
            if links is not None:
                info += link_suffix(links)
            # The line is "%7d %11.6f%s%7d %s\n" % (packet, time, mid, size, info), put together
            # from parts made once for many lines: formatting numbers is most of a line's cost.
            # printf-style where formatted: a third cheaper than f-strings with format specs (the
            # same text for ints and floats, nan and inf included).
            if clock.mode == "r":  # the default, relative seconds (other clocks may keep state)
                number, ts, t0 = fr.packets[1], fr.ts, clock.t0
                head, hnumber, hts, ht0 = self._head
                if number != hnumber or ts != hts or t0 != ht0:
                    head = "%7d %11.6f" % (number, ts - t0)  # noqa: UP031
                    self._head = (head, number, ts, t0)
            else:
                head = "%7d %11s" % (fr.packets[1], clock(fr.ts))  # noqa: UP031
            size = self._sizes.get(fr.size)
            if size is None:
                if len(self._sizes) >= 4096:
                    self._sizes.clear()
                size = self._sizes[fr.size] = "%7d " % fr.size  # noqa: UP031
            text = f"{head}{mid}{size}{info}\n"  # one string built at once: cheaper than "+"s
            if fr.file is not None:
                text = safe(f"{fr.file} ") + text
            out.stream.write(text)
        else:
            file: list[Part] = [(f"{fr.file} ", "dim")] if fr.file is not None else []
            link: list[Part] = []
            if links is not None:
                link = [(f"  [{'; '.join(link_texts(links))}]", "cyan")]
            out.line(*file, (f"{fr.packets[1]:>7} ", None), (f"{self.clock(fr.ts):>11} ", "dim"),
                     (endpoints(fr, out.arrows) + " ", None),
                     (f"{fr.protocol:<16}", "magenta"), (f"{fr.size:>7} ", "dim"),
                     (clip(fr.info or fr.command, TEXT_LIMIT), None), *link)
        # Each finding under its frame, as the tree shows them: the id and what is wrong.
        for f in fr.findings:
            self.out.line((f"{'':>9}", None), (f"[{SEVERITY_MARK[f.severity]}] {f.severity}: ", SEVERITY_STYLE[f.severity]),
                          (clip(f.message, TEXT_LIMIT), None), (f"  <{f.id}>", "dim"))

    def finding(self, f: Finding) -> None:
        where = f"flow {f.flow}" if f.flow is not None else "capture"
        if f.frame:
            where += f" {f.file} #{f.frame}" if f.file is not None else f" #{f.frame}"
        self.out.line((f"{'':>7} ", None), (f"[{SEVERITY_MARK[f.severity]}] {f.severity}: ", SEVERITY_STYLE[f.severity]),
                      (f"{where}: {clip(f.message, TEXT_LIMIT)}", None), (f"  <{f.id}>", "dim"))


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
    """A plain aligned table (works the same on terminals and pipes); cells are made safe before
    their widths are measured, so an escaped cell still lines up."""
    cells = [[safe(str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out.line(("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), "bold"))
    for r in cells:
        out.line(("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), None))
