#!/usr/bin/env python3
"""One recorded Iggy client session, run inside a client library's own venv (see record.py).

    /tmp/iggy-venvs/apache_iggy_0.8.0/bin/python captures/iggy/session.py --port 8090

Works with iggy-py 0.4.0 and apache-iggy 0.5.0 … 0.9.0; each generation's Python API differs, so
the steps below go through a small adapter per generation. The session: connect (the SDK pings),
ping, login iggy/iggy, create stream `sp-orders` and topic `orders` (2 partitions), read both back,
send three batches to partition P (one message of 150,000 bytes, so the request and the poll reply
span many TCP segments), poll them back and compare, consumer-group work and offsets where the API
has them, a duplicate CREATE_STREAM that must fail, a GET of a missing stream (empty OK).
Prints one JSON line with what the client saw; record.py keeps it in facts.jsonl as `client_view`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import os
import sys
from importlib import metadata

try:
    import apache_iggy as ig

    DIST = "apache-iggy"
except ImportError:  # iggy-py 0.4.0, the package's name before it moved to the ASF
    import iggy_py as ig

    DIST = "iggy-py"

VERSION = metadata.version(DIST)
GEN = tuple(int(x) for x in VERSION.split(".")[:2])
ONE_BASED = DIST == "iggy-py" or GEN <= (0, 5)  # ids start at 1 up to server-0.5 (dialects L1, Z1)
BASE = 1 if ONE_BASED else 0
STREAM, TOPIC, GROUP = "sp-orders", "orders", "sp-readers"
BIG = 150_000


def big_payload() -> str:
    # Text, because iggy-py 0.4.0 and apache-iggy 0.5.0 only take str payloads; varied so that a
    # shifted or reordered segment shows up as a checksum or comparison failure.
    return "".join(chr(ord("a") + (i * 7 + i // 26) % 26) for i in range(BIG))


def batches() -> list[list[tuple[str | bytes, dict | None, int | None]]]:
    """(payload, user headers, explicit id) per message; headers and ids only where the API has them."""
    headers_ok = GEN >= (0, 9) and DIST == "apache-iggy"
    b1 = [(f"order-{i}", None, None) for i in range(3)]
    b2 = [(f"order-{i}", {"source": "streamproto", "seq": i, "ok": i % 2 == 0} if headers_ok else None,
           0x1000 + i if headers_ok else None) for i in range(3, 8)]
    b3 = [(big_payload(), {"kind": "big"} if headers_ok else None, None), ("after-big", None, None)]
    if headers_ok:
        b2.append((b"\x00\x01binary\xff", {"f": 1.5, "neg": -7, "raw": b"\x01\x02"}, 0x2000))
        b2.append(("all-header-kinds", every_header_kind(), 0x2001))
    return [b1, b2, b3]


def every_header_kind() -> dict:
    """One user header of each of the 15 value kinds (iggy.md §5.5), and typed (non-string) keys."""
    hv, hk = ig.HeaderValue, ig.HeaderKey
    return {
        "raw": hv.Raw(b"\x00\xff"), "string": hv.String("text"), "bool": hv.Bool(True),
        "int8": hv.Int8(-8), "int16": hv.Int16(-16), "int32": hv.Int32(-32), "int64": hv.Int64(-64),
        "int128": hv.Int128(-(2**100)), "uint8": hv.UnsignedInt8(8), "uint16": hv.UnsignedInt16(16),
        "uint32": hv.UnsignedInt32(32), "uint64": hv.UnsignedInt64(2**63), "uint128": hv.UnsignedInt128(2**127),
        "float32": hv.Float32(0.5), "float64": hv.Float64(-2.25),
        hk.UnsignedInt32(42): hv.String("uint32 key"), hk.Raw(b"\x01\x02"): hv.Bool(False),
    }


def ident(name: str) -> bytes:
    """A string Identifier (iggy.md §2.1)."""
    return bytes([2, len(name)]) + name.encode()


async def maybe(x):
    return await x if hasattr(x, "__await__") else x


def make_message(payload, headers, mid):
    if GEN >= (0, 9) and DIST == "apache-iggy":
        return ig.SendMessage(payload, user_headers=headers, id=mid)
    return ig.SendMessage(payload)


def as_bytes(p) -> bytes:
    return p.encode() if isinstance(p, str) else bytes(p)


def digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


async def run(port: int) -> dict:
    view: dict = {"client": DIST, "version": VERSION, "steps": []}

    def step(what: str, **kw) -> None:
        view["steps"].append({"step": what, **kw})

    c = ig.IggyClient(f"127.0.0.1:{port}")
    await maybe(c.connect())
    step("connect")
    await maybe(c.ping())
    step("ping")
    await maybe(c.login_user("iggy", "iggy"))
    step("login")

    if ONE_BASED:
        await maybe(c.create_stream(STREAM, BASE))
    else:
        await maybe(c.create_stream(STREAM))
    sd = await maybe(c.get_stream(STREAM))
    step("create_stream", id=sd.id, stream=sd.name)
    if DIST == "iggy-py":
        await maybe(c.create_topic(sd.id, TOPIC, 2, None, BASE, None))
    elif GEN <= (0, 5):
        await maybe(c.create_topic(STREAM, TOPIC, 2, None, BASE, None))
    else:
        await maybe(c.create_topic(STREAM, TOPIC, 2))
    td = await maybe(c.get_topic(STREAM if DIST != "iggy-py" else sd.id, TOPIC if DIST != "iggy-py" else BASE))
    step("create_topic", id=td.id, topic=td.name)
    stream_ref = sd.id if DIST == "iggy-py" else STREAM
    topic_ref = td.id if DIST == "iggy-py" else TOPIC
    partition = BASE  # the first partition, in the dialect's numbering

    sent = []
    for batch in batches():
        msgs = [make_message(p, h, i) for p, h, i in batch]
        await maybe(c.send_messages(stream_ref, topic_ref, partition, msgs))
        sent += [as_bytes(p) for p, _, _ in batch]
    step("send", batches=3, messages=len(sent), sizes=[len(b) for b in sent])

    if GEN >= (0, 9) and DIST == "apache-iggy":
        polled = await c.poll_messages(stream_ref, topic_ref, consumer=ig.Consumer.Single("sp-poller"),
                                       polling_strategy=ig.PollingStrategy.Offset(0), count=100,
                                       auto_commit=True, partition_id=partition)
    else:
        polled = await maybe(c.poll_messages(stream_ref, topic_ref, partition, ig.PollingStrategy.Offset(0),
                                             100, True))
    got = [bytes(m.payload()) for m in polled]
    step("poll", messages=len(got), equal=got == sent, offsets=[m.offset() for m in polled],
         payload_digests=[digest(b) for b in got])
    if GEN >= (0, 9) and DIST == "apache-iggy":
        heads = [m.user_headers() for m in polled]
        step("poll_headers", headers=[{str(k): repr(v) for k, v in h.items()} if h else None for h in heads])

    if DIST == "apache-iggy":
        await consumer_group_part(c, step)

    try:
        if ONE_BASED:
            await maybe(c.create_stream(STREAM, BASE + 1))
        else:
            await maybe(c.create_stream(STREAM))
        step("duplicate_stream", error=None)
    except Exception as e:  # the expected failure: StreamNameAlreadyExists (1012)
        step("duplicate_stream", error=str(e)[:200])
    missing = await maybe(c.get_stream("sp-missing"))
    step("get_missing_stream", found=missing is not None)
    return view


async def consumer_group_part(c, step) -> None:
    """Consumer groups through the API each generation has."""
    if GEN >= (0, 9):
        await c.create_consumer_group(STREAM, TOPIC, GROUP)
        await c.join_consumer_group(STREAM, TOPIC, GROUP)
        g = await c.get_consumer_group(STREAM, TOPIC, GROUP)
        step("consumer_group", id=g.id, members=g.members_count, partitions=g.partitions_count)
        polled = await c.poll_messages(STREAM, TOPIC, consumer=ig.Consumer.Group(GROUP),
                                       polling_strategy=ig.PollingStrategy.Next(), count=4, auto_commit=True)
        step("group_poll", messages=len(polled), offsets=[m.offset() for m in polled])
        # GET_CONSUMER_OFFSET has no method in this API; send it through the client's raw-command
        # call (the client frames it; the payload is ours): consumer group, stream, topic, partition.
        raw = (b"\x02" + ident(GROUP) + ident(STREAM) + ident(TOPIC) + b"\x01" + (0).to_bytes(4, "little"))
        reply = await c.send_binary_request(120, raw)
        step("get_offset_raw", reply_hex=bytes(reply).hex())
        await c.leave_consumer_group(STREAM, TOPIC, GROUP)
        step("leave_group")
    # The high-level consumer: looks the stream, topic and group up, creates and joins the group
    # (already there in 0.9), polls as the group and stores offsets.
    consumer = await maybe(c.consumer_group(
        GROUP, STREAM, TOPIC, polling_strategy=ig.PollingStrategy.Offset(0), batch_length=4,
        auto_commit=ig.AutoCommit.Disabled(), poll_interval=datetime.timedelta(milliseconds=50)))
    got: list[int] = []
    done = asyncio.Event()

    async def on_message(m) -> None:
        got.append(m.offset())
        if len(got) >= 5:
            done.set()

    task = asyncio.ensure_future(consumer.consume_messages(on_message, done))
    try:
        await asyncio.wait_for(done.wait(), 10)
    except TimeoutError:
        pass
    await asyncio.wait_for(task, 10)
    step("group_consume", offsets=got)
    partition = consumer.partition_id()
    await consumer.store_offset(got[-1] if got else 0, partition)
    step("store_offset", offset=got[-1] if got else 0, partition=partition,
         last_stored=consumer.get_last_stored_offset(partition))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8090)
    args = ap.parse_args()
    view = asyncio.run(run(args.port))
    print(json.dumps(view))
    sys.stdout.flush()
    # The Rust clients' runtime sometimes aborts while the interpreter tears down (SIGABRT after the
    # session has finished, seen with apache-iggy 0.5.0); leave without running finalizers.
    os._exit(0)


if __name__ == "__main__":
    main()
