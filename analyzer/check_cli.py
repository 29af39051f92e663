"""`streamproto check`: conformance verdicts for CI, with an exit code and report files.

Registered on the main CLI by :func:`register` (so that this command lives apart from cli.py);
the report writers are in :mod:`analyzer.reports`."""


# No `from __future__ import annotations`: typer reads the annotations of `check`, which name the
# option types imported inside register(), so they must be evaluated where they are defined.
import enum
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from analyzer.api import Finding, Severity
from analyzer.engine import DEFAULT_IDLE_TIMEOUT


class FailOn(enum.StrEnum):
    error = "error"
    warning = "warning"
    note = "note"


def _write(path: Path, data: str | bytes, fail: Callable[[str], typer.Exit]) -> None:
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    from analyzer.cli import DecodeAsOpt, DialectOpt, IdleOpt, OptionOpt, _analyzer, fail


    @app.command()
    def check(
        capture: Annotated[list[Path], typer.Argument(
            help="Capture files (pcap, pcapng, optionally gzip-compressed) and directories (searched recursively); "
                 "each file is checked as a capture of its own", show_default=False)],
        fail_on: Annotated[FailOn, typer.Option(
            "--fail-on", help="Exit 1 when a finding of at least this severity is reported")] = FailOn.error,
        junit: Annotated[Path | None, typer.Option(
            "--junit", metavar="FILE", dir_okay=False,
            help="Write JUnit XML: a testsuite per capture, a testcase per conversation")] = None,
        sarif: Annotated[Path | None, typer.Option(
            "--sarif", metavar="FILE", dir_okay=False, help="Write SARIF 2.1.0 (code scanning)")] = None,
        html: Annotated[Path | None, typer.Option(
            "--html", metavar="FILE", dir_okay=False,
            help="Write a self-contained HTML report with ladder diagrams")] = None,
        json_out: Annotated[Path | None, typer.Option(
            "--json", metavar="FILE", dir_okay=False, help="Write every result as one JSON document")] = None,
        baseline: Annotated[Path | None, typer.Option(
            "--baseline", metavar="FILE", dir_okay=False,
            help="Leave out the findings recorded in this baseline: report only new ones")] = None,
        write_baseline: Annotated[Path | None, typer.Option(
            "--write-baseline", metavar="FILE", dir_okay=False,
            help="Record this run's findings (by fingerprint) as a baseline")] = None,
        enable: Annotated[list[str], typer.Option(
            "--enable", metavar="RULE", help="Only report these rules (ids or patterns like 'amqp091.*'; "
                                             "repeatable)")] = [],  # noqa: B006 - typer needs a literal default
        disable: Annotated[list[str], typer.Option(
            "--disable", metavar="RULE", help="Do not report these rules (ids or patterns; repeatable)")] = [],  # noqa: B006
        severity: Annotated[list[str], typer.Option(
            "--severity", metavar="RULE=LEVEL", help="Report a rule at another severity (repeatable)")] = [],  # noqa: B006
        decode_as: DecodeAsOpt = [],  # noqa: B006
        option: OptionOpt = [],  # noqa: B006
        dialect: DialectOpt = [],  # noqa: B006
        idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        """Check captures for protocol conformance: a summary, report files and an exit code
        (0: nothing at or above --fail-on, 1: something is, 2: unusable input)."""
        from analyzer.reports import baseline as baselines
        from analyzer.reports.collect import collect, expand, unusable
        from analyzer.reports.policy import RulePolicy, catalogue
        from analyzer.reports.results import CheckResult
        from analyzer.reports.summary import summary

        _analyzer(decode_as, idle_timeout, option, dialect)  # refuses bad options before any work
        rules = catalogue()
        try:
            policy = RulePolicy.parse([r.id for _, r in rules], enable, disable, severity)
            known = baselines.load(str(baseline)) if baseline is not None else set()
        except ValueError as exc:
            raise fail(str(exc)) from None
        recorded: list[tuple[str, Finding]] = []
        captures = []
        for path, error in expand(str(c) for c in capture):
            if error is not None:
                captures.append(unusable(path, error))
                continue
            captures.append(collect(path, _analyzer(decode_as, idle_timeout, option, dialect), policy, known,
                                    (lambda f, p=path: recorded.append((p, f))) if write_baseline else None))
        result = CheckResult(captures, rules, policy, Severity(fail_on.value))
        if junit is not None:
            from analyzer.reports.junit import junit_xml

            _write(junit, junit_xml(result), fail)
        if sarif is not None:
            from analyzer.reports.sarif import sarif_json

            _write(sarif, sarif_json(result), fail)
        if html is not None:
            from analyzer.reports.html import html_report

            _write(html, html_report(result), fail)
        if json_out is not None:
            from analyzer.reports.jsondoc import json_report

            _write(json_out, json_report(result), fail)
        if write_baseline is not None:
            _write(write_baseline, baselines.dump(recorded), fail)
        sys.stdout.write(summary(result))
        sys.stdout.flush()
        for c in result.unusable:
            # The one stderr line per unusable input the other commands give too (reports still name it).
            print(f"streamproto: {c.error}", file=sys.stderr)
        raise typer.Exit(result.exit_code)
