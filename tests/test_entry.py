"""analyzer.entry, the program's entry point: the command line loads with the cyclic garbage
collector paused, what it loaded is frozen, and the command itself runs with the collector on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap"

PROBE = textwrap.dedent("""
    import gc, json, sys
    during_load = []
    during_run = []

    def watch(phase, info):
        if phase != "start":
            return
        cli = sys.modules.get("analyzer.cli")
        # analyzer.cli registers the live command last: without it, the module is still loading.
        (during_load if cli is not None and not hasattr(cli, "register_live") else during_run).append(1)

    gc.callbacks.append(watch)
    sys.argv = ["streamproto", *sys.argv[1:]]
    from analyzer.entry import main
    try:
        main()
    except SystemExit:
        pass
    enabled, frozen, run = gc.isenabled(), gc.get_freeze_count(), len(during_run)
    # Garbage with a cycle, made after the run: the collector must still take it.
    for _ in range(20_000):
        a = []
        a.append(a)
    print(json.dumps({"load": len(during_load), "run": run, "enabled": enabled, "frozen": frozen,
                      "later": len(during_run) - run}), file=sys.stderr)
""")


def test_command_line_loads_without_collections_then_runs_with_them() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE, "inspect", str(CAPTURE), "--only-findings", "-T", "jsonl"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    seen = json.loads(r.stderr.strip().splitlines()[-1])
    assert seen["load"] == 0  # no collection while analyzer.cli (click, typer, the analyzer) loaded
    assert seen["frozen"] > 10_000  # what it loaded is out of the collector's way
    assert seen["enabled"]  # the run, and whatever follows, has the collector on
    assert seen["later"] > 0  # 20,000 cyclic lists made after the run: the collector ran for them
