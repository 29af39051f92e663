"""Soak: `streamproto live -i lo` for N minutes (10 by default) while many short conversations come
and go on 127.0.0.1; the live process's memory is sampled every second (VmRSS) and its peak
(VmHWM) reported, with what it captured and decoded.

Many short conversations: recorded AMQP 0-9-1 and RabbitMQ Stream conversations replayed over
new connections, ``--rate`` a second, alternately. Memory must stay flat: every conversation is
closed (FIN both ways) and released at once; what stays of each is its row in `flows`.

    sudo python bench/live_soak.py --minutes 10 --rate 40 [--backend scapy]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.live_traffic import Replayer, conversations, paced  # noqa: E402


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=40.0, help="new conversations per second")
    ap.add_argument("--backend", default="scapy")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    amqp = Replayer()
    stream = Replayer()
    plays = [(amqp, c) for c in conversations(str(ROOT / "captures/amqp091/pika_e2e.pcap"), "amqp091")]
    plays += [(stream, c) for c in conversations(str(ROOT / "captures/rabbitmq_stream/rstream_publish_confirm.pcap"),
                                                  "rabbitmq_stream")]
    cmd = [sys.executable, "-m", "analyzer", "live", "-i", "lo", "--backend", args.backend,
           "-f", f"tcp port {amqp.port} or tcp port {stream.port}",
           "-d", f"{amqp.port}=amqp091", "-d", f"{stream.port}=rabbitmq_stream", "-T", "jsonl"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    if not banner.startswith("streamproto: capturing"):
        sys.exit(f"live did not start: {banner}{proc.stderr.read()}")
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def sample() -> None:
        while not stop.wait(1.0):
            samples.append((time.monotonic() - t0, rss_kib(proc.pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def play(i: int) -> None:
        replayer, chunks = plays[i % len(plays)]
        replayer.one(chunks)

    played = paced(args.rate, args.minutes * 60, play)
    time.sleep(2)  # let the capture take the last packets
    peak = rss_kib(proc.pid, "VmHWM")
    stop.set()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    elapsed = time.monotonic() - t0
    rss = [kib for _, kib in samples]
    first_minute = [kib for t, kib in samples if t <= 60]
    last_minute = [kib for t, kib in samples if t >= elapsed - 62]
    result = {
        "backend": args.backend, "minutes": args.minutes, "rate": args.rate, "conversations_played": played,
        "rss_mib_after_1_min": round(max(first_minute) / 1024, 1) if first_minute else None,
        "rss_mib_last_min": round(max(last_minute) / 1024, 1) if last_minute else None,
        "rss_mib_max_sampled": round(max(rss) / 1024, 1) if rss else None,
        "peak_rss_mib": round(peak / 1024, 1), "exit_code": proc.returncode,
        "summary": [ln for ln in err.splitlines() if ln.startswith("--")],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "samples": samples}) + "\n")
    amqp.close()
    stream.close()


if __name__ == "__main__":
    main()
