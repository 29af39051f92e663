"""The modules compiled by mypyc (analyzer/native.py, setup.py): compiled where the package was
built with mypyc (always in CI), and every view of every bundled capture the same, byte for byte,
from the compiled modules as from their source (``STREAMPROTO_PURE=1``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from analyzer import native

ROOT = Path(__file__).resolve().parent.parent
MARKED = native.marked_modules(ROOT)
CAPTURES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "captures").rglob("*")
                  if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


def test_modules_are_marked() -> None:
    assert "dissectors.amqp_fast.hot" in MARKED
    assert all(find_spec(name) is not None for name in MARKED)


def test_marked_modules_run_compiled() -> None:
    """In CI the install must have compiled them (a silent fallback would leave the compiled code
    untested); elsewhere an install without mypyc or a C compiler is pure Python, as designed."""
    missing = native.not_compiled(ROOT)
    if missing and native.pure_requested():
        pytest.skip("STREAMPROTO_PURE is set: every module runs from its source")
    if missing and not os.environ.get("CI"):
        pytest.skip(f"installed without mypyc or a C compiler: {len(missing)} marked modules run from source")
    assert not missing, f"not compiled: {missing}"


def _views(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "STREAMPROTO_PURE"}
    if pure:
        env["STREAMPROTO_PURE"] = "1"
    run = subprocess.run([sys.executable, "-m", "tests.native_views", *CAPTURES], cwd=ROOT, env=env,
                         capture_output=True, check=True)
    return json.loads(run.stdout)


def test_compiled_and_source_give_the_same_views() -> None:
    if native.not_compiled(ROOT) == MARKED:
        pytest.skip("nothing is compiled here: both runs would be the source (see the test above)")
    compiled, pure = _views(pure=False), _views(pure=True)
    assert compiled["compiled"] and set(compiled["compiled"]) <= set(MARKED) and not pure["compiled"]
    assert len(compiled["views"]) == 3 * len(CAPTURES) > 300
    differ = [view for view, digest in compiled["views"].items() if pure["views"][view] != digest]
    assert not differ, f"{len(differ)} views differ between the compiled modules and their source: {differ[:10]}"
