"""cli.for_command: a run builds only the command it was asked for, and that command is exactly
the one the whole app has (parameters, help, usage errors); anything else gets the whole app."""

from __future__ import annotations

import click
import pytest
import typer
from typer.testing import CliRunner

import analyzer.cli as cli

runner = CliRunner()
NAMES = sorted(typer.main.get_group(cli.app).commands)


def _info(group: click.Group, name: str) -> dict:
    cmd = group.commands[name]
    with click.Context(group, info_name="streamproto") as ctx:
        return cmd.to_info_dict(ctx)


def test_every_command_is_found() -> None:
    assert {"inspect", "check", "live", "flows", "stats", "follow", "pipeline"} <= set(NAMES)
    for name in NAMES:
        narrow = cli.for_command(["streamproto", name])
        assert narrow is not cli.app
        assert [c.callback for c in narrow.registered_commands] == [
            c.callback for c in cli.app.registered_commands
            if (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    # The whole app is left as it was.
    assert sorted(typer.main.get_group(cli.app).commands) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_narrowed_command_is_the_same(name: str) -> None:
    whole = typer.main.get_command(cli.app)
    narrow = typer.main.get_command(cli.for_command(["streamproto", name]))
    assert isinstance(whole, click.Group) and isinstance(narrow, click.Group)
    assert list(narrow.commands) == [name]
    assert _info(narrow, name) == _info(whole, name)
    assert [p.name for p in narrow.params] == [p.name for p in whole.params]  # --version, completion
    for args in ([name, "--help"], [name, "--no-such-option"]):
        a = runner.invoke(cli.app, args)
        b = runner.invoke(cli.for_command(["streamproto", name]), args)
        assert (b.exit_code, b.output) == (a.exit_code, a.output)


@pytest.mark.parametrize("argv", [["streamproto"], ["streamproto", "--help"], ["streamproto", "--version"],
                                  ["streamproto", "inspec"], ["streamproto", "capture.pcap"]])
def test_anything_else_gets_the_whole_app(argv: list[str]) -> None:
    assert cli.for_command(argv) is cli.app
