"""AMQP 0-9-1, transactions, rejections and redeliveries, and basic.get polling.

Real client: pika (three BlockingConnections, the consumer in a thread of its own) against Debian's
rabbitmq-server. The publisher publishes N messages in a transaction (tx.select once, tx.commit
after every 10), each with a header table and message id of its own, every twentieth time also one
to a second queue; the consumer (basic.qos prefetch 50) acknowledges every delivery on its own,
but rejects every seventh first delivery and nacks every eleventh, both with requeue (so the
broker redelivers them); at the end a second channel drains the second queue with basic.get and
basic.ack, then polls it empty 200 times (basic.get-empty). Recorded on 2026-12-02 as a workload
the benchmark had not seen (the README has its first figures), then kept as one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from bench.workloads import _pika
from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"
WORK, POLL = "bench.tx_reject", "bench.tx_reject.poll"


def _consume(want: int, done: list[int]) -> None:
    conn = _pika.connect()
    ch = conn.channel()
    ch.basic_qos(prefetch_count=50)
    seen = acked = 0
    for method, _props, _body in ch.consume(WORK, inactivity_timeout=5):
        if method is None:
            break
        seen += 1
        if not method.redelivered and seen % 7 == 0:
            ch.basic_reject(method.delivery_tag, requeue=True)
        elif not method.redelivered and seen % 11 == 0:
            ch.basic_nack(method.delivery_tag, multiple=False, requeue=True)
        else:
            ch.basic_ack(method.delivery_tag)
            acked += 1
            if acked >= want:
                break
    ch.cancel()
    conn.close()
    done.append(acked)


def session(n: int) -> None:
    import pika

    conn = _pika.connect()
    ch = conn.channel()
    for q in (WORK, POLL):
        ch.queue_declare(q)
        ch.queue_purge(q)
    done: list[int] = []
    consumer = threading.Thread(target=_consume, args=(n, done))
    consumer.start()
    ch.tx_select()
    polled = 0
    for i in range(n):
        ch.basic_publish("", WORK, _pika.body(i),
                         pika.BasicProperties(content_type="application/json", message_id=str(i),
                                              headers={"n": i, "source": "bench"}, delivery_mode=2 if i % 3 else 1))
        if i % 20 == 0:
            ch.basic_publish("", POLL, b"poll %d" % i)
            polled += 1
        if i % 10 == 9:
            ch.tx_commit()
    ch.tx_commit()
    consumer.join(300)
    if not done or done[0] < n:
        raise SystemExit(f"the consumer acknowledged {done[0] if done else 0} of {n} messages")
    ch2 = conn.channel()
    got = 0
    while True:
        method, _props, _body = ch2.basic_get(POLL)
        if method is None:
            break
        ch2.basic_ack(method.delivery_tag)
        got += 1
    for _ in range(200):
        ch2.basic_get(POLL, auto_ack=True)
    if got != polled:
        raise SystemExit(f"basic.get took {got} of {polled} messages")
    for q in (WORK, POLL):
        ch2.queue_delete(q)
    conn.close()


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: session(max(500, int(20_000 * scale))))
