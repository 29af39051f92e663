"""`streamproto pipeline` and `streamproto pipeline-report`, registered on the main CLI."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

# Imported when analyzer.cli registers these commands, at its very end: every name is defined by then.
from analyzer.cli import DEFAULT_IDLE_TIMEOUT, DecodeAsOpt, DialectOpt, IdleOpt, OptionOpt, fail


class Engine(enum.StrEnum):
    local = "local"
    spark = "spark"


class ReportFormat(enum.StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def register(app: typer.Typer) -> None:
    @app.command()
    def pipeline(
        inputs: Annotated[list[str], typer.Argument(
            help="Capture files, directories (read recursively) or globs; a directory's files are one host's "
                 "rotated captures, read as one capture", show_default=False)],
        out: Annotated[str, typer.Option("--out", help="Directory of the Parquet tables (replaced if there)")],
        engine: Annotated[Engine, typer.Option(help="local: worker processes, no JVM; spark: PySpark")] = Engine.local,
        master: Annotated[str | None, typer.Option(help="Spark master URL (default local[*]; spark-submit's "
                                                        "when run under it)")] = None,
        jobs: Annotated[int | None, typer.Option(help="Worker processes of the local engine (default: all "
                                                      "cores)")] = None,
        decode_as: DecodeAsOpt = [],  # noqa: B006 - typer needs a literal default
        option: OptionOpt = [],  # noqa: B006
        dialect: DialectOpt = [],  # noqa: B006
        idle_timeout: IdleOpt = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        """Decode fleets of captures into Parquet tables: frames, findings, conversations, files."""
        from analyzer.pipeline import Settings, run
        from analyzer.registry import load_dissectors, parse_decode_as, parse_options

        if jobs is not None and jobs < 1:
            raise fail(f"--jobs must be at least 1, not {jobs}")
        if not idle_timeout >= 0:
            raise fail(f"--idle-timeout must be 0 (never) or a positive number of seconds, not {idle_timeout}")
        try:
            parse_decode_as(decode_as, parse_options(option, dialect, load_dissectors()))
        except ValueError as exc:
            raise fail(str(exc)) from None
        settings = Settings(tuple(decode_as), tuple(option), tuple(dialect), idle_timeout)
        try:
            outcome = run(inputs, out, settings, str(engine), jobs, master)
        except ImportError as exc:
            raise fail(f"the {engine} engine needs {exc.name or 'pyspark with its SQL extras'} "
                       f"(pip install 'streamproto[spark]')") from None
        except RuntimeError as exc:  # SparkUnavailable: no Java, no master
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"{out}: {exc.strerror or exc}") from None
        for name in outcome.missing:
            print(f"streamproto: {name}: no such file, directory or match", file=sys.stderr)
        for path, error in outcome.failed:
            print(f"streamproto: {error if path in error else f'{path}: {error}'}", file=sys.stderr)
        bad = len(outcome.failed) + len(outcome.missing)
        print(f"{outcome.files} files -> {out} ({len(outcome.failed)} unreadable, see the files table)"
              if outcome.failed else f"{outcome.files} files -> {out}", file=sys.stderr)
        if outcome.files == 0:
            raise fail("no capture files found")
        if bad:
            raise typer.Exit(1)

    @app.command("pipeline-report")
    def pipeline_report(
        directory: Annotated[Path, typer.Argument(help="The --out directory of `streamproto pipeline`",
                                                  show_default=False)],
        format: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format")] = ReportFormat.table,
        engine: Annotated[Engine, typer.Option(help="local: DuckDB, embedded; spark: Spark SQL")] = Engine.local,
        master: Annotated[str | None, typer.Option(help="Spark master URL (default local[*])")] = None,
        top: Annotated[int, typer.Option(help="Rows of the conversations with the most findings")] = 10,
    ) -> None:
        """Findings by rule and protocol, commands per protocol, latency percentiles per command and the
        conversations with the most findings, from the pipeline's tables."""
        from analyzer.pipeline import report

        if not (directory / "frames").is_dir() and not (directory / "files").is_dir():
            raise fail(f"{directory}: no pipeline tables there (run `streamproto pipeline ... --out {directory}`)")
        try:
            sections = report.run(str(directory), str(engine), master, top)
        except ImportError as exc:
            raise fail(f"pipeline-report needs {exc.name or 'pyspark with its SQL extras'} "
                       f"(pip install 'streamproto[spark]')") from None
        except RuntimeError as exc:  # SparkUnavailable
            raise fail(str(exc)) from None
        report.write(sections, str(format))
