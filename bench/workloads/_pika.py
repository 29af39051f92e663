"""Shared by the pika workloads: a connection to the benchmark broker and a message body."""

from __future__ import annotations

import json

import pika

from bench.workloads._record import AMQP_PORT


def connect(**kw: object) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=AMQP_PORT, **kw))


def body(i: int) -> bytes:
    return json.dumps({"order": i, "region": "eu", "items": [1, 2, 3], "note": "x" * 40}).encode()


PROPS = pika.BasicProperties(content_type="application/json", delivery_mode=2, headers={"source": "bench"})


def consume(conn: pika.BlockingConnection, want: int, got: list[int], timeout: float = 120.0) -> None:
    """Pumps the connection until ``got`` holds ``want`` items (filled by the consumers' callbacks)."""
    import time

    deadline = time.monotonic() + timeout
    while len(got) < want:
        if time.monotonic() > deadline:
            raise SystemExit(f"consumed {len(got)} of {want} messages")
        conn.process_data_events(time_limit=0.2)


def consume_and_close(conn: pika.BlockingConnection, ch: object, tag: str, queue: str, want: int,
                      got: list[int]) -> None:
    """Pumps until ``got`` holds ``want`` items, then cancels the consumer ``tag``, deletes ``queue``
    and closes the connection (how a consuming workload ends its recording)."""
    consume(conn, want, got)
    ch.basic_cancel(tag)  # type: ignore[attr-defined]
    ch.queue_delete(queue)  # type: ignore[attr-defined]
    conn.close()
