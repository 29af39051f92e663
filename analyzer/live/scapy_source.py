"""The default backend: a Linux packet socket opened by scapy, with a compiled BPF filter.

scapy opens the socket (``conf.L2listen``: AF_PACKET, the filter compiled by libpcap and attached
in the kernel before the socket is bound, so nothing unfiltered is ever queued) and receives each
packet with its kernel timestamp and VLAN tag restored. Nothing is dissected by scapy: the raw
bytes and the interface's link type go to the engine, as a file's packets do.
"""

from __future__ import annotations

import errno
import logging
import select
import socket
import struct
from typing import Any

from analyzer.capture import RawPacket
from analyzer.live.sources import BATCH, CaptureFailed, CaptureStats

#: Bytes read per packet: a whole IPv4/IPv6 packet of the loopback MTU (65,536) with its Ethernet
#: header; small enough that the receive buffer stays below malloc's mmap threshold.
SNAPLEN = 65536 + 64
#: The socket's receive buffer: packets wait there while the engine is busy; when it is full the
#: kernel drops them, and counts them. Eight times dumpcap's and tcpdump's 2 MiB: a Python
#: consumer is slower than theirs, and on a busy machine it is also scheduled later.
BUFFER = 16 * 1024 * 1024

# linux/if_arp.h device types -> pcap link types of what a raw packet socket reads on them.
_ETHERNET = {1, 772}  # ARPHRD_ETHER, ARPHRD_LOOPBACK: Ethernet headers (zero MACs on lo)
_RAW_IP = {65534, 519}  # ARPHRD_NONE (tun), ARPHRD_RAWIP: the IP packet itself
SOL_PACKET = 263
SO_RCVBUFFORCE = 33  # asm-generic/socket.h (the socket module does not name it)
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4


def _scapy() -> Any:
    try:
        import scapy.arch  # noqa: F401 - sets conf.L2listen for this platform
        from scapy.config import conf
    except ImportError as exc:  # pragma: no cover - scapy is a dependency
        raise CaptureFailed(f"the scapy backend needs scapy ({exc}); pip install scapy") from None
    return conf


def interfaces() -> list[tuple[str, str]]:
    """(name, addresses) of every interface, as scapy sees them."""
    conf = _scapy()
    rows = []
    for iface in sorted(conf.ifaces.values(), key=lambda i: i.index):
        ips = [ip for family in (4, 6) for ip in iface.ips.get(family, [])]
        rows.append((iface.name, ", ".join(ips)))
    return rows


class ScapySource:
    def __init__(self, iface: str, bpf: str, *, snaplen: int = SNAPLEN, buffer: int = BUFFER) -> None:
        conf = _scapy()
        from scapy.arch.common import compile_filter
        from scapy.error import Scapy_Exception

        self.name = f"{iface} (scapy)"
        self.snaplen = snaplen
        try:
            index = socket.if_nametoindex(iface)
        except OSError:
            raise CaptureFailed(f"unknown interface {iface!r} (see `streamproto live -D`)") from None
        # Checked before the socket is opened (compiling needs no rights), so a mistyped filter is
        # reported as such even without capture rights.
        try:
            compile_filter(bpf, iface=iface)
        except ImportError:
            raise CaptureFailed("cannot compile the capture filter: libpcap is missing "
                                "(apt-get install libpcap0.8)") from None
        except Scapy_Exception as exc:
            raise CaptureFailed(f"bad capture filter {bpf!r}: {_reason(exc)}") from None
        # scapy would warn that it cannot name the link layer for its own dissection, which is
        # not used here: the engine reads the link layer itself.
        logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
        listen = conf.L2listen
        if listen is None:
            raise CaptureFailed("the scapy backend has no capture socket on this platform; try --backend tshark")
        try:
            self.sock = listen(iface=iface, filter=bpf)
        except PermissionError:
            raise CaptureFailed(f"no permission to capture on {iface}: run as root, or give the Python "
                                f"interpreter CAP_NET_RAW and CAP_NET_ADMIN (setcap), or use --backend tshark "
                                f"with Wireshark's capture rights") from None
        except OSError as exc:
            if exc.errno == errno.ENODEV:
                raise CaptureFailed(f"unknown interface {iface!r} (see `streamproto live -D`)") from None
            raise CaptureFailed(f"cannot capture on {iface}: {exc.strerror or exc}") from None
        except Scapy_Exception as exc:
            raise CaptureFailed(f"bad capture filter {bpf!r}: {_reason(exc)}") from None
        ins: socket.socket = self.sock.ins
        hatype = ins.getsockname()[3]
        if hatype in _ETHERNET:
            self.linktype: int | None = 1
        elif hatype in _RAW_IP:
            self.linktype = 101
        else:
            self.sock.close()
            raise CaptureFailed(f"{iface} has device type {hatype} (linux/if_arp.h), which the scapy backend "
                                f"cannot hand over raw; try --backend tshark")
        # The kernel queues packets here while the engine is busy (SO_RCVBUFFORCE, allowed to a
        # capturing process, goes beyond net.core.rmem_max).
        try:
            ins.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, buffer)
        except OSError:
            ins.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
        ins.setblocking(False)
        self._ins = ins
        self._fd = ins.fileno()
        # On loopback every packet passes the socket twice, leaving and arriving; libpcap keeps
        # only the arrival, and so does this (one packet each, as tcpdump -i lo shows them).
        self._skip_outgoing = hatype == 772 or index == _loopback_index()
        self._received = 0
        self._dropped = 0

    def now(self) -> float:
        import time

        return time.time()

    def read(self, timeout: float) -> list[RawPacket]:
        ready, _, _ = select.select([self._fd], [], [], max(timeout, 0.0))
        if not ready:
            return []
        out: list[RawPacket] = []
        recv = self.sock._recv_raw  # scapy's receive: kernel timestamp, VLAN tag put back, no dissection
        ins, snaplen, skip = self._ins, self.snaplen, self._skip_outgoing
        linktype = self.linktype
        count = self._received
        while len(out) < BATCH:
            try:
                data, sa_ll, ts = recv(ins, snaplen)
            except BlockingIOError:
                break
            except OSError as exc:
                raise CaptureFailed(f"capture on {self.name} failed: {exc.strerror or exc}") from None
            if skip and sa_ll[2] == PACKET_OUTGOING:
                continue
            if ts is None:
                import time

                ts = time.time()
            count += 1
            # Microseconds, as the pcapng copy keeps them: the copy reads back the same times.
            out.append(RawPacket(count, round(ts * 1e6) / 1e6, linktype, data, len(data)))  # type: ignore[arg-type]
        self._received = count
        return out

    def stats(self) -> CaptureStats:
        try:
            # struct tpacket_stats {tp_packets, tp_drops}; reading it resets the kernel's counters.
            _, drops = struct.unpack("II", self._ins.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
            self._dropped += drops
        except OSError:
            pass
        return CaptureStats(self._received, self._dropped)

    def close(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None and not sock.closed:
            self.stats()  # the last drop counts, before the socket goes
            sock.close()


def _loopback_index() -> int | None:
    try:
        return socket.if_nametoindex("lo")
    except OSError:
        return None


def _reason(exc: Exception) -> str:
    """scapy's message without its repetition of the expression."""
    text = str(exc)
    if "(" in text and text.endswith(")"):
        return text[text.rindex("(") + 1:-1]
    return text
