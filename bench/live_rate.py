"""Live capture rate: the packet rate `streamproto live -i lo` sustains without kernel drops, per
backend, and `tshark -i lo` decoding the same AMQP 0-9-1 traffic.

Traffic: an AMQP 0-9-1 connection over 127.0.0.1 (a recorded pika session's handshake replayed, the
listener answering with the broker's recorded bytes), then the recorded Basic.Publish (method,
content header and body: 89 bytes) sent over and over at a fixed rate for ``--seconds``, one write
each (TCP_NODELAY), while the capture runs; the rate steps up until the capture drops packets.
Each step starts a fresh capture, waits for it to say it is capturing, sends, leaves it 2 s to
drain its backlog, stops it with SIGINT and reads what it says it captured and what was dropped
(`live`: the socket's PACKET_STATISTICS or dumpcap's count; tshark: dumpcap's count). A `live`
step counts as sustained only if nothing was dropped and every message was decoded.

Every capture decodes fully and writes JSON to /dev/null: `live -T jsonl`, `tshark -T ek`.

    sudo python bench/live_rate.py [--seconds 8] [--rates 2000,5000,10000,20000,40000]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.live_traffic import Replayer, conversations  # noqa: E402

HANDSHAKE_END = 21  # pika_e2e's pieces 0-20: connection, channel, exchanges, queue, bindings
PUBLISH = (21, 22, 23)  # Basic.Publish, ContentHeader, ContentBody


def tools(port: int) -> dict[str, list[str]]:
    live = [sys.executable, "-m", "analyzer", "live", "-i", "lo", "-f", f"tcp port {port}",
            "-d", f"{port}=amqp091", "-T", "jsonl"]
    return {
        "live --backend scapy": [*live, "--backend", "scapy"],
        "live --backend tshark": [*live, "--backend", "tshark"],
        "tshark -i lo -T ek": ["tshark", "-i", "lo", "-f", f"tcp port {port}", "-d", f"tcp.port=={port},amqp",
                               "-T", "ek"],
    }


def counts(name: str, err: str) -> tuple[int, int | None, int | None]:
    """(packets captured, dropped, frames decoded) from what the capture printed at its end
    (tshark does not say how many frames it decoded: None)."""
    if name.startswith("live"):
        m = re.search(r"([\d,]+) packets captured, (?:([\d,]+) dropped|drops unknown)", err)
        f = re.search(r"-- frames: ([\d,]+)", err)
        if not m or not f:
            raise RuntimeError(f"no summary from {name}: {err[-500:]}")
        return (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")) if m.group(2) else None,
                int(f.group(1).replace(",", "")))
    captured = re.search(r"(\d+) packets? captured", err)
    dropped = re.search(r"(\d+) packets? dropped", err)
    return int(captured.group(1)) if captured else 0, int(dropped.group(1)) if dropped else 0, None


def step(name: str, cmd: list[str], replayer: Replayer, chunks: list[tuple[str, bytes]], rate: float,
         seconds: float) -> dict:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err_lines: list[str] = []
    ready = threading.Event()

    def read_err() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            err_lines.append(line)
            if line.startswith(("streamproto: capturing", "Capturing on")):
                ready.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    if not ready.wait(60):
        proc.kill()
        raise RuntimeError(f"{name} did not start: {''.join(err_lines)}")
    time.sleep(0.5)
    client = socket.create_connection(("127.0.0.1", replayer.port))
    server, _ = replayer.listener.accept()
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for direction, data in chunks[:HANDSHAKE_END]:
        a, b = (client, server) if direction == "c2s" else (server, client)
        a.sendall(data)
        n = len(data)
        while n:
            n -= len(b.recv(n))
    publish = b"".join(chunks[i][1] for i in PUBLISH)

    def drain() -> None:
        while server.recv(1 << 16):
            pass

    threading.Thread(target=drain, daemon=True).start()
    sent = 0
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = int(elapsed * rate) + 1
        while sent < due:
            client.sendall(publish)
            sent += 1
        time.sleep(0.0005)
    sent_seconds = time.monotonic() - start
    client.close()
    time.sleep(5.0)  # the capture works through its backlog
    proc.send_signal(signal.SIGINT)
    stopping = time.monotonic()
    proc.wait(timeout=600)
    # live stops at once (what it has not read by then is not decoded); tshark decodes everything
    # dumpcap captured before it exits, so a long exit shows a backlog it had not kept up with.
    exit_after = time.monotonic() - stopping
    reader.join(timeout=10)
    server.close()
    captured, dropped, decoded = counts(name, "".join(err_lines))
    # live: every message decoded (3 frames each, after the handshake's); a capture that fell
    # behind without the kernel dropping (its backlog cut at the stop) does not count as keeping up.
    behind = decoded is not None and decoded < 3 * sent
    return {"tool": name, "target_msgs_per_s": rate, "messages": sent, "seconds": round(sent_seconds, 2),
            "packets_captured": captured, "packets_per_s": round(captured / sent_seconds), "dropped": dropped,
            "frames": decoded, "exit_after_stop_s": round(exit_after, 1),
            "kept_up": not dropped and not behind and exit_after < 5.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rates", default="2000,5000,10000,20000,40000", help="messages per second, increasing")
    ap.add_argument("--only", help="run only the tools whose name contains this")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    (chunks,) = conversations(str(ROOT / "captures/amqp091/pika_e2e.pcap"), "amqp091")
    replayer = Replayer()
    rows = []
    for name, cmd in tools(replayer.port).items():
        if args.only and args.only not in name:
            continue
        for rate in (float(r) for r in args.rates.split(",")):
            row = step(name, cmd, replayer, chunks, rate, args.seconds)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if not row["kept_up"]:
                break  # past what it sustains
    print()
    print(f"{'tool':24} {'sustained without drops (packets/s)':>36} {'first step it did not keep up':>44}")
    for name in dict.fromkeys(r["tool"] for r in rows):
        mine = [r for r in rows if r["tool"] == name]
        clean = [r["packets_per_s"] for r in mine if r["kept_up"]]
        lossy = [f"{r['packets_per_s']:,}/s ({r['dropped']:,} dropped, {r['frames'] or '?'} frames)"
                 for r in mine if not r["kept_up"]]
        print(f"{name:24} {max(clean) if clean else 0:>36,} {lossy[0] if lossy else '-':>44}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    replayer.close()


if __name__ == "__main__":
    main()
