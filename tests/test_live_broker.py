"""`streamproto live -i lo` against a real RabbitMQ (Debian's rabbitmq-server, stream plugin on,
bound to 127.0.0.1 on ports of its own): real clients (pika for AMQP 0-9-1, rstream for RabbitMQ
Stream) publish and consume a known number of messages while live captures; the frames printed
must match what the clients did, and `inspect` of the pcapng copy must print the same frames.

Needs the broker (``rabbitmq`` marker) and capture rights (``capture``); CI has both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.live_helpers import Live, frames
from tests.private_broker import private_broker
from tests.test_live_loop import assert_same_frames, jsonl, streamproto

pytestmark = [pytest.mark.rabbitmq, pytest.mark.capture]

AMQP_PORT = 35681
STREAM_PORT = 35561
DIST_PORT = 25682
NODE = "streamproto-live@localhost"
MESSAGES = 25


@pytest.fixture(scope="module")
def broker():
    config = (f"listeners.tcp.default = 127.0.0.1:{AMQP_PORT}\nloopback_users = none\n"
              f"stream.listeners.tcp.1 = 127.0.0.1:{STREAM_PORT}\nstream.advertised_host = 127.0.0.1\n"
              f"stream.advertised_port = {STREAM_PORT}\n")
    with private_broker(node=NODE, dist_port=DIST_PORT, ports=(AMQP_PORT, STREAM_PORT), config=config,
                        plugins="[rabbitmq_stream].\n", prefix="streamproto-live-broker-", timeout=180):
        yield


def _commands(events: list[dict], command: str) -> list[dict]:
    return [f for f in frames(events) if f["command"] == command]


@pytest.mark.parametrize("backend", ["scapy", "tshark"])
def test_pika_publish_and_get(broker, backend: str, tmp_path: Path) -> None:
    import pika

    copy = tmp_path / "amqp.pcapng"
    live = Live("-i", "lo", "--backend", backend, "-f", f"tcp port {AMQP_PORT}", "-d", f"{AMQP_PORT}=amqp091",
                "--format", "jsonl", "-w", str(copy))
    try:
        assert live.started(), live.banner
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", AMQP_PORT))
        ch = conn.channel()
        ch.confirm_delivery()
        queue = ch.queue_declare("", exclusive=True).method.queue
        for i in range(MESSAGES):
            ch.basic_publish("", queue, f"live message {i}".encode())
        got = []
        for _ in range(MESSAGES):
            _, _, body = ch.basic_get(queue, auto_ack=True)
            got.append(body)
        conn.close()
        assert got == [f"live message {i}".encode() for i in range(MESSAGES)]
        live.wait_for(lambda events: bool(_commands(events, "Connection.CloseOk")))
    finally:
        code, err = live.stop()
    assert code == 0, err
    events = live.events()
    publishes = _commands(events, "Basic.Publish")
    assert [f["fields"]["routing_key"] for f in publishes] == [queue] * MESSAGES
    bodies = [f["fields"]["message"]["body"] for f in _commands(events, "ContentBody")]
    # Each message twice: published by the client, then delivered by Basic.Get.
    assert bodies == [f"live message {i}" for i in range(MESSAGES)] * 2
    assert len(_commands(events, "Basic.GetOk")) == MESSAGES
    assert len(_commands(events, "Basic.Ack")) == MESSAGES  # the broker's publisher confirms
    assert not [f for f in frames(events) for x in f["findings"] if x["severity"] == "error"]
    again = frames(jsonl(streamproto("inspect", str(copy), "-d", f"{AMQP_PORT}=amqp091", "-T", "jsonl").stdout))
    assert_same_frames(frames(events), again)


@pytest.mark.parametrize("backend", ["scapy", "tshark"])
def test_rstream_publish_with_confirms(broker, backend: str, tmp_path: Path) -> None:
    from rstream import AMQPMessage, Producer

    copy = tmp_path / "stream.pcapng"
    stream = f"live-{backend}"

    async def publish() -> None:
        async with Producer("127.0.0.1", port=STREAM_PORT, username="guest", password="guest") as producer:
            await producer.create_stream(stream, exists_ok=True)
            for i in range(MESSAGES):
                await producer.send_wait(stream, AMQPMessage(body=f"stream message {i}".encode()))
            await producer.delete_stream(stream)

    live = Live("-i", "lo", "--backend", backend, "-f", f"tcp port {STREAM_PORT}",
                "-d", f"{STREAM_PORT}=rabbitmq_stream", "--format", "jsonl", "-w", str(copy))
    try:
        assert live.started(), live.banner
        asyncio.run(publish())
        live.wait_for(lambda events: len([i for f in _commands(events, "PublishConfirm")
                                          for i in f["fields"]["publishing_ids"]]) >= MESSAGES
                      and bool(_commands(events, "Delete")))
    finally:
        code, err = live.stop()
    assert code == 0, err
    events = live.events()
    messages = [m for f in _commands(events, "Publish") for m in f["fields"]["messages"]]
    assert [m["amqp"]["data"] for m in messages] == [[f"stream message {i}"] for i in range(MESSAGES)]
    confirmed = [i for f in _commands(events, "PublishConfirm") for i in f["fields"]["publishing_ids"]]
    assert sorted(confirmed) == sorted(m["publishing_id"] for m in messages)
    assert not [f for f in frames(events) for x in f["findings"] if x["severity"] == "error"]
    again = frames(jsonl(streamproto("inspect", str(copy), "-d", f"{STREAM_PORT}=rabbitmq_stream",
                                     "-T", "jsonl").stdout))
    assert_same_frames(frames(events), again)
