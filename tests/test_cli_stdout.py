"""Standard output is written in large blocks unless it is a terminal (cli.block_buffered), even
when Python was told to leave it unbuffered (PYTHONUNBUFFERED, -u: container images often set it):
otherwise every summary line and JSON object is a system call of its own, and with Python's own
4 KiB or 8 KiB buffer one in every few."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer import cli
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


@pytest.mark.parametrize("target, size", [("file", cli.FILE_BUFFER), ("pipe", cli.PIPE_BUFFER)])
def test_a_buffered_stream_gets_a_larger_buffer(tmp_path: Path, target: str, size: int) -> None:
    """Python's own buffer (8 KiB here) would write every few lines: a file gets FILE_BUFFER, a
    pipe (or device) PIPE_BUFFER, and what was written before goes first."""
    if target == "file":
        sink = open(tmp_path / "out.txt", "w", encoding="utf-8", buffering=8192)  # noqa: SIM115

        def written() -> bytes:
            return (tmp_path / "out.txt").read_bytes()
    else:
        r, w = os.pipe()
        os.set_blocking(r, False)
        sink = open(w, "w", encoding="utf-8", buffering=8192)  # noqa: SIM115
        got = bytearray()

        def written() -> bytes:
            with contextlib.suppress(BlockingIOError):
                got.extend(os.read(r, 1 << 20))
            return bytes(got)
    with sink:
        sink.write("before\n")
        out = block_buffered(sink)
        assert out is not sink and written() == b"before\n"
        line = "x" * 99 + "\n"
        held = (size - 2 * 8192) // 100  # lines that fit in the buffer with the text layer's 8 KiB
        for _ in range(held):
            out.write(line)
        assert written() == b"before\n"  # all of it in the buffer
        out.write(line * 300)
        assert len(written()) > len("before\n")  # the buffer overflowed
        out.flush()
        assert written() == b"before\n" + (line * (held + 300)).encode()
        out.close()
        assert not sink.closed  # the original's file is left open (closefd=False)
    if target == "pipe":
        os.close(r)


def test_terminals_and_streams_without_a_descriptor_are_left_alone(tmp_path: Path) -> None:
    text = io.StringIO()
    assert block_buffered(text) is text

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    with open(tmp_path / "tty.txt", "wb", buffering=0) as raw:
        tty = Terminal(raw, write_through=True)
        assert block_buffered(tty) is tty
    with open(tmp_path / "tty.txt", "w") as buffered:
        terminal = Terminal(buffered.buffer)
        assert block_buffered(terminal) is terminal


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
