#!/usr/bin/env python3
"""Record real Iggy client libraries against our responder: one capture per client version.

    python captures/iggy/record.py [NAME ...]     (default: all; root, for tcpdump)

For each client (CLIENTS below) it makes a venv outside the repository (/tmp/iggy-venvs/NAME) with
that exact release from PyPI, starts responder.py for the client's dialect on 127.0.0.1 (port 8090
when free, so the default port mapping applies; otherwise a free port, noted in facts.jsonl),
captures `tcpdump -i lo 'tcp port P'`, runs session.py in the client's venv, stops tcpdump with
SIGINT so the file is complete, and stops the responder. The responder's run log (every request,
its status, the messages it stored and returned) becomes the capture's line in facts.jsonl.
Captures over 1 MB are gzipped (NAME.pcap.gz). Needs tcpdump (apt-get install tcpdump) and xxhash
in the Python that runs this script (the repository's venv has it).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = Path("/tmp/iggy-venvs")
WORK = Path("/tmp/iggy-record")
FACTS = HERE / "facts.jsonl"
GZIP_OVER = 1_000_000

# name -> (distribution, version, dialect per iggy.md §0)
CLIENTS = {
    "iggy_py_0.4.0": ("iggy-py", "0.4.0", "L1"),
    "apache_iggy_0.5.0": ("apache-iggy", "0.5.0", "Z1"),
    "apache_iggy_0.6.0": ("apache-iggy", "0.6.0", "Z2"),
    "apache_iggy_0.7.0": ("apache-iggy", "0.7.0", "C"),
    "apache_iggy_0.8.0": ("apache-iggy", "0.8.0", "C"),
    "apache_iggy_0.9.0": ("apache-iggy", "0.9.0", "V"),
}


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_port() -> int:
    if port_free(8090):
        return 8090
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_venv(name: str, dist: str, version: str) -> Path:
    python = VENVS / name / "bin" / "python"
    if python.exists():
        probe = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version('{dist}'))"],
                               capture_output=True, text=True)
        if probe.stdout.strip() == version:
            return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENVS / name)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"{dist}=={version}"], check=True)
    return python


def record(name: str) -> dict:
    dist, version, dialect = CLIENTS[name]
    python = ensure_venv(name, dist, version)
    WORK.mkdir(parents=True, exist_ok=True)
    port = pick_port()
    log = WORK / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    pcap = HERE / f"{name}.pcap"
    for old in (pcap, pcap.with_suffix(".pcap.gz")):
        old.unlink(missing_ok=True)

    responder = subprocess.Popen([sys.executable, str(HERE / "responder.py"), "--dialect", dialect,
                                  "--port", str(port), "--log", str(log)],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # It prints one line once it listens; no probe connection, so the log holds only the client.
        if "listening" not in responder.stdout.readline():
            raise SystemExit("responder did not start")
        tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(pcap), f"tcp port {port}"],
                                   stderr=subprocess.PIPE, start_new_session=True)
        _wait_tcpdump(tcpdump)
        try:
            run = subprocess.run([str(python), str(HERE / "session.py"), "--port", str(port)],
                                 capture_output=True, text=True, timeout=180)
        finally:
            time.sleep(0.5)  # the last segments reach lo before tcpdump stops
            tcpdump.send_signal(signal.SIGINT)
            tcpdump.wait(10)
    finally:
        os.killpg(responder.pid, signal.SIGTERM)
        responder.wait(10)
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
    view = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else None
    capture = pcap.name
    if pcap.stat().st_size > GZIP_OVER:
        with pcap.open("rb") as src, gzip.open(str(pcap) + ".gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        pcap.unlink()
        capture += ".gz"
    return build_facts(capture, dist, version, dialect, port, log, view, run.returncode)


def _wait_tcpdump(proc: subprocess.Popen) -> None:
    """tcpdump prints 'listening on lo' once the capture is armed."""
    line = proc.stderr.readline().decode(errors="replace")
    if "listening" not in line:
        raise SystemExit(f"tcpdump: {line.strip()}")


def build_facts(capture: str, dist: str, version: str, dialect: str, port: int, log: Path,
                view: dict | None, returncode: int) -> dict:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    reqs = [r for r in records if "code" in r]
    facts = {
        "capture": capture, "client": dist, "version": version, "dialect": dialect, "port": port,
        "connections": sum(1 for r in records if r.get("event") == "connect"),
        "requests": [r["code"] for r in reqs],
        "failed": [[r["code"], r["status"]] for r in reqs if r["status"] != 0],
        "login": next(({k: r[k] for k in ("username", "client_version", "context") if k in r}
                       for r in reqs if r["code"] in (38, 40) and r["status"] == 0), None),
        "messages_sent": [m for r in reqs for m in r.get("sent", [])],
        "messages_polled": [m for r in reqs for m in r.get("polled", [])],
        "session_exit": returncode,
        "client_view": view,
    }
    facts["polls"] = [r["poll"] for r in reqs if "poll" in r]
    if dialect == "V":
        # Per request: the consensus header's request number, operation, session and code field.
        facts["vsr"] = [r["vsr"] for r in reqs]
        facts["send_batches"] = [r["batch"] for r in reqs if "batch" in r]
    return facts


def main() -> None:
    names = sys.argv[1:] or list(CLIENTS)
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        raise SystemExit(f"unknown client(s) {unknown}; known: {', '.join(CLIENTS)}")
    if not shutil.which("tcpdump"):
        raise SystemExit("tcpdump missing: apt-get install -y tcpdump")
    old = {}
    if FACTS.exists():
        for line in FACTS.read_text().splitlines():
            f = json.loads(line)
            old[f["capture"].split(".pcap")[0]] = f
    for name in names:
        facts = record(name)
        old[name] = facts
        print(f"{name}: dialect {facts['dialect']} port {facts['port']} requests {len(facts['requests'])} "
              f"failed {facts['failed']} sent {len(facts['messages_sent'])} polled {len(facts['messages_polled'])} "
              f"exit {facts['session_exit']}")
    order = [n for n in CLIENTS if n in old]
    FACTS.write_text("".join(json.dumps(old[n]) + "\n" for n in order))


if __name__ == "__main__":
    main()
