"""Apache Iggy, send/poll-heavy traffic in dialect Z2 (apache-iggy 0.6).

Real client: apache-iggy 0.6.0 (the official Python SDK, from PyPI, in its own venv under
/tmp/iggy-venvs) against the project's Iggy responder (captures/iggy/responder.py, dialect Z2), not
a real Iggy server: Debian has none. The same session as iggy_send_poll (N rounds of one 10-message
send and one 10-message poll), in the dialect before C: a row for a release the benchmark had not
measured (added after it was measured unseen: README, "Workloads the benchmark had not seen").
"""

from __future__ import annotations

from pathlib import Path

from bench.workloads.iggy_send_poll import record_send_poll

SOURCE = "real client: apache-iggy 0.6.0 against the project's responder, dialect Z2 (no Iggy server in Debian)"
PORT = 8090
TSHARK = None


def build(out: Path, scale: float = 1.0) -> None:
    record_send_poll(out, scale, "apache_iggy_0.6.0")
