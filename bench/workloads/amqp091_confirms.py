"""AMQP 0-9-1, publishers with confirms.

Real client: pika (BlockingConnection) against Debian's rabbitmq-server. Four publisher
connections, one after the other, each `confirm.select` then N/4 publishes, each waiting for the
broker's basic.ack (pika's blocking confirms), and one mandatory publish to no queue (returned).
"""

from __future__ import annotations

from pathlib import Path

import pika

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"


def session(n: int) -> None:
    for p in range(4):
        conn = _pika.connect()
        ch = conn.channel()
        ch.confirm_delivery()
        q = ch.queue_declare(f"bench.confirms.{p}").method.queue
        for i in range(n // 4):
            ch.basic_publish("", q, _pika.body(i), _pika.PROPS)
        try:
            ch.basic_publish("", "bench.nowhere", b"unroutable", mandatory=True)
        except pika.exceptions.UnroutableError:
            pass
        ch.queue_delete(q)
        conn.close()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(400, int(16_000 * scale))))
