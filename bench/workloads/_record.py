"""Recording real clients for the workloads: one private rabbitmq-server (AMQP 0-9-1 on 5672 and
RabbitMQ Stream on 5552, 127.0.0.1 only) shared by every workload of a run, and two recorders:

- ``record()``: tcpdump on lo (kernel drops make it retry; lo's segmentation offload makes 64 KiB
  packets);
- ``relay_record()``: a TCP relay on 127.0.0.1 between the client and the server that logs every
  chunk it passes on, then writes the conversations with analyzer/pcapwrite.py (real application
  bytes and timing; IPv4/TCP headers synthesized, in segments of MSS 1448 each acknowledged). It
  cannot lose bytes, so it needs no retries and no root.

Reuses tests/private_broker.py (the broker) and captures/iggy/record.py (waiting for tcpdump, and
the check that a recorded capture has no holes), imported, not copied.
"""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AMQP_PORT = 5672
STREAM_PORT = 5552
# The relay in front of the stream port: the broker advertises it (metadata, leader and replica
# addresses), so connections a client opens to the advertised address go through the relay too.
STREAM_RELAY_PORT = 5553
NODE = "spbench@localhost"
DIST_PORT = 35679
BROKER_CONFIG = f"""listeners.tcp.default = 127.0.0.1:{AMQP_PORT}
stream.listeners.tcp.1 = 127.0.0.1:{STREAM_PORT}
stream.advertised_host = 127.0.0.1
stream.advertised_port = {STREAM_RELAY_PORT}
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


T = TypeVar("T")
MSS = 1448
STEP = 1e-6  # between the synthesized segments of one chunk (and the handshake's)


@dataclass(slots=True)
class _Conn:
    client_port: int
    opened: float
    # (receive time, "c2s" or "s2c", the bytes; b"" for the end of that direction, None for a reset)
    events: list[tuple[float, str, bytes | None]] = field(default_factory=list)
    done: bool = False


class Relay:
    """A TCP relay on 127.0.0.1:``relay_port`` to 127.0.0.1:``server_port`` in a thread of its own
    (its own asyncio loop): each accepted connection gets one to the server, bytes are pumped both
    ways unchanged and every chunk read is logged with the time it was read. The end of a direction
    is passed on as a half close (FIN), a reset as an abort of the other side."""

    def __init__(self, server_port: int, relay_port: int) -> None:
        self.server_port = server_port
        self.relay_port = relay_port
        self.conns: list[_Conn] = []
        self._tasks: set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay", daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> None:
        self._thread.start()
        try:
            self._server = self._submit(asyncio.start_server(self._accept, "127.0.0.1", self.relay_port))
        except OSError as e:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            raise SystemExit(f"relay: cannot listen on 127.0.0.1:{self.relay_port}: {e}") from e

    def stop(self, grace: float = 5.0) -> list[_Conn]:
        """Stops accepting; waits up to ``grace`` seconds for the open connections to end (both
        directions closed), then aborts what is left. Returns the connections that did not end."""
        left = self._submit(self._stop(grace))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        return left

    def _submit(self, coro: Coroutine[object, object, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _stop(self, grace: float) -> list[_Conn]:
        assert self._server is not None
        self._server.close()
        deadline = time.monotonic() + grace
        while self._tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        left = [c for c in self.conns if not c.done]
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        return left

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        opened = time.time()
        try:
            try:
                sreader, swriter = await asyncio.open_connection("127.0.0.1", self.server_port)
            except OSError as e:
                print(f"  relay: connecting to 127.0.0.1:{self.server_port}: {e}", file=sys.stderr)
                cwriter.transport.abort()
                return
            conn = _Conn(cwriter.get_extra_info("peername")[1], opened)
            self.conns.append(conn)
            try:
                await asyncio.gather(self._pump(conn, "c2s", creader, swriter),
                                     self._pump(conn, "s2c", sreader, cwriter))
                conn.done = True
            finally:
                for w in (cwriter, swriter):
                    w.close()
        finally:
            self._tasks.discard(task)

    @staticmethod
    async def _pump(conn: _Conn, direction: str, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(1 << 16)
                conn.events.append((time.time(), direction, data))
                if not data:
                    if not writer.is_closing():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except OSError:  # a reset
            conn.events.append((time.time(), direction, None))
            writer.transport.abort()

    def write(self, out: Path) -> int:
        """The logged connections as a pcap (server side 127.0.0.1:``server_port``, the client's
        real port); each chunk at the time the relay read it, cut into acknowledged segments of
        MSS 1448. Returns the number of packets."""
        from analyzer.pcapwrite import TcpConversation, write_capture

        convs = []
        seen: set[int] = set()
        for conn in self.conns:
            port = conn.client_port
            while port in seen:  # an ephemeral port used twice in one session: keep them apart
                port = port % 65535 + 1
            seen.add(port)
            conv = TcpConversation(("127.0.0.1", port), ("127.0.0.1", self.server_port), ts=conn.opened,
                                   step=STEP)
            conv.handshake()
            events = conn.events
            # The usual ending, the client's FIN answered by the server's: TcpConversation.close()
            # (FIN, FIN, last ACK), at the time of the client's FIN.
            closing = [(d, x) for _t, d, x in events[-2:]] == [("c2s", b""), ("s2c", b"")]
            for t, direction, data in events[:-2] if closing else events:
                conv.ts = max(conv.ts, t)  # a chunk's segments may run past the next chunk's time
                if data is None:
                    conv.rst(direction)
                elif data:
                    conv.send(direction, data, mss=MSS, ack=True)
                else:
                    conv.fin(direction)
            if closing:
                conv.ts = max(conv.ts, events[-2][0])
                conv.close()
            convs.append(conv)
        return write_capture(str(out), convs)


def relay_record(out: Path, server_port: int, relay_port: int, session: Callable[[], object],
                 grace: float = 5.0) -> None:
    """Runs ``session`` (its client connecting to 127.0.0.1:``relay_port``) through a :class:`Relay`
    to 127.0.0.1:``server_port``, then writes what crossed it into ``out``."""
    relay = Relay(server_port, relay_port)
    relay.start()
    try:
        session()
    finally:
        left = relay.stop(grace)
    if left:
        print(f"  relay: {len(left)} of {len(relay.conns)} connections still open {grace:g} s after the "
              "session (written without their end)", file=sys.stderr)
    if not relay.conns:
        raise SystemExit(f"{out.name}: no connection went through the relay on port {relay_port}")
    relay.write(out)
    # Written from the relay's log, the streams have no holes; a missing FIN (a connection reset or
    # left open) is what the relay saw, reported, not repeated.
    problems = iggy_record.capture_gaps(out)
    if [p for p in problems if "FIN" not in p]:
        raise SystemExit(f"{out.name}: {problems[:3]}")
    if problems:
        print(f"  relay: {problems}", file=sys.stderr)
