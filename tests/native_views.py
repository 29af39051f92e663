"""Every view of the given captures, as a digest each: run as a program by tests/test_native.py, once
with the compiled modules and once with ``STREAMPROTO_PURE=1`` (analyzer/native.py).

Prints one JSON object: ``{"compiled": [module, ...], "views": {"capture | format": sha256}}``.
"""

from __future__ import annotations

import hashlib
import json
import sys

from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.native import compiled_modules

#: The tree (every field), the one-line summary and JSON Lines (every field and finding as data).
FORMATS = {"tree": [], "summary": ["--format", "summary"], "jsonl": ["--format", "jsonl"]}


def views(captures: list[str]) -> dict[str, str]:
    runner = CliRunner()
    out: dict[str, str] = {}
    for capture in captures:
        for name, args in FORMATS.items():
            result = runner.invoke(app, ["inspect", "--jobs", "1", *args, capture])
            digest = hashlib.sha256(result.stdout_bytes + f"\nexit {result.exit_code}".encode())
            out[f"{capture} | {name}"] = digest.hexdigest()
    return out


if __name__ == "__main__":
    found = views(sys.argv[1:])
    json.dump({"compiled": compiled_modules(), "views": found}, sys.stdout)
