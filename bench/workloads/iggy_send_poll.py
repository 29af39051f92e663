"""Apache Iggy, send/poll-heavy traffic.

Real client: apache-iggy 0.7.0 (the official Python SDK, from PyPI, in its own venv under
/tmp/iggy-venvs, made by captures/iggy/record.py's ensure_venv) against the project's Iggy
responder (captures/iggy/responder.py, dialect C), not a real Iggy server: Debian has none. The
client runs iggy_client_session.py: N rounds of one 10-message send and one 10-message poll.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from bench.workloads._record import ROOT, iggy_record, record

SOURCE = "real client: apache-iggy 0.7.0 against the project's responder (no Iggy server in Debian)"
PORT = 8090
TSHARK = None


def build(out: Path, scale: float = 1.0) -> None:
    record_send_poll(out, scale, "apache_iggy_0.7.0")


def record_send_poll(out: Path, scale: float, client: str) -> None:
    """Records iggy_client_session.py run by ``client`` (a name of captures/iggy/record.py's
    CLIENTS: its release, in a venv of its own) against the responder speaking its dialect."""
    rounds = max(50, int(8_000 * scale))
    dist, version, dialect = iggy_record.CLIENTS[client]
    python = iggy_record.ensure_venv(client, dist, version)
    if not iggy_record.port_free(PORT):
        raise SystemExit(f"port {PORT} is busy: the Iggy responder needs it (streamproto's default Iggy port)")
    responder = subprocess.Popen([sys.executable, str(ROOT / "captures" / "iggy" / "responder.py"), "--dialect", dialect,
                                  "--port", str(PORT), "--log", os.devnull],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        if "listening" not in (responder.stdout.readline() if responder.stdout else ""):
            raise SystemExit("the Iggy responder did not start")

        attempts = [0]

        def session() -> None:
            # The responder outlives a failed attempt (tcpdump lost packets): each makes a stream of its own.
            attempts[0] += 1
            run = subprocess.run([str(python), str(Path(__file__).with_name("iggy_client_session.py")),
                                  "--port", str(PORT), "--rounds", str(rounds), "--stream", f"bench{attempts[0]}"],
                                 capture_output=True, text=True, timeout=300)
            view = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else None
            if run.returncode != 0 or not view or view["polled"] != view["sent"]:
                raise SystemExit(f"iggy session failed: {view} {run.stderr[-2000:]}")

        record(out, PORT, session)
    finally:
        os.killpg(responder.pid, signal.SIGTERM)
        responder.wait(10)
