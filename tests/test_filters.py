"""Display filters (-Y) on real frames of the bundled captures: Wireshark's syntax over the field
catalogue and the engine's fields, and one-line errors that point at the position."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from analyzer.api import Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.filters import DisplayFilter, FilterError
from analyzer.linking import Linker
from analyzer.registry import load_dissectors

CAPTURES = Path(__file__).parent.parent / "captures"
STREAM = ("rabbitmq_stream",)
AMQP = ("amqp091",)


def dissectors(names):
    known = load_dissectors()
    return {n: known[n] for n in names}


def run(capture: str, text: str, names=STREAM) -> tuple[list, list]:
    """(matching frames, matching free-standing findings) of a capture."""
    ds = dissectors(names)
    analyzer = Analyzer(ds)
    fields = [f.name for d in ds.values() for f in d.fields()]
    flt = DisplayFilter(text, fields, ds, lambda flow: (analyzer.flow(flow) or None) and analyzer.flow(flow).protocol,
                        {n: [c.name for c in d.commands()] for n, d in ds.items()})
    linker = Linker(lambda p: (None, p))
    frames, findings = [], []
    events = analyzer.run(read_packets(str(CAPTURES / capture)))
    for ev, links in [*linker.link(events), *linker.flush()]:
        if flt(ev, links):
            (frames if isinstance(ev, Frame) else findings).append(ev)
    return frames, findings


def test_engine_fields_and_bare_words():
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap", 'flow == 4 and command == "Deliver"')
    assert [f.packets[1] for f in frames] == [106, 108, 112, 113]
    same, _ = run("rabbitmq_stream/rstream_consume.pcap", "flow eq 4 && command == Deliver")
    assert [f.packets[1] for f in same] == [106, 108, 112, 113]
    s2c, _ = run("rabbitmq_stream/rstream_consume.pcap", "direction == s2c and flow in {1, 2}")
    assert s2c and all(f.direction == "s2c" and f.flow in (1, 2) for f in s2c)
    big, _ = run("rabbitmq_stream/rstream_consume.pcap", "size > 3000 or size <= 11")
    assert big and all(f.size > 3000 or f.size <= 11 for f in big)


def test_catalogue_fields_nested_lists_and_existence():
    # A value deep in the chunk's records (list elements are not part of the path, as in JSON).
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap", 'rabbitmq_stream.deliver.chunk.entries.amqp.data == "m1"')
    assert [f.packets[1] for f in frames] == [106]
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap",
                    'rabbitmq_stream.deliver.chunk.entries.amqp.data contains "m25"')
    assert [f.packets[1] for f in frames] == [106, 113]  # m25 (records 0-31), m250..m259 (224-299)
    # A command (a prefix of catalogue names) as a test; a protocol-level field.
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap", "rabbitmq_stream.deliver")
    assert len(frames) == 4
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap", "rabbitmq_stream.key == 8")
    assert len(frames) == 4


def test_amqp_fields_regex_and_not():
    frames, _ = run("amqp091/pika_consume.pcap", 'amqp091.basic.deliver.routing_key matches "^SP\\\\.CONS"', AMQP)
    assert frames and all(f.command == "Basic.Deliver" for f in frames)
    tags = run("amqp091/pika_consume.pcap", "amqp091.basic.deliver.delivery_tag >= 3", AMQP)[0]
    everyone = run("amqp091/pika_consume.pcap", "amqp091.basic.deliver", AMQP)[0]
    assert 0 < len(tags) < len(everyone)
    rest = run("amqp091/pika_consume.pcap", "amqp091.basic.deliver and not amqp091.basic.deliver.delivery_tag >= 3",
               AMQP)[0]
    assert len(rest) + len(tags) == len(everyone)
    # Parentheses and precedence: "and" binds tighter than "or".
    a = run("amqp091/pika_consume.pcap", "command == Basic.Ack or command == Basic.Deliver and flow == 99", AMQP)[0]
    b = run("amqp091/pika_consume.pcap", "(command == Basic.Ack or command == Basic.Deliver) and flow == 99", AMQP)[0]
    assert a and not b and all(f.command == "Basic.Ack" for f in a)


def test_enum_names_findings_and_links():
    frames, _ = run("rabbitmq_stream/rstream_errors.pcap",
                    "rabbitmq_stream.create_response.response_code == STREAM_ALREADY_EXISTS")
    assert [f.packets[1] for f in frames] == [26]
    frames, _ = run("rabbitmq_stream/rstream_errors.pcap", 'finding.id == "rabbitmq_stream.response.refused"')
    assert 26 in [f.packets[1] for f in frames] and all(f.findings for f in frames)
    noted, _ = run("rabbitmq_stream/rstream_errors.pcap", "finding.severity == note")
    assert {f.packets[1] for f in noted} >= {26, 28}
    answered, _ = run("rabbitmq_stream/rstream_errors.pcap", "response_frame == 26")
    assert [f.packets[1] for f in answered] == [25]
    slow, _ = run("rabbitmq_stream/rstream_errors.pcap", "latency > 0.002")
    assert slow and all(f.packets[1] for f in slow)


def test_not_equal_is_none_equal_and_needs_the_field():
    # On a field carried several times, != holds only when no occurrence is equal (Wireshark 4).
    frames, _ = run("rabbitmq_stream/rstream_consume.pcap", 'rabbitmq_stream.deliver.chunk.entries.amqp.data != "m1"')
    assert [f.packets[1] for f in frames] == [108, 112, 113]


def test_free_standing_findings_are_tested_with_engine_fields():
    _, findings = run("amqp091/pika_heartbeat.pcap", "finding", AMQP)
    everything = run("amqp091/pika_heartbeat.pcap", "flow >= 1 or not flow >= 1", AMQP)[1]
    assert findings == everything
    assert run("amqp091/pika_heartbeat.pcap", "amqp091.basic.publish", AMQP)[1] == []


@pytest.mark.parametrize("text,column,what", [
    ("amqp091.basic.pubish", 1, "unknown field 'amqp091.basic.pubish'"),
    ("flow == 1 and nosuch", 15, "unknown field 'nosuch'"),
    ("flow == (1", 9, "expected a value"),
    ("(flow == 1", 11, "expected ')'"),
    ('info contains "abc', 15, "unterminated string"),
    ("flow == 1 flow", 11, "unexpected 'flow'"),
    ("info matches \"(\"", 6, "bad regular expression"),
    ("flow in {}", 9, "empty set"),
    ("", 1, "empty filter"),
    ("flow == 1 $", 11, "unexpected character"),
])
def test_errors_name_the_position(text: str, column: int, what: str):
    ds = dissectors(STREAM + AMQP)
    with pytest.raises(FilterError) as err:
        DisplayFilter(text, [f.name for d in ds.values() for f in d.fields()], ds)
    assert err.value.position == column - 1
    assert what in str(err.value) and f"column {column}" in str(err.value)


def test_cli_bad_filter_is_one_line_exit_2():
    import analyzer.cli as cli

    r = CliRunner().invoke(cli.app, ["inspect", str(CAPTURES / "amqp091/pika_get.pcap"), "-Y", "flow == (1"])
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith("streamproto: bad display filter: expected a value") and "column 9" in err[-1]
    assert r.stdout == ""


def test_a_command_name_is_that_command_not_a_field_of_another():
    # Tune carries a heartbeat field; rabbitmq_stream.heartbeat is the Heartbeat command.
    beats, _ = run("rabbitmq_stream/rstream_errors.pcap", "rabbitmq_stream.heartbeat")
    assert beats and {f.command for f in beats} == {"Heartbeat"}
    tunes, _ = run("rabbitmq_stream/rstream_errors.pcap", "rabbitmq_stream.tune.heartbeat == 60")
    assert tunes and {f.command for f in tunes} == {"Tune"}
    empty, _ = run("amqp091/pika_get.pcap", "amqp091.basic.get_empty", AMQP)  # a command without fields
    assert [f.command for f in empty] == ["Basic.GetEmpty"]
