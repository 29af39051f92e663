#!/usr/bin/env python3
"""An Iggy server of our own, for recording real Iggy clients: one dialect per run, 127.0.0.1 only.

    python captures/iggy/responder.py --dialect C --port 8090 --log /tmp/run.jsonl

Dialects as in /work/shared/specs/iggy.md §0: L1, Z1, Z2, C (classic framing, §1) and V (the
256-byte consensus header, §9). State lives in memory (broker.py); every request and its answer is
appended to the --log file as one JSON line, so the facts of a capture are what was on the wire.
Stops on SIGINT/SIGTERM. Not a broker: one node, no persistence, no permissions, one user iggy/iggy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import Broker, Session  # noqa: E402
from wire import DIALECTS, INVALID_COMMAND  # noqa: E402

MAX_FRAME = 64 * 1024 * 1024  # larger frames are not Iggy traffic (§9.1 drops them; §1.1 caps lower)


class RunLog:
    """Appends one JSON object per line, flushed at once so a killed run keeps what it saw."""

    def __init__(self, path: Path | None) -> None:
        self.file = path.open("a") if path else None

    def write(self, record: dict) -> None:
        if self.file:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()


class Responder:
    def __init__(self, dialect: str, log: RunLog, port: int) -> None:
        self.dialect = DIALECTS[dialect]
        self.broker = Broker(self.dialect, port)
        self.log = log
        self.clients = 0

    def new_session(self, writer: asyncio.StreamWriter) -> Session:
        self.clients += 1
        host, port = writer.get_extra_info("peername")[:2]
        s = Session(self.clients, f"{host}:{port}")
        self.broker.sessions[s.client_id] = s
        self.log.write({"event": "connect", "conn": s.client_id, "peer": s.address})
        return s

    async def serve_classic(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """§1: request = length u32 (code + payload) + code u32 + payload;
        response = status u32 + length u32 (payload only) + payload."""
        s = self.new_session(writer)
        seq = 0
        try:
            while True:
                head = await reader.readexactly(8)
                length, code = struct.unpack("<II", head)
                if length < 4 or length > MAX_FRAME:
                    # §1.1: a length below 4 is InvalidCommand; the stream cannot be resynchronised.
                    status, body, payload = INVALID_COMMAND, b"", b""
                else:
                    payload = await reader.readexactly(length - 4)
                    status, body = self.broker.handle(s, code, payload)
                writer.write(struct.pack("<II", status, len(body)) + body)
                await writer.drain()
                seq += 1
                self.log.write({"conn": s.client_id, "seq": seq, "code": code, "status": status,
                                "request_len": 4 + length, "response_len": 8 + len(body), **s.note})
                if status == INVALID_COMMAND and (length < 4 or length > MAX_FRAME):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.close(s, writer)

    def close(self, s: Session, writer: asyncio.StreamWriter) -> None:
        self.log.write({"event": "disconnect", "conn": s.client_id})
        for st in self.broker.streams.values():
            for t in st.topics.values():
                for g in t.groups.values():
                    if g.members.pop(s.client_id, None) is not None:
                        self.broker.rebalance(t, g)
        self.broker.sessions.pop(s.client_id, None)
        writer.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dialect", required=True, choices=sorted(DIALECTS))
    ap.add_argument("--port", type=int, default=8090)
    ap.add_argument("--log", type=Path, help="JSON-lines run log (appended)")
    args = ap.parse_args()
    responder = Responder(args.dialect, RunLog(args.log), args.port)
    if responder.dialect.vsr:
        from vsr import serve_vsr

        def handler(r, w):
            return serve_vsr(responder, r, w)
    else:
        handler = responder.serve_classic
    server = await asyncio.start_server(handler, "127.0.0.1", args.port, limit=MAX_FRAME)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"iggy responder dialect={args.dialect} listening on 127.0.0.1:{args.port}", flush=True)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
