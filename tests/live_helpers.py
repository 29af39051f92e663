"""Shared by the live capture tests: a `streamproto live` process in the background, its output read
as it comes, and the byte streams of recorded conversations replayed over real sockets."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from analyzer.api import Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.follow import DATA, Recorder, recorders
from analyzer.registry import load_dissectors

ROOT = Path(__file__).resolve().parent.parent
#: Bounds every wait on another process: reached only when something is broken.
PATIENCE = 120.0


class Live:
    """`streamproto live ...` running in the background; stdout lines collected by a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "analyzer", "live", *args], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "NO_COLOR": "1"})
        assert self.proc.stderr is not None and self.proc.stdout is not None
        # The capture runs once this line is out (the socket or dumpcap is capturing by then).
        self.banner = self.proc.stderr.readline()
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def started(self) -> bool:
        return self.banner.startswith("streamproto: capturing on")

    def wait_for(self, done: Callable[[list[dict]], bool]) -> None:
        """Until the output so far satisfies ``done`` (or the process ended, or PATIENCE ran out)."""
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline and self.proc.poll() is None:
            if done(self.events()):
                return
            time.sleep(0.05)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in list(self.lines) if line.strip()]

    def stop(self) -> tuple[int, str]:
        """SIGTERM, as a service manager stops it; the exit code and standard error."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=PATIENCE)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=10)
        assert self.proc.stderr is not None
        return self.proc.returncode, self.banner + self.proc.stderr.read()


def frames(events: list[dict]) -> list[dict]:
    return [x for x in events if "command" in x]


def conversations(path: str) -> list[tuple[str | None, list[tuple[str, bytes]]]]:
    """Each conversation of a capture: its protocol and its reassembled bytes, piece by piece in
    capture order with their direction (what `streamproto follow` shows)."""
    analyzer = Analyzer(recorders(load_dissectors()), fallback=Recorder())
    pieces: dict[int, list[tuple[str, bytes]]] = {}
    for ev in analyzer.run(read_packets(path)):
        if isinstance(ev, Frame) and ev.command == DATA and ev.data:
            pieces.setdefault(ev.flow or 0, []).append((str(ev.direction), ev.data))
    return [(analyzer.flow(flow).protocol, chunks) for flow, chunks in sorted(pieces.items())]  # type: ignore[union-attr]


def _recv_exactly(sock: socket.socket, n: int) -> None:
    while n:
        data = sock.recv(min(n, 1 << 16))
        assert data, "the other side closed early"
        n -= len(data)


def connect(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    return client, server


def replay(client: socket.socket, server: socket.socket, chunks: list[tuple[str, bytes]]) -> None:
    """Both sides write their bytes in the recorded order (each piece read by the other side
    before the next is written, so the order across directions is the recording's)."""
    for direction, data in chunks:
        a, b = (client, server) if direction == "c2s" else (server, client)
        a.sendall(data)
        _recv_exactly(b, len(data))


def close(client: socket.socket, server: socket.socket) -> None:
    client.shutdown(socket.SHUT_WR)
    assert server.recv(1) == b""
    server.close()
    client.close()


def listener() -> socket.socket:
    """A listening socket on a free port of 127.0.0.1 (held by the test: no race for the port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s
