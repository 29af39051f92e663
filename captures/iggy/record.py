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
import struct
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
        # --immediate-mode: packets still waiting in the kernel's capture ring when tcpdump gets SIGINT
        # are lost otherwise (an early run kept only the first 64 KiB of a 150 KB poll reply).
        tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-w", str(pcap),
                                    f"tcp port {port}"], stderr=subprocess.PIPE, start_new_session=True)
        _wait_tcpdump(tcpdump)
        try:
            run = subprocess.run([str(python), str(HERE / "session.py"), "--port", str(port)],
                                 capture_output=True, text=True, timeout=180)
        finally:
            time.sleep(1.5)  # the last segments (the FINs) reach lo before tcpdump stops
            tcpdump.send_signal(signal.SIGINT)
            tcpdump.wait(10)
    finally:
        os.killpg(responder.pid, signal.SIGTERM)
        responder.wait(10)
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
    view = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else None
    stats = tcpdump.stderr.read().decode(errors="replace").strip().replace("\n", "; ")
    problems = capture_gaps(pcap)
    if problems:
        raise Incomplete(f"{pcap.name}: {problems[:5]} (tcpdump: {stats})")
    capture = pcap.name
    if pcap.stat().st_size > GZIP_OVER:
        with pcap.open("rb") as src, gzip.open(str(pcap) + ".gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        pcap.unlink()
        capture += ".gz"
    return build_facts(capture, dist, version, dialect, port, log, view, run.returncode)


def capture_gaps(pcap: Path) -> list[str]:
    """Holes in the recorded TCP streams: a segment starting past the next expected sequence
    number, or a connection whose SYN or FIN is missing. Reads the classic pcap file tcpdump writes
    on lo (Ethernet link type, IPv4)."""
    data = pcap.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    pos, expected, problems, fins = 24, {}, [], set()
    while pos + 16 <= len(data):
        incl, orig = struct.unpack_from(endian + "II", data, pos + 8)
        frame = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if incl < orig:
            problems.append(f"packet cut to {incl} of {orig} bytes")
        if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ihl = (frame[14] & 0x0F) * 4
        total = struct.unpack_from(">H", frame, 16)[0]
        tcp = 14 + ihl
        sport, dport, seq = struct.unpack_from(">HHI", frame, tcp)
        flags = frame[tcp + 13]
        payload = total - ihl - (frame[tcp + 12] >> 4) * 4
        key = (frame[26:30], sport, frame[30:34], dport)
        if flags & 0x02:  # SYN
            expected[key] = (seq + 1) & 0xFFFFFFFF
            continue
        if key not in expected:
            problems.append(f"segment of a connection whose SYN is missing ({sport}->{dport})")
            expected[key] = seq
        gap = (seq - expected[key]) & 0xFFFFFFFF
        if 0 < gap < 1 << 31:
            problems.append(f"{gap} bytes missing {sport}->{dport}")
        end = (seq + payload + (1 if flags & 0x01 else 0)) & 0xFFFFFFFF
        if ((end - expected[key]) & 0xFFFFFFFF) < 1 << 31:
            expected[key] = end
        if flags & 0x01:
            fins.add(key)
    if len(fins) < len(expected):
        problems.append(f"{len(expected)} stream directions but {len(fins)} FINs")
    return problems


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


class Incomplete(Exception):
    """tcpdump missed packets; the run is repeated."""


def record_retrying(name: str, tries: int = 3) -> dict:
    for attempt in range(1, tries + 1):
        try:
            return record(name)
        except Incomplete as e:
            print(f"{name}: attempt {attempt}: {e}", file=sys.stderr)
    raise SystemExit(f"{name}: no complete capture in {tries} attempts")


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
        facts = record_retrying(name)
        old[name] = facts
        print(f"{name}: dialect {facts['dialect']} port {facts['port']} requests {len(facts['requests'])} "
              f"failed {facts['failed']} sent {len(facts['messages_sent'])} polled {len(facts['messages_polled'])} "
              f"exit {facts['session_exit']}")
    order = [n for n in CLIENTS if n in old]
    FACTS.write_text("".join(json.dumps(old[n]) + "\n" for n in order))


if __name__ == "__main__":
    main()
