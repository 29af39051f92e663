"""``-w FILE``: every captured packet written to pcapng as it arrives.

Written before the packets are decoded and flushed after every batch, so a run that is interrupted
(Ctrl-C, SIGTERM, even SIGKILL) leaves a file whose every whole block is readable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

from analyzer.capture import RawPacket
from analyzer.live.sources import CaptureFailed
from analyzer.pcapwrite import LINKTYPES, CaptureWriter

#: Link type number -> the writer's name for it (its other names are the same numbers).
_LINK_NAMES = {num: name for name, num in reversed(LINKTYPES.items())}


class PcapngTee:
    """A pcapng file with one interface; the link type comes from the source or its first packet."""

    def __init__(self, path: str, linktype: int | None = None) -> None:
        self.path = path
        try:
            self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise CaptureFailed(f"cannot write {path}: {exc.strerror or exc}") from None
        self.writer: CaptureWriter | None = None
        self.linktype: int | None = None
        #: Packets of another link type than the file's (a capture program on several interfaces).
        self.skipped = 0
        if linktype is not None:
            self._start(linktype)

    def _start(self, linktype: int) -> None:
        name = _LINK_NAMES.get(linktype)
        if name is None:
            raise CaptureFailed(f"cannot write link type {linktype} to {self.path}")
        self.linktype = linktype
        self.writer = CaptureWriter(self.f, fmt="pcapng", link=name)
        self.f.flush()

    def write(self, packets: Iterable[RawPacket]) -> None:
        try:
            for pkt in packets:
                if self.writer is None:
                    self._start(pkt.linktype)
                if pkt.linktype != self.linktype:
                    self.skipped += 1
                    continue
                self.writer.write_raw(pkt.ts, pkt.data, pkt.orig_len)  # type: ignore[union-attr]
            self.f.flush()
        except OSError as exc:  # a full disk, a removed mount: the capture stops with one line
            raise CaptureFailed(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        if self.f.closed:
            return
        if self.writer is None:  # nothing captured: still a readable (empty) capture
            self._start(1)
        self.f.close()
