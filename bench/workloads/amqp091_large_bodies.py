"""AMQP 0-9-1, large bodies split over many body frames (1-4 MB bodies, frame_max 131072).

Encoder-built (dissectors/amqp091/encode.py + analyzer/pcapwrite.py), not recorded: pika against
rabbitmq-server does produce these frames, but on lo (MTU 65536, segmentation offload) a 2.5 MB
body crosses in a few dozen packets, so a recording with the issue's 20k+ packets would be a
half-gigabyte file. Here the same frames (method, header, body frames of frame_max - 8 octets) go
in Ethernet-sized segments (MSS 1448), each acknowledged, as on a real network:
a publisher connection publishes N bodies of 1 to 4 MB, a consumer connection (prefetch 4)
receives and acks each.
"""

from __future__ import annotations

import random
from pathlib import Path

from analyzer.pcapwrite import TcpConversation, write_capture
from dissectors.amqp091 import encode as E

SOURCE = "encoder (lo's 64 KiB segments make too few packets for a recording)"
PORT = 5672
TSHARK = "amqp"
FRAME_MAX = 131072
PROPS = {"content-type": "application/octet-stream", "delivery-mode": 1}


def _send(conv: TcpConversation, direction: str, data: bytes) -> None:
    conv.send(direction, data, mss=1448, ack=True)


def _open(conv: TcpConversation) -> None:
    conv.handshake()
    for d, data, _ts in E.Script().handshake(frame_max=FRAME_MAX).open_channel(1).steps:
        conv.send(str(d), data, mss=1448)


def _close(conv: TcpConversation) -> None:
    conv.send("c2s", E.method("Connection.Close", reply_code=200, reply_text="bye"))
    conv.send("s2c", E.method("Connection.CloseOk"))
    conv.close()


def build(out: Path, scale: float = 1.0) -> None:
    n = max(2, int(10 * scale))
    rnd = random.Random(15)
    sizes = [rnd.randrange(1_000_000, 4_000_001) for _ in range(n)]
    pub = TcpConversation(("10.15.0.1", 41000), ("10.15.0.2", PORT), step=0.00002)
    _open(pub)
    for i, size in enumerate(sizes):
        blob = (bytes((i + k) & 0xFF for k in range(256)) * (size // 256 + 1))[:size]
        _send(pub, "c2s", E.message(1, blob, PROPS, frame_max=FRAME_MAX, routing_key="bench.large"))
    _close(pub)
    con = TcpConversation(("10.15.0.3", 42000), ("10.15.0.2", PORT), ts=1_700_000_000.5, step=0.00002)
    _open(con)
    con.send("c2s", E.method("Basic.Qos", 1, prefetch_count=4))
    con.send("s2c", E.method("Basic.QosOk", 1))
    con.send("c2s", E.method("Basic.Consume", 1, queue="bench.large", consumer_tag="large"))
    con.send("s2c", E.method("Basic.ConsumeOk", 1, consumer_tag="large"))
    for i, size in enumerate(sizes):
        blob = (bytes((i + k) & 0xFF for k in range(256)) * (size // 256 + 1))[:size]
        _send(con, "s2c", E.message(1, blob, PROPS, frame_max=FRAME_MAX, name="Basic.Deliver", consumer_tag="large",
                                    delivery_tag=i + 1, routing_key="bench.large"))
        con.send("c2s", E.method("Basic.Ack", 1, delivery_tag=i + 1))
    _close(con)
    write_capture(str(out), [pub, con])
