"""Client scenarios recorded by record.sh: one function per capture, real clients, real broker.

Run as ``python scenarios.py NAME`` against a broker on 127.0.0.1:5552 (guest/guest). Each scenario
prints a JSON line of the facts it observed (what it published, received, which errors it got), which
record.sh keeps next to the captures (facts.jsonl) for the tests and MANIFEST.md.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

HOST = "127.0.0.1"
USER = PASSWORD = "guest"


def emit(name: str, **facts: Any) -> None:
    print(json.dumps({"scenario": name, **facts}), flush=True)


# ----------------------------------------------------------------------------- rstream
async def rstream_publish_confirm() -> None:
    """Declare a publisher, publish one message and wait for its confirm, then a batch of 100 with
    confirms, then a gzip sub-batch of 10 records (one publishing id)."""
    from rstream import AMQPMessage, CompressionType, ConfirmationStatus, Producer

    stream = "sp-confirm"
    confirmed: list[int] = []

    def on_confirm(status: ConfirmationStatus) -> None:
        if status.is_confirmed:
            confirmed.append(status.message_id)

    async with Producer(HOST, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream, exists_ok=True)
        first = await producer.send_wait(stream, AMQPMessage(body=b"hello stream"))
        batch = [AMQPMessage(body=f"batch message {i}".encode()) for i in range(100)]
        ids = await producer.send_batch(stream, batch, on_publish_confirm=on_confirm)
        await producer.send_sub_entry(stream, [AMQPMessage(body=f"sub-entry {i}".encode()) for i in range(10)],
                                      compression_type=CompressionType.Gzip, on_publish_confirm=on_confirm)
        for _ in range(100):
            if len(confirmed) >= 101:
                break
            await asyncio.sleep(0.05)
        await producer.delete_stream(stream)
    # Publishing ids: 1 (single) + 100 (batch) + 1 (the whole sub-batch); records: 1 + 100 + 10.
    emit("rstream_publish_confirm", single_id=first, publishing_ids=1 + len(ids) + 1,
         confirmed=len(confirmed) + 1, records=1 + 100 + 10)


async def rstream_consume() -> None:
    """Publish 300 messages, subscribe from first with credit, receive all, store and query the offset,
    ask for metadata (stream_exists)."""
    from rstream import AMQPMessage, Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    stream = "sp-consume"
    n = 300
    async with Producer(HOST, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream, exists_ok=True)
        await producer.send_batch(stream, [AMQPMessage(body=f"m{i}".encode(),
                                                       application_properties={"i": i}) for i in range(n)])
        await asyncio.sleep(0.5)

    got: list[int] = []
    done = asyncio.Event()
    async with Consumer(HOST, username=USER, password=PASSWORD) as consumer:
        exists = await consumer.stream_exists(stream)

        async def on_message(msg: Any, ctx: Any) -> None:
            got.append(ctx.offset)
            if len(got) >= n:
                done.set()

        await consumer.start()
        await consumer.subscribe(stream, on_message, subscriber_name="sp-reader",
                                 offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
                                 initial_credit=2)
        try:
            await asyncio.wait_for(done.wait(), 20)
        except TimeoutError:
            pass
        await consumer.store_offset(stream, "sp-reader", got[-1] if got else 0)
        await asyncio.sleep(0.2)
        stored = await consumer.query_offset(stream, "sp-reader")
        await consumer.delete_stream(stream)
    emit("rstream_consume", published=n, received=len(got), stored_offset=stored, exists=exists)


async def rstream_errors() -> None:
    """Error cases: subscribe to a missing stream, query an offset never stored, publisher on a
    missing stream, metadata for a missing stream, create an existing stream."""
    from rstream import Consumer, Producer

    stream = "sp-errors"
    errors: dict[str, str] = {}
    async with Consumer(HOST, username=USER, password=PASSWORD) as consumer:
        await consumer.start()
        errors["exists_missing"] = str(await consumer.stream_exists("sp-missing"))
        try:
            await consumer.subscribe("sp-missing", lambda m, c: None)
        except Exception as exc:  # rstream raises its ServerError subclasses
            errors["subscribe_missing"] = type(exc).__name__
        await consumer.create_stream(stream, exists_ok=True)
        try:
            await consumer.create_stream(stream, exists_ok=False)
        except Exception as exc:
            errors["create_existing"] = type(exc).__name__
        try:
            await consumer.query_offset(stream, "never-stored")
        except Exception as exc:
            errors["query_offset"] = type(exc).__name__
        await consumer.delete_stream(stream)
        # The high-level API checks Metadata first; the low-level client sends the commands as they are.
        client = await consumer.default_client
        try:
            await client.subscribe("sp-missing", subscription_id=7)
        except Exception as exc:
            errors["raw_subscribe_missing"] = type(exc).__name__
        try:
            await client.declare_publisher("sp-missing", None, 9)
        except Exception as exc:
            errors["raw_declare_publisher_missing"] = type(exc).__name__
    async with Producer(HOST, username=USER, password=PASSWORD) as producer:
        try:
            await producer.send_wait("sp-missing", b"nobody home")
        except Exception as exc:
            errors["publish_missing"] = type(exc).__name__
    emit("rstream_errors", **errors)


async def rstream_bad_password() -> None:
    from rstream import Producer

    try:
        async with Producer(HOST, username=USER, password="not-the-password", max_retries=1) as producer:
            await producer.stream_exists("x")
        outcome = "connected"
    except Exception as exc:
        outcome = type(exc).__name__
    emit("rstream_bad_password", outcome=outcome)


# ----------------------------------------------------------------------------- rbfly
async def rbfly_publish(client: Any, stream: str, singles: int, batched: int, body: Any,
                        flush_every: int | None = None) -> None:
    """rbfly: ``singles`` messages sent one by one (each confirmed before the next), then
    ``batched`` (``body(i)``) through its fast batch publisher, flushed every ``flush_every``
    messages and at the end. bench/workloads/rabbitmq_stream_rbfly.py records this too."""
    import rbfly.streams as rbs

    async with client.publisher(stream) as publisher:
        for i in range(singles):
            await publisher.send(f"single {i}".encode())
    async with client.publisher(stream, cls=rbs.PublisherBatchFast) as publisher:
        for i in range(batched):
            publisher.batch(body(i))
            if flush_every and i % flush_every == flush_every - 1:
                await publisher.flush()
        await publisher.flush()


async def rbfly_publish_consume() -> None:
    """rbfly: create a stream, publish 50 single messages and a batch of 150, subscribe from first,
    read all 200, store and read back the offset."""
    import rbfly.streams as rbs

    client = rbs.streams_client(f"rabbitmq-stream://{USER}:{PASSWORD}@{HOST}:5552/")
    stream = "sp-rbfly"
    n_single, n_batch = 50, 150
    await client.create_stream(stream)
    await rbfly_publish(client, stream, n_single, n_batch, lambda i: f"batch {i}".encode())
    got = 0
    last = -1
    async for _msg in client.subscribe(stream, offset=rbs.Offset.FIRST):
        got += 1
        last = rbs.get_message_ctx().stream_offset
        if got >= n_single + n_batch:
            break
    await client.write_offset(stream, "rbfly-reader", last)
    await asyncio.sleep(0.2)
    await client.delete_stream(stream)
    await client.disconnect()
    emit("rbfly_publish_consume", published=n_single + n_batch, received=got, last_offset=last)


async def rbfly_offset_reference() -> None:
    """rbfly: subscribe with an offset reference that was never stored (QueryOffset -> NO_OFFSET,
    rbfly then starts from the beginning) and read 20 messages."""
    import rbfly.streams as rbs

    client = rbs.streams_client(f"rabbitmq-stream://{USER}:{PASSWORD}@{HOST}:5552/")
    stream = "sp-rbfly-ref"
    await client.create_stream(stream)
    async with client.publisher(stream) as publisher:
        for i in range(20):
            await publisher.send(f"ref {i}".encode())
    got = 0
    async for _msg in client.subscribe(stream, offset=rbs.Offset.reference("never-stored")):
        got += 1
        if got >= 20:
            break
    await client.delete_stream(stream)
    await client.disconnect()
    emit("rbfly_offset_reference", published=20, received=got)


SCENARIOS = {f.__name__: f for f in (rstream_publish_confirm, rstream_consume, rstream_errors,
                                     rstream_bad_password, rbfly_publish_consume, rbfly_offset_reference)}

if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(SCENARIOS[sys.argv[1]](), 60))
