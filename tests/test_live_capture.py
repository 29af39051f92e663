"""`streamproto live -i lo` on real sockets: the byte streams of recorded conversations are replayed
over 127.0.0.1 (each conversation a new connection, both sides writing their bytes in the recorded
order) while live captures them, with each backend; what it prints must be what `inspect` prints for
the original recording, and `inspect` of its pcapng copy must print what it printed.

Needs root or CAP_NET_RAW (the ``capture`` marker: skipped without, failed in CI).
"""

from __future__ import annotations

import re

import pytest

from analyzer.capture import read_packets
from tests.live_helpers import Live, close, connect, conversations, frames, listener, replay
from tests.test_live_loop import assert_same_frames, jsonl, streamproto

pytestmark = pytest.mark.capture

RECORDINGS = [
    ("captures/amqp091/pika_e2e.pcap", "amqp091", "scapy"),
    ("captures/amqp091/pika_e2e.pcap", "amqp091", "tshark"),
    ("captures/rabbitmq_stream/rstream_publish_confirm.pcap", "rabbitmq_stream", "scapy"),
    ("captures/rabbitmq_stream/rstream_consume.pcap", "rabbitmq_stream", "tshark"),
    ("captures/iggy/apache_iggy_0.9.0.pcap", "iggy", "scapy"),
    ("captures/amqp_fast/amqp_fast_session.pcap", "amqp_fast", "scapy"),
]


def _untimed(fields: object) -> object:
    """Fields without the ones the analyzer derives from capture times (a response's
    ``response_time``): the replay's timing is its own. Values from the wire stay."""
    if isinstance(fields, dict):
        return {k: _untimed(v) for k, v in fields.items() if k != "response_time"}
    if isinstance(fields, list):
        return [_untimed(v) for v in fields]
    return fields


def content(frame: dict) -> tuple:
    """What a frame says, without where and when it was captured (ports, packet numbers, times:
    the replay's own)."""
    # A latency in the Info line, negative too: the replay's capture times can put a reply before
    # its request (seen once in CI, the machine loaded: "response to PING status=OK req=1 (-1111 µs)").
    info = re.sub(r" \(-?\d+(\.\d+)? (µs|ms|s)\)", "", frame["info"])
    return (frame["direction"], frame["protocol"], frame["dialect"], frame["command"], frame["size"],
            info, _untimed(frame["fields"]), sorted(f["id"] for f in frame.get("findings", [])))


def by_conversation(frames: list[dict]) -> list[list[tuple]]:
    """Each conversation's frames in order (the replay plays conversations one after another,
    where the recording may interleave them)."""
    flows: dict[int, list[tuple]] = {}
    for f in frames:
        flows.setdefault(f["flow"], []).append(content(f))
    return [flows[k] for k in sorted(flows)]


@pytest.mark.parametrize(("recording", "protocol", "backend"), RECORDINGS)
def test_replayed_conversations_decode_as_the_recording(recording: str, protocol: str, backend: str, tmp_path) -> None:
    original = frames(jsonl(streamproto("inspect", recording, "-T", "jsonl").stdout))
    convs = [c for c in conversations(recording) if c[0] == protocol]
    assert convs and original
    server = listener()
    port = server.getsockname()[1]
    copy = tmp_path / "live.pcapng"
    live = Live("-i", "lo", "--backend", backend, "-f", f"tcp port {port}", "-d", f"{port}={protocol}",
                "-T", "jsonl", "-w", str(copy))
    try:
        assert live.started(), live.banner
        for _, chunks in convs:
            client, srv = connect(server)
            replay(client, srv, chunks)
            close(client, srv)
        live.wait_for(lambda events: len(frames(events)) >= len(original))
    finally:
        code, err = live.stop()
        server.close()
    assert code == 0, err
    assert "Traceback" not in err
    shown = frames(live.events())
    assert by_conversation(shown) == by_conversation(original)
    assert "stopped (interrupted)" in err and " 0 dropped" in err
    again = frames(jsonl(streamproto("inspect", str(copy), "-T", "jsonl").stdout))
    assert_same_frames(shown, again)
    # Each packet once: loopback shows every packet leaving and arriving; only one copy is kept.
    packets = [p.data for p in read_packets(str(copy))]
    assert len(set(packets)) == len(packets)
    assert f"{len(packets):,} packets captured" in err


def test_a_conversation_open_before_the_capture_is_decoded_from_the_middle(tmp_path) -> None:
    recording = "captures/amqp091/pika_e2e.pcap"
    original = frames(jsonl(streamproto("inspect", recording, "-T", "jsonl").stdout))
    (_, chunks), = [c for c in conversations(recording) if c[0] == "amqp091"]
    server = listener()
    port = server.getsockname()[1]
    client, srv = connect(server)
    half = len(chunks) // 2
    replay(client, srv, chunks[:half])  # before the capture starts
    live = Live("-i", "lo", "-f", f"tcp port {port}", "-d", f"{port}=amqp091", "-T", "jsonl")
    try:
        assert live.started(), live.banner
        replay(client, srv, chunks[half:])
        close(client, srv)
        live.wait_for(lambda events: any(f["command"] == "Connection.CloseOk" for f in frames(events)))
    finally:
        code, err = live.stop()
        server.close()
    assert code == 0, err
    shown = [(f["direction"], f["command"], f["info"]) for f in frames(live.events())]
    expected = [(f["direction"], f["command"], f["info"]) for f in original]
    # The second half's frames, from the middle of the conversation: at most the first one or two
    # (cut by the capture's start) missing.
    assert len(shown) >= len(expected) // 2 - 2
    assert shown == expected[len(expected) - len(shown):]


def test_capture_errors_are_one_line_and_exit_2() -> None:
    for args, text in [
        (["-i", "nope0"], "unknown interface 'nope0'"),
        (["-i", "lo", "-f", "tcp portx 1"], "bad capture filter 'tcp portx 1'"),
        (["-i", "nope0", "--backend", "tshark"], "unknown interface 'nope0'"),
        (["-i", "lo", "-f", "tcp portx 1", "--backend", "tshark"], "Invalid capture filter"),
    ]:
        r = streamproto("live", *args, "--duration", "1", timeout=120)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("streamproto: ") and text in r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["scapy", "tshark"])
def test_without_capture_rights_one_line_and_exit_2(backend: str) -> None:
    # Root without CAP_NET_RAW and CAP_NET_ADMIN (bounding set dropped): as an ordinary user.
    r = streamproto("live", "-i", "lo", "--duration", "1", "--backend", backend, timeout=120,
                    prefix=["setpriv", "--bounding-set=-net_raw,-net_admin", "--inh-caps=-net_raw,-net_admin"])
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "permission" in r.stderr, r.stderr


def test_list_interfaces_names_loopback() -> None:
    for backend in ("scapy", "tshark"):
        r = streamproto("live", "-D", "--backend", backend, timeout=120)
        assert r.returncode == 0, r.stderr
        assert any(line.split(". ", 1)[1].split(" ")[0] == "lo" for line in r.stdout.splitlines()), r.stdout
