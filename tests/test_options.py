"""Dissector options (``-o PROTO.NAME=VALUE``, ``--dialect PROTO=NAME``): parsed once, validated
against each dissector's declared options, applied to a copy so the registry's instances stay as
they were."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from analyzer.api import Dissector, Option
from analyzer.cli import app
from analyzer.registry import parse_options


class Opted(Dissector):
    name = "opted"
    title = "a dissector with options"
    options = (Option("dialect", "which variant", "auto", ("auto", "old", "new")),
               Option("label", "free text", ""))


def test_defaults_and_configured_copy() -> None:
    d = Opted()
    assert d.setting("dialect") == "auto"
    new = parse_options(["opted.label=x"], ["opted=old"], {"opted": d})["opted"]
    assert (new.setting("dialect"), new.setting("label")) == ("old", "x")
    assert d.setting("dialect") == "auto" and d.setting("label") == ""  # the original is untouched
    # tshark's colon form is accepted too
    assert parse_options(["opted.dialect:new"], [], {"opted": d})["opted"].setting("dialect") == "new"
    with pytest.raises(KeyError):
        d.setting("nope")


@pytest.mark.parametrize(("opts", "dialects", "message"), [
    (["opted.dialect=mid"], [], "opted.dialect must be one of auto, old, new, not 'mid'"),
    (["opted.nope=1"], [], "opted has no option 'nope' (its options: dialect, label)"),
    (["other.x=1"], [], "unknown protocol 'other'"),
    (["opted=1"], [], "-o expects PROTO.NAME=VALUE"),
    (["novalue"], [], "-o expects PROTO.NAME=VALUE"),
    ([], ["opted"], "--dialect expects PROTO=DIALECT"),
])
def test_bad_settings_say_what_is_wrong(opts: list[str], dialects: list[str], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_options(opts, dialects, {"opted": Opted()})


def test_cli_refuses_bad_option_with_one_line(tmp_path) -> None:
    capture = tmp_path / "empty.pcap"
    from analyzer.pcapwrite import CaptureWriter
    with open(capture, "wb") as fh:
        CaptureWriter(fh)
    result = CliRunner().invoke(app, ["inspect", str(capture), "-o", "amqp091.nope=1"])
    assert result.exit_code == 2
    assert "amqp091 has no option 'nope'" in result.output
