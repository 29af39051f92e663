"""Regenerate the synthetic Iggy captures of this folder from the dissector's test encoder.

    python captures/iggy/synthetic/make.py

Writes ``<dialect>_session.pcap`` (a clean session of every dialect; L0 exists only from the
encoder) and ``rule_<id>.pcap`` (one per conformance rule, the anomaly of ``ANOMALIES``; the
outstanding-request limit as ``rule_limit_exceeded.pcap.gz``),
all on 127.0.0.1:8090. The output is deterministic (fixed times and ports).
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from dissectors.iggy.encode import ANOMALIES, limit_anomaly, session  # noqa: E402

DIALECTS = ("L0", "L1", "Z1", "Z2", "C", "V")


def main() -> None:
    for d in DIALECTS:
        session(d).pcap(str(HERE / f"{d.lower()}_session.pcap"))
    for rule, build in ANOMALIES.items():
        build().pcap(str(HERE / f"rule_{rule.removeprefix('iggy.').replace('.', '_')}.pcap"))
    # 100,001 unanswered PINGs: 840 KB as pcap, 7 KB compressed (the reader takes .pcap.gz).
    plain = HERE / "rule_limit_exceeded.pcap"
    limit_anomaly().pcap(str(plain))
    with plain.open("rb") as src, gzip.GzipFile(HERE / "rule_limit_exceeded.pcap.gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()


if __name__ == "__main__":
    main()
