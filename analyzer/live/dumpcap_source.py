"""``--backend tshark``: Wireshark's dumpcap, as pyshark's live capture runs it.

pyshark finds the programs (tshark, dumpcap), checks the interface and builds dumpcap's command
line (interface, capture filter, pcapng to standard output), exactly as its ``LiveCapture`` does
before it pipes dumpcap into tshark. Here dumpcap's pcapng goes to this process instead, read by
the project's own pcapng reader in a thread (its reads block; the loop must not), and the raw
packets go to the engine: tshark decodes nothing. Users who already have Wireshark's capture
rights (the ``wireshark`` group, dumpcap's file capabilities) capture without root this way.
"""

from __future__ import annotations

import io
import queue
import re
import socket
import subprocess
import threading
import time
from typing import Any

from analyzer.capture import CaptureError, RawPacket, _Chunks, _read_pcapng
from analyzer.live.sources import BATCH, CaptureFailed, CaptureStats

#: How long dumpcap may take to open the interface and write its header.
START_TIMEOUT = 20.0
_STATS = re.compile(r"Packets received/dropped on interface '[^']*': (\d+)/(\d+)")
_END = object()


def _pyshark() -> tuple[Any, Any, Any]:
    try:
        import pyshark
        from pyshark.tshark.tshark import TSharkNotFoundException, get_process_path
    except ImportError as exc:  # pragma: no cover - pyshark is a dependency
        raise CaptureFailed(f"--backend tshark needs pyshark ({exc}); pip install pyshark") from None
    return pyshark, TSharkNotFoundException, get_process_path


def _missing(what: str) -> CaptureFailed:
    return CaptureFailed(f"--backend tshark needs {what}, which is not installed (apt-get install tshark)")


def interfaces() -> list[tuple[str, str]]:
    """dumpcap's interfaces (``tshark -D``, through pyshark)."""
    _, not_found, _ = _pyshark()
    from pyshark.tshark.tshark import get_tshark_interfaces

    try:
        names = get_tshark_interfaces()
    except not_found:
        raise _missing("tshark") from None
    except subprocess.CalledProcessError as exc:
        raise CaptureFailed(f"tshark -D failed (exit code {exc.returncode})") from None
    return [(name, "") for name in names]


class _Watched(io.RawIOBase):
    """dumpcap's standard output, noting when its first bytes (the pcapng header) arrive."""

    def __init__(self, raw: Any, started: threading.Event) -> None:
        self.raw = raw
        self.started = started

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        if data:
            self.started.set()
        return data


class DumpcapSource:
    def __init__(self, iface: str, bpf: str, buffer: int = 16 * 1024 * 1024) -> None:
        pyshark, not_found, get_process_path = _pyshark()
        self.name = f"{iface} (dumpcap)"
        self.linktype: int | None = None  # known from the header's interface block
        try:
            dumpcap = get_process_path(process_name="dumpcap")
            capture = pyshark.LiveCapture(interface=iface, bpf_filter=bpf)
        except not_found:
            raise _missing("dumpcap") from None
        try:
            socket.if_nametoindex(iface)
        except OSError:
            # Not a system interface: one of dumpcap's own ("any", a number from -D, extcap)?
            # pyshark asks tshark -D, which lists only what the user may capture on.
            try:
                capture._verify_capture_parameters()
            except Exception:  # pyshark's UnknownInterfaceException (its message lists every interface)
                raise CaptureFailed(f"unknown interface {iface!r} (see `streamproto live -D --backend tshark`)"
                                    ) from None
        # dumpcap's kernel buffer in MiB (-B), as large as the scapy backend's.
        args = [dumpcap, *capture._get_dumpcap_parameters(), "-B", str(max(1, buffer >> 20))]
        try:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        except OSError as exc:
            raise CaptureFailed(f"cannot run {dumpcap}: {exc.strerror or exc}") from None
        self._stderr: list[bytes] = []
        self._packets: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._received = 0
        self._dropped: int | None = None
        started = threading.Event()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._reader, args=(_Watched(self.proc.stdout, started),), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not started.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
        if not started.is_set() or self.proc.poll() is not None:
            self.close()
            raise CaptureFailed(self._error() or f"dumpcap did not start capturing on {iface}")

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def _reader(self, stream: _Watched) -> None:
        put = self._packets.put
        try:
            for pkt in _read_pcapng("dumpcap", _Chunks(stream)):  # type: ignore[arg-type]
                put(pkt)
        except CaptureError as exc:
            put(exc)
        except (OSError, ValueError):  # the pipe closed under the reader at stop
            pass
        put(_END)

    def _error(self) -> str | None:
        """dumpcap's complaint in one line: the message and the reason in parentheses after it."""
        self.proc.wait(timeout=5) if self.proc.poll() is None else None
        lines = [ln.decode("utf-8", "replace").strip() for ln in self._stderr]
        lines = [ln for ln in lines if ln and not ln.startswith("Capturing on") and "cap_set_proc" not in ln]
        if not lines:
            return None
        text = lines[0].removeprefix("dumpcap: ")
        # The reason follows in parentheses on one of the next lines: "(socket: Operation not
        # permitted)", "... capture filter (can't parse filter expression: syntax error)."
        for line in lines[1:3]:
            m = re.search(r"\(([^()]*)\)", line)
            if m:
                text += f" ({m.group(1)})"
                break
        return f"dumpcap: {text}"

    def now(self) -> float:
        return time.time()

    def read(self, timeout: float) -> list[RawPacket]:
        q = self._packets
        try:
            item = q.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return []
        out: list[RawPacket] = []
        while True:
            if item is _END:
                q.put(_END)  # every later read sees the end as well
                if not out:
                    raise CaptureFailed(self._error() or "dumpcap stopped capturing")
                break
            if isinstance(item, CaptureError):
                raise CaptureFailed(f"reading dumpcap's output: {item}")
            if self.linktype is None:
                self.linktype = item.linktype
            # Microseconds, as the pcapng copy keeps them (dumpcap's are nanoseconds, which a
            # float of epoch seconds cannot carry through a file exactly): the copy reads back
            # the same times.
            out.append(item._replace(ts=round(item.ts * 1e6) / 1e6))
            if len(out) >= BATCH:
                break
            try:
                item = q.get_nowait()
            except queue.Empty:
                break
        self._received += len(out)
        return out

    def stats(self) -> CaptureStats:
        if self._dropped is None:
            for line in self._stderr:
                m = _STATS.search(line.decode("utf-8", "replace"))
                if m:
                    self._dropped = int(m.group(2))
        return CaptureStats(self._received, self._dropped)

    def close(self) -> None:
        proc = self.proc
        if proc.poll() is None:
            proc.terminate()  # dumpcap stops cleanly on SIGTERM and prints its drop counts
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        time.sleep(0.05)  # let the stderr thread take dumpcap's last lines
