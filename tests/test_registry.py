"""Finding dissectors: entry points, and packages under dissectors/ that need nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dissectors
from analyzer.registry import load_dissectors, parse_decode_as


def test_builtin_dissectors_are_registered():
    found = load_dissectors()
    assert {"rabbitmq_stream", "amqp091"} <= set(found)
    assert found["rabbitmq_stream"].default_ports == (5552,)
    assert found["amqp091"].default_ports == (5672,)


def test_a_new_protocol_folder_is_enough(tmp_path: Path, monkeypatch):
    pkg = tmp_path / "fifthproto"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from analyzer.api import Dissector\n"
        "class FifthDissector(Dissector):\n"
        "    name = 'fifth'\n"
        "    title = 'A fifth protocol'\n"
        "    default_ports = (9999,)\n")
    monkeypatch.setattr(dissectors, "__path__", [*dissectors.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "dissectors.fifthproto", raising=False)
    found = load_dissectors.__wrapped__()
    assert found["fifth"].default_ports == (9999,)
    assert "rabbitmq_stream" in found


def test_decode_as_parsing():
    known = load_dissectors()
    assert parse_decode_as(["15552=rabbitmq_stream", " 5673 = amqp091"], known) == {
        15552: "rabbitmq_stream", 5673: "amqp091"}
    for bad in ["5552", "abc=amqp091", "0=amqp091", "70000=amqp091", "5552=nope"]:
        with pytest.raises(ValueError):
            parse_decode_as([bad], known)
