"""A lazy frame's quick Info line (dissectors.kit.lazy.QUICK_INFO: what the summary view reads
without building a tree) is the line its tree builder gives, on every frame of every bundled
capture of every protocol; and reading the Info line first leaves the tree and the line as they
would have been. (tests/test_amqp091_quick_info.py holds AMQP 0-9-1 to it on mutated variants too.)"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from analyzer.api import Frame
from analyzer.registry import load_dissectors
from dissectors.kit.lazy import QUICK_INFO, LazyFrame
from tests.replay import Recorded, events, normal, record

CAPTURES = sorted(p for p in (Path(__file__).parent.parent / "captures").rglob("*")
                  if p.name.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")))
PROTOCOLS = sorted(load_dissectors())
#: The protocols whose busy frames are lazy with a quick Info function (Iggy's frames are made
#: whole: a lazy request and response measured 2.7 % faster checks, 1 % slower summaries and
#: 1.5 % slower JSON Lines).
QUICK = {"amqp091", "amqp_fast", "rabbitmq_stream"}


def _runs(rec: Recorded) -> tuple[list[str], list[object], int]:
    """The Info lines read before anything else, the whole output after (in the normal form),
    and how many frames answered through a quick Info function."""
    dissector = load_dissectors()[rec.protocol]
    out = events(dissector, rec)
    quick = 0
    lines = []
    for ev in out:
        if isinstance(ev, Frame):
            if isinstance(ev, LazyFrame) and ev._build is not None:
                quick += ev._build in QUICK_INFO
            lines.append(ev.info)
    return lines, normal(out), quick


@cache
def _recorded(path: str) -> list[Recorded]:
    return record(path)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_quick_info_is_the_tree_info(protocol: str) -> None:
    quick = 0
    for path in CAPTURES:
        for rec in _recorded(str(path)):
            if rec.protocol != protocol:
                continue
            lines, after_info, n = _runs(rec)
            built = events(load_dissectors()[protocol], rec)
            for ev in built:
                if isinstance(ev, Frame):
                    _ = ev.fields  # the tree first: the Info line then comes with it
            tree_first = normal(built)
            assert [e[6] for e in tree_first if e[0] == "frame"] == lines, path.name
            assert after_info == tree_first, path.name
            quick += n
    if protocol in QUICK:
        assert quick > 20, protocol  # the quick way really ran
