"""AMQP 0-9-1, thousands of short connections: open, a channel, publish three messages, close.

Real client: pika (BlockingConnection) against Debian's rabbitmq-server, one connection after
another (each a TCP conversation of its own).
"""

from __future__ import annotations

from pathlib import Path

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"


def session(n: int) -> None:
    setup = _pika.connect()
    sch = setup.channel()
    q = sch.queue_declare("bench.short").method.queue
    for c in range(n):
        conn = _pika.connect()
        ch = conn.channel()
        for i in range(3):
            ch.basic_publish("", q, _pika.body(c * 3 + i), _pika.PROPS)
        conn.close()
    sch.queue_delete(q)
    setup.close()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(50, int(2_000 * scale))))
