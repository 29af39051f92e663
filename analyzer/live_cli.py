"""`streamproto live`: decode traffic as it happens, through the same engine and display as `inspect`.

Registered on the main app by :func:`register` (the last lines of :mod:`analyzer.cli`). The capture
itself lives in :mod:`analyzer.live`; this module reads the options, picks the packet source, runs
the loop and shows its events through inspect's :class:`~analyzer.cli.Display`.
"""

from __future__ import annotations

import enum
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from analyzer.cli import (
    DecodeAsOpt,
    DialectOpt,
    Display,
    FilterOpt,
    FlowOpt,
    Format,
    HexOpt,
    IdleOpt,
    MaxValueSizeOpt,
    OnlyFindingsOpt,
    OptionOpt,
    ProtocolOpt,
    TimeFormatOpt,
    TreeOpt,
    _analyzer,
    fail,
)
from analyzer.engine import DEFAULT_IDLE_TIMEOUT, Analyzer
from analyzer.linking import WINDOW, Linked, Linker
from analyzer.live.loop import LiveRun, Tick
from analyzer.live.sources import CaptureFailed, PacketSource, ReplaySource
from analyzer.live.summary import summary_lines
from analyzer.live.tee import PcapngTee
from analyzer.textsafe import safe

#: Finished conversations whose rows a live capture keeps (~480 bytes each: about 5 MiB).
MAX_FLOW_ROWS = 10_000

EPILOG_LIVE = """\b
Examples:
  sudo streamproto live -i lo                            every frame as it completes, Ctrl-C stops
  sudo streamproto live -i lo -T summary -w run.pcapng   one line per frame, every packet kept
  sudo streamproto live -i eth0 -f 'tcp port 15672' -d 15672=amqp091
  sudo streamproto live -i lo --only-findings --duration 600
  streamproto live -D                                    the interfaces
  streamproto live --replay capture.pcap --speed 10      a capture played back through the live path
"""


class Backend(enum.StrEnum):
    scapy = "scapy"
    tshark = "tshark"


class _LiveLinker(Linker):
    """inspect's request/response linker, told the time between events: a request held for its
    response is let go once the wait is over even if nothing else arrives."""

    def expire(self, now: float) -> Iterator[Linked]:
        return self._release(now)


def default_filter(analyzer: Analyzer) -> str:
    """The capture filter covering every registered dissector's ports and the --decode-as ports."""
    ports = sorted(set(analyzer.by_port) | set(analyzer.decode_as))
    if not ports:
        return "tcp"
    return "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"


def _source(backend: Backend, interface: str | None, bpf: str, replay: Path | None, speed: float,
            buffer_mib: int) -> PacketSource:
    if replay is not None:
        return ReplaySource(str(replay), speed)
    assert interface is not None
    if backend is Backend.tshark:
        from analyzer.live.dumpcap_source import DumpcapSource

        return DumpcapSource(interface, bpf, buffer=buffer_mib << 20)
    from analyzer.live.scapy_source import ScapySource

    return ScapySource(interface, bpf, buffer=buffer_mib << 20)


def _list_interfaces(backend: Backend) -> None:
    if backend is Backend.tshark:
        from analyzer.live.dumpcap_source import interfaces
    else:
        from analyzer.live.scapy_source import interfaces
    try:
        rows = interfaces()
    except CaptureFailed as exc:
        raise fail(str(exc)) from None
    for i, (name, detail) in enumerate(rows, 1):
        print(safe(f"{i}. {name}" + (f" ({detail})" if detail else "")))


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG_LIVE)(live)


def live(
    interface: Annotated[str | None, typer.Option("--interface", "-i", metavar="IFACE",
                                                  help="The interface to capture on (see -D)")] = None,
    capture_filter: Annotated[str | None, typer.Option(
        "--capture-filter", "-f", metavar="BPF",
        help="Capture filter in tcpdump's syntax, replacing the default (TCP on every registered "
             "dissector's port and the --decode-as ports)")] = None,
    list_interfaces: Annotated[bool, typer.Option("--list-interfaces", "-D",
                                                  help="List the interfaces and exit")] = False,
    backend: Annotated[Backend, typer.Option(
        "--backend", help="scapy: a Linux packet socket with a compiled BPF filter (needs root or "
                          "CAP_NET_RAW); tshark: Wireshark's dumpcap through pyshark (its capture rights)")
    ] = Backend.scapy,
    write: Annotated[Path | None, typer.Option(
        "--write", "-w", metavar="FILE", help="Also write every captured packet to this pcapng file "
                                              "(flushed as it goes: an interrupted run leaves a readable file)")
    ] = None,
    duration: Annotated[float | None, typer.Option("--duration", "-a", metavar="SECONDS",
                                                   help="Stop after this many seconds")] = None,
    replay: Annotated[Path | None, typer.Option(
        "--replay", metavar="FILE", help="Instead of an interface, play a capture file back in real time "
                                         "through the live path (no capture rights needed)")] = None,
    speed: Annotated[float, typer.Option("--speed", metavar="X", help="--replay: play back X times faster")] = 1.0,
    buffer_size: Annotated[int, typer.Option(
        "--buffer-size", "-B", metavar="MIB",
        help="Kernel buffer for packets waiting to be decoded, in MiB (as dumpcap's -B); when it is full "
             "the kernel drops packets, and the summary counts them")] = 16,
    link_wait: Annotated[float, typer.Option(
        "--link-wait", metavar="SECONDS",
        help="Hold a request back at most this long for its response, to print it with \"response in "
             "#N\" (0: print every frame at once; responses still name their request)")] = 1.0,
    display_filter: FilterOpt = None,
    format: Annotated[Format, typer.Option("--format", "-T", help="Output format: tree (as -V), summary (one "
                                           "line per frame), json (one document, closed at stop), jsonl "
                                           "(JSON Lines)")] = Format.tree,
    tree: TreeOpt = False,
    flow: FlowOpt = [],  # noqa: B006 - typer needs a literal default
    protocol: ProtocolOpt = [],  # noqa: B006
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    max_frames: Annotated[int | None, typer.Option("--max-frames", "-c", metavar="FRAMES",
                                                   help="Stop after this many frames shown")] = None,
    hex: HexOpt = False,
    time_format: TimeFormatOpt = "r",
    only_findings: OnlyFindingsOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No frames or findings: only the summary")] = False,
    max_value_size: MaxValueSizeOpt = 1 << 20,
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
    max_flow_rows: Annotated[int, typer.Option(
        "--max-flow-rows", metavar="N",
        help="Remember at most N finished conversations (their summary rows; the oldest go first) so a run "
             "of days keeps its memory bounded; open ones and the summary's totals are always kept")
    ] = MAX_FLOW_ROWS,
) -> None:
    """Capture on an interface and decode each frame as soon as its last byte arrives, with its
    findings, through the same engine as `inspect`; Ctrl-C or SIGTERM stops, then a summary.

    Time-driven findings (heartbeat silence, idle conversations) are reported when they become
    true. The summary (packets captured and dropped, conversations, frames per protocol, findings
    per severity) goes to standard error; standard output carries only the frames and findings.
    """
    if list_interfaces:
        _list_interfaces(backend)
        return
    if replay is None and not interface:
        raise fail("no interface given: -i IFACE (see `streamproto live -D`), or --replay FILE")
    if duration is not None and not duration > 0:
        raise fail(f"--duration must be a positive number of seconds, not {duration}")
    if buffer_size < 1:
        raise fail(f"--buffer-size must be 1 MiB or more, not {buffer_size}")
    if not link_wait >= 0:
        raise fail(f"--link-wait must be 0 or a positive number of seconds, not {link_wait}")
    if max_flow_rows < 0:
        raise fail(f"--max-flow-rows must be 0 or more, not {max_flow_rows}")
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    analyzer.limit_finished_rows(max_flow_rows)
    analyzer.info_lines_only = format is Format.summary and not tree  # as inspect says it
    bpf = capture_filter if capture_filter is not None else default_filter(analyzer)
    display = Display.from_options(
        analyzer, capture=str(replay) if replay is not None else interface, display_filter=display_filter,
        format=format, tree=tree, flow=flow, protocol=protocol, max_frames=max_frames, hex=hex,
        time_format=time_format, only_findings=only_findings, quiet=quiet, max_value_size=max_value_size)
    try:
        source = _source(backend, interface, bpf, replay, speed, buffer_size)
    except CaptureFailed as exc:
        raise fail(str(exc)) from None
    tee = None
    try:
        if write is not None:
            tee = PcapngTee(str(write), source.linktype)
    except CaptureFailed as exc:
        source.close()
        raise fail(str(exc)) from None
    if replay is None:
        print(safe(f"streamproto: capturing on {source.name}, filter: {bpf}"), file=sys.stderr)
    run = LiveRun(analyzer, source, tee=tee, duration=duration)
    try:
        error = _show(run, display, max_frames, link_wait)
    finally:
        source.close()
        if tee is not None:
            tee.close()
    display.close([])
    seconds = run.stopped - run.started if run.stopped is not None and run.started is not None else 0.0
    for text in summary_lines(analyzer, source.name, source.stats(), seconds, run.reason, run.open_at_stop):
        print(safe(text), file=sys.stderr)
    sys.stderr.flush()
    if error:
        raise fail(error)


def _show(run: LiveRun, display: Display, max_frames: int | None, link_wait: float) -> str | None:
    """Run the capture, showing its events; the capture's error, if it failed midway."""
    # link_wait 0: nothing is held (a window of 0 lets every event through at once).
    linker = _LiveLinker(lambda packet: (None, packet), window=WINDOW if link_wait else 0, horizon=link_wait)
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        run.stop("interrupted")
        # A second Ctrl-C or SIGTERM ends the process at once, without the summary.
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, on_signal)
    try:
        if max_frames is not None and max_frames <= 0:
            run.stop("count")
        events = run.events()
        for ev in events:
            pairs = linker.expire(ev.now) if isinstance(ev, Tick) else linker.link((ev,))
            for item, links in pairs:
                if not display.show(item, links) or (max_frames is not None and display.shown >= max_frames):
                    run.stop("count")
                    break
            if run.reason == "count":
                events.close()
                break
            if isinstance(ev, Tick):
                display.flush()
        else:
            for item, links in linker.flush():
                display.show(item, links)
    except CaptureFailed as exc:
        return str(exc)
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is on_signal:
                signal.signal(sig, handler)
    return None
