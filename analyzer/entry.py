"""The ``streamproto`` program's entry point (the console script, ``python -m analyzer``).

The command line is loaded with the cyclic garbage collector paused, and what it loaded is then
frozen: click, typer and the analyzer make only objects that live as long as the process, and the
collector's passes over them while they loaded, during the run and at exit were about a tenth of
the start of every run. Importing :mod:`analyzer.cli` elsewhere (tests, the pipeline) leaves the
collector alone.
"""

from __future__ import annotations

import gc


def main() -> None:
    enabled = gc.isenabled()
    gc.disable()
    try:
        from analyzer.cli import main as cli_main
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    cli_main()
