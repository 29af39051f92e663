"""The `streamproto` command line."""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer

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
from analyzer.jsonout import dumps, finding_json, frame_json
from analyzer.registry import load_dissectors, parse_decode_as, parse_options
from analyzer.render import Output, SummaryRenderer, TreeRenderer, table

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Wireshark-style analyzer for message-streaming protocols.")


class Format(enum.StrEnum):
    tree = "tree"
    summary = "summary"
    json = "json"
    jsonl = "jsonl"


def fail(message: str) -> typer.Exit:
    print(f"streamproto: {message}", file=sys.stderr)
    return typer.Exit(2)


def _analyzer(decode_as: list[str], idle_timeout: float, options: Sequence[str] = (),
              dialects: Sequence[str] = ()) -> Analyzer:
    try:
        dissectors = parse_options(options, dialects, load_dissectors())
        mapping = parse_decode_as(decode_as, dissectors)
    except ValueError as exc:
        raise fail(str(exc)) from None
    if not idle_timeout >= 0:  # also refuses NaN
        raise fail(f"--idle-timeout must be 0 (never) or a positive number of seconds, not {idle_timeout}")
    return Analyzer(dissectors, mapping, idle_timeout=idle_timeout)


CaptureArg = Annotated[list[Path], typer.Argument(
    help="pcap or pcapng files (optionally gzip-compressed); several are read as one capture, in the "
         "order of their first packets (as tcpdump -C/-G rotates them)", show_default=False)]
DecodeAsOpt = Annotated[list[str], typer.Option("--decode-as", metavar="PORT=PROTO",
                                                help="Decode TCP port PORT as protocol PROTO (repeatable)")]
OptionOpt = Annotated[list[str], typer.Option(
    "--option", "-o", metavar="PROTO.NAME=VALUE",
    help="Set a dissector option (repeatable; `streamproto protocols` lists them)")]
DialectOpt = Annotated[list[str], typer.Option(
    "--dialect", metavar="PROTO=DIALECT",
    help="Decode PROTO as this dialect instead of detecting it (short for -o PROTO.dialect=DIALECT)")]
IdleOpt = Annotated[float, typer.Option(
    "--idle-timeout", metavar="SECONDS",
    help="Finish a conversation after this long without a packet, in capture time (0: never)")]


@app.command()
def inspect(
    capture: CaptureArg,
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format")] = Format.tree,
    flow: Annotated[int | None, typer.Option(help="Only this conversation (see `flows`)")] = None,
    protocol: Annotated[str | None, typer.Option(help="Only frames of this protocol")] = None,
    decode_as: DecodeAsOpt = [],  # noqa: B006 - typer needs a literal default
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    max_frames: Annotated[int | None, typer.Option(help="Stop after this many frames")] = None,
    hex: Annotated[bool, typer.Option("--hex", help="Hex dump of each frame, with each field's bytes")] = False,
    only_findings: Annotated[bool, typer.Option("--only-findings", help="Only frames with findings")] = False,
) -> None:
    """Decode every frame of every TCP conversation, with conformance findings."""
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    if protocol is not None and protocol not in analyzer.dissectors:
        raise fail(f"unknown protocol {protocol!r} (known: {', '.join(sorted(analyzer.dissectors))})")
    out = Output()
    tree = TreeRenderer(out, 0.0, hexdump=hex)
    summary = SummaryRenderer(out, 0.0)
    collected: dict[str, list] = {"frames": [], "findings": []}
    shown = 0

    def wanted_finding(f: Finding) -> bool:
        if flow is not None and f.flow != flow:
            return False
        if protocol is None:
            return True
        info = analyzer.flow(f.flow)
        return info is not None and info.protocol == protocol

    write = sys.stdout.write
    on_frame: Callable[[Frame], object]
    on_finding: Callable[[Finding], object]
    if format is Format.jsonl:
        def on_frame(ev: Frame) -> None:
            write(dumps(frame_json(ev)) + "\n")

        def on_finding(ev: Finding) -> None:
            write(dumps(finding_json(ev)) + "\n")
    elif format is Format.json:
        def on_frame(ev: Frame) -> None:
            collected["frames"].append(frame_json(ev))

        def on_finding(ev: Finding) -> None:
            collected["findings"].append(finding_json(ev))
    elif format is Format.summary:
        on_frame, on_finding = summary.frame, summary.finding
    else:
        on_frame, on_finding = tree.frame, tree.finding

    error: str | None = None
    try:
        for ev in analyzer.run_files([str(c) for c in capture]):
            if isinstance(ev, Frame):
                if flow is not None and ev.flow != flow:
                    continue
                if protocol is not None and ev.protocol != protocol:
                    continue
                if only_findings and not ev.findings:
                    continue
                if max_frames is not None and shown >= max_frames:
                    break
                # Only once something is shown (the first packet's time is set by then and stays):
                # with --only-findings most frames are skipped, and each one used to set it again.
                if not shown:
                    tree.t0 = summary.t0 = analyzer.first_ts or 0.0
                shown += 1
                on_frame(ev)
            elif wanted_finding(ev):
                if not shown:
                    tree.t0 = summary.t0 = analyzer.first_ts or 0.0
                on_finding(ev)
    except CaptureError as exc:
        error = str(exc)
    except NoDecodableLinkType as exc:
        error = f"{', '.join(str(c) for c in capture)}: {exc}"
    if format is Format.json:
        doc = {"capture": str(capture[0]) if len(capture) == 1 else [str(c) for c in capture], **collected,
               "flows": [flow_json(f) for f in analyzer.flows if flow is None or f.id == flow]}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    elif format in (Format.tree, Format.summary) and (error is None or analyzer.packets):
        # The counts follow the filters: what --flow / --protocol selected (and the capture itself).
        totals = dict(analyzer.capture_findings)
        for f in analyzer.flows:
            if flow is not None and f.id != flow or protocol is not None and f.protocol != protocol:
                continue
            totals["error"] += f.errors
            totals["warning"] += f.warnings
            totals["note"] += f.notes
        out.line((f"-- {analyzer.packets} packets, {len(analyzer.flows)} TCP conversations, {shown} frames shown; "
                  f"findings: {totals['error']} errors, {totals['warning']} warnings, {totals['note']} notes", "dim"))
    sys.stdout.flush()
    if error is not None:
        raise fail(error)


def flow_json(f: FlowInfo) -> dict:
    return {"flow": f.id, "client": fmt_endpoint(f.client), "server": fmt_endpoint(f.server),
            "community_id": f.community_id, "protocol": f.protocol, "dialect": f.dialect, "packets": f.packets, "frames": f.frames,
            "bytes_c2s": f.bytes_c2s, "bytes_s2c": f.bytes_s2c, "findings": f.findings,
            "first_ts": f.first_ts, "last_ts": f.last_ts}


@app.command()
def flows(
    capture: CaptureArg,
    decode_as: DecodeAsOpt = [],  # noqa: B006
    option: OptionOpt = [],  # noqa: B006
    dialect: DialectOpt = [],  # noqa: B006
    json_out: Annotated[bool, typer.Option("--json", help="JSON Lines, one object per conversation")] = False,
    idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """One row per TCP conversation: endpoints, protocol, frames, bytes, findings, Community ID."""
    analyzer = _analyzer(decode_as, idle_timeout, option, dialect)
    error = None
    try:
        for _ in analyzer.run_files([str(c) for c in capture]):
            pass
    except CaptureError as exc:
        error = str(exc)
    except NoDecodableLinkType as exc:
        error = f"{', '.join(str(c) for c in capture)}: {exc}"
    if json_out:
        for f in analyzer.flows:
            sys.stdout.write(dumps(flow_json(f)) + "\n")
    else:
        rows = [[f.id, fmt_endpoint(f.client), fmt_endpoint(f.server),
                 (f.protocol or "-") + (f"/{f.dialect}" if f.dialect else ""), f.packets, f.frames,
                 f.bytes_c2s, f.bytes_s2c, f.errors, f.warnings, f.notes, f.community_id]
                for f in analyzer.flows]
        table(Output(), ["flow", "client", "server", "protocol", "packets", "frames", "bytes c→s",
                         "bytes s→c", "errors", "warnings", "notes", "community id"], rows)
    if error is not None:
        raise fail(error)


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
        for owner, r in all_rules:
            sys.stdout.write(dumps({"owner": owner, "id": r.id, "severity": str(r.severity),
                                    "category": str(r.category), "description": r.description}) + "\n")
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
        for f in defs:
            sys.stdout.write(dumps({"name": f.name, "type": f.type, "repeated": f.repeated,
                                    "description": f.description}) + "\n")
        return
    table(Output(), ["field", "type", "description"],
          [[f.name, f.type + ("[]" if f.repeated else ""), f.description] for f in defs])


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
from analyzer.check_cli import register  # noqa: E402, I001
register(app)
