"""Several files as one capture: every bundled capture cut into 2, 3 and 10 files at arbitrary
packet boundaries (inside protocol frames too) gives the frames and findings of the whole file."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.api import Frame
from analyzer.capture import read_packets
from analyzer.engine import Analyzer
from analyzer.pcapwrite import TcpConversation, write_capture, write_packets
from tests.split_files import normal, split
from tests.toy import ToyDissector

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").glob("*/*.pcap*"))
LINKS = {1: "ethernet", 113: "sll", 276: "sll2", 0: "null", 101: "raw"}


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
@pytest.mark.parametrize("parts", [2, 3, 10])
def test_split_files_give_the_whole_capture(tmp_path: Path, capture: Path, parts: int):
    packets = list(read_packets(str(capture)))
    whole = normal(list(Analyzer().run(read_packets(str(capture)))))
    rng = random.Random(f"{capture.name}/{parts}")
    cuts = sorted(rng.sample(range(1, len(packets)), min(parts - 1, len(packets) - 1)))
    paths = split(packets, cuts, tmp_path, LINKS[packets[0].linktype])
    given = list(reversed(paths))  # the order on the command line does not matter: time does
    # Packet ordinals across the files, to compare with the whole file's numbers...
    a = Analyzer()
    assert normal(list(a.run_files(given, per_file=False))) == whole
    assert a.packets == len(packets)
    # ...and the same events per file: every packet number maps back to its file and position.
    per_file = list(Analyzer().run_files(given))
    bounds = dict(zip(paths, [0, *cuts], strict=True))
    got = []
    for ev in per_file:
        if isinstance(ev, Frame):
            assert ev.file is not None
            got.append(ev.packets[1] + bounds[ev.file])
        elif ev.frame is not None:
            assert ev.file is not None
            got.append(ev.frame + bounds[ev.file])
    expected = [json.loads(x).get("frame") for x in whole if json.loads(x).get("frame") is not None]
    assert got == expected


def test_files_are_read_in_time_order_and_numbered_per_file(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 7777), ts=100.0)
    c.handshake()
    c.send("c2s", b"HELLO\nLINE 1\nLINE 2\n", mss=7)  # frames span packets, and files
    c.send("s2c", b"BAD\n")
    c.close()
    whole = tmp_path / "whole.pcap"
    write_capture(str(whole), [c])
    packets = list(read_packets(str(whole)))
    late, early = tmp_path / "a.pcap", tmp_path / "b.pcap"  # names sort against time
    write_packets(str(early), packets[:5], "ethernet")
    write_packets(str(late), packets[5:], "ethernet")
    a = Analyzer({"toy": ToyDissector()})
    frames = [e for e in a.run_files([str(late), str(early)]) if isinstance(e, Frame)]
    assert [(f.info, f.file, f.packets) for f in frames] == [
        ("HELLO", str(early), (4, 4)), ("LINE 1", str(early), (4, 5)),
        # bytes from packet 5 of b.pcap and packet 1 of a.pcap
        ("LINE 2", str(late), (5, 1)), ("BAD", str(late), (2, 2))]
    assert frames[-1].findings[0].file == str(late) and frames[-1].findings[0].frame == 2
    assert len(a.flows) == 1 and a.flows[0].packets == len(packets)



def test_the_cli_names_files_only_when_several_are_read(tmp_path: Path):
    whole = ROOT / "captures" / "rabbitmq_stream" / "rstream_publish_confirm.pcap"
    packets = list(read_packets(str(whole)))
    first, second = tmp_path / "x.pcap", tmp_path / "y.pcap"
    write_packets(str(first), packets[:30], "ethernet")
    write_packets(str(second), packets[30:], "ethernet")
    run = [sys.executable, "-m", "analyzer"]

    def out(*args: str) -> str:
        return subprocess.run([*run, *args], capture_output=True, text=True, check=True).stdout

    lines = [json.loads(x) for x in out("inspect", str(second), str(first), "--format", "jsonl").splitlines()]
    assert lines and {x["file"] for x in lines} == {str(first), str(second)}
    assert max(x["frame"] for x in lines if x["file"] == str(first)) <= 30
    one = [json.loads(x) for x in out("inspect", str(whole), "--format", "jsonl").splitlines()]
    assert len(one) == len(lines) and not any("file" in x for x in one)
    assert [x["frame"] for x in one] == [x["frame"] + (30 if x["file"] == str(second) else 0) for x in lines]
    tree = out("inspect", str(second), str(first))
    assert f"{first} #" in tree and f"{second} #" in tree
    summary = out("inspect", str(second), str(first), "--format", "summary")
    assert f"{second}       1 " in summary
    assert str(first) not in out("inspect", str(whole)) and "x.pcap" not in out("inspect", str(whole))
    flows = out("flows", str(second), str(first)).splitlines()
    assert flows[1:] == out("flows", str(whole)).splitlines()[1:]  # conversations continue across files


def test_a_broken_file_among_several_is_one_line_after_what_was_readable(tmp_path: Path):
    c = TcpConversation(("10.1.1.1", 50000), ("10.1.1.2", 5552), ts=100.0)
    c.handshake()
    c.close()
    good = tmp_path / "good.pcap"
    write_capture(str(good), [c])
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(good.read_bytes()[:-7])  # a later file, cut in its last packet
    c2 = TcpConversation(("10.1.1.1", 50001), ("10.1.1.2", 5552), ts=200.0)
    c2.handshake()
    write_capture(str(bad), [c2])
    bad.write_bytes(bad.read_bytes()[:-7])
    r = subprocess.run([sys.executable, "-m", "analyzer", "flows", str(bad), str(good)], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "truncated" in r.stderr and "Traceback" not in r.stderr
    assert "10.1.1.1:50000" in r.stdout  # the good file, read first, is shown
