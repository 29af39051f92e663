#!/usr/bin/env python3
"""The workload shapes of issue 15, as captures for bench/vs_tshark.py.

    python bench/workloads.py [--out DIR] [NAME ...]      (default: every workload, into bench/work/)

A capture is made only when it is missing from DIR. Where a real client can produce the shape it is
recorded from that client against Debian's rabbitmq-server (a private broker bound to 127.0.0.1,
started and stopped here; tcpdump on lo); otherwise it is built with the project's encoders:

- ``amqp091_ack_multiple`` (pika): a consumer with a prefetch window of 5,000 acking with
  ``multiple`` every 1,000 deliveries, 40,000 messages;
- ``amqp091_many_channels`` (pika): one connection, 300 channels, each declaring a queue and
  publishing 40 messages;
- ``amqp091_short_connections`` (pika): 2,000 connections, each opening a channel, publishing one
  message and closing;
- ``amqp091_large_bodies`` (pika): 40 messages of 1 MiB published and consumed back (frame_max
  131,072: 9 body frames each, many TCP segments);
- ``amqp091_confirms`` (pika): a publisher with confirms, 10,000 messages;
- ``rabbitmq_stream_subbatch`` (encoder): Publish frames of gzip sub-batches and Deliver chunks
  holding gzip sub-batches, 3,000 frames of 100 AMQP 1.0 messages each way. Encoder-built because the
  Debian broker here (3.10) and rstream do not record reliably in a bounded time;
- ``iggy_send_poll`` (encoder, dialect C): 3,000 SEND_MESSAGES of 10 messages and 3,000 polls
  answered with 10 messages (no Iggy server can run here);
- ``amqp_fast_fragmented`` (encoder): 4,000 messages of 2,000 octets sent in fragments of 500
  (no AMQP/Fast implementation survives).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORK = ROOT / "bench" / "work"
BROKER_STATE = Path("/tmp/streamproto-bench-broker")
BROKER_NODE = "spbench@localhost"
PORT = 5672


# ------------------------------------------------------------------------- real clients (pika)
def _conn():  # type: ignore[no-untyped-def]
    import pika

    return pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=PORT))


def _publish_many(queue: str, n: int, body: bytes) -> None:
    c = _conn()
    ch = c.channel()
    ch.queue_declare(queue, auto_delete=False)
    ch.queue_purge(queue)
    for _ in range(n):
        ch.basic_publish("", queue, body)
    c.close()


def ack_multiple_setup() -> None:
    _publish_many("bench.ack", 40_000, b'{"order": 1, "qty": 10}')


def ack_multiple() -> None:
    c = _conn()
    ch = c.channel()
    ch.basic_qos(prefetch_count=5000)
    seen = 0
    for method, _props, _body in ch.consume("bench.ack", inactivity_timeout=5):
        if method is None:
            break
        seen += 1
        if seen % 1000 == 0:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if seen == 40_000:
            break
    ch.cancel()
    c.close()


def many_channels() -> None:
    c = _conn()
    chans = [c.channel() for _ in range(300)]
    for i, ch in enumerate(chans):
        ch.queue_declare(f"bench.ch{i}", auto_delete=True)
    for _ in range(40):
        for i, ch in enumerate(chans):
            ch.basic_publish("", f"bench.ch{i}", b"tick %d" % i)
    for ch in chans:
        ch.close()
    c.close()


def short_connections() -> None:
    import pika

    for i in range(2000):
        c = _conn()
        ch = c.channel()
        ch.basic_publish("", "bench.short", b"hello %d" % i, pika.BasicProperties(content_type="text/plain"))
        c.close()


def large_bodies() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    c = _conn()
    ch = c.channel()
    ch.queue_declare("bench.large", auto_delete=True)
    for _ in range(40):
        ch.basic_publish("", "bench.large", body)
    got = 0
    for method, _props, _body in ch.consume("bench.large", inactivity_timeout=10):
        if method is None:
            break
        ch.basic_ack(method.delivery_tag)
        got += 1
        if got == 40:
            break
    ch.cancel()
    c.close()


def confirms() -> None:
    import pika

    c = _conn()
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare("bench.confirm", auto_delete=True)
    props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
    for i in range(10_000):
        ch.basic_publish("", "bench.confirm", b'{"n": %d}' % i, props)
    c.close()


def _record(out: Path, fn: Callable[[], None]) -> None:
    tmp = out.with_suffix(".tmp")
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-U", "-B", "65536", "-w", str(tmp),
                             f"tcp port {PORT}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        fn()
    finally:
        time.sleep(1)
        dump.send_signal(signal.SIGINT)
        dump.wait(10)
    tmp.rename(out)


# ------------------------------------------------------------------------------------ encoders
def rabbitmq_stream_subbatch(out: Path) -> None:
    from analyzer.pcapwrite import TcpConversation, write_capture
    from dissectors.rabbitmq_stream.encode import (
        build_chunk,
        deliver,
        encode_message,
        handshake,
        request,
        response,
        sub_batch_entry,
    )

    conv = TcpConversation(("127.0.0.1", 40100), ("127.0.0.1", 5552), ts=1_700_000_000.0, step=0.0002)
    conv.handshake()
    for d, data in handshake():
        conv.send(str(d), data, 65000)
    conv.send("c2s", request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="",
                             stream="bench"), 65000)
    conv.send("s2c", response("DeclarePublisher", correlation_id=10, response_code=1), 65000)
    conv.send("c2s", request("Subscribe", correlation_id=11, subscription_id=0, stream="bench",
                             offset_spec={"type": 1}, credit=10), 65000)
    conv.send("s2c", response("Subscribe", correlation_id=11, response_code=1), 65000)
    for n in range(3000):
        msgs = [encode_message(b'{"sensor": %d, "value": 21.5}' % (n * 100 + i)) for i in range(100)]
        conv.send("c2s", request("Publish", publisher_id=1, messages=[
            {"publishing_id": n + 1, "sub_batch": msgs, "compression": 1}]), 1448)
        conv.send("s2c", request("PublishConfirm", publisher_id=1, publishing_ids=[n + 1]), 1448)
        conv.send("s2c", deliver(0, build_chunk([sub_batch_entry(msgs, 1)], 100, n * 100,
                                                timestamp=1_700_000_000_000 + n)), 1448)
        conv.send("c2s", request("Credit", subscription_id=0, credit=1), 1448)
    conv.close()
    write_capture(str(out), [conv])


def iggy_send_poll(out: Path) -> None:
    from dissectors.iggy import encode as E

    s = E.Script()
    s.c(E.request("PING", "C")).s(E.response())
    E.login(s, "C")
    for n in range(3000):
        msgs = [{"id": 0, "payload": b"event %d: temperature 21.5" % (n * 10 + i),
                 "headers": [{"key": "n", "kind": 11, "value": i}]} for i in range(10)]
        s.c(E.request("SEND_MESSAGES", "C", stream_id=0, topic_id=0, messages=msgs,
                      partitioning={"kind": 2, "value": 0})).s(E.response())
        s.c(E.request("POLL_MESSAGES", "C", consumer={"kind": 1, "id": 1}, stream_id=0, topic_id=0,
                      partition_id=0, strategy={"kind": 1, "value": n * 10}, count=10, auto_commit=0))
        s.s(E.polled("C", E._stored("C", msgs, first_id=0x1000 + n * 10), partition_id=0))
    s.c(E.request("PING", "C")).s(E.response())
    s.pcap(str(out))


def amqp_fast_fragmented(out: Path) -> None:
    from analyzer.pcapwrite import TcpConversation, write_capture
    from dissectors.amqp_fast import encode as E

    s = E.Script().negotiate().open_channel(1).open_handle(1, 1)
    body = bytes(i & 0xFF for i in range(2000))
    head = E.head(len(body), mime_type="application/octet-stream")
    for _ in range(4000):
        s.c(E.message("HANDLE SEND", 1, body, fragment=500, head_bytes=head, dest_name="queue.a"))
    s.close()
    conv = TcpConversation(("127.0.0.1", 40200), ("127.0.0.1", 3018), ts=1_700_000_000.0, step=0.0001)
    conv.handshake()
    for d, data, _ts in s.steps:
        conv.send(str(d), data, 1448)
    conv.close()
    write_capture(str(out), [conv])


#: name -> (source, setup before recording or None, recorded client function or encoder builder)
PIKA: dict[str, tuple[Callable[[], None] | None, Callable[[], None]]] = {
    "amqp091_ack_multiple": (ack_multiple_setup, ack_multiple),
    "amqp091_many_channels": (None, many_channels),
    "amqp091_short_connections": (None, short_connections),
    "amqp091_large_bodies": (None, large_bodies),
    "amqp091_confirms": (None, confirms),
}
ENCODED: dict[str, Callable[[Path], None]] = {
    "rabbitmq_stream_subbatch": rabbitmq_stream_subbatch,
    "iggy_send_poll": iggy_send_poll,
    "amqp_fast_fragmented": amqp_fast_fragmented,
}
NAMES = [*PIKA, *ENCODED]
SOURCE = {**{n: "pika against rabbitmq-server" for n in PIKA}, **{n: "encoder" for n in ENCODED}}


def build(names: list[str], out: Path = WORK) -> dict[str, Path]:
    """Every named workload's capture in ``out``, made where missing."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {n: out / f"{n}.pcap" for n in names}
    for n in names:
        if n in ENCODED and not paths[n].exists():
            ENCODED[n](paths[n])
    todo = [n for n in names if n in PIKA and not paths[n].exists()]
    if todo:
        sys.path.insert(0, str(ROOT / "captures" / "amqp091"))
        from record import port_open, start_private_broker, stop_private_broker

        proc = None if port_open(PORT) else start_private_broker(BROKER_STATE, PORT, BROKER_NODE, 25679)
        try:
            for n in todo:
                setup, fn = PIKA[n]
                if setup is not None:
                    setup()
                _record(paths[n], fn)
        finally:
            if proc is not None:
                stop_private_broker(proc, BROKER_NODE)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=WORK)
    ap.add_argument("names", nargs="*", choices=[[], *NAMES], default=[])
    args = ap.parse_args()
    for n, p in build(args.names or NAMES, args.out).items():
        print(f"{n}: {p} ({p.stat().st_size / 1e6:.1f} MB, {SOURCE[n]})")


if __name__ == "__main__":
    main()
