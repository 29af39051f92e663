"""Traffic for the live benchmarks: recorded conversations replayed over 127.0.0.1, as new
connections, as fast as asked.

Each conversation's reassembled bytes (what `streamproto follow` shows) are written by both sides
in the recorded order over a fresh TCP connection to a local listener, so the capture sees real
handshakes, segments and closes, and the analyzer real protocol frames.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from analyzer.api import Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.follow import DATA, Recorder, recorders
from analyzer.registry import load_dissectors

Chunks = list[tuple[str, bytes]]


def conversations(path: str, protocol: str | None = None) -> list[Chunks]:
    analyzer = Analyzer(recorders(load_dissectors()), fallback=Recorder())
    pieces: dict[int, Chunks] = {}
    for ev in analyzer.run(read_packets(path)):
        if isinstance(ev, Frame) and ev.command == DATA and ev.data:
            info = analyzer.flow(ev.flow)
            if protocol is None or (info is not None and info.protocol == protocol):
                pieces.setdefault(ev.flow or 0, []).append((str(ev.direction), ev.data))
    return [pieces[k] for k in sorted(pieces)]


def _recv_exactly(sock: socket.socket, n: int) -> None:
    while n:
        data = sock.recv(min(n, 1 << 16))
        if not data:
            raise ConnectionError("closed early")
        n -= len(data)


class Replayer:
    """A listener on 127.0.0.1 and the client side: :meth:`one` plays one conversation."""

    def __init__(self, port: int = 0) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.done = 0

    def one(self, chunks: Chunks) -> None:
        client = socket.create_connection(("127.0.0.1", self.port))
        server, _ = self.listener.accept()
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for direction, data in chunks:
                a, b = (client, server) if direction == "c2s" else (server, client)
                a.sendall(data)
                _recv_exactly(b, len(data))
            client.shutdown(socket.SHUT_WR)
            server.recv(1)
        finally:
            server.close()
            client.close()
        self.done += 1

    def close(self) -> None:
        self.listener.close()


def paced(rate: float, seconds: float, action: Callable[[int], None], stop: threading.Event | None = None) -> int:
    """Call ``action(i)`` ``rate`` times a second for ``seconds`` (or until ``stop``); how many ran.
    Falls behind rather than bursting when an action takes longer than its slot."""
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds and not (stop and stop.is_set()):
        due = start + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        action(i)
        i += 1
    return i
