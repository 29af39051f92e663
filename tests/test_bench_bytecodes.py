"""bench/bytecodes.py counts the bytecodes each function executes (issue 15's tool for where a
run's interpreter time goes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.bytecodes import count, report

ROOT = Path(__file__).resolve().parent.parent


def _loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_a_loop_counts_more_bytecodes_the_longer_it_runs() -> None:
    short, long = count(lambda: _loop(10)), count(lambda: _loop(1000))
    key = next(k for k in long if k[2] == "_loop")
    assert 0 < short[key] < long[key]
    assert long[key] - short[key] >= 990 * 4  # FOR_ITER, STORE_FAST, the add, JUMP_BACKWARD at least
    lines = report(long, 3)
    assert lines[0].endswith(" bytecodes") and any("_loop" in line for line in lines[1:])


def test_a_capture_s_run_is_counted_in_the_engine_and_its_dissector() -> None:
    capture = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap"
    command = [sys.executable, str(ROOT / "bench" / "bytecodes.py"), "--top", "200",
               "inspect", "--jobs", "1", "-T", "summary", str(capture)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.count("\n") == 41  # the summary itself, untouched: 40 frames and the footer
    counted = done.stderr.splitlines()
    assert int(counted[0].split()[0].replace(",", "")) > 10_000
    assert any("analyzer/engine.py" in line and "_emit" in line for line in counted)
    assert any("dissectors/rabbitmq_stream/connection.py" in line for line in counted)
