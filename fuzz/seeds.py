"""The seed corpus, built from the bundled captures (and a few encoder-made conversations).

    python fuzz/seeds.py [OUT_DIR]      # default fuzz/corpus/, one folder per target

A dissector target gets every TCP conversation of the captures in ``captures/<target>/`` as one
input in the harness's format (in-order payloads, retransmissions dropped, cut to the input
limit); a dissector without captures starts from the conversations of all the others. The
``capture`` target gets the capture files themselves (their first 64 KiB; of a ``.gz``, the first
64 KiB of the capture inside, compressed again). Campaigns start from seeds cut to 8 KiB.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analyzer.capture import CaptureError, read_packets  # noqa: E402
from analyzer.packets import SYN, LinkDecoder  # noqa: E402
from fuzz import harness  # noqa: E402

CAPTURES = ROOT / "captures"
SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")


def capture_files(folder: Path | None = None) -> list[Path]:
    base = folder or CAPTURES
    return sorted(p for p in base.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def conversations(path: Path) -> Iterator[bytes]:
    """Each TCP conversation of a capture as a harness input."""
    dec = LinkDecoder()
    convs: dict[frozenset[tuple[str, int]], dict] = {}
    try:
        for pkt in read_packets(str(path)):
            seg = dec.decode(pkt)
            if seg is None:
                continue
            a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
            key = frozenset((a, b))
            conv = convs.get(key)
            if conv is None:
                # The first segment's sender is the client unless it is a SYN-ACK.
                client = b if seg.flags & SYN and seg.flags & 0x10 else a
                conv = convs[key] = {"client": client, "next": {}, "records": [], "midstream": not seg.flags & SYN}
            direction = "c2s" if a == conv["client"] else "s2c"
            if not seg.payload:
                continue
            nxt = conv["next"].get(direction)
            end = seg.seq + len(seg.payload)
            if nxt is not None and (end - nxt) % (1 << 32) > (1 << 31):
                continue  # wholly retransmitted
            payload = seg.payload
            if nxt is not None:
                skip = (nxt - seg.seq) % (1 << 32)
                if skip < len(payload):
                    payload = payload[skip:]
            conv["next"][direction] = end
            conv["records"].append((direction, payload))
    except CaptureError:
        pass  # what was readable is used
    for conv in convs.values():
        if conv["records"]:
            yield harness.encode(conv["records"], midstream=conv["midstream"])[:harness.MAX_INPUT]


def seeds(target: str, limit: int = harness.MAX_INPUT) -> list[bytes]:
    """The seed inputs of one target, each cut to ``limit`` bytes, deterministic and without duplicates."""
    out: list[bytes] = []
    if target == harness.CAPTURE:
        for path in capture_files():
            with open(path, "rb") as f:
                raw = f.read()
            if path.name.endswith(".gz"):
                # The start of the capture inside (as much as of any other capture), compressed
                # again: a small .gz can hold megabytes (a synthetic one of 7 KB holds 100,000
                # Iggy frames: seconds per run).
                out.append(gzip.compress(gzip.decompress(raw)[:limit], mtime=0))
            else:
                out.append(raw[:harness.MAX_INPUT])
    else:
        own = CAPTURES / target
        paths = capture_files(own) if own.is_dir() and capture_files(own) else capture_files()
        for path in paths:
            out.extend(conversations(path))
        out.extend(_synthetic(target))
    seen: set[bytes] = set()
    return [s for s in (o[:limit] for o in out) if not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]


def _synthetic(target: str) -> list[bytes]:
    """Conversations no capture holds: RabbitMQ Stream sub-batches with every codec (the bounded
    decompression paths), built with the package's own encoder."""
    if target != "rabbitmq_stream":
        return []
    from dissectors.rabbitmq_stream.encode import (
        build_chunk,
        deliver,
        encode_message,
        handshake,
        request,
        response,
        sub_batch_entry,
    )

    msgs = [encode_message(b"seed %d " % i * 5) for i in range(4)]
    records = [(str(d), raw) for d, raw in handshake()]
    records.append(("c2s", request("Subscribe", correlation_id=9, subscription_id=0, stream="s",
                                   offset_spec={"type": 1}, credit=5)))
    records.append(("s2c", response("Subscribe", correlation_id=9, response_code=1)))
    entries = [sub_batch_entry(msgs, codec) for codec in range(5)]
    records.append(("s2c", deliver(0, build_chunk(entries, 5 * len(msgs), 0))))
    records.append(("c2s", request("DeclarePublisher", correlation_id=10, publisher_id=1, publisher_reference="",
                                   stream="s")))
    records.append(("s2c", response("DeclarePublisher", correlation_id=10, response_code=1)))
    records.append(("c2s", request("Publish", publisher_id=1, messages=[
        {"publishing_id": 1, "sub_batch": msgs, "compression": 1}])))
    return [harness.encode(records)]


#: What campaigns start from: seeds cut to the -max_len fuzz/run.py gives libFuzzer (a seed that
#: takes longer than the 1 s timeout under instrumentation would end the campaign at once).
CAMPAIGN_LIMIT = 8192


def write(out_dir: Path, limit: int = CAMPAIGN_LIMIT) -> dict[str, int]:
    counts = {}
    for target in harness.targets():
        folder = out_dir / target
        folder.mkdir(parents=True, exist_ok=True)
        items = seeds(target, limit)
        for s in items:
            (folder / hashlib.sha1(s).hexdigest()).write_bytes(s)
        counts[target] = len(items)
    return counts


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "corpus"
    for name, n in write(out).items():
        print(f"{name}: {n} seeds in {os.path.join(out, name)}")
