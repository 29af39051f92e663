#!/usr/bin/env python3
"""AMQP 0-9-1: streamproto (full decoding, every check) against `tshark -q -z expert` on the same capture.

Builds a synthetic but realistic capture (our encoder + analyzer.pcapwrite): one connection with
publisher confirms publishing N messages (method + header + body per segment, as pika sends them,
server confirms batched), and a consumer connection receiving the same N messages (deliveries
batched per segment as RabbitMQ writes them) and acking each. Then times, each right next to a run of
``tshark -r FILE -q -z expert`` unless said otherwise (the machine's speed drifts, so ratios are taken
per pair, median of 3):

  * streamproto in-process: ``analyze_file`` (every frame decoded and checked, every finding consumed),
  * ``streamproto inspect --only-findings --format jsonl`` (the CLI doing what ``-q -z expert`` does:
    decode everything, print the findings),
  * ``streamproto inspect --format jsonl`` (every frame's whole field tree as JSON), paired with
    ``tshark -r FILE -T ek`` (every packet's whole dissection as JSON),

and prints the ratios (target <= 1.0 for the in-process decoding). Usage: python bench/amqp091_vs_tshark.py [N] [--keep PATH]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from analyzer.api import Finding, Frame
from analyzer.engine import analyze_file
from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp091 import encode as E


def _handshake(conv: TcpConversation) -> None:
    s = E.Script().handshake().open_channel(1)
    for d, data, _ts in s.steps:
        conv.send(str(d), data, mss=65000)


def build(path: str, n: int) -> dict[str, int]:
    body = json.dumps({"order": 0, "region": "eu", "items": [1, 2, 3], "note": "x" * 40}).encode()
    props = {"content-type": "application/json", "delivery-mode": 2, "headers": {"source": "bench"}}
    pub = TcpConversation(("10.0.0.1", 41000), ("10.0.0.2", 5672), step=0.00001)
    pub.handshake()
    _handshake(pub)
    pub.send("c2s", E.method("Confirm.Select", 1), mss=65000)
    pub.send("s2c", E.method("Confirm.SelectOk", 1), mss=65000)
    batch = 50
    for start in range(1, n + 1, batch):
        end = min(start + batch, n + 1)
        for seq in range(start, end):
            pub.send("c2s", E.message(1, body, props, exchange="orders", routing_key=f"eu.new.{seq % 7}"),
                     mss=65000)
        pub.send("s2c", E.method("Basic.Ack", 1, delivery_tag=end - 1, multiple=True), mss=65000)
    pub.send("c2s", E.method("Channel.Close", 1, reply_code=200, reply_text="bye"), mss=65000)
    pub.send("s2c", E.method("Channel.CloseOk", 1), mss=65000)
    pub.send("c2s", E.method("Connection.Close", reply_code=200, reply_text="bye"), mss=65000)
    pub.send("s2c", E.method("Connection.CloseOk"), mss=65000)
    pub.close()

    con = TcpConversation(("10.0.0.3", 42000), ("10.0.0.2", 5672), step=0.00001)
    con.handshake()
    _handshake(con)
    con.send("c2s", E.method("Basic.Qos", 1, prefetch_count=100), mss=65000)
    con.send("s2c", E.method("Basic.QosOk", 1), mss=65000)
    con.send("c2s", E.method("Basic.Consume", 1, queue="orders-eu", consumer_tag="bench"), mss=65000)
    con.send("s2c", E.method("Basic.ConsumeOk", 1, consumer_tag="bench"), mss=65000)
    per_segment = 10
    for start in range(1, n + 1, per_segment):
        tags = range(start, min(start + per_segment, n + 1))
        con.send("s2c", b"".join(E.message(1, body, props, name="Basic.Deliver", consumer_tag="bench",
                                           delivery_tag=t, exchange="orders", routing_key="eu.new")
                                 for t in tags), mss=65000)
        for t in tags:
            con.send("c2s", E.method("Basic.Ack", 1, delivery_tag=t), mss=65000)
    con.send("c2s", E.method("Basic.Cancel", 1, consumer_tag="bench"), mss=65000)
    con.send("s2c", E.method("Basic.CancelOk", 1, consumer_tag="bench"), mss=65000)
    con.send("c2s", E.method("Connection.Close", reply_code=200, reply_text="bye"), mss=65000)
    con.send("s2c", E.method("Connection.CloseOk"), mss=65000)
    con.close()
    packets = write_capture(path, [pub, con])
    return {"published": n, "consumed": n, "packets": packets}


def best_of(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    args = sys.argv[1:]
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    n = int(args[0]) if args else 50_000
    path = keep or os.path.join(tempfile.gettempdir(), f"amqp091-bench-{n}.pcap")
    facts = build(path, n)
    size = os.path.getsize(path)

    counts = {"frames": 0, "findings": 0, "warnings+": 0}

    def in_process() -> None:
        frames = findings = bad = 0
        for ev in analyze_file(path):
            if isinstance(ev, Frame):
                frames += 1
                for f in ev.findings:
                    findings += 1
                    bad += f.severity != "note"
            elif isinstance(ev, Finding):
                findings += 1
                bad += ev.severity != "note"
        counts.update(frames=frames, findings=findings, **{"warnings+": bad})

    def cli() -> None:
        with open(os.devnull, "wb") as null:
            subprocess.run(["streamproto", "inspect", "--format", "jsonl", path], stdout=null, check=True)

    def tshark() -> None:
        subprocess.run(["tshark", "-r", path, "-q", "-z", "expert"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)

    def cli_findings() -> None:  # what `tshark -q -z expert` prints: the findings, after full decoding
        with open(os.devnull, "wb") as null:
            subprocess.run(["streamproto", "inspect", "--only-findings", "--format", "jsonl", path], stdout=null,
                           check=True)

    def tshark_ek() -> None:  # tshark writing every packet's whole dissection as JSON, like our jsonl
        subprocess.run(["tshark", "-r", path, "-T", "ek"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)

    # The machine's speed drifts over minutes: each run is timed right next to its tshark counterpart,
    # and the ratio reported is the median of the paired ratios.
    plan = (("in-process", in_process, "-q -z expert", tshark),
            ("CLI --only-findings", cli_findings, "-q -z expert", tshark),
            ("CLI jsonl (every frame)", cli, "-T ek", tshark_ek))
    ratios: dict[str, list[float]] = {name: [] for name, *_ in plan}
    times: dict[str, list[float]] = {}
    for _ in range(3):
        for name, ours, theirs_name, theirs in plan:
            t_ours = best_of(ours, 1)
            t_theirs = best_of(theirs, 1)
            times.setdefault(name, []).append(t_ours)
            times.setdefault(theirs_name, []).append(t_theirs)
            ratios[name].append(t_ours / t_theirs)
    print(f"capture: {path} ({size / 1e6:.1f} MB, {facts['packets']} packets, {facts['published']} published, "
          f"{facts['consumed']} consumed messages)")
    print(f"streamproto: {counts['frames']} frames, {counts['findings']} findings ({counts['warnings+']} warning+)")
    for theirs_name in ("-q -z expert", "-T ek"):
        print(f"tshark -r FILE {theirs_name:<13} best {min(times[theirs_name]):6.2f} s")
    for name, _ours, theirs_name, _theirs in plan:
        print(f"streamproto {name:<24} best {min(times[name]):6.2f} s   ratio to tshark {theirs_name} "
              f"(median of 3 paired runs): {statistics.median(ratios[name]):.2f}")
    print("target: in-process ratio <= 1.0")
    if keep is None:
        os.unlink(path)


if __name__ == "__main__":
    main()
