"""AMQP 0-9-1, a publisher and a consumer at the same time, every delivery acknowledged on its own.

Real client: pika (two BlockingConnections, one thread each) against Debian's rabbitmq-server. The
publisher publishes N messages while the consumer (basic.qos prefetch 200) receives them and sends
one basic.ack per delivery (multiple=false): the traffic of the pika capture issue #15 was
measured on, though sparser on lo (1.3 frames per packet, 2.8 there: amqp091_routed_mixed has 2.4).
"""

from __future__ import annotations

import threading
from pathlib import Path

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"
QUEUE = "bench.publish_consume"


def _publish(n: int) -> None:
    conn = _pika.connect()
    ch = conn.channel()
    for i in range(n):
        ch.basic_publish("", QUEUE, _pika.body(i), _pika.PROPS)
    conn.close()


def session(n: int) -> None:
    con = _pika.connect()
    ch = con.channel()
    ch.queue_declare(QUEUE)
    ch.queue_purge(QUEUE)
    ch.basic_qos(prefetch_count=200)
    got: list[int] = []

    def on_message(c, method, props, body) -> None:
        got.append(method.delivery_tag)
        c.basic_ack(method.delivery_tag)

    tag = ch.basic_consume(QUEUE, on_message)
    publisher = threading.Thread(target=_publish, args=(n,))
    publisher.start()
    _pika.consume_and_close(con, ch, tag, QUEUE, n, got)
    publisher.join()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(1000, int(20_000 * scale))))
