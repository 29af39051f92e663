"""The encoder-built benchmark workloads (bench/workloads/, issue #15) build at a small scale and
decode with their protocol's dissector, frame after frame, with no engine.dissector_error and no
warning or error finding. Nothing here is timed: the speed figures are bench/vs_tshark.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.engine import analyze_file
from bench import workloads

ENCODER_BUILT = {"amqp091_large_bodies": ("amqp091", 0.2), "amqp_fast_fragmented": ("amqp_fast", 0.01)}


@pytest.mark.parametrize("name", sorted(ENCODER_BUILT))
def test_encoder_workload_builds_and_decodes_cleanly(name: str, tmp_path: Path) -> None:
    protocol, scale = ENCODER_BUILT[name]
    mod = workloads.module(name)
    assert mod.SOURCE.startswith("encoder")
    capture = workloads.ensure([name], tmp_path, scale, log=lambda _msg: None)[name]
    frames, bad = 0, []
    for ev in analyze_file(str(capture)):
        if isinstance(ev, Frame):
            assert ev.protocol == protocol
            frames += 1
            bad += [f.id for f in ev.findings if f.severity != "note"]
        elif isinstance(ev, Finding) and ev.severity != "note":
            bad.append(ev.id)
    assert frames > 50
    assert bad == []


def test_every_workload_declares_how_it_is_made() -> None:
    for name in workloads.NAMES:
        text = (Path(workloads.__file__).parent / f"{name}.py").read_text()
        assert "\nSOURCE = " in text and "\nPORT = " in text and "\nTSHARK = " in text, name


def test_the_jobs_ceiling_of_bench_cores() -> None:
    # bench/cores.py: two runs at once as fast as one alone, no start-up: two halves gain 2x.
    from bench.cores import ceilings

    assert ceilings(1.0, 1.0, 0.0) == (2.0, 2.0)
    # Two at once take twice as long as one alone: the second core gives nothing.
    assert ceilings(1.0, 2.0, 0.1) == (1.0, 1.0)
    # The start-up (0.2 of 1.0 s) is paid once, before the halves: 1 / (0.2 + 0.8 / 2).
    cores, most = ceilings(1.0, 1.0, 0.2)
    assert cores == 2.0 and abs(most - 1 / 0.6) < 1e-12
    # The README's figures for short connections on its machine (printed rounded to the ms: 1.53x
    # from the unrounded medians).
    cores, most = ceilings(0.726, 0.866, 0.099)
    assert round(cores, 2) == 1.68 and abs(most - 1.53) < 0.01
