"""AMQP 0-9-1, consumers acking with `multiple` over a prefetch window of thousands.

Real client: pika (BlockingConnection) against Debian's rabbitmq-server. A publisher connection
publishes N messages; a consumer connection sets basic.qos prefetch 5000 and acks with
multiple=true every 1000th delivery, so each ack covers 1000 of ~5000 outstanding tags.
"""

from __future__ import annotations

from pathlib import Path

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"


def session(n: int) -> None:
    pub = _pika.connect()
    pch = pub.channel()
    q = pch.queue_declare("bench.ack_multiple").method.queue
    pch.queue_purge(q)
    for i in range(n):
        pch.basic_publish("", q, _pika.body(i), _pika.PROPS)
    pub.close()
    con = _pika.connect()
    ch = con.channel()
    ch.basic_qos(prefetch_count=5000)
    got: list[int] = []

    def on_message(c, method, props, body) -> None:
        got.append(method.delivery_tag)
        if len(got) % 1000 == 0 or len(got) == n:
            c.basic_ack(method.delivery_tag, multiple=True)

    _pika.consume_and_close(con, ch, ch.basic_consume(q, on_message), q, n, got)


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(1000, int(30_000 * scale))))
