"""The README's worked example dissector (`kvp`) runs end to end: decoded from a capture by the
real engine, its findings, snapshot/resume, and the registry picking it up from its folder."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import struct
import sys
from pathlib import Path

import pytest

from analyzer.api import Finding, Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.pcapwrite import TcpConversation, write_capture
from tests.replay import Recorded, normal

ROOT = Path(__file__).resolve().parent.parent
CODE = re.search(r"```python\n# dissectors/kvp/__init__.py\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.fixture(scope="module")
def kvp():
    assert CODE is not None, "the README lost its worked example"
    spec = importlib.util.spec_from_loader("kvp_readme_example", loader=None)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[module.__name__] = module  # plain_state finds classes by module
    exec(compile(CODE.group(1), "README.md:kvp", "exec"), module.__dict__)
    return module


def _msg(op: int, rid: int, payload: bytes = b"") -> bytes:
    return struct.pack(">IBI", 5 + len(payload), op, rid) + payload


def _capture(tmp_path: Path) -> str:
    conv = TcpConversation(server=("10.0.0.2", 7777))
    conv.handshake()
    conv.send("c2s", _msg(1, 7, b"colour") + _msg(2, 8, b"size=3"))
    conv.send("s2c", _msg(0x81, 7, b"blue"))
    conv.send("c2s", b"\xff\xff\xff\xffjunk" + _msg(2, 9, b"x"))  # junk, then a Put never answered
    conv.send("s2c", _msg(0x82, 8) + _msg(0x82, 42) + _msg(0x33, 1))
    conv.send("c2s", _msg(1, 10)[:6])  # the capture ends inside a frame
    path = str(tmp_path / "kvp.pcap")
    write_capture(path, [conv])
    return path


def test_kvp_decodes_end_to_end(kvp, tmp_path):
    events = list(Analyzer({"kvp": kvp.KvpDissector()}).run(read_packets(_capture(tmp_path))))
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.info for f in frames] == ["Get id=7", "Put id=8", "Value id=7", "Put id=9", "Ok id=8", "Ok id=42",
                                        "Unknown id=1"]
    assert frames[2].get("response_time") == pytest.approx(frames[2].ts - frames[0].ts)
    found = [f.id for f in frames for f in f.findings] + [e.id for e in events if isinstance(e, Finding)]
    assert sorted(found) == ["kvp.correlation.unanswered", "kvp.correlation.unknown_response",
                             "kvp.framing.incomplete", "kvp.framing.resync", "kvp.op.unknown"]
    unanswered = next(e for e in events if isinstance(e, Finding) and e.id == "kvp.correlation.unanswered")
    assert unanswered.frame == frames[3].packets[1] and "Put id=9" in unanswered.message


def test_kvp_snapshot_resumes_anywhere(kvp, tmp_path):
    d = kvp.KvpDissector()
    log: list[Recorded] = []

    class Recording(kvp.KvpDissector):
        def connection(self, midstream):
            inner = d.connection(midstream)
            rec = Recorded("kvp", midstream)
            log.append(rec)

            class Tap:
                def __getattr__(self, name):
                    attr = getattr(inner, name)
                    if name in ("feed", "gap", "end", "tick"):
                        return lambda *a: (rec.calls.append((name, a)), attr(*a))[1]
                    return attr
            return Tap()

    list(Analyzer({"kvp": Recording()}).run(read_packets(_capture(tmp_path))))
    calls = log[0].calls
    # Split every feed at each byte so that cuts fall inside frames too.
    fine = [(n, a) if n != "feed" else ("feed", (a[0], a[1][i:i + 1], a[2]))
            for n, a in calls for i in (range(len(a[1])) if n == "feed" else [0])]
    straight = _run(d, fine, None)
    for cut in sorted({1, len(fine) // 2, len(fine) - 1, *random.Random(5).sample(range(len(fine)), 10)}):
        assert _run(d, fine, cut) == straight, cut


def _run(d, calls, cut):
    conn = d.connection(False)
    out = []
    for i, (name, args) in enumerate(calls):
        if i == cut:
            conn = d.resume(json.loads(json.dumps(conn.snapshot())))
        out += normal(getattr(conn, name)(*args) or ())
    return out
