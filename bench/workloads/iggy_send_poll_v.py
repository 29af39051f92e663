"""Apache Iggy, send/poll-heavy traffic in dialect V (the consensus header of 0.9).

Real client: apache-iggy 0.9.0 (the official Python SDK, from PyPI, in its own venv under
/tmp/iggy-venvs) against the project's Iggy responder (captures/iggy/responder.py, dialect V), not
a real Iggy server: Debian has none. The same session as iggy_send_poll (N rounds of one 10-message
send and one 10-message poll), so the two rows differ by the dialect alone: every request and
reply behind a 256-byte header, the messages in batches with a header and checksum of their own.
"""

from __future__ import annotations

from pathlib import Path

from bench.workloads.iggy_send_poll import record_send_poll

SOURCE = "real client: apache-iggy 0.9.0 against the project's responder, dialect V (no Iggy server in Debian)"
PORT = 8090
TSHARK = None


def build(out: Path, scale: float = 1.0) -> None:
    record_send_poll(out, scale, "apache_iggy_0.9.0")
