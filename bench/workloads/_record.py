"""Recording real clients for the workloads: one private rabbitmq-server (AMQP 0-9-1 on 5672 and
RabbitMQ Stream on 5552, 127.0.0.1 only) shared by every workload of a run, and tcpdump on lo.

Reuses tests/private_broker.py (the broker) and captures/iggy/record.py (waiting for tcpdump, and
the check that a recorded capture has no holes), imported, not copied.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AMQP_PORT = 5672
STREAM_PORT = 5552
NODE = "spbench@localhost"
DIST_PORT = 35679
BROKER_CONFIG = f"""listeners.tcp.default = 127.0.0.1:{AMQP_PORT}
stream.listeners.tcp.1 = 127.0.0.1:{STREAM_PORT}
stream.advertised_host = 127.0.0.1
loopback_users = none
frame_max = 131072
"""


def load(path: Path, name: str) -> ModuleType:
    """A script that is not in a package (captures/iggy/record.py), under a name of its own."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


iggy_record = load(ROOT / "captures" / "iggy" / "record.py", "_iggy_record")

_broker: ExitStack | None = None


def broker() -> None:
    """Starts the shared private broker on first use; stop_broker() (called by make.py) ends it."""
    global _broker
    if _broker is not None:
        return
    from tests.private_broker import private_broker

    stack = ExitStack()
    stack.enter_context(private_broker(node=NODE, dist_port=DIST_PORT, ports=(AMQP_PORT, STREAM_PORT),
                                       config=BROKER_CONFIG, plugins="[rabbitmq_stream].\n",
                                       prefix="streamproto-bench-", timeout=120))
    _broker = stack


def stop_broker() -> None:
    global _broker
    if _broker is not None:
        _broker.close()
        _broker = None


class Incomplete(Exception):
    """tcpdump missed packets: the recording is repeated."""


@contextmanager
def tcpdump(out: Path, port: int) -> Iterator[None]:
    """Records ``tcp port PORT`` on lo into ``out`` for the duration of the block."""
    proc = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-B", "262144", "-s", "0",
                             "-w", str(out), f"tcp port {port}"], stderr=subprocess.PIPE, start_new_session=True)
    iggy_record._wait_tcpdump(proc)
    try:
        yield
    finally:
        time.sleep(1.5)  # the last segments (the FINs) reach lo before tcpdump stops
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    stats = proc.stderr.read().decode(errors="replace")
    # Missing bytes or cut packets fail the recording; a FIN tcpdump did not see yet does not.
    problems = [p for p in iggy_record.capture_gaps(out) if "FIN" not in p]
    if problems:
        raise Incomplete(f"{out.name}: {problems[:3]} (tcpdump: {' '.join(stats.split())})")


def record(out: Path, port: int, session: Callable[[], object], tries: int = 3) -> None:
    """Runs ``session`` while recording port ``port`` into ``out``; again when tcpdump lost packets."""
    for attempt in range(1, tries + 1):
        try:
            with tcpdump(out, port):
                session()
            return
        except Incomplete as e:
            print(f"  attempt {attempt}: {e}", file=sys.stderr)
    raise SystemExit(f"{out.name}: no complete recording in {tries} attempts")


class SmallSegments:
    """Client sockets opened in the block advertise an Ethernet-sized MSS (1448): on lo (MTU 65536)
    megabyte bodies would otherwise cross in a handful of 64 KiB segments, not the thousands of
    packets the same traffic makes on a real network."""

    def __enter__(self) -> SmallSegments:
        self.orig = socket.socket

        class _Socket(socket.socket):
            def __init__(s, *a, **kw) -> None:  # noqa: N805
                super().__init__(*a, **kw)
                if s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1448)

        socket.socket = _Socket  # type: ignore[misc]
        return self

    def __exit__(self, *exc: object) -> None:
        socket.socket = self.orig  # type: ignore[misc]
