"""The installed command on the bundled captures, as a user runs it (the README's first command)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted([*(ROOT / "captures").glob("*/*.pcap"), *(ROOT / "captures").glob("*/*.pcapng")])
#: Recorded with a small snap length on purpose: their capture loss is the point.
LOSSY = {"rstream_publish_confirm_snaplen96.pcap"}


def streamproto(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "analyzer", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_readme_capture_through_the_cli():
    r = streamproto("inspect", "captures/rabbitmq_stream/rstream_publish_confirm.pcap")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "Publish publisher=0 messages=1" in r.stdout
    assert "PublishConfirm publisher=0 confirmed=1" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].endswith("findings: 0 errors, 0 warnings, 0 notes")


@pytest.mark.parametrize("capture", CAPTURES, ids=[f"{p.parent.name}/{p.name}" for p in CAPTURES])
def test_every_bundled_capture_decodes_to_frames_and_valid_jsonl(capture: Path):
    r = streamproto("inspect", str(capture), "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    frames = [x for x in lines if x["type"] == "frame"]
    assert frames, "no frame decoded"
    assert all(f["protocol"] in ("rabbitmq_stream", "amqp091", "amqp_fast", "iggy") for f in frames)
    bad = ("engine.",) if capture.name in LOSSY else ("engine.", "tcp.")
    assert not [f for f in lines if f["type"] == "finding" and f["id"].startswith(bad)]
    for f in frames:
        assert f["packets"][0] <= f["packets"][1] == f["frame"]


def test_rule_ids_are_unique_across_engine_and_dissectors():
    r = streamproto("rules", "--json")
    ids = [json.loads(x)["id"] for x in r.stdout.splitlines()]
    assert "tcp.gap" in ids and len(ids) == len(set(ids))
    assert any(i.startswith("rabbitmq_stream.") for i in ids) and any(i.startswith("amqp091.") for i in ids)
