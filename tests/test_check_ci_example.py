"""The README's CI example, run for real: its shell part (the "Record and check" step, which the
GitLab job repeats word for word) records a client's traffic with tcpdump against a real RabbitMQ
(Debian's rabbitmq-server on 127.0.0.1) and checks it. A well-behaved client passes (exit 0); one
that acknowledges a delivery it never received fails the job (exit 1) with the finding in the JUnit
and SARIF reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import junitparser
import pytest
from lxml import etree

from tests.private_broker import private_broker

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
README = (ROOT / "README.md").read_text()
#: A port of our own (a broker of another test or script may hold 5672), passed as the example's AMQP_PORT.
PORT = 35672
NODE = "streamproto-ci-example@localhost"
DIST_PORT = 25679

CLIENT = '''"""The client under test: connect, declare a queue, publish, close (with --bad: also acknowledge a
delivery tag it never received, which the broker answers by closing the channel)."""
import os, socket, struct, sys
from dissectors.amqp091 import encode as E


def read_frame(sock, buf):
    while True:
        if len(buf) >= 7:
            ftype, _, size = struct.unpack(">BHI", buf[:7])
            if len(buf) >= 8 + size:
                payload = bytes(buf[7:7 + size])
                del buf[:8 + size]
                if ftype != 8:  # heartbeats
                    return payload
                continue
        data = sock.recv(65536)
        if not data:
            sys.exit("the broker closed the connection")
        buf += data


sock = socket.create_connection(("127.0.0.1", int(os.environ["AMQP_PORT"])), timeout=10)
buf = bytearray()
sock.sendall(b"AMQP\\x00\\x00\\x09\\x01")
read_frame(sock, buf)  # Connection.Start
sock.sendall(E.method("Connection.StartOk", client_properties={"product": "ci-example"}, mechanism="PLAIN",
                      response="\\0guest\\0guest", locale="en_US"))
channel_max, frame_max, _ = struct.unpack(">HIH", read_frame(sock, buf)[4:12])  # Connection.Tune
sock.sendall(E.method("Connection.TuneOk", channel_max=channel_max, frame_max=frame_max, heartbeat=0))
sock.sendall(E.method("Connection.Open", virtual_host="/"))
read_frame(sock, buf)  # Connection.OpenOk
sock.sendall(E.method("Channel.Open", 1))
read_frame(sock, buf)
sock.sendall(E.method("Queue.Declare", 1, queue="sp.ci-example", auto_delete=True))
read_frame(sock, buf)
sock.sendall(E.message(1, b"hello from CI", {"content-type": "text/plain"}, exchange="",
                       routing_key="sp.ci-example"))
if "--bad" in sys.argv:
    sock.sendall(E.method("Basic.Ack", 1, delivery_tag=999))
    read_frame(sock, buf)  # Channel.Close 406 PRECONDITION_FAILED
    sock.sendall(E.method("Channel.CloseOk", 1))
else:
    sock.sendall(E.method("Channel.Close", 1, reply_code=200, reply_text="bye"))
    read_frame(sock, buf)
sock.sendall(E.method("Connection.Close", reply_code=200, reply_text="bye"))
read_frame(sock, buf)  # Connection.CloseOk
sock.close()
'''


def example_shell() -> str:
    """The `run: |` block of the GitHub step "Record and check", dedented."""
    m = re.search(r"- name: Record and check\n\s+run: \|\n((?: {10}.*\n)+)", README)
    assert m is not None, "the README's GitHub Actions example has no 'Record and check' step"
    return "".join(line[10:] + "\n" for line in m.group(1).splitlines())


def test_gitlab_job_runs_the_same_shell():
    m = re.search(r"  script:\n    - \|\n((?: {6}.*\n)+)", README)
    assert m is not None
    assert "".join(line[6:] + "\n" for line in m.group(1).splitlines()) == example_shell()


@pytest.fixture(scope="module")
def broker():
    if not shutil.which("tcpdump"):
        if os.environ.get("CI"):
            pytest.fail("tcpdump is not installed, and CI must run the CI example (.ci/run installs it)")
        pytest.skip("tcpdump is not installed (apt-get install tcpdump)")
    with private_broker(node=NODE, dist_port=DIST_PORT, ports=(PORT,), prefix="streamproto-ci-example-",
                        config=f"listeners.tcp.default = 127.0.0.1:{PORT}\nloopback_users = none\n",
                        plugins="[].\n", timeout=120):
        yield PORT


def run_example(tmp_path: Path, port: int, *client_args: str) -> subprocess.CompletedProcess:
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    env = dict(os.environ, AMQP_PORT=str(port), PYTHONPATH=str(ROOT),
               CLIENT_TESTS=" ".join([sys.executable, str(client), *client_args]),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return subprocess.run(["bash", "-c", example_shell()], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)


def reports(tmp_path: Path) -> tuple[list, dict]:
    etree.XMLSchema(etree.parse(str(DATA / "junit-ant.xsd"))).assertValid(etree.parse(str(tmp_path / "report.xml")))
    sarif = json.loads((tmp_path / "report.sarif").read_text())
    jsonschema.Draft4Validator(json.loads((DATA / "sarif-schema-2.1.0.json").read_text())).validate(sarif)
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    return list(junitparser.JUnitXml.fromfile(str(tmp_path / "report.xml"))), sarif


@pytest.mark.rabbitmq
def test_ci_example_passes_a_well_behaved_client(broker, tmp_path):
    r = run_example(tmp_path, broker)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 conversation (amqp091 1)" in r.stdout and "pass: no finding at or above warning" in r.stdout
    (suite,), sarif = reports(tmp_path)
    (case,) = list(suite)
    assert case.is_passed and f"-> 127.0.0.1:{broker} amqp091/0-9-1 1:" in case.name
    assert [res for res in sarif["runs"][0]["results"] if res["level"] != "note"] == []
    assert "PASS" in (tmp_path / "report.html").read_text()


@pytest.mark.rabbitmq
def test_ci_example_fails_a_client_that_breaks_the_protocol(broker, tmp_path):
    r = run_example(tmp_path, broker, "--bad")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "amqp091.ack.unknown_tag" in r.stdout
    (suite,), sarif = reports(tmp_path)
    (case,) = list(suite)
    assert isinstance(case.result[0], junitparser.Failure)
    assert "amqp091.ack.unknown_tag at packet" in case.result[0].text
    rules = {res["ruleId"] for res in sarif["runs"][0]["results"]}
    assert "amqp091.ack.unknown_tag" in rules
    assert "FAIL" in (tmp_path / "report.html").read_text()
