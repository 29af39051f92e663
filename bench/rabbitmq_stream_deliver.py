"""Benchmark: Deliver-heavy RabbitMQ Stream traffic through streamproto vs tshark.

Builds a capture with one connection (clean handshake, a subscription with enough credit, then
Deliver frames each carrying one Osiris chunk of AMQP 1.0 messages: >= 200,000 records), decodes it
with ``analyze_file`` and every check on (CRC of every chunk, credit, correlation...), and times
``tshark -r FILE -q -z expert`` on the same file. tshark 4.0 has no RabbitMQ Stream dissector (the
script checks ``tshark -G protocols``), so it only dissects down to TCP and its expert pass.

    python bench/rabbitmq_stream_deliver.py [--records 200000] [--per-chunk 100] [--keep FILE]

Prints records/s for streamproto (frames and checks; and once more with every record's AMQP tree
built, as the tree/JSON output does) and the time ratio to tshark. No assertions: this is a report.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzer.api import Field, Frame  # noqa: E402
from analyzer.engine import analyze_file  # noqa: E402
from analyzer.pcapwrite import TcpConversation, write_capture  # noqa: E402
from dissectors.rabbitmq_stream.encode import (  # noqa: E402
    build_chunk,
    deliver,
    encode_message,
    handshake,
    request,
    response,
    simple_entry,
)


def build(path: str, records: int, per_chunk: int, mss: int) -> tuple[int, int]:
    conv = TcpConversation(("127.0.0.1", 40000), ("127.0.0.1", 5552), step=0.0001)
    conv.handshake()
    for d, raw in handshake(broker_version="3.13.7"):
        conv.send(str(d), raw, mss)
    chunks = (records + per_chunk - 1) // per_chunk
    conv.send("c2s", request("Subscribe", correlation_id=5, subscription_id=0, stream="bench",
                             offset_spec={"type": 1}, credit=min(chunks, 65535)), mss)
    conv.send("s2c", response("Subscribe", correlation_id=5, response_code=1), mss)
    # Distinct message bodies so the CRC of every chunk is really computed over different data.
    body = bytearray()
    done = 0
    granted = min(chunks, 65535)
    for c in range(chunks):
        n = min(per_chunk, records - done)
        msgs = [simple_entry(encode_message(f"order {done + i:08d}".encode(),
                                            application_properties={"i": done + i})) for i in range(n)]
        body += deliver(0, build_chunk(msgs, n, done), version=2, committed_chunk_id=done)
        done += n
        if len(body) > 256 * 1024 or c == chunks - 1:
            conv.send("s2c", bytes(body), mss)
            body.clear()
        if c + 1 == granted and granted < chunks:
            conv.send("c2s", request("Credit", subscription_id=0, credit=min(chunks - granted, 65535)), mss)
            granted += min(chunks - granted, 65535)
    conv.send("c2s", request("Close", correlation_id=6, closing_code=1, closing_reason="done"), mss)
    conv.send("s2c", response("Close", correlation_id=6, response_code=1), mss)
    conv.close()
    packets = write_capture(path, [conv])
    return packets, done


def walk(fields: list[Field] | None) -> int:
    n = 0
    for f in fields or ():
        n += 1 + walk(f.children)
    return n


def run_streamproto(path: str, materialise: bool) -> tuple[float, int, int, int]:
    t0 = time.perf_counter()
    records = frames = findings = 0
    for ev in analyze_file(path):
        if isinstance(ev, Frame):
            frames += 1
            findings += len(ev.findings)
            if ev.command == "Deliver":
                ch = ev.fields[-1]
                nr = ch.child("num_records")
                records += nr.value if nr is not None else 0
                if materialise:
                    walk(ev.fields)
        else:
            findings += 1
    return time.perf_counter() - t0, records, frames, findings


def run_tshark(path: str) -> tuple[float | None, str]:
    if shutil.which("tshark") is None:
        return None, "tshark not installed"
    protos = subprocess.run(["tshark", "-G", "protocols"], capture_output=True, text=True).stdout
    args = ["tshark", "-r", path, "-q", "-z", "expert"]
    if any("rabbitmq-stream" in line.lower() for line in protos.splitlines()):
        args[3:3] = ["-d", "tcp.port==5552,rabbitmq-stream"]
        how = "tshark with its rabbitmq-stream dissector"
    else:
        how = "tshark (no RabbitMQ Stream dissector: TCP + expert only)"
    t0 = time.perf_counter()
    subprocess.run(args, capture_output=True, check=False)
    return time.perf_counter() - t0, how


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--per-chunk", type=int, default=100)
    ap.add_argument("--mss", type=int, default=65_483, help="TCP segment size (loopback default)")
    ap.add_argument("--keep", help="write the capture here and keep it")
    args = ap.parse_args()
    tmp = None
    path = args.keep
    if path is None:
        fd, tmp = tempfile.mkstemp(suffix=".pcap")
        os.close(fd)
        path = tmp
    try:
        t0 = time.perf_counter()
        packets, records = build(path, args.records, args.per_chunk, args.mss)
        print(f"capture: {path}  {packets} packets, {os.path.getsize(path) / 1e6:.1f} MB, {records} records in "
              f"{(records + args.per_chunk - 1) // args.per_chunk} Deliver frames (built in "
              f"{time.perf_counter() - t0:.1f} s)")
        sp, got, frames, findings = run_streamproto(path, materialise=False)
        print(f"streamproto (frames + every check):      {sp:7.2f} s  {got / sp:12,.0f} records/s  "
              f"({frames} frames, {findings} findings)")
        spm, _, _, _ = run_streamproto(path, materialise=True)
        print(f"streamproto (+ every record's AMQP tree): {spm:7.2f} s  {got / spm:12,.0f} records/s")
        ts, how = run_tshark(path)
        if ts is None:
            print(how)
        else:
            print(f"{how}: {ts:7.2f} s  {got / ts:12,.0f} records/s")
            print(f"ratio streamproto/tshark: {sp / ts:.2f}x (checks), {spm / ts:.2f}x (full trees)")
        if got != records:
            print(f"WARNING: decoded {got} records, built {records}")
    finally:
        if tmp is not None:
            os.unlink(tmp)


if __name__ == "__main__":
    main()
