"""The `streamproto` command line.

Options follow tshark's and tcpdump's habits (``-r``, ``-Y``, ``-c``, ``-V``, ``-x``, ``-T``,
``-t``, ``-d``, ``-q``); ``-f`` is left free for a capture filter. Every error, usage errors
included, is one line on stderr, ``streamproto: ...``, with exit code 2.
"""

from __future__ import annotations

import copy
import enum
import itertools
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from analyzer.api import Finding, Frame
from analyzer.capture import CaptureError
from analyzer.engine import (
    DEFAULT_IDLE_TIMEOUT,
    ENGINE_RULES,
    Analyzer,
    FlowInfo,
    NoDecodableLinkType,
    fmt_endpoint,
)
from analyzer.filters import DisplayFilter, FilterError
from analyzer.jsonout import JsonWriter, dumps, dumps_event, finding_json, frame_json, set_max_value
from analyzer.linking import Linker, Links
from analyzer.registry import load_dissectors, parse_decode_as, parse_options
from analyzer.render import Clock, Output, SummaryRenderer, TreeRenderer, table
from analyzer.stream_input import is_stream, read_stream
from analyzer.textsafe import safe

EPILOG_INSPECT = """\b
Examples:
  streamproto inspect capture.pcap                      every frame as a tree
  streamproto inspect -r capture.pcap -T summary        one line per frame
  streamproto inspect capture.pcap -Y 'flow == 3 and command == "Deliver"'
  streamproto inspect capture.pcap -Y 'amqp091.basic.publish.routing_key contains "order"'
  streamproto inspect capture.pcap -Y 'finding.severity == error' -T summary
  gzip -dc capture.pcap.gz | streamproto inspect - -T jsonl
"""


class _OneLineErrors(TyperGroup):
    """Usage errors as one plain line (``streamproto: ...``, exit 2), not typer's boxed panels,
    on a terminal and in a pipe alike."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None and not getattr(cmd, "_plain_help", False):
            # Plain, man-page-like help: typer escapes "[default: x]" for rich even when rich
            # formatting is off, which would show as "\[default: x]".
            original = cmd.format_help

            def format_help(ctx: click.Context, formatter: click.HelpFormatter) -> None:
                original(ctx, formatter)
                formatter.buffer[:] = [text.replace("\\[", "[") for text in formatter.buffer]

            cmd.format_help = format_help  # type: ignore[method-assign]
            cmd._plain_help = True  # type: ignore[attr-defined]
        return cmd

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx is not None else str(exc))
            sys.exit(0)
        except click.ClickException as exc:
            message = exc.format_message()
            if "'-f'" in message:  # tshark and tcpdump habits: -f is a capture filter there
                message += "; the output format is -T FORMAT (or --format)"
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message += f" (see `{exc.ctx.command_path} --help`)"
            print(f"streamproto: {safe(message)}", file=sys.stderr)
            sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
        except click.exceptions.Abort:
            sys.exit(130)
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(cls=_OneLineErrors, add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Wireshark-style analyzer for message-streaming protocols.\n\n"
                       "Start with `streamproto inspect CAPTURE`; `streamproto COMMAND --help` explains each "
                       "command, with examples.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("streamproto")
        except PackageNotFoundError:
            v = "unknown"
        print(f"streamproto {v}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit")] = False) -> None:
    """Wireshark-style analyzer for message-streaming protocols."""


class Format(enum.StrEnum):
    tree = "tree"
    summary = "summary"
    json = "json"
    jsonl = "jsonl"


def fail(message: str) -> typer.Exit:
    # Escaped too: a message can quote a file name or a filter, which can hold anything.
    print(f"streamproto: {safe(message)}", file=sys.stderr)
    return typer.Exit(2)


def _decode_as_forms(items: Sequence[str]) -> list[str]:
    """tshark's ``-d tcp.port==PORT,PROTO`` as well as ``PORT=PROTO``."""
    out = []
    for item in items:
        if item.startswith("tcp.port==") and "," in item:
            port, _, proto = item[len("tcp.port=="):].partition(",")
            item = f"{port}={proto}"
        out.append(item)
    return out


def _analyzer(decode_as: list[str], idle_timeout: float, options: Sequence[str] = (),
              dialects: Sequence[str] = (), fallback: Any = None) -> Analyzer:
    try:
        dissectors = parse_options(options, dialects, load_dissectors())
        mapping = parse_decode_as(_decode_as_forms(decode_as), dissectors)
    except ValueError as exc:
        raise fail(str(exc)) from None
    if not idle_timeout >= 0:  # also refuses NaN
        raise fail(f"--idle-timeout must be 0 (never) or a positive number of seconds, not {idle_timeout}")
    return Analyzer(dissectors, mapping, idle_timeout=idle_timeout, fallback=fallback)


CaptureArg = Annotated[list[Path], typer.Argument(
    help="pcap or pcapng files (optionally gzip-compressed); several are read as one capture, in the "
         "order of their first packets (as tcpdump -C/-G rotates them); - reads standard input", show_default=False)]
CapturesArg = Annotated[list[Path] | None, typer.Argument(
    help="pcap or pcapng files (optionally gzip-compressed); several are read as one capture, in the "
         "order of their first packets (as tcpdump -C/-G rotates them); - reads standard input", show_default=False)]
ReadOpt = Annotated[list[Path], typer.Option(
    "--read", "-r", metavar="FILE", help="A capture file to read, as tshark -r (repeatable; - for standard input)")]
DecodeAsOpt = Annotated[list[str], typer.Option(
    "--decode-as", "-d", metavar="PORT=PROTO",
    help="Decode TCP port PORT as protocol PROTO (repeatable; tshark's tcp.port==PORT,PROTO works too)")]
OptionOpt = Annotated[list[str], typer.Option(
    "--option", "-o", metavar="PROTO.NAME=VALUE",
    help="Set a dissector option (repeatable; `streamproto protocols` lists them)")]
DialectOpt = Annotated[list[str], typer.Option(
    "--dialect", metavar="PROTO=DIALECT",
    help="Decode PROTO as this dialect instead of detecting it (short for -o PROTO.dialect=DIALECT)")]
IdleOpt = Annotated[float, typer.Option(
    "--idle-timeout", metavar="SECONDS",
    help="Finish a conversation after this long without a packet, in capture time (0: never)")]
FilterOpt = Annotated[str | None, typer.Option(
    "--display-filter", "-Y", metavar="FILTER",
    help="Only frames (and findings) matching this display filter, in Wireshark's syntax, e.g. "
         "'flow == 2 and amqp091.basic.publish', 'finding.severity == error'")]
FlowOpt = Annotated[list[int], typer.Option("--flow", metavar="N", help="Only this conversation (repeatable; see `flows`)")]
ProtocolOpt = Annotated[list[str], typer.Option("--protocol", metavar="NAME", help="Only this protocol (repeatable)")]
# Display options that inspect and live share.
TreeOpt = Annotated[bool, typer.Option("-V", help="The annotated tree of every frame (the default format)")]
HexOpt = Annotated[bool, typer.Option("--hex", "-x", help="Hex dump of each frame, with each field's bytes")]
TimeFormatOpt = Annotated[str, typer.Option(
    "--time-format", "-t", metavar="FORMAT",
    help="Frame times: r since the first packet (default), a local time, ad local date and time, u/ud "
         "the same in UTC, e epoch seconds, d since the previous frame shown")]
OnlyFindingsOpt = Annotated[bool, typer.Option("--only-findings", help="Only frames with findings "
                                               "(short for -Y finding)")]
MaxValueSizeOpt = Annotated[int, typer.Option(
    "--max-value-size", metavar="BYTES",
    help="JSON: longer field values are cut to this many bytes and listed under `truncated` (0: no limit)")]


def _inputs(capture: Sequence[Path] | None, read: Sequence[Path]) -> list[str]:
    """The captures named by arguments and -r, in that order; one error for none, and for standard
    input (or a pipe) mixed with other files (it can only be read once, alone)."""
    paths = [str(p) for p in (*(capture or ()), *read)]
    if not paths:
        raise fail("no capture given (a file, -r FILE, or - for standard input)")
    if len(paths) > 1 and any(is_stream(p) for p in paths):
        raise fail("standard input and pipes can only be read alone, not with other files")
    return paths


def _events(analyzer: Analyzer, paths: list[str]) -> Iterator[Any]:
    if len(paths) == 1 and is_stream(paths[0]):
        return analyzer.run(read_stream(paths[0]))
    return analyzer.run_files(paths)


def _with_progress(events: Iterator[Any], analyzer: Analyzer, paths: list[str]) -> Iterator[Any]:
    """A progress line on stderr while a long capture is read (see :func:`progress_line`); the
    events themselves where there is none (no generator in between: one less per event)."""
    line = progress_line(paths, lambda: (analyzer.packets, analyzer.conversations))
    if line is None:
        return events
    return _shown_with(line, events)


def _shown_with(line: Any, events: Iterator[Any]) -> Iterator[Any]:
    with line:
        yield from events


def progress_line(paths: list[str], counts: Callable[[], tuple[int, int]]) -> Any:
    """A progress line on stderr, as a context manager, or None where there must be none: only
    when stderr is a terminal and stdout is not (output sent to a file or a pipe); never in a pipe,
    never over the output. ``counts`` gives (packets read, conversations seen); the line asks for
    them each time it is redrawn (from rich's refresh thread), so the reader pays nothing."""
    if os.environ.get("STREAMPROTO_NO_PROGRESS") or not _isatty(sys.stderr) or _isatty(sys.stdout):
        return None
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Counts(ProgressColumn):
        def render(self, task: Any) -> Text:
            packets, conversations = counts()
            return Text(f"{packets:,} packets, {conversations:,} conversations")

    total = sum(os.path.getsize(p) for p in paths if not is_stream(p) and os.path.isfile(p))
    progress = Progress(SpinnerColumn(), Counts(), TimeElapsedColumn(),
                        TextColumn(f"({total / 1e6:.1f} MB of captures)" if total else ""),
                        console=Console(file=sys.stderr, force_terminal=True), transient=True)
    progress.add_task("reading")
    return progress


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _run(analyzer: Analyzer, paths: list[str]) -> tuple[Iterator[Any], list[str]]:
    """The events of the captures, and where the reading error (if any) will be put."""
    error: list[str] = []

    def events() -> Iterator[Any]:
        try:
            yield from _with_progress(_events(analyzer, paths), analyzer, paths)
        except CaptureError as exc:
            error.append(str(exc))
        except NoDecodableLinkType as exc:
            error.append(f"{', '.join(paths)}: {exc}")

    return events(), error


def _compile_filter(text: str | None, analyzer: Analyzer) -> DisplayFilter | None:
    if text is None:
        return None
    names: list[str] = []
    commands: dict[str, list[str]] = {}
    for d in analyzer.dissectors.values():
        try:
            names += [f.name for f in d.fields()]
            # Commands are tests too, those without fields included (iggy.ping), as in Wireshark.
            commands[d.name] = [c.name for c in d.commands()]
        except Exception as exc:  # a broken plugin's catalogue: its fields cannot be filtered on
            print(f"streamproto: {d.name}: no field catalogue ({type(exc).__name__}: {exc})", file=sys.stderr)

    def flow_protocol(flow: int | None) -> str | None:
        info = analyzer.flow(flow)
        return None if info is None else info.protocol

    try:
        return DisplayFilter(text, names, analyzer.dissectors, flow_protocol, commands)
    except FilterError as exc:
        raise fail(f"bad display filter: {exc}") from None


def _code_parts(analyzer: Analyzer) -> dict[str, Any]:
    """Protocols whose command code packs several numbers declare how to read it (``code_parts``)."""
    return {name: parts for name, d in analyzer.dissectors.items() if (parts := getattr(d, "code_parts", None))}


@app.command(epilog=EPILOG_INSPECT)
def inspect(
    capture: CapturesArg = None,
    read: ReadOpt = [],  # noqa: B006 - typer needs a literal default
    display_filter: FilterOpt = None,
    format: Annotated[Format, typer.Option("--format", "-T", help="Output format: tree (as -V), summary (one "
                                           "line per frame), json (one document), jsonl (JSON Lines)")] = Format.tree,
    tree: TreeOpt = False,
    flow: FlowOpt = [],  # noqa: B006
    protocol: ProtocolOpt = [],  # noqa: B006
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    max_frames: Annotated[int | None, typer.Option("--max-frames", "-c", metavar="N",
                                                   help="Stop after this many frames")] = None,
    hex: HexOpt = False,
    time_format: TimeFormatOpt = "r",
    only_findings: OnlyFindingsOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No frames or findings: only the closing "
                                        "summary line (or, for json, the flows)")] = False,
    max_value_size: MaxValueSizeOpt = 1 << 20,
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", metavar="N", help="At most N worker processes decoding "
                                             "the conversations (output as with one): N when the conversations spread "
                                             "over them, else 1; default: the machine's cores for a capture of 4 MB or "
                                             "more whose conversations spread over them, else 1", show_default=False)] = None,
) -> None:
    """Decode every frame of every TCP conversation, with conformance findings.

    Frames are printed as they are decoded; a request is printed with the frame of its response
    ("response in #N (1.234 ms)") when the response follows within 2,000 packets and 10 s of capture
    time.
    """
    paths = _inputs(capture, read)
    if jobs is not None and jobs < 1:
        raise fail(f"--jobs must be 1 or more, not {jobs}")
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    # Only frames with findings are shown: the analyzer need not give back the others (it still
    # gives back what the linker needs to name a shown frame's request or response).
    analyzer.findings_only = only_findings
    # A line per frame: the dissectors may leave a clean frame's fields until a filter reads them.
    analyzer.info_lines_only = format is Format.summary and not tree

    def make_display(analyzer: Analyzer) -> Display:
        return Display.from_options(
            analyzer, capture=paths[0] if len(paths) == 1 else paths, display_filter=display_filter, format=format,
            tree=tree, flow=flow, protocol=protocol, max_frames=max_frames, hex=hex, time_format=time_format,
            only_findings=only_findings, quiet=quiet, max_value_size=max_value_size)

    display = make_display(analyzer)
    # One process where the output depends on what was shown before across conversations (-c
    # stops after N frames; -t d times each frame from the previous one shown) and for a stream,
    # which can be read only once.
    if max_frames is None and time_format != "d" and jobs != 1 and not any(is_stream(p) for p in paths):
        from analyzer.job_count import jobs_for

        plan = jobs_for(paths, jobs)
        if plan.jobs > 1:
            # Imported here: multiprocessing costs start-up (15 ms) that one process is spared.
            from analyzer import jobs as parallel

            display.close(parallel.run(plan.jobs, analyzer, display, paths, make_display, _run, _isatty(sys.stdout),
                                       progress=lambda counts: progress_line(paths, counts), placed=plan.placed))
            return
    events, error = _run(analyzer, paths)
    # A bound method, asked when used: the analyzer learns whether it reads several files only once
    # reading starts.
    linker = Linker(analyzer.place, position=lambda: analyzer.packets)

    # The held events after the last (flush runs only when link is exhausted).
    for ev, links in itertools.chain(linker.link(events), linker.flush()):
        if not display.show(ev, links):
            break
    display.close(error)


class Display:
    """What `inspect` shows of the events of a capture, in the chosen format: the selection of
    frames and findings (--flow, --protocol, --only-findings, -Y, -c, -q), each as it comes, and
    the closing part (the JSON document's findings and flows, or the footer line). A class rather
    than inspect's locals so that `streamproto live` shows its events through the same code."""

    def __init__(self, analyzer: Analyzer, format: Format, *, capture: Any, hexdump: bool, clock: Clock,
                 flows: Sequence[int], protocols: Sequence[str], dfilter: DisplayFilter | None,
                 only_findings: bool, max_frames: int | None, quiet: bool) -> None:
        self.analyzer = analyzer
        self.format = format
        self.clock = clock
        self.flows_wanted = set(flows)
        self.protocols_wanted = set(protocols)
        self.dfilter = dfilter
        self.only_findings = only_findings
        self.max_frames = max_frames
        self.quiet = quiet
        self.shown = 0
        self.started = False
        self.out = out = Output()
        tree_view = TreeRenderer(out, 0.0, hexdump=hexdump, clock=clock)
        summary = SummaryRenderer(out, 0.0, clock=clock)
        code_parts = _code_parts(analyzer)
        self.writer: JsonWriter | None = None
        self.spool: Any = None
        self._sep = "\n"  # before the JSON document's next frame
        #: Set by a --jobs worker: where the JSON document's frames and findings go, as text, instead
        #: of the output (see put).
        self.keep: Callable[[bool, str], None] | None = None
        on_frame: Callable[[Frame, Links | None], object]
        on_finding: Callable[[Finding], object]

        if format in (Format.jsonl, Format.json):
            writer = self.writer = JsonWriter(sys.stdout)
            if format is Format.jsonl:
                line = writer.event

                def on_frame(ev: Frame, links: Links | None) -> None:
                    line(frame_json(ev, links, code_parts))

                def on_finding(ev: Finding) -> None:
                    line(finding_json(ev))
            else:
                # One document, streamed: frames are written as they come (memory stays flat, as with
                # JSON Lines); the free-standing findings, which the document lists after the frames,
                # wait in a temporary file meanwhile.
                import tempfile  # here: only the JSON document needs it (4 ms of start-up otherwise)

                self.spool = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogateescape")
                writer.write('{"capture":' + dumps(capture) + ',\n"frames":[')

                def on_frame(ev: Frame, links: Links | None) -> None:
                    obj = frame_json(ev, links, code_parts)
                    if self.keep is not None:
                        self.keep(True, dumps_event(obj))
                    else:  # as put writes it, the JSON's bytes without a round trip through text
                        writer.element(self._sep, obj)
                        self._sep = ",\n"

                def on_finding(ev: Finding) -> None:
                    self.put(False, dumps_event(finding_json(ev)))
        elif format is Format.summary:
            on_frame, on_finding = summary.frame, summary.finding
        else:
            on_frame, on_finding = tree_view.frame, tree_view.finding
        self.on_frame, self.on_finding = on_frame, on_finding

    @classmethod
    def from_options(cls, analyzer: Analyzer, *, capture: Any, display_filter: str | None, format: Format,
                     tree: bool, flow: Sequence[int], protocol: Sequence[str], max_frames: int | None, hex: bool,
                     time_format: str, only_findings: bool, quiet: bool, max_value_size: int) -> Display:
        """The display the options ask for, each option checked (one line and exit 2 when wrong)."""
        for p in protocol:
            if p not in analyzer.dissectors:
                raise fail(f"unknown protocol {p!r} (known: {', '.join(sorted(analyzer.dissectors))})")
        for n in flow:
            if n < 1:
                raise fail(f"--flow must be a conversation number from 1 (see `streamproto flows`), not {n}")
        if max_frames is not None and max_frames < 0:
            raise fail(f"--max-frames must be 0 or more, not {max_frames}")
        if max_value_size < 0:
            raise fail(f"--max-value-size must be 0 (no limit) or more, not {max_value_size}")
        try:
            clock = Clock(time_format)
        except ValueError as exc:
            raise fail(f"-t: {exc}") from None
        if tree:
            format = Format.tree
        dfilter = _compile_filter(display_filter, analyzer)
        set_max_value(max_value_size)
        return cls(analyzer, format, capture=capture, hexdump=hex, clock=clock, flows=flow, protocols=protocol,
                   dfilter=dfilter, only_findings=only_findings, max_frames=max_frames, quiet=quiet)

    def _wanted_finding(self, f: Finding) -> bool:
        if self.flows_wanted and f.flow not in self.flows_wanted:
            return False
        if self.protocols_wanted:
            info = self.analyzer.flow(f.flow)
            if info is None or info.protocol not in self.protocols_wanted:
                return False
        return self.dfilter is None or self.dfilter(f)

    def show(self, ev: Any, links: Links | None) -> bool:
        """Show one event if it is selected; False when -c's count was already reached (stop)."""
        if isinstance(ev, Frame):
            if self.flows_wanted and ev.flow not in self.flows_wanted:
                return True
            if self.protocols_wanted and ev.protocol not in self.protocols_wanted:
                return True
            if self.only_findings and not ev.findings:
                return True
            if self.dfilter is not None and not self.dfilter(ev, links):
                return True
            if self.max_frames is not None and self.shown >= self.max_frames:
                return False
            # Only once something is shown (the first packet's time is set by then and stays):
            # with --only-findings most frames are skipped.
            if not self.started:
                self.clock.t0, self.started = self.analyzer.first_ts or 0.0, True
            self.shown += 1
            if not self.quiet:
                self.on_frame(ev, links)
        elif self._wanted_finding(ev):
            if not self.started:
                self.clock.t0, self.started = self.analyzer.first_ts or 0.0, True
            if not self.quiet:
                self.on_finding(ev)
        return True

    def put(self, frame: bool, text: str) -> None:
        """Write what ``on_frame`` (``frame``) or ``on_finding`` made of an event: the text a
        renderer wrote, or for the JSON document, one frame's or one finding's JSON text (the
        document's own punctuation is added here). Also how ``--jobs`` writes its workers' text; in
        a worker, ``keep`` takes the JSON document's text instead."""
        if self.keep is not None:
            self.keep(frame, text)
            return
        writer = self.writer
        if self.format is Format.json:
            assert writer is not None
            if frame:
                writer.write(self._sep + text)
                self._sep = ",\n"
            else:
                self.spool.write(text + "\n")
        elif writer is not None:
            writer.write(text)
        else:
            self.out.stream.write(text)

    def put_run(self, items: Sequence[tuple[Any, bool, str]]) -> None:
        """:meth:`put` for each of ``items`` (key, frame, text) in turn, in one write where the
        text goes out as it is (every view but the JSON document): how ``--jobs`` writes a run of
        one worker's events."""
        if self.keep is not None or self.format is Format.json:
            for _key, frame, text in items:
                self.put(frame, text)
            return
        # Outside the JSON document put writes a frame's text and a finding's alike.
        self.put(True, "".join([t for _key, _frame, t in items]))

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()
        sys.stdout.flush()

    def close(self, error: Sequence[str]) -> None:
        """The closing part, then the reading error or the conversations asked for but missing
        (one line, exit 2)."""
        analyzer, writer = self.analyzer, self.writer
        flows_wanted, protocols_wanted = self.flows_wanted, self.protocols_wanted
        # Ids, not kept rows: a live analyzer drops old finished conversations' rows.
        missing = sorted(n for n in flows_wanted if n > analyzer.conversations)
        if writer is not None and self.format is Format.json:
            writer.write("\n],\n\"findings\":[")
            spool = self.spool
            assert spool is not None
            spool.seek(0)
            sep = "\n"
            for text in spool:
                writer.write(sep + text.rstrip("\n"))
                sep = ",\n"
            spool.close()
            writer.write("\n],\n\"flows\":[")
            sep = "\n"
            for f in analyzer.flows:
                if (not flows_wanted or f.id in flows_wanted) and (not protocols_wanted or f.protocol in protocols_wanted):
                    writer.write(sep + dumps(flow_json(f)))
                    sep = ",\n"
            writer.write("\n]}\n")
        elif self.format in (Format.tree, Format.summary) and (not error or analyzer.packets):
            self.out.line((footer(analyzer, self.shown, flows_wanted, protocols_wanted), "dim"))
        self.flush()
        if error:
            raise fail(error[0])
        if missing:
            raise fail(f"no conversation {', '.join(map(str, missing))} in this capture (it has "
                       f"{analyzer.conversations}; see `streamproto flows`)")


def footer(analyzer: Analyzer, shown: int, flows: set[int] | Sequence[int] = (),
           protocols: set[str] | Sequence[str] = ()) -> str:
    """The closing line; the counts follow the filters: what --flow / --protocol selected (and the
    capture itself)."""
    totals = dict(analyzer.capture_findings)
    undecoded = 0
    for f in analyzer.flows:
        if flows and f.id not in flows or protocols and f.protocol not in protocols:
            continue
        totals["error"] += f.errors
        totals["warning"] += f.warnings
        totals["note"] += f.notes
        if f.protocol is None and (f.bytes_c2s or f.bytes_s2c):
            undecoded += 1
    if not flows and not protocols:
        # Unfiltered: the analyzer's totals, which count the rows a live analyzer dropped too.
        totals = analyzer.findings_per_severity()
    conversations = f"{analyzer.conversations} TCP conversations"
    if undecoded:
        conversations += f" ({undecoded} undecoded: `streamproto follow N` shows their bytes)"
    return (f"-- {analyzer.packets} packets, {conversations}, {shown} frames shown; "
            f"findings: {totals['error']} errors, {totals['warning']} warnings, {totals['note']} notes")


def flow_json(f: FlowInfo) -> dict:
    return {"flow": f.id, "client": fmt_endpoint(f.client), "server": fmt_endpoint(f.server),
            "community_id": f.community_id, "protocol": f.protocol, "dialect": f.dialect, "packets": f.packets, "frames": f.frames,
            "bytes_c2s": f.bytes_c2s, "bytes_s2c": f.bytes_s2c, "findings": f.findings,
            "first_ts": f.first_ts, "last_ts": f.last_ts,
            "undecoded": f.protocol is None and bool(f.bytes_c2s or f.bytes_s2c)}


EPILOG_FLOWS = """\b
Examples:
  streamproto flows capture.pcap                      the table
  streamproto flows a.pcap b.pcap --json | jq 'select(.undecoded)'
  streamproto flows capture.pcap -d 15552=rabbitmq_stream
"""


@app.command(epilog=EPILOG_FLOWS)
def flows(
    capture: CapturesArg = None,
    read: ReadOpt = [],  # noqa: B006
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    json_out: Annotated[bool, typer.Option("--json", help="JSON Lines, one object per conversation")] = False,
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """One row per TCP conversation: endpoints, protocol, frames, bytes, findings, Community ID.

    A conversation that carried data no dissector claimed shows as `undecoded` (`streamproto follow
    N` shows its bytes; --decode-as PORT=PROTO forces a protocol); one without data as `-`.
    """
    paths = _inputs(capture, read)
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    events, error = _run(analyzer, paths)
    for _ in events:
        pass
    if json_out:
        writer = JsonWriter(sys.stdout)
        for f in analyzer.flows:
            writer.line(flow_json(f))
        writer.flush()
    else:
        out = Output()
        rows = [[f.id, fmt_endpoint(f.client), fmt_endpoint(f.server),
                 protocol_text(f), f.packets, f.frames,
                 f.bytes_c2s, f.bytes_s2c, f.errors, f.warnings, f.notes, f.community_id]
                for f in analyzer.flows]
        c2s = out.arrows["c2s"]
        table(out, ["flow", "client", "server", "protocol", "packets", "frames", f"bytes c{c2s}s",
                    f"bytes s{c2s}c", "errors", "warnings", "notes", "community id"], rows)
    if error:
        raise fail(error[0])


def protocol_text(f: FlowInfo) -> str:
    """A conversation's protocol as `flows` shows it: ``proto/dialect``, ``undecoded`` when it
    carried data no dissector claimed, ``-`` when it carried none."""
    if f.protocol is None:
        return "undecoded" if f.bytes_c2s or f.bytes_s2c else "-"
    return f.protocol + (f"/{f.dialect}" if f.dialect else "")


class StatsFormat(enum.StrEnum):
    table = "table"
    json = "json"


EPILOG_STATS = """\b
Examples:
  streamproto stats capture.pcap                      every table
  streamproto stats capture.pcap --only srt           service response times only
  streamproto stats capture.pcap -Y 'flow == 2' --only commands --only expert
  streamproto stats capture.pcap --interval 0.5 --format json | jq .io
"""


@app.command(epilog=EPILOG_STATS)
def stats(
    capture: CapturesArg = None,
    read: ReadOpt = [],  # noqa: B006
    only: Annotated[list[str], typer.Option(
        "--only", metavar="TABLE", help="Only these tables (repeatable): commands, srt (service response times), "
                                        "expert (findings by rule), conversations, io (frames over time)")] = [],  # noqa: B006
    display_filter: FilterOpt = None,
    interval: Annotated[float | None, typer.Option(
        "--interval", metavar="SECONDS", help="io table: the interval (default: a round one for about 20 rows)")
    ] = None,
    format: Annotated[StatsFormat, typer.Option("--format", "-T", help="table, or one JSON document")
                      ] = StatsFormat.table,
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """Statistics of a capture, as tshark's -z gives them: commands per protocol and direction,
    service response times per request (count, min, mean, p50, p95, max), findings by rule and
    severity (-z expert), conversations with durations (-z conv,tcp), frames over time (-z io,stat).

    A command of its own rather than `inspect -z`: statistics are read once the whole capture is
    read, while inspect prints frames as they come; here --format chooses between the tables and
    JSON, and -Y selects the frames counted.
    """
    from analyzer.stats import SECTIONS, Stats, conversation_rows

    for name in only:
        if name not in SECTIONS:
            raise fail(f"unknown table {name!r} for --only (one of {', '.join(SECTIONS)})")
    if interval is not None and not interval > 0:
        raise fail(f"--interval must be a positive number of seconds, not {interval}")
    paths = _inputs(capture, read)
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    dfilter = _compile_filter(display_filter, analyzer)
    counts = Stats(interval)
    events, error = _run(analyzer, paths)
    for ev in events:
        if dfilter is None or dfilter(ev):
            counts.add(ev)
    wanted = [s for s in SECTIONS if not only or s in only]
    tables: dict[str, Any] = {}
    if "commands" in wanted:
        tables["commands"] = counts.command_rows()
    if "srt" in wanted:
        tables["srt"] = counts.srt_rows()
    if "expert" in wanted:
        tables["expert"] = counts.expert_rows()
    if "conversations" in wanted:
        tables["conversations"] = conversation_rows(analyzer.flows)
    io_interval = None
    if "io" in wanted:
        io_interval, tables["io"] = counts.io_rows()
    if format is StatsFormat.json:
        writer = JsonWriter(sys.stdout)
        doc = {"capture": paths[0] if len(paths) == 1 else paths, "packets": analyzer.packets, **tables}
        if io_interval is not None:
            doc["io_interval"] = io_interval
        writer.line(doc)
        writer.flush()
    else:
        _stats_tables(Output(), tables, io_interval)
    if error:
        raise fail(error[0])


def _stats_tables(out: Output, tables: dict[str, Any], io_interval: float | None) -> None:
    def fmt_ms(x: float) -> str:
        return f"{x * 1000:.3f}"

    arrow = {"c2s": f"c{out.arrows['c2s']}s", "s2c": f"s{out.arrows['c2s']}c"}
    sections: list[tuple[str, list[str], list[list[Any]]]] = []
    if "commands" in tables:
        sections.append(("Commands per protocol and direction", ["protocol", "command", "dir", "frames", "bytes"],
                         [[r["protocol"], r["command"], arrow.get(r["direction"], r["direction"]), r["frames"],
                           r["bytes"]] for r in tables["commands"]]))
    if "srt" in tables:
        sections.append(("Service response times (ms)", ["protocol", "request", "response", "count", "min", "mean",
                                                          "p50", "p95", "max"],
                         [[r["protocol"], r["request"], r["response"], r["count"], *map(fmt_ms, (
                             r["min"], r["mean"], r["p50"], r["p95"], r["max"]))] for r in tables["srt"]]))
    if "expert" in tables:
        sections.append(("Findings by rule (expert info)", ["severity", "count", "id"],
                         [[r["severity"], r["count"], r["id"]] for r in tables["expert"]]))
    if "conversations" in tables:
        sections.append(("Conversations", ["flow", "client", "server", "protocol", "duration s", "packets",
                                           "frames", f"bytes {arrow['c2s']}", f"bytes {arrow['s2c']}", "findings"],
                         [[r["flow"], r["client"], r["server"],
                           (r["protocol"] or "-") + (f"/{r['dialect']}" if r["dialect"] else ""),
                           f"{r['duration']:.6f}", r["packets"], r["frames"], r["bytes_c2s"], r["bytes_s2c"],
                           r["errors"] + r["warnings"] + r["notes"]] for r in tables["conversations"]]))
    if "io" in tables:
        sections.append((f"Frames over time ({io_interval:g} s intervals from the first frame)",
                         ["from s", "to s", "frames", "bytes", "findings"],
                         [[f"{r['start']:g}", f"{r['end']:g}", r["frames"], r["bytes"], r["findings"]]
                          for r in tables["io"]]))
    for i, (title, headers, rows) in enumerate(sections):
        if i:
            out.line(("", None))
        out.line((f"== {title}", "bold"))
        if rows:
            table(out, headers, rows)
        else:
            out.line(("(none)", "dim"))


class FollowFormat(enum.StrEnum):
    ascii = "ascii"
    hex = "hex"
    raw = "raw"


EPILOG_FOLLOW = """\b
Examples:
  streamproto follow 3 capture.pcap                   printable text, server side indented
  streamproto follow 3 capture.pcap --format hex      hex dump of each piece
  streamproto follow 3 capture.pcap --format raw      each piece as one line of hex (tshark's raw)
"""


@app.command(epilog=EPILOG_FOLLOW)
def follow(
    flow_id: Annotated[int, typer.Argument(metavar="FLOW", help="The conversation (see `streamproto flows`)",
                                           show_default=False)],
    capture: CapturesArg = None,
    read: ReadOpt = [],  # noqa: B006
    format: Annotated[FollowFormat, typer.Option("--format", "-T", help="ascii, hex or raw (hex text per piece)")
                      ] = FollowFormat.ascii,
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """One conversation's reassembled bytes, decoded or not, in capture order (tshark's
    -z follow,tcp,ascii,N): the client's pieces at the margin, the server's indented, each
    after a line with its packet, direction and size; lost bytes are marked.
    """
    from analyzer.follow import DATA, Recorder, ascii_text, recorders

    if flow_id < 1:
        raise fail(f"FLOW must be a conversation number from 1 (see `streamproto flows`), not {flow_id}")
    paths = _inputs(capture, read)
    real = _analyzer(decode_as, idle_timeout, option, dialect)
    analyzer = Analyzer(recorders(real.dissectors), real.decode_as, idle_timeout=real.idle_timeout,
                        fallback=Recorder())
    out = Output()
    events, error = _run(analyzer, paths)
    totals = {"c2s": 0, "s2c": 0}
    header = False
    for ev in events:
        if not isinstance(ev, Frame) or ev.flow != flow_id:
            continue
        if not header:
            info = analyzer.flow(flow_id)
            assert info is not None
            out.line((f"=== flow {flow_id}: {fmt_endpoint(info.client)} {out.arrows['c2s']} "
                      f"{fmt_endpoint(info.server)}, {format} ===", "bold"))
            header = True
        d = str(ev.direction)
        pad = "    " if d == "s2c" else ""
        where = f"{ev.file} #{ev.packets[1]}" if ev.file is not None else f"#{ev.packets[1]}"
        if ev.command != DATA:
            out.line((f"{pad}[{where} {d}: {ev.info}]", "yellow"))
            continue
        data = ev.data or b""
        totals[d] += len(data)
        out.line((f"{pad}{where} {d} {len(data)} bytes", "dim"))
        if format is FollowFormat.ascii:
            for text in ascii_text(data).split("\n"):
                out.line((pad + text, None))
        elif format is FollowFormat.hex:
            from analyzer.render import hexdump_lines

            for row in hexdump_lines(data, limit=len(data)):
                out.line((pad + row, None))
        else:
            out.line((pad + data.hex(), None))
    if error:
        raise fail(error[0])
    info = analyzer.flow(flow_id)
    if info is None:
        raise fail(f"no conversation {flow_id} in this capture (it has {len(analyzer.flows)}; "
                   f"see `streamproto flows`)")
    if not header:
        out.line((f"=== flow {flow_id}: {fmt_endpoint(info.client)} {out.arrows['c2s']} "
                  f"{fmt_endpoint(info.server)}: no data ===", "bold"))
    else:
        out.line((f"=== {totals['c2s']} bytes c2s, {totals['s2c']} bytes s2c ===", "bold"))


class SchemaName(enum.StrEnum):
    frame = "frame"
    finding = "finding"


@app.command()
def schema(which: Annotated[SchemaName, typer.Argument(help="frame or finding", show_default=False)]) -> None:
    """The JSON Schema (draft 2020-12) of a frame line or a finding line of `inspect -T jsonl`."""
    from analyzer.json_schema import SCHEMAS

    writer = JsonWriter(sys.stdout)
    writer.write(json.dumps(SCHEMAS[which.value], indent=2) + "\n")
    writer.flush()


@app.command()
def protocols(
    commands: Annotated[bool, typer.Option("--commands/--no-commands", help="List each protocol's commands")] = True,
    machines: Annotated[bool, typer.Option("--machines/--no-machines",
                                           help="Print each protocol's state machines as transition tables")] = True,
) -> None:
    """The registered dissectors, their ports, commands and state machines."""
    out = Output()
    for d in load_dissectors().values():
        ports = ", ".join(str(p) for p in d.default_ports) or "-"
        out.line((d.name, "bold green"), (f"  {d.title}  (ports: {ports})", None))
        for o in d.options:
            choices = f" [{'|'.join(o.choices)}]" if o.choices else ""
            out.line((f"    -o {d.name}.{o.name}={o.default or '…'}{choices}  {o.description}", None))
        if commands:
            rows = [[c.code, c.name, c.direction, c.versions, c.fields] for c in d.commands()]
            if rows:
                table(_Indented(out), ["code", "command", "dir", "versions", "fields"], rows)
        if machines:
            for machine in d.machines():
                for text in machine.describe():
                    out.line(("    " + text, None))
        out.line(("", None))


class _Indented(Output):
    def __init__(self, inner: Output) -> None:
        self.inner = inner

    def line(self, *parts: tuple[str, str | None]) -> None:
        self.inner.line(("    ", None), *parts)


@app.command()
def rules(
    json_out: Annotated[bool, typer.Option("--json", help="JSON Lines, one object per rule")] = False,
) -> None:
    """Every conformance rule of the engine and of every dissector."""
    all_rules = [("engine", r) for r in ENGINE_RULES]
    for d in load_dissectors().values():
        all_rules += [(d.name, r) for r in d.rules()]
    if json_out:
        writer = JsonWriter(sys.stdout)
        for owner, r in all_rules:
            writer.line({"owner": owner, "id": r.id, "severity": str(r.severity), "category": str(r.category),
                         "description": r.description})
        writer.flush()
        return
    table(Output(), ["id", "severity", "category", "description"],
          [[r.id, r.severity, r.category, r.description] for _, r in all_rules])


@app.command()
def fields(
    protocol: Annotated[str | None, typer.Argument(help="Only this protocol's fields", show_default=False)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="JSON Lines, one object per field")] = False,
) -> None:
    """The field catalogue: every field's dotted name, type and description (like `tshark -G fields`)."""
    known = load_dissectors()
    if protocol is not None and protocol not in known:
        raise fail(f"unknown protocol {protocol!r} (known: {', '.join(sorted(known)) or 'none'})")
    defs = [f for d in known.values() if protocol in (None, d.name) for f in d.fields()]
    if json_out:
        writer = JsonWriter(sys.stdout)
        for f in defs:
            writer.line({"name": f.name, "type": f.type, "repeated": f.repeated, "description": f.description})
        writer.flush()
        return
    table(Output(), ["field", "type", "description"],
          [[f.name, f.type + ("[]" if f.repeated else ""), f.description] for f in defs])


#: Standard output's buffer when it is a regular file, and when it is anything else but a terminal
#: (a pipe, /dev/null): JSON output runs to hundreds of MB, and with the 4 KiB or 8 KiB that Python
#: picks, writing 220 MB of JSON Lines to a file took 0.25 s against 0.07 s (to a pipe, larger
#: blocks than the pipe holds gain nothing).
FILE_BUFFER = 1 << 20
PIPE_BUFFER = 1 << 16


def block_buffered(stream: Any) -> Any:
    """``stream`` (standard output) written in large blocks when it is no terminal: a file object
    of its own on the same descriptor with a buffer of FILE_BUFFER or PIPE_BUFFER bytes. Also
    when Python was told to leave it unbuffered (PYTHONUNBUFFERED or -u, which container images
    often set): its text would otherwise go out a system call at a time, one per summary line or
    JSON object (a tenth of a summary's time). The same stream for a terminal, and for one
    without a descriptor. `live` flushes after every batch."""
    if getattr(stream, "buffer", None) is None:
        return stream
    try:
        if stream.isatty():
            return stream
        fd = stream.fileno()
        size = FILE_BUFFER if stat.S_ISREG(os.fstat(fd).st_mode) else PIPE_BUFFER
        stream.flush()  # anything already written goes first
        # closefd=False: the original, still sys.__stdout__, is never closed under it.
        return open(fd, "w", buffering=size, encoding=stream.encoding, errors=stream.errors,  # noqa: SIM115
                    closefd=False)
    except (AttributeError, OSError, ValueError):
        return stream


def for_command(argv: Sequence[str]) -> typer.Typer:
    """The app narrowed to the command ``argv`` names, or the whole app when it names none.

    Typer turns the signature of every registered command into click parameters on each start
    (about 15 ms for the twelve here, a tenth of a short run's start-up); a run needs only the
    one it was asked for. tests/test_cli_narrow.py proves each narrowed command is the same."""
    name = argv[1] if len(argv) > 1 else ""
    chosen = [c for c in app.registered_commands
              if (c.name or typer.main.get_command_name(c.callback.__name__ if c.callback else "")) == name]
    if len(chosen) != 1:
        return app
    narrow = copy.copy(app)
    narrow.registered_commands = chosen
    return narrow


def main() -> None:
    sys.stdout = block_buffered(sys.stdout)
    # Whatever the locale can encode, text output never ends in a UnicodeEncodeError: what it
    # cannot encode is written as a backslash escape (JSON is written as UTF-8 bytes regardless).
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        for_command(sys.argv)()
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
from analyzer.check_cli import register  # noqa: E402, I001
register(app)
from analyzer.pipeline_cli import register as register_pipeline  # noqa: E402

register_pipeline(app)
from analyzer.live_cli import register as register_live  # noqa: E402, I001
register_live(app)
