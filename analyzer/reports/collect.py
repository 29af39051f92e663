"""One capture through the engine, kept as a :class:`CaptureResult`: the findings as the rule
policy and the baseline leave them, command counts and latencies, and the frames the ladder
diagrams draw. The per-frame work is small on purpose: `check` is meant to cost about what
`inspect --only-findings` costs."""

from __future__ import annotations

import os
import time
from array import array
from collections import deque
from collections.abc import Callable, Container, Iterable
from pathlib import Path

from analyzer.api import Finding, Frame
from analyzer.capture import CaptureError
from analyzer.engine import Analyzer, NoDecodableLinkType
from analyzer.reports.policy import UNDECODED, RulePolicy
from analyzer.reports.results import Arrow, CaptureResult, ConversationResult
from analyzer.stream_input import is_stream, read_stream

#: File names taken from a directory (pcap and pcapng, optionally gzip-compressed).
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")
#: Ladder diagrams are recorded for this many conversations of a capture (a report with 100,000
#: ladders helps nobody; every conversation still has its row and its findings).
LADDERS = 50
#: Per ladder: the first frames (the handshake), the last ones (the close), and in between only
#: the frames with findings (at most MARKED), the rest collapsed.
HEAD, TAIL, MARKED = 40, 12, 200
#: Request frames remembered to name the request of a response (see :func:`collect`).
ANCHORS = 100_000


def expand(paths: Iterable[str]) -> list[tuple[str, str | None]]:
    """The captures to check, in order: files as given, directories searched recursively for
    capture files (each its own capture). (path, None), or (path, why it is unusable)."""
    out: list[tuple[str, str | None]] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(f) for f in Path(p).rglob("*")
                           if f.is_file() and f.name.lower().endswith(CAPTURE_SUFFIXES))
            if not found:
                out.append((p, f"{p}: no capture files ({', '.join(CAPTURE_SUFFIXES)}) in this directory"))
            out += [(f, None) for f in found]
        else:
            out.append((p, None))
    return out


class _Lane:
    """The frames of one conversation kept for its ladder diagram."""

    __slots__ = ("n", "head", "marked", "tail")

    def __init__(self) -> None:
        self.n = 0
        self.head: list[tuple[int, Frame, list[Finding]]] = []
        self.marked: list[tuple[int, Frame, list[Finding]]] = []
        self.tail: deque[tuple[int, Frame, list[Finding]]] = deque(maxlen=TAIL)

    def arrows(self) -> list[Arrow]:
        seen: dict[int, Arrow] = {}
        for i, fr, kept in (*self.head, *self.marked, *self.tail):
            if i not in seen:
                seen[i] = Arrow(i, fr.packets[1], fr.ts, str(fr.direction), fr.command, fr.info, fr.size,
                                getattr(fr, "latency", None), kept)
        return [seen[i] for i in sorted(seen)]


def collect(path: str, analyzer: Analyzer, policy: RulePolicy, baseline: Container[str] = (),
            recorded: Callable[[Finding], None] | None = None) -> CaptureResult:
    """Run one capture; ``recorded`` sees every finding the policy keeps, before the baseline
    (what --write-baseline records)."""
    result = CaptureResult(path, ladder_limit=LADDERS)
    started = time.perf_counter()
    findings = result.findings
    commands = result.commands
    latencies = result.latencies
    t_c2s, t_s2c = result.times["c2s"].append, result.times["s2c"].append
    lanes: dict[int, _Lane] = {}
    anchors: dict[tuple[int, str, int], str] = {}
    engine_undecoded: set[int] = set()

    def keep(f: Finding) -> bool:
        if policy.apply(f) is None:
            return False
        if recorded is not None:
            recorded(f)
        if f.fingerprint in baseline:
            result.suppressed += 1
            return False
        findings.append(f)
        return True

    try:
        # Standard input ("-") and pipes are read once, as they come (`tcpdump -w - | streamproto check -`).
        events = analyzer.run(read_stream(path)) if is_stream(path) else analyzer.run_files([path])
        for ev in events:
            if isinstance(ev, Frame):
                key = (ev.protocol, ev.direction, ev.command)
                commands[key] = commands.get(key, 0) + 1
                if ev.direction == "c2s":
                    t_c2s(ev.ts)
                else:
                    t_s2c(ev.ts)
                kept = [f for f in ev.findings if keep(f)] if ev.findings else ev.findings
                if ev.ref is not None and len(anchors) < ANCHORS:
                    # A frame the dissector may name later as the request a response answers.
                    anchors[(ev.flow, ev.direction, ev.offset)] = ev.command
                # getattr: a frame class that sets its slots itself may leave these two unset.
                latency = getattr(ev, "latency", None)
                if latency is not None:
                    req = getattr(ev, "request", None)
                    name = anchors.pop((ev.flow, req[0], req[1]), "") if req is not None else ""
                    lkey = (ev.protocol, name, ev.command)
                    samples = latencies.get(lkey)
                    if samples is None:
                        samples = latencies[lkey] = []
                    samples.append(latency)
                flow = ev.flow
                if flow <= LADDERS:
                    lane = lanes.get(flow)
                    if lane is None:
                        lane = lanes[flow] = _Lane()
                    lane.n += 1
                    item = (lane.n, ev, kept)
                    if lane.n <= HEAD:
                        lane.head.append(item)
                    else:
                        if kept and len(lane.marked) < MARKED:
                            lane.marked.append(item)
                        lane.tail.append(item)
            else:
                if ev.id == UNDECODED.id and ev.flow is not None:
                    engine_undecoded.add(ev.flow)
                keep(ev)
    except CaptureError as exc:
        result.error = str(exc)
    except NoDecodableLinkType as exc:
        result.error = f"{path}: {exc}"
    result.packets = analyzer.packets
    result.first_ts = analyzer.first_ts
    result.last_ts = analyzer.last_ts
    result.conversations = [ConversationResult(info) for info in analyzer.flows]
    for conv in result.conversations:
        info = conv.info
        if info.protocol is None and info.bytes_c2s + info.bytes_s2c and info.id not in engine_undecoded:
            # No dissector claimed it: say so, so that a check never passes on traffic it could not read.
            f = UNDECODED(f"no dissector decoded this conversation ({info.bytes_c2s} bytes client to server, "
                          f"{info.bytes_s2c} server to client; --decode-as PORT=PROTO forces one)")
            f.flow, f.community_id = info.id, info.community_id
            keep(f)
        lane = lanes.get(info.id)
        if lane is not None:
            conv.arrows = lane.arrows()
    for f in findings:
        conv = result.conversation(f.flow)
        if conv is not None:
            conv.findings.append(f)
    result.frames = sum(commands.values())
    result.elapsed = time.perf_counter() - started
    return result


def unusable(path: str, error: str) -> CaptureResult:
    """A capture that could not even be opened or found."""
    return CaptureResult(path, error=error, times={"c2s": array("d"), "s2c": array("d")})
