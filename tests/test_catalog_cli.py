"""`streamproto fields` prints the field catalogue; `protocols` prints the state machine tables."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.registry import load_dissectors

runner = CliRunner()


def test_fields_lists_registered_names_with_types():
    r = runner.invoke(app, ["fields", "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["name"]: x for x in map(json.loads, r.output.splitlines())}
    assert rows["rabbitmq_stream.publish.publisher_id"]["type"] == "uint8"
    assert rows["rabbitmq_stream.publish.messages.publishing_id"]["repeated"] is True
    assert rows["amqp091.basic.publish.routing_key"]["type"] == "string"
    assert rows["amqp091.basic.deliver.delivery_tag"]["type"] == "uint64"
    text = runner.invoke(app, ["fields", "amqp091"]).output
    assert "amqp091.basic.publish.routing_key" in text and "rabbitmq_stream." not in text


def test_fields_rejects_an_unknown_protocol():
    r = runner.invoke(app, ["fields", "nope"])
    assert r.exit_code == 2


def test_every_dissector_has_a_catalogue_and_machines():
    for d in load_dissectors().values():
        names = [f.name for f in d.fields()]
        assert names and all(n.startswith(d.name + ".") for n in names), d.name
        assert len(names) == len(set(names)), d.name
        assert d.machines(), d.name


def test_protocols_prints_each_machine_table():
    out = runner.invoke(app, ["protocols", "--no-commands"]).output
    for d in load_dissectors().values():
        for m in d.machines():
            assert m.rule.id in out
