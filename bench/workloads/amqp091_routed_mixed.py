"""AMQP 0-9-1, a frame-dense mix: topic routing, confirms, returns, batched acks, basic.get.

Real client: aio-pika (aiormq; asyncio) against Debian's rabbitmq-server. One connection publishes
N messages to a topic exchange with publisher confirms, 200 in flight at a time, every fifth one
mandatory to a routing key no queue is bound to (basic.return); every message has its own
message id, correlation id and header table (ids, a nested table holding an array), as
applications send them. Two consumer connections (basic.qos prefetch 1000) ack with multiple=true
every 100 deliveries; a third queue is polled with basic.get. aiormq writes a message's three
frames, and the broker its deliveries and confirms, several to a segment: 2.4 AMQP frames per
packet (the capture issue #15 was measured on: 2.8; the pika workloads: 0.7-2.2). Properties that
differ per message are checked afresh each time (the pika workloads repeat theirs).
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from bench.workloads._record import AMQP_PORT, broker, record

SOURCE = "real client: aio-pika against rabbitmq-server"
PORT = AMQP_PORT
TSHARK = "amqp"
URL = f"amqp://guest:guest@127.0.0.1:{AMQP_PORT}/"
ROUTES = ("orders.eu", "events.a.b", "orders.us", "events.x", "nowhere.x")  # the last: no queue, returned
STAMP = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)


async def _consume(aio_pika, queue: str, want: int) -> None:
    conn = await aio_pika.connect(URL)
    ch = await conn.channel()
    await ch.set_qos(prefetch_count=1000)
    q = await ch.get_queue(queue)
    n = 0
    async with q.iterator() as it:
        async for msg in it:
            n += 1
            if n % 100 == 0 or n >= want:
                await msg.ack(multiple=True)
            if n >= want:
                break
    await conn.close()


async def _session(n: int) -> None:
    import aio_pika

    conn = await aio_pika.connect(URL)
    ch = await conn.channel(publisher_confirms=True, on_return_raises=False)
    ex = await ch.declare_exchange("bench.routed", aio_pika.ExchangeType.TOPIC, auto_delete=True)
    queues = {}
    for name, key in (("a", "orders.*"), ("b", "events.#"), ("c", "poll.x")):
        q = queues[name] = await ch.declare_queue(f"bench.routed.{name}")
        await q.purge()
        await q.bind(ex, key)
    want_a = sum(1 for i in range(n) if ROUTES[i % 5].startswith("orders"))
    want_b = sum(1 for i in range(n) if ROUTES[i % 5].startswith("events"))
    consumers = [asyncio.create_task(_consume(aio_pika, "bench.routed.a", want_a)),
                 asyncio.create_task(_consume(aio_pika, "bench.routed.b", want_b))]
    pending = []
    for i in range(n):
        m = aio_pika.Message(
            body=b'{"i": %d, "pad": "%s"}' % (i, b"y" * (i % 300)), content_type="application/json",
            headers={"src": "bench", "n": i, "nested": {"k": [1, 2, "x"]}}, message_id=f"m{i}",
            correlation_id=f"c{i % 97}", priority=i % 5, timestamp=STAMP,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT if i % 2 else aio_pika.DeliveryMode.NOT_PERSISTENT)
        pending.append(ex.publish(m, ROUTES[i % 5], mandatory=i % 5 == 4))
        if i % 50 == 0:
            pending.append(ex.publish(aio_pika.Message(b"poll"), "poll.x"))
        if len(pending) >= 200:
            await asyncio.gather(*pending)
            pending = []
        if i % 1000 == 0:
            for _ in range(5):
                await queues["c"].get(fail=False, no_ack=True)
    await asyncio.gather(*pending)
    await asyncio.wait_for(asyncio.gather(*consumers), 300)
    for q in queues.values():
        await q.delete(if_unused=False, if_empty=False)
    await conn.close()
    await asyncio.sleep(0.2)  # aiormq's closing tasks end before the loop does


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    record(out, PORT, lambda: asyncio.run(_session(max(500, int(40_000 * scale)))))
