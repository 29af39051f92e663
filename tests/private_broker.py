"""A RabbitMQ broker of a test's own: Debian's rabbitmq-server started on 127.0.0.1 with its state
in a fresh directory, stopped and cleaned up afterwards (the live capture and `check` CI example
tests both need one)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def private_broker(*, node: str, dist_port: int, ports: tuple[int, ...], config: str, plugins: str,
                   prefix: str, timeout: float) -> Iterator[None]:
    """Runs until the block ends; fails the test when a port is busy or the broker does not come up
    on every port of ``ports`` within ``timeout`` seconds (with the end of its log)."""
    for port in ports:
        if port_open(port):
            pytest.fail(f"port {port} is busy: the test starts its own broker there")
    # Not under pytest's temporary directory: its parents are private to root, and the broker runs
    # as the rabbitmq user.
    state = Path(tempfile.mkdtemp(prefix=prefix))
    for sub in ("mnesia", "log"):
        (state / sub).mkdir()
    (state / "rabbitmq.conf").write_text(config)
    (state / "plugins").write_text(plugins)
    # The Debian start script drops to the rabbitmq user when run as root: it must own the state.
    subprocess.run(["chown", "-R", "rabbitmq:rabbitmq", str(state)], check=False, capture_output=True)
    os.chmod(state, 0o755)
    env = dict(os.environ, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODENAME=node,
               RABBITMQ_MNESIA_BASE=str(state / "mnesia"), RABBITMQ_LOG_BASE=str(state / "log"),
               RABBITMQ_CONFIG_FILE=str(state / "rabbitmq.conf"), ERL_EPMD_ADDRESS="127.0.0.1",
               RABBITMQ_ENABLED_PLUGINS_FILE=str(state / "plugins"), RABBITMQ_DIST_PORT=str(dist_port))
    out = open(state / "server.out", "wb")  # noqa: SIM115 - closed after the broker stops
    proc = subprocess.Popen(["rabbitmq-server"], env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not all(port_open(p) for p in ports):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (state / "server.out").read_text(errors="replace")[-3000:]
                where = "/".join(str(p) for p in ports)
                pytest.fail(f"rabbitmq-server did not come up on 127.0.0.1:{where}:\n{log}")
            time.sleep(0.5)
        yield
    finally:
        subprocess.run(["rabbitmqctl", "-n", node, "stop"], env=env, check=False, capture_output=True, timeout=60)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        out.close()
        shutil.rmtree(state, ignore_errors=True)
        # The broker started Erlang's port mapper daemon; leave it only while another node uses it.
        names = subprocess.run(["epmd", "-names"], capture_output=True, text=True, check=False).stdout
        if "name " not in names:
            subprocess.run(["epmd", "-kill"], capture_output=True, check=False)
