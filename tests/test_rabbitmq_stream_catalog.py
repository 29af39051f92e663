"""The RabbitMQ Stream field catalogue: every field a frame carries is registered, with the right
repeated-ness, on every bundled capture and on every command of both dialects."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

import pytest

from analyzer.api import Field, Frame
from analyzer.engine import analyze_file
from dissectors.kit.catalog import FieldDef
from dissectors.rabbitmq_stream import RabbitMQStreamDissector
from dissectors.rabbitmq_stream.catalog import field_name
from dissectors.rabbitmq_stream.encode import (
    Script,
    build_chunk,
    deliver,
    encode_message,
    frame,
    request,
    response,
    run,
    simple_entry,
    sub_batch_entry,
    truncate,
    with_trailing,
)
from tests.test_rabbitmq_stream_decode import RESPONSES, SAMPLES

HERE = Path(__file__).resolve().parent.parent / "captures" / "rabbitmq_stream"
CAPTURES = sorted([*HERE.glob("*.pcap"), *HERE.glob("*.pcapng")])


@cache
def catalogue() -> dict[str, FieldDef]:
    return {d.name: d for d in RabbitMQStreamDissector().fields()}


def paths(fields: Sequence[Field], command: str, prefix: tuple[str, ...] = (), elements: bool = False,
          repeated: bool = False) -> Iterator[tuple[tuple[str, ...], bool, Field]]:
    """(path, inside a list, field) of every field; list elements (``elements``) add nothing to the
    path, as in JSON; tables (string-keyed maps) are one field."""
    for f in fields:
        path = prefix if elements else (*prefix, f.name)
        rep = repeated or f.is_list
        if not elements:
            yield path, rep, f
        d = catalogue().get(field_name(command, path))
        if f.children is not None and not (d is not None and d.type == "table"):
            yield from paths(f.children, command, path, f.is_list, rep)


def check(frames: list[Frame]) -> int:
    cat = catalogue()
    problems = []
    n = 0
    for fr in frames:
        for path, repeated, _ in paths(fr.fields, fr.command):
            name = field_name(fr.command, path)
            n += 1
            d = cat.get(name)
            if d is None:
                problems.append(f"{name} (in {fr.command}) is not in the catalogue")
            elif d.repeated != repeated:
                problems.append(f"{name}: repeated={repeated} in {fr.command}, catalogue says {d.repeated}")
    assert not sorted(set(problems)), sorted(set(problems))[:10]
    return n


def test_catalogue_names_are_unique_dotted_snake_case() -> None:
    names = [d.name for d in RabbitMQStreamDissector().fields()]
    assert len(names) == len(set(names)) > 200
    assert all(n.startswith("rabbitmq_stream.") for n in names)
    cat = catalogue()
    assert cat["rabbitmq_stream.publish.publisher_id"].type == "uint8"
    assert cat["rabbitmq_stream.publish.messages.publishing_id"].repeated
    assert cat["rabbitmq_stream.deliver.chunk.entries.amqp.data"].type == "bytes"
    assert cat["rabbitmq_stream.response_time"].type == "double"


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_field_of_every_captured_frame_is_catalogued(path: Path) -> None:
    frames = [e for e in analyze_file(str(path)) if isinstance(e, Frame) and e.protocol == "rabbitmq_stream"]
    assert frames
    assert check(frames) > len(frames) * 3


def test_every_field_of_every_command_is_catalogued() -> None:
    s = Script()
    for name, values in SAMPLES.items():
        s.c(request(name, **values))
        if name in RESPONSES:
            s.s(response(name, **RESPONSES[name]))
    msg = encode_message(b"x", properties={"message_id": "m", "creation_time": 5}, header={"durable": True},
                         application_properties={"k": 1}, message_annotations={"a": "b"})
    s.c(request("Publish", 2, publisher_id=1, messages=[{"publishing_id": 1, "filter_value": "f", "message": msg}]))
    s.c(request("Publish", publisher_id=1, messages=[{"publishing_id": 2, "sub_batch": [msg, b"raw"],
                                                      "compression": 1}]))
    s.s(deliver(0, build_chunk([simple_entry(msg), sub_batch_entry([msg, msg]), simple_entry(b"raw")], 4, 0,
                               trailer=b"t"), version=2, committed_chunk_id=1))
    s.c(request("Metadata", correlation_id=77, streams=["a"]))
    s.s(response("Metadata", **RESPONSES["Metadata"] | {"correlation_id": 77}))
    s.c(with_trailing(request("Heartbeat"), b"\0\0"))
    s.c(truncate(request("Delete", correlation_id=5, stream="stream"), 3))
    s.c(frame(0x0042, 1, b"xyz"))
    frames = [e for e in run(s, midstream=True) if isinstance(e, Frame)]
    assert {f.command for f in frames} >= {"Deliver", "Publish", "MetadataResponse", "Unknown"}
    assert {"trailing", "undecoded", "payload"} <= {f.name for fr in frames for f in fr.fields}
    assert any(f.name == "response_time" for fr in frames for f in fr.fields)
    check(frames)


def test_repeatable_amqp_sections_are_always_lists() -> None:
    """JSON keeps one type per field: data (and amqp-sequence) sections are a list with one or more."""
    from analyzer.jsonout import fields_json
    from dissectors.rabbitmq_stream.amqp import message_fields

    one = encode_message(b"a")
    two = one + one[:3] + b"\xa0\x01b"  # a second data section
    for raw, want in ((one, ["a"]), (two, ["a", "b"])):
        got = fields_json(message_fields(raw, 0, len(raw), 0) or [])
        assert got["data"] == want
