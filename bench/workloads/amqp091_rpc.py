"""AMQP 0-9-1, request/reply (RPC) over direct reply-to.

Real client: pika (BlockingConnection) against Debian's rabbitmq-server. A server connection (in a
thread of its own) consumes a request queue with prefetch 50 and answers each request on its
``reply_to`` with the request's ``correlation_id``, then acks it; a client connection consumes
``amq.rabbitmq.reply-to`` without acks and makes N calls one after the other, each waiting for its
reply. Small messages without a content type, one round trip each: about one frame per packet.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pika

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"
QUEUE = "bench.rpc"
REPLY_TO = "amq.rabbitmq.reply-to"


def _server(ready: threading.Event, stop: threading.Event) -> None:
    conn = _pika.connect()
    ch = conn.channel()
    ch.queue_declare(QUEUE)
    ch.queue_purge(QUEUE)
    ch.basic_qos(prefetch_count=50)

    def on_request(c, method, props, body) -> None:
        c.basic_publish("", props.reply_to, b"done:" + body[:24],
                        pika.BasicProperties(correlation_id=props.correlation_id))
        c.basic_ack(method.delivery_tag)

    ch.basic_consume(QUEUE, on_request)
    ready.set()
    while not stop.is_set():
        conn.process_data_events(time_limit=0.1)
    ch.queue_delete(QUEUE)
    conn.close()


def session(n: int) -> None:
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(target=_server, args=(ready, stop))
    server.start()
    try:
        if not ready.wait(60):
            raise SystemExit("the RPC server did not start")
        conn = _pika.connect()
        ch = conn.channel()
        replies: list[str] = []
        ch.basic_consume(REPLY_TO, lambda c, m, p, b: replies.append(p.correlation_id), auto_ack=True)
        for i in range(n):
            ch.basic_publish("", QUEUE, _pika.body(i), pika.BasicProperties(reply_to=REPLY_TO, correlation_id=str(i)))
            _pika.consume(conn, i + 1, replies, timeout=30)
        conn.close()
        if replies != [str(i) for i in range(n)]:
            raise SystemExit(f"RPC: {len(replies)} replies to {n} calls, or out of order")
    finally:
        stop.set()
        server.join()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(200, int(6_000 * scale))))
