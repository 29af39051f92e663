"""RabbitMQ Stream, plain publishing: single messages, no sub-entry batches, properties of their own.

Real client: rstream against Debian's rabbitmq-server with the stream plugin, recorded by the TCP
relay as rabbitmq_stream_subbatch is (see there). A producer sends N messages one by one with
``Producer.send`` (rstream gathers them into Publish frames of many messages each), every one
with application properties of its own (its number), with publish confirms; then a consumer
subscribes from the first offset and receives them all, one chunk entry a message. The most
common way to use a stream; the sub-batch row compresses, this one does not, and no two
messages' sections are alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.workloads._record import STREAM_PORT, STREAM_RELAY_PORT, broker, relay_record
from bench.workloads.rabbitmq_stream_subbatch import publish_then_consume

SOURCE = ("real client: rstream against rabbitmq-server (stream plugin), real bytes and timing recorded "
          "by a TCP relay; TCP/IP headers synthesized by the relay at MSS 1448")
PORT = STREAM_PORT
TSHARK = None


async def session(n: int) -> None:
    from rstream import AMQPMessage

    async def publish(producer, stream: str, on_confirm) -> None:
        for i in range(n):
            await producer.send(stream, AMQPMessage(body=f'{{"order": {i}, "note": "plain message"}}'.encode(),
                                                    application_properties={"i": i}),
                                on_publish_confirm=on_confirm)

    await publish_then_consume("bench-plain", publish, n, n, "messages")


def build(out: Path, scale: float = 1.0) -> None:
    broker()
    relay_record(out, PORT, STREAM_RELAY_PORT, lambda: asyncio.run(session(max(1000, int(200_000 * scale)))))
