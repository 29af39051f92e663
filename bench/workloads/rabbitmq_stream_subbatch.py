"""RabbitMQ Stream, publish/deliver-heavy traffic with sub-batches (compressed sub-entries).

Real client: rstream against Debian's rabbitmq-server with the stream plugin, recorded by the TCP
relay of bench/workloads/_record.py (``relay_record``), not by tcpdump: on lo, tcpdump drops packets
under this load and segmentation offload makes 64 KiB packets. The client connects to the relay
(port 5553, which the broker also advertises, so the connections rstream opens to a stream's leader
or replica go through it too); the relay passes the bytes on to the broker's port 5552 unchanged
and logs each chunk with the time it read it. The capture holds the real client's and broker's
bytes at their real times; the IPv4/TCP headers are synthesized by the relay (127.0.0.1, server
port 5552, the client's real ephemeral port, segments of MSS 1448 each acknowledged, as on an
Ethernet network).

A producer publishes N sub-entry batches of 20 AMQP 1.0 messages each (three in four
gzip-compressed, the rest uncompressed sub-entries), with publish confirms; then a consumer
subscribes from the first offset and receives every message (the broker delivers the sub-batches
inside its chunks; rstream grants credit chunk by chunk).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bench.workloads._record import STREAM_PORT, STREAM_RELAY_PORT, broker, relay_record

SOURCE = ("real client: rstream against rabbitmq-server (stream plugin), real bytes and timing recorded "
          "by a TCP relay; TCP/IP headers synthesized by the relay at MSS 1448")
PORT = STREAM_PORT
TSHARK = None
PER_BATCH = 20


async def session(batches: int) -> None:
    from rstream import AMQPMessage, CompressionType

    async def publish(producer, stream: str, on_confirm) -> None:
        for b in range(batches):
            msgs = [AMQPMessage(body=f'{{"order": {b * PER_BATCH + i}, "note": "sub-batch entry"}}'.encode(),
                                application_properties={"batch": b})
                    for i in range(PER_BATCH)]
            kind = CompressionType.No if b % 4 == 3 else CompressionType.Gzip
            await producer.send_sub_entry(stream, msgs, compression_type=kind, on_publish_confirm=on_confirm)

    await publish_then_consume("bench-subbatch", publish, batches, batches * PER_BATCH, "sub-batches")


async def publish_then_consume(stream: str, publish, sends: int, want: int, what: str) -> None:
    """A producer (through the relay) creates ``stream`` and runs ``publish(producer, stream,
    on_confirm)``, which makes ``sends`` confirmed sends of ``what``, then waits for their
    confirms; then a consumer subscribes from the first offset and takes the ``want`` messages."""
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    confirmed = 0

    def on_confirm(status) -> None:
        nonlocal confirmed
        confirmed += 1

    async with Producer("127.0.0.1", port=STREAM_RELAY_PORT, username="guest", password="guest") as producer:
        await producer.create_stream(stream, exists_ok=True)
        await publish(producer, stream, on_confirm)
        for _ in range(400):
            if confirmed >= sends:
                break
            await asyncio.sleep(0.05)

    got = 0
    done = asyncio.Event()

    async def on_message(msg, ctx) -> None:
        nonlocal got
        got += 1
        if got >= want:
            done.set()

    async with Consumer("127.0.0.1", port=STREAM_RELAY_PORT, username="guest", password="guest") as consumer:
        await consumer.start()
        await consumer.subscribe(stream, on_message, subscriber_name="bench-reader",
                                 offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
                                 initial_credit=10)
        try:
            await asyncio.wait_for(done.wait(), 120)
        except TimeoutError:
            pass
        await consumer.delete_stream(stream)
    counts = f"rstream: {confirmed} of {sends} {what} confirmed, {got} of {want} messages received"
    if got < want or confirmed < sends:
        raise SystemExit(counts)
    print(f"  {counts}", file=sys.stderr)


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    relay_record(out, PORT, STREAM_RELAY_PORT, lambda: asyncio.run(session(max(100, int(25_000 * scale)))))
