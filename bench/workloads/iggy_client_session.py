"""The Iggy send/poll client session, run inside an apache-iggy venv (see iggy_send_poll.py and
iggy_send_poll_v.py).

    /tmp/iggy-venvs/apache_iggy_0.7.0/bin/python bench/workloads/iggy_client_session.py --port P --rounds N [--stream NAME]

Connects, logs in, creates a stream and a topic (2 partitions), then N rounds of: send a batch of
10 messages to one partition, poll 10 back from that partition's next offset. Prints one JSON line.
Imports nothing from the project: it runs in the client's own venv. apache-iggy 0.9 takes
poll_messages' arguments by keyword, with a consumer (as captures/iggy/session.py calls it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import apache_iggy as ig


async def maybe(x):
    return await x if hasattr(x, "__await__") else x


async def run(port: int, rounds: int, stream: str) -> dict:
    c = ig.IggyClient(f"127.0.0.1:{port}")
    await maybe(c.connect())
    await maybe(c.login_user("iggy", "iggy"))
    await maybe(c.create_stream(stream))
    await maybe(c.create_topic(stream, "orders", 2))
    keywords = hasattr(ig, "Consumer")  # apache-iggy 0.9 and later
    offsets = [0, 0]
    sent = polled = 0
    for r in range(rounds):
        part = r % 2
        msgs = [ig.SendMessage(f'{{"order": {r * 10 + i}, "note": "send/poll benchmark"}}') for i in range(10)]
        await maybe(c.send_messages(stream, "orders", part, msgs))
        sent += len(msgs)
        if keywords:
            got = await c.poll_messages(stream, "orders", consumer=ig.Consumer.Single("bench"),
                                        polling_strategy=ig.PollingStrategy.Offset(offsets[part]), count=10,
                                        auto_commit=True, partition_id=part)
        else:
            got = await maybe(c.poll_messages(stream, "orders", part, ig.PollingStrategy.Offset(offsets[part]), 10,
                                              True))
        offsets[part] += len(got)
        polled += len(got)
    return {"rounds": rounds, "sent": sent, "polled": polled}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--stream", default="bench")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args.port, args.rounds, args.stream))))
    sys.stdout.flush()
    os._exit(0)  # the Rust client's runtime may abort during interpreter teardown (see captures/iggy)


if __name__ == "__main__":
    main()
