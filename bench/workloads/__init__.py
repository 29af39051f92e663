"""The workload captures of issue #15: one module per traffic shape, each with

- ``SOURCE``: how the capture is made (a real client against a real broker, or the encoders, and why);
- ``PORT``: the server port (streamproto's default port for the protocol);
- ``TSHARK``: the tshark dissector for ``-d tcp.port==PORT,NAME``, or None where tshark 4.0 has none;
- ``build(out, scale=1.0)``: writes the capture (scale 1.0: 20k-150k packets; smaller for tests).

``ensure()`` builds the missing ones into a cache directory (default bench/work/, not committed):
a capture is only rebuilt when its file is missing. CLI: ``python -m bench.workloads [--out DIR] [NAMES]``.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "bench" / "work"

NAMES = (
    "amqp091_ack_multiple",
    "amqp091_many_channels",
    "amqp091_short_connections",
    "amqp091_large_bodies",
    "amqp091_confirms",
    "amqp091_publish_consume",
    "amqp091_routed_mixed",
    "amqp091_rpc",
    "amqp091_tx_reject",
    "rabbitmq_stream_subbatch",
    "rabbitmq_stream_plain",
    "rabbitmq_stream_rbfly",
    "iggy_send_poll",
    "iggy_send_poll_v",
    "iggy_send_poll_z2",
    "amqp_fast_fragmented",
)


def module(name: str) -> ModuleType:
    if name not in NAMES:
        raise SystemExit(f"unknown workload {name!r}; known: {', '.join(NAMES)}")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"bench.workloads.{name}")


def path(name: str, out: Path = DEFAULT_DIR, scale: float = 1.0) -> Path:
    return out / (f"{name}.pcap" if scale == 1.0 else f"{name}-x{scale:g}.pcap")


def ensure(names: list[str] | tuple[str, ...] = NAMES, out: Path = DEFAULT_DIR, scale: float = 1.0,
           log=print) -> dict[str, Path]:
    """Every named workload's capture, built when missing (written to a temporary name, then renamed,
    so an interrupted build leaves no half capture behind)."""
    from bench.workloads import _record

    out.mkdir(parents=True, exist_ok=True)
    done: dict[str, Path] = {}
    try:
        for name in names:
            target = path(name, out, scale)
            if not target.exists():
                mod = module(name)
                part = target.with_name(target.name + ".part")
                t = time.perf_counter()
                mod.build(part, scale)
                os.replace(part, target)
                log(f"built {target} in {time.perf_counter() - t:.0f} s ({mod.SOURCE})")
            done[name] = target
    finally:
        _record.stop_broker()
    return done
