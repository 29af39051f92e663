"""AMQP/Fast 0.7, fragmented messages.

Encoder-built (dissectors/amqp_fast/encode.py + analyzer/pcapwrite.py): no implementation of
AMQP/Fast 0.7 survives, so nothing can be recorded (see captures/amqp_fast/make_captures.py, whose
conversation() cuts the script into TCP segments here too). Eight connections; each negotiates,
opens a channel and a producer/consumer handle, then sends N messages of 0.5-3.5 KB as HANDLE SEND
fragments of at most 500 octets, the server delivers each back in HANDLE NOTIFY fragments, and the
client acknowledges it (CHANNEL ACK); then every close handshake.
"""

from __future__ import annotations

import random
from pathlib import Path

from analyzer.pcapwrite import write_capture
from bench.workloads._record import ROOT, load
from dissectors.amqp_fast import encode as E

SOURCE = "encoder (no AMQP/Fast 0.7 implementation exists to record)"
PORT = 3018
TSHARK = None
CONNECTIONS = 8

make_captures = load(ROOT / "captures" / "amqp_fast" / "make_captures.py", "_amqp_fast_make_captures")


def script(index: int, n: int) -> E.Script:
    rnd = random.Random(index)
    s = E.Script()
    s.c(E.initiation())
    s.sc("CONNECTION CHALLENGE", version=1, mechanisms="PLAIN", challenges=b"login")
    s.cc("CONNECTION RESPONSE", mechanism="PLAIN", responses=b"login:guest")
    s.sc("CONNECTION TUNE", frame_max=131072, channel_max=16, handle_max=64, heartbeat=0)
    s.cc("CONNECTION TUNE", frame_max=131072, channel_max=4, handle_max=16, heartbeat=0)
    s.cc("CONNECTION OPEN", confirm_tag=1, virtual_path="/bench", client_name=f"bench-{index}")
    s.sc("CONNECTION REPLY", confirm_tag=1, reply_code=200, reply_text="OK")
    s.cc("CHANNEL OPEN", channel_id=1, confirm_tag=2)
    s.sc("CHANNEL REPLY", channel_id=1, confirm_tag=2, reply_code=200, reply_text="OK")
    s.cc("HANDLE OPEN", channel_id=1, handle_id=1, service_type=1, confirm_tag=3, producer=True, consumer=True,
         dest_name="orders", mime_type="application/octet-stream")
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=3, reply_code=200, reply_text="OK")
    s.cc("HANDLE CONSUME", handle_id=1, confirm_tag=4, prefetch=10, dest_name="")
    s.sc("HANDLE REPLY", handle_id=1, confirm_tag=4, reply_code=200, reply_text="consuming")
    for k in range(1, n + 1):
        body = bytes((k + i) & 0xFF for i in range(rnd.randrange(500, 3500)))
        s.c(E.message("HANDLE SEND", 1, body, fragment=500, dest_name="orders"))
        s.s(E.message("HANDLE NOTIFY", 1, body, fragment=500, message_nbr=k, delivered=True, dest_name="orders"))
        s.cc("CHANNEL ACK", channel_id=1, message_nbr=k)
    s.cc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="done")
    s.sc("HANDLE CLOSE", handle_id=1, reply_code=200, reply_text="done")
    s.cc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.sc("CHANNEL CLOSE", channel_id=1, reply_code=200, reply_text="Ok")
    s.cc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    s.sc("CONNECTION CLOSE", reply_code=200, reply_text="Ok")
    return s


def build(out: Path, scale: float = 1.0) -> None:
    n = max(5, int(1200 * scale))
    write_capture(str(out), [make_captures.conversation(script(i, n), i) for i in range(CONNECTIONS)])
