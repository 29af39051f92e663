"""Standard output is written in blocks even when Python was told to leave it unbuffered
(PYTHONUNBUFFERED, -u: container images often set it), unless it is a terminal: otherwise every
summary line and JSON object is a system call of its own (cli.block_buffered)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from analyzer.cli import block_buffered

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "captures" / "amqp091" / "pika_consume.pcap"


def test_an_unbuffered_file_gets_a_buffer(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with open(path, "wb", buffering=0) as raw:
        unbuffered = io.TextIOWrapper(raw, encoding="ascii", errors="backslashreplace", write_through=True)
        assert isinstance(unbuffered.buffer, io.RawIOBase)
        out = block_buffered(unbuffered)
        assert out is not unbuffered and isinstance(out.buffer, io.BufferedWriter)
        assert (out.encoding, out.errors) == ("ascii", "backslashreplace")
        out.write("a → b\n")
        assert path.read_bytes() == b""  # held in the buffer
        out.flush()
        assert path.read_bytes() == b"a \\u2192 b\n"
        out.close()
        assert not raw.closed  # the original's file is left open (closefd=False)


def test_buffered_streams_and_terminals_are_left_alone(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "w") as buffered:
        assert block_buffered(buffered) is buffered
    text = io.StringIO()
    assert block_buffered(text) is text

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    with open(tmp_path / "tty.txt", "wb", buffering=0) as raw:
        tty = Terminal(raw, write_through=True)
        assert block_buffered(tty) is tty


def test_the_output_is_the_same_with_pythonunbuffered(tmp_path: Path) -> None:
    outputs = []
    for unbuffered in (False, True):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        for fmt in ("summary", "jsonl"):
            path = tmp_path / f"{fmt}-{unbuffered}.txt"
            with open(path, "wb") as f:
                subprocess.run([sys.executable, "-m", "analyzer", "inspect", "--jobs", "1", "-T", fmt, str(CAPTURE)],
                               stdout=f, env=env, cwd=ROOT, check=True)
            outputs.append(path.read_bytes())
    assert outputs[:2] == outputs[2:] and len(outputs[0]) > 1000
