"""Finding dissectors: entry points, and packages under dissectors/ that need nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dissectors
from analyzer.registry import GROUP, declared, load_dissectors, parse_decode_as


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


def _entry_points(group: str) -> list[tuple[str, str]]:
    from importlib.metadata import entry_points

    return [(e.name, e.value) for e in sorted(entry_points(group=group), key=lambda e: e.name)]


def test_declared_entry_points_are_importlib_metadatas():
    assert declared() == _entry_points(GROUP)
    assert ("amqp091", "dissectors.amqp091:Amqp091Dissector") in declared()
    for group in ("console_scripts", "pytest11"):  # groups many installed distributions declare
        assert declared(group) == _entry_points(group)


def test_a_plugin_declared_by_an_installed_distribution(tmp_path: Path, monkeypatch):
    """A third-party dissector: its own module and a dist-info whose entry_points.txt names it,
    beside a second copy of the same distribution later on the path (which is not read) and an
    egg-info of another one."""
    (tmp_path / "sixthproto.py").write_text(
        "from analyzer.api import Dissector\n"
        "class Outer:\n"
        "    class SixthDissector(Dissector):\n"
        "        name = 'sixth'\n"
        "        title = 'A sixth protocol'\n"
        "        default_ports = (9998,)\n")
    info = tmp_path / "Sixth_Proto-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(
        "; a comment\n[console_scripts]\nsixth = sixthproto:main\n\n"
        f"[{GROUP}]\nsixth = sixthproto:Outer.SixthDissector [extra]\n")
    shadowed = tmp_path / "later" / "sixth.proto-2.0.dist-info"
    shadowed.mkdir(parents=True)
    (shadowed / "entry_points.txt").write_text(f"[{GROUP}]\nshadow = nowhere:Nothing\n")
    egg = tmp_path / "later" / "seventh-0.1.egg-info"
    egg.mkdir()
    (egg / "entry_points.txt").write_text(f"[{GROUP}]\nbroken = no_such_module:Nothing\n")
    monkeypatch.syspath_prepend(str(tmp_path / "later"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sixthproto", raising=False)
    assert declared() == _entry_points(GROUP)
    assert ("sixth", "sixthproto:Outer.SixthDissector [extra]") in declared()
    assert not any(name == "shadow" for name, _ in declared())
    found = load_dissectors.__wrapped__()
    assert found["sixth"].default_ports == (9998,)
    assert "broken" not in found and "amqp091" in found


def test_decode_as_parsing():
    known = load_dissectors()
    assert parse_decode_as(["15552=rabbitmq_stream", " 5673 = amqp091"], known) == {
        15552: "rabbitmq_stream", 5673: "amqp091"}
    for bad in ["5552", "abc=amqp091", "0=amqp091", "70000=amqp091", "5552=nope"]:
        with pytest.raises(ValueError):
            parse_decode_as([bad], known)
