"""RabbitMQ Stream from a second client: rbfly, single sends and fast batches, then a consumer.

Real client: rbfly (asyncio, its own protocol code, not rstream's) against Debian's rabbitmq-server
with the stream plugin, recorded by the TCP relay as rabbitmq_stream_subbatch is (see there). One
connection creates a stream, sends N/11 messages one by one (``Publisher.send``: a Publish frame of
one message, confirmed before the next), then 10N/11 through ``PublisherBatchFast`` flushed every
100 messages, then subscribes from the first offset and reads them all back (rbfly's credit
flow, one Deliver per chunk). Added after it was measured unseen (README, "Workloads the benchmark
had not seen").
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bench.workloads._record import ROOT, STREAM_PORT, STREAM_RELAY_PORT, broker, load, relay_record

SOURCE = ("real client: rbfly against rabbitmq-server (stream plugin), real bytes and timing recorded by a TCP "
          "relay; TCP/IP headers synthesized by the relay at MSS 1448")
PORT = STREAM_PORT
TSHARK = None
_FLUSH = 100


async def session(singles: int, batched: int) -> None:
    import rbfly.streams as rbs

    client = rbs.streams_client(f"rabbitmq-stream://guest:guest@127.0.0.1:{STREAM_RELAY_PORT}/")
    stream = "bench-rbfly"
    await client.create_stream(stream)
    scenarios = load(ROOT / "captures" / "rabbitmq_stream" / "scenarios.py", "_stream_scenarios")
    await scenarios.rbfly_publish(client, stream, singles, batched,
                                  lambda i: f'{{"order": {i}, "note": "batched"}}'.encode(), _FLUSH)
    got = 0
    messages = client.subscribe(stream, offset=rbs.Offset.FIRST)
    async for _msg in messages:
        got += 1
        if got >= singles + batched:
            break
    await messages.aclose()  # unsubscribes now: left to the garbage collector, after the deletion, it is refused
    await client.delete_stream(stream)
    await client.disconnect()
    print(f"  rbfly: {singles + batched} messages sent, {got} received", file=sys.stderr)


def build(out: Path, scale: float = 1.0) -> None:
    n = max(1100, int(220_000 * scale))
    broker()
    relay_record(out, PORT, STREAM_RELAY_PORT, lambda: asyncio.run(asyncio.wait_for(session(n // 11, n - n // 11), 600)))
