"""The README's tour shows real output: every `$ streamproto ...` example is run and its lines
must appear in what the command prints today (`...` stands for lines left out)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```\n\$ (streamproto [^\n]+)\n(.*?)```", re.S)
EXAMPLES = BLOCK.findall((ROOT / "README.md").read_text())


def test_the_tour_has_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("command,shown", EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_example_output_is_real(command: str, shown: str):
    args = shlex.split(command)[1:]
    r = subprocess.run([sys.executable, "-m", "analyzer", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [line for line in shown.splitlines() if line.strip() and line.strip() != "..."]
    out = r.stdout.splitlines()
    missing = [line for line in lines if line not in out]
    assert not missing, f"README lines not in today's output of `{command}`: {missing[:3]}"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Set up and run the tests.*?```sh\n(.+?)\n```", readme, re.S)
    assert block is not None
    command = block.group(1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci, f"`.ci/run` must run the README's test command: {command}"
