"""Bad input end to end: real capture files with random bytes flipped, cut or inserted, run through
the whole engine with every dissector and both renderers. The only acceptable outcomes are output
and, for a broken file, CaptureError or NoDecodableLinkType: never another exception, never a hang,
and never a dissector exception either (the engine turns those into `engine.dissector_error`
findings, which would otherwise hide them here)."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Frame
from analyzer.capture import CaptureError
from analyzer.engine import DISSECTOR_ERROR, NoDecodableLinkType, analyze_file
from analyzer.jsonout import dumps, finding_json, frame_json
from analyzer.render import Output, TreeRenderer

ROOT = Path(__file__).resolve().parent.parent / "captures"
SOURCES = [ROOT / "rabbitmq_stream" / "rstream_consume.pcap", ROOT / "amqp091" / "pika_confirms.pcap",
           ROOT / "rabbitmq_stream" / "rstream_consume_any_sll2.pcapng", ROOT / "amqp091" / "pika_large.pcap"]
ORIGINALS = {p: p.read_bytes() for p in SOURCES}

# Mostly in-place edits: they keep the file readable, so the bytes reach TCP and the dissectors.
edits = st.lists(st.tuples(st.sampled_from(["flip", "flip", "flip", "zero", "zero", "cut", "insert"]), st.floats(0, 1),
                           st.integers(1, 64), st.integers(0, 255)), min_size=1, max_size=6)


def mutate(data: bytes, plan: list[tuple[str, float, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, where, n, value in plan:
        at = int(where * (len(buf) - 1))
        if kind == "flip":
            for i in range(at, min(at + n, len(buf))):
                buf[i] ^= value or 0xFF
        elif kind == "cut":
            del buf[at:at + n]
        elif kind == "insert":
            buf[at:at] = bytes([value]) * n
        else:
            buf[at:at + n] = bytes(min(n, len(buf) - at))
    return bytes(buf)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.sampled_from(SOURCES), plan=edits)
def test_mutated_capture_files_never_crash_the_engine(tmp_path_factory, source: Path, plan) -> None:
    path = tmp_path_factory.mktemp("mut") / source.name
    path.write_bytes(mutate(ORIGINALS[source], plan))
    # Every event is also rendered both ways, as `inspect --hex` and `--format jsonl` would.
    out = io.StringIO()
    tree = TreeRenderer(Output(out, color=False), 0.0, hexdump=True)
    crashes = []
    try:
        for ev in analyze_file(str(path)):
            if isinstance(ev, Frame):
                tree.frame(ev)
                out.write(dumps(frame_json(ev)))
            else:
                tree.finding(ev)
                out.write(dumps(finding_json(ev)))
                if ev.id == DISSECTOR_ERROR.id:
                    crashes.append(ev.message)
    except (CaptureError, NoDecodableLinkType):
        pass
    assert not crashes, f"{source.name} mutated by {plan}: {crashes}"
