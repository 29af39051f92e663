"""Run a test helper in a new interpreter and take its JSON result back.

pyshark sets a process-wide asyncio child watcher on whatever event loop is current when a capture
opens, and reaps its tshark through it at close. In a pytest process where other tests have made
and closed event loops and subprocesses of their own, that watcher once lost its tshark ("Unknown
child process pid ..., will report returncode 255") after every packet had been read, and pyshark
raised TSharkCrashException at close. The oracles that read captures through pyshark run it here,
in an interpreter that has done nothing else: the same pyshark and tshark, without the state other
tests leave behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_CODE = ("import importlib, json, sys; f = getattr(importlib.import_module(sys.argv[1]), sys.argv[2]); "
         "sys.stdout.write(json.dumps(f(*json.loads(sys.argv[3]))))")


def run(module: str, function: str, *args: Any) -> Any:
    """``module.function(*args)`` (arguments and result as JSON) in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", _CODE, module, function, json.dumps(args)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{module}.{function}{args} failed in a new interpreter:\n{done.stderr}")
    return json.loads(done.stdout)
