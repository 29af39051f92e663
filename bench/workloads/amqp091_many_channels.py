"""AMQP 0-9-1, many channels per connection publishing and consuming.

Real client: pika (BlockingConnection) against Debian's rabbitmq-server. One consumer connection
opens 300 channels, each consuming its own queue with prefetch 50 and acking every delivery; one
publisher connection opens 300 channels and publishes round-robin over them, N messages in all.
"""

from __future__ import annotations

from pathlib import Path

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"
CHANNELS = 300


def session(n: int) -> None:
    con = _pika.connect(channel_max=1000)
    got: list[int] = []

    def on_message(c, method, props, body) -> None:
        got.append(method.delivery_tag)
        c.basic_ack(method.delivery_tag)

    chans = []
    for i in range(CHANNELS):
        ch = con.channel()
        q = ch.queue_declare(f"bench.many.{i}", auto_delete=True).method.queue
        ch.basic_qos(prefetch_count=50)
        ch.basic_consume(q, on_message)
        chans.append(ch)
    pub = _pika.connect(channel_max=1000)
    pchans = [pub.channel() for _ in range(CHANNELS)]
    for i in range(n):
        pchans[i % CHANNELS].basic_publish("", f"bench.many.{i % CHANNELS}", _pika.body(i), _pika.PROPS)
        if i % 500 == 0:
            con.process_data_events(0)
    _pika.consume(con, n, got)
    for ch in pchans:
        ch.close()
    pub.close()
    for ch in chans:
        ch.close()
    con.close()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(CHANNELS, int(20_000 * scale))))
