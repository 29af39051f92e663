#!/usr/bin/env python3
"""Record AMQP 0-9-1 captures from real clients (pika, aio-pika) against a local RabbitMQ.

Usage: python captures/amqp091/record.py [scenario ...]   (default: all)

Reuses a broker already listening on 127.0.0.1:5672 (user guest/guest); otherwise starts a private
Debian rabbitmq-server with its state under /tmp/amqp091-broker, bound to 127.0.0.1 only, and
stops it afterwards. Each scenario is captured with tcpdump on lo, port 5672, into <scenario>.pcap
next to this script. The facts each test asserts are listed in MANIFEST.md.

`aiopika_big_frame` starts its own second broker on 127.0.0.1:5673 with frame_max 4 MiB (state under
/tmp/amqp091-bigframe-broker), records port 5673 and writes aiopika_big_frame.pcap.gz, then stops it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pika
import pika.compat

HERE = Path(__file__).resolve().parent
BROKER_DIR = Path("/tmp/amqp091-broker")
PARAMS = dict(host="127.0.0.1", port=5672)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_private_broker(state: Path, port: int, node: str, dist_port: int, extra_conf: str = "") -> subprocess.Popen:
    """A private Debian rabbitmq-server bound to 127.0.0.1:``port``, its state under ``state``."""
    if port_open(port):
        raise SystemExit(f"port {port} is busy")
    for sub in ("mnesia", "log"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    conf = state / "rabbitmq.conf"
    conf.write_text(f"listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n{extra_conf}")
    (state / "plugins").write_text("[].\n")
    # The Debian start script drops to the rabbitmq user when run as root: it must own the state.
    subprocess.run(["chown", "-R", "rabbitmq:rabbitmq", str(state)], check=False)
    env = dict(os.environ, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODENAME=node,
               RABBITMQ_MNESIA_BASE=str(state / "mnesia"), RABBITMQ_LOG_BASE=str(state / "log"),
               RABBITMQ_CONFIG_FILE=str(conf), ERL_EPMD_ADDRESS="127.0.0.1",
               RABBITMQ_ENABLED_PLUGINS_FILE=str(state / "plugins"), RABBITMQ_DIST_PORT=str(dist_port))
    proc = subprocess.Popen(["rabbitmq-server"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(120):
        if port_open(port):
            time.sleep(1)
            return proc
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit(f"rabbitmq-server on port {port} did not come up")


def stop_private_broker(proc: subprocess.Popen, node: str) -> None:
    subprocess.run(["rabbitmqctl", "-n", node, "stop"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)


def start_broker() -> subprocess.Popen | None:
    if port_open(5672):
        print("reusing the broker on 127.0.0.1:5672")
        return None
    return start_private_broker(BROKER_DIR, 5672, "amqp091rec@localhost", 25673)


def stop_broker(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        stop_private_broker(proc, "amqp091rec@localhost")


def record(name: str, fn, port: int = 5672, gz: bool = False) -> None:
    out = HERE / f"{name}.pcap"
    # Megabyte bursts on lo overrun tcpdump's default 2 MiB buffer (packets dropped): give it 64 MiB.
    big = ["-B", "65536"] if gz else []
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-U", *big, "-w", str(out), f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        fn()
    finally:
        time.sleep(1)
        dump.send_signal(signal.SIGINT)
        dump.wait(10)
    if gz:  # megabyte frames of a repeating pattern: gzip keeps the committed file small
        packed = out.with_name(out.name + ".gz")
        packed.write_bytes(gzip.compress(out.read_bytes(), 9, mtime=0))
        out.unlink()
        out = packed
    print(f"{out.name}: {out.stat().st_size} bytes")


def conn(**kw) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(**PARAMS, **kw))


# ----------------------------------------------------------------------------------- scenarios
def pika_confirms() -> None:
    """confirm.select; 10 JSON publishes each confirmed; a mandatory publish to nowhere is returned (312)."""
    c = conn()
    ch = c.channel()
    ch.confirm_delivery()
    q = ch.queue_declare("sp.confirms", auto_delete=True).method.queue
    for i in range(10):
        ch.basic_publish("", q, json.dumps({"n": i}).encode(),
                         pika.BasicProperties(content_type="application/json", delivery_mode=2,
                                              headers={"seq": i, "src": "pika"}, timestamp=1700000000 + i))
    try:
        ch.basic_publish("", "sp.nowhere", b"unroutable", mandatory=True)
    except pika.exceptions.UnroutableError:
        pass
    ch.queue_delete(q)
    c.close()


def pika_tx() -> None:
    """tx.select; 3 publishes + commit; 2 publishes + rollback; queue then holds exactly 3 (declare-ok)."""
    c = conn()
    ch = c.channel()
    q = ch.queue_declare("sp.tx", auto_delete=False).method.queue
    ch.queue_purge(q)
    ch.tx_select()
    for i in range(3):
        ch.basic_publish("", q, f"commit-{i}".encode(), pika.BasicProperties(content_type="text/plain"))
    ch.tx_commit()
    for i in range(2):
        ch.basic_publish("", q, f"rollback-{i}".encode(), pika.BasicProperties(content_type="text/plain"))
    ch.tx_rollback()
    ch.queue_declare(q, passive=True)
    ch.queue_delete(q)
    c.close()


def pika_consume() -> None:
    """QoS 5; 10 text messages consumed: 7 acked (one multiple), 1 nacked, 1 rejected, 1 nacked+requeued then acked."""
    c = conn()
    ch = c.channel()
    q = ch.queue_declare("sp.consume", auto_delete=False).method.queue
    ch.queue_purge(q)
    for i in range(10):
        ch.basic_publish("", q, f"msg-{i}".encode(), pika.BasicProperties(content_type="text/plain"))
    ch.basic_qos(prefetch_count=5)
    seen: list[tuple[int, bytes]] = []

    def on_msg(chan, method, props, body) -> None:
        seen.append((method.delivery_tag, body))
        if body == b"msg-3":
            chan.basic_nack(method.delivery_tag, requeue=False)
        elif body == b"msg-4":
            chan.basic_reject(method.delivery_tag, requeue=False)
        elif body == b"msg-5" and not method.redelivered:
            chan.basic_nack(method.delivery_tag, requeue=True)
        elif body == b"msg-1":
            pass  # acked by the multiple ack of msg-2
        elif body == b"msg-2":
            chan.basic_ack(method.delivery_tag, multiple=True)
        else:
            chan.basic_ack(method.delivery_tag)
        if len(seen) == 11:
            chan.stop_consuming()

    ch.basic_consume(q, on_msg, consumer_tag="sp-consumer")
    ch.start_consuming()
    ch.queue_delete(q)
    c.close()


def pika_get() -> None:
    """basic.get: 2 get-ok (acked) then a get-empty; one no-ack get."""
    c = conn()
    ch = c.channel()
    q = ch.queue_declare("sp.get", auto_delete=False).method.queue
    ch.queue_purge(q)
    for body in (b"first", b"second", b"third"):
        ch.basic_publish("", q, body, pika.BasicProperties(content_type="text/plain"))
    for _ in range(2):
        m, _p, _b = ch.basic_get(q)
        ch.basic_ack(m.delivery_tag)
    ch.basic_get(q, auto_ack=True)
    assert ch.basic_get(q) == (None, None, None)
    ch.queue_delete(q)
    c.close()


BIG = bytes((i * 7 + 3) % 251 for i in range(100_000))


def pika_large() -> None:
    """frame_max 4096: a 100000-byte binary message goes out in 25 body frames and comes back in 25."""
    c = conn(frame_max=4096)
    ch = c.channel()
    q = ch.queue_declare("sp.large", auto_delete=False).method.queue
    ch.queue_purge(q)
    ch.basic_publish("", q, BIG, pika.BasicProperties(content_type="application/octet-stream"))
    text = ("line of text %05d\n" * 1000) % tuple(range(1000))
    ch.basic_publish("", q, text.encode(), pika.BasicProperties(content_type="text/plain"))
    for _ in range(2):
        while True:
            m, _p, body = ch.basic_get(q)
            if m is not None:
                break
            time.sleep(0.05)
        ch.basic_ack(m.delivery_tag)
    ch.queue_delete(q)
    c.close()


def pika_e2e() -> None:
    """exchange.bind sp.src (topic) -> sp.dst (fanout); queue bound to sp.dst gets a message via sp.src."""
    c = conn()
    ch = c.channel()
    ch.exchange_declare("sp.src", "topic", auto_delete=False)
    ch.exchange_declare("sp.dst", "fanout", auto_delete=False)
    ch.exchange_bind("sp.dst", "sp.src", routing_key="orders.#")
    q = ch.queue_declare("sp.e2e", auto_delete=False).method.queue
    ch.queue_purge(q)
    ch.queue_bind(q, "sp.dst")
    ch.basic_publish("sp.src", "orders.eu.new", b"routed twice", pika.BasicProperties(content_type="text/plain"))
    ch.basic_publish("sp.src", "invoices.eu", b"not routed", pika.BasicProperties(content_type="text/plain"))
    time.sleep(0.2)
    m, _p, _b = ch.basic_get(q, auto_ack=True)
    ch.queue_unbind(q, "sp.dst")
    ch.exchange_unbind("sp.dst", "sp.src", routing_key="orders.#")
    ch.queue_delete(q)
    ch.exchange_delete("sp.src")
    ch.exchange_delete("sp.dst")
    c.close()


def pika_channel_error() -> None:
    """Passive declare of a missing queue: channel.close 404 NOT_FOUND; a second channel then closes cleanly."""
    c = conn()
    ch = c.channel()
    try:
        ch.queue_declare("sp.missing-queue", passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        pass
    ch2 = c.channel()
    ch2.queue_declare("sp.after-error", auto_delete=True)
    ch2.close()
    c.close()


def pika_bad_login() -> None:
    """Wrong password: connection.close 403 ACCESS_REFUSED during the handshake."""
    try:
        conn(credentials=pika.PlainCredentials("guest", "wrong-password"), connection_attempts=1)
    except pika.exceptions.ProbableAuthenticationError:
        pass
    except pika.exceptions.AMQPConnectionError:
        pass


def pika_heartbeat() -> None:
    """heartbeat 1 s, then 4 s idle: both sides exchange heartbeat frames, no silence > 2 s."""
    c = conn(heartbeat=1)
    ch = c.channel()
    c.sleep(4.0)
    ch.close()
    c.close()


def aiopika_session() -> None:
    """aio-pika: publisher confirms on by default; 20 publishes confirmed, consumed via iterator and acked."""
    import aio_pika

    async def run() -> None:
        connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("sp.aiopika", auto_delete=True)
            for i in range(20):
                await channel.default_exchange.publish(
                    aio_pika.Message(f"aio-{i}".encode(), content_type="text/plain",
                                     headers={"i": i, "tags": ["a", "b"], "nested": {"ok": True}}),
                    routing_key=queue.name)
            got = 0
            async with queue.iterator() as it:
                async for message in it:
                    async with message.process():
                        got += 1
                    if got == 20:
                        break
            await queue.delete(if_unused=False, if_empty=False)

    asyncio.run(run())


# --------------------------------------------- cases Wireshark gets wrong (tests/test_amqp091_wireshark_gaps.py)
def aiopika_update_secret() -> None:
    """aio-pika (aiormq): connection.update-secret (RabbitMQ's class 10 method 70) answered by update-secret-ok."""
    import aio_pika

    async def run() -> None:
        connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
        async with connection:
            channel = await connection.channel()
            # The internal auth backend accepts a "new" secret equal to the current password.
            await connection.update_secret("guest", reason="sp rotate")
            queue = await channel.declare_queue("sp.update-secret", auto_delete=True)
            await channel.default_exchange.publish(aio_pika.Message(b"after update-secret"), routing_key=queue.name)
            message = await queue.get(timeout=5)
            await message.ack()
            await queue.delete(if_unused=False, if_empty=False)

    asyncio.run(run())


#: Every header value type each client can emit (pika: no float; aio-pika/pamqp picks the narrowest integer).
HEADER_TYPES_PIKA = {
    "bool-true": True, "bool-false": False, "int": 42, "int-neg": -7, "long": pika.compat.long(1099511627776),
    "int-big": 3000000000, "decimal": Decimal("3.14"), "timestamp": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    "nested": {"k": "v", "n": 1, "deeper": {"ok": True}}, "array": [1, "two", True, None, [3]],
    "bytes": b"\x00\x01\xfe\xff", "void": None, "text": "h\u00e9llo",
}
HEADER_TYPES_AIOPIKA = {
    "bool-true": True, "bool-false": False, "i8": -5, "i16": -300, "u16": 40000, "i32": -100000,
    "u32": 3000000000, "i64": -(1 << 40), "float": 1.5, "decimal": Decimal("3.14"),
    "timestamp": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "nested": {"k": "v", "n": 1, "deeper": {"ok": True}},
    "array": [1, "two", True, None, [3]], "bytes": bytearray(b"\x00\x01\xfe\xff"), "void": None,
    "text": "h\u00e9llo",
}


def pika_header_types() -> None:
    """pika: one publish whose headers use every type pika encodes; fetched back with basic.get."""
    c = conn()
    ch = c.channel()
    q = ch.queue_declare("sp.header-types", auto_delete=False).method.queue
    ch.queue_purge(q)
    ch.basic_publish("", q, b"typed headers", pika.BasicProperties(content_type="text/plain",
                                                                   headers=HEADER_TYPES_PIKA))
    while True:
        m, _p, _b = ch.basic_get(q)
        if m is not None:
            break
        time.sleep(0.05)
    ch.basic_ack(m.delivery_tag)
    ch.queue_delete(q)
    c.close()


def aiopika_header_types() -> None:
    """aio-pika: one publish whose headers use every type pamqp encodes; fetched back with basic.get."""
    import aio_pika

    async def run() -> None:
        connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("sp.header-types", auto_delete=True)
            await channel.default_exchange.publish(
                aio_pika.Message(b"typed headers", content_type="text/plain", headers=HEADER_TYPES_AIOPIKA),
                routing_key=queue.name)
            message = await queue.get(timeout=5)
            await message.ack()
            await queue.delete(if_unused=False, if_empty=False)

    asyncio.run(run())


BIGFRAME_PORT = 5673
BIGFRAME_DIR = Path("/tmp/amqp091-bigframe-broker")
BIGFRAME_NODE = "amqp091big@localhost"
#: 1.5 MB, one body frame (frame_max 4 MiB); a 251-byte period so gzip shrinks the capture ~300x.
HUGE = bytes((i * 7 + 3) % 251 for i in range(1_500_000))


def start_bigframe_broker() -> subprocess.Popen:
    """A second, private broker on 127.0.0.1:5673 with frame_max 4 MiB (the shared one keeps 128 KiB)."""
    return start_private_broker(BIGFRAME_DIR, BIGFRAME_PORT, BIGFRAME_NODE, 25674, "frame_max = 4194304\n")


def stop_bigframe_broker(proc: subprocess.Popen) -> None:
    stop_private_broker(proc, BIGFRAME_NODE)


def aiopika_big_frame() -> None:
    """aio-pika (aiormq takes the broker's frame_max 4 MiB in tune-ok): a 1.5 MB message in ONE body frame,
    then a small one; both consumed back (the 1.5 MB one again in one body frame)."""
    import aio_pika

    async def run() -> None:
        connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{BIGFRAME_PORT}/")
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("sp.big-frame", auto_delete=True)
            await channel.default_exchange.publish(
                aio_pika.Message(HUGE, content_type="application/octet-stream"), routing_key=queue.name)
            await channel.default_exchange.publish(
                aio_pika.Message(b"after the big frame", content_type="text/plain"), routing_key=queue.name)
            got = []
            async with queue.iterator() as it:
                async for message in it:
                    async with message.process():
                        got.append(message.body)
                    if len(got) == 2:
                        break
            assert got == [HUGE, b"after the big frame"]
            await queue.delete(if_unused=False, if_empty=False)

    asyncio.run(run())


def record_aiopika_big_frame() -> None:
    broker = start_bigframe_broker()
    try:
        record("aiopika_big_frame", aiopika_big_frame, port=BIGFRAME_PORT, gz=True)
    finally:
        stop_bigframe_broker(broker)


SCENARIOS = {f.__name__: f for f in (pika_confirms, pika_tx, pika_consume, pika_get, pika_large, pika_e2e,
                                     pika_channel_error, pika_bad_login, pika_heartbeat, aiopika_session,
                                     aiopika_update_secret, pika_header_types, aiopika_header_types,
                                     aiopika_big_frame)}
#: Scenarios that need their own broker / port / output format.
RECORDERS = {"aiopika_big_frame": record_aiopika_big_frame}


def ensure_installed() -> None:
    """Debian's rabbitmq-server and tcpdump, installed when missing (root, as for tcpdump)."""
    if shutil.which("rabbitmq-server") and shutil.which("tcpdump"):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "rabbitmq-server", "tcpdump"], check=True, env=env)
    # The package may start a system broker on every interface; ours binds 127.0.0.1 only.
    subprocess.run(["rabbitmqctl", "stop"], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(names: list[str]) -> None:
    ensure_installed()
    broker = start_broker()
    try:
        for name in names or list(SCENARIOS):
            if name in RECORDERS:
                RECORDERS[name]()
            else:
                record(name, SCENARIOS[name])
    finally:
        stop_broker(broker)


if __name__ == "__main__":
    main(sys.argv[1:])
