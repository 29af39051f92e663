"""`streamproto check`: exit codes, the summary, directories, undecoded conversations, JUnit XML
(parsed with junitparser, validated against the Ant JUnit XSD), baseline and rule selection, on
the bundled captures and on captures built for the purpose."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import junitparser
from lxml import etree
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pcapwrite import TcpConversation, write_capture

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
DATA = Path(__file__).resolve().parent / "data"
CLEAN = CAPTURES / "rabbitmq_stream" / "rstream_publish_confirm.pcap"  # no finding at all
WARNS = CAPTURES / "rabbitmq_stream" / "rstream_bad_password.pcap"  # one warning (packet 11)
ERRS = CAPTURES / "amqp091" / "pika_bad_login.pcap"  # one error (packet 9): login refused
runner = CliRunner()


def check(*args: object):
    return runner.invoke(app, ["check", *(str(a) for a in args)])


def undecoded_capture(path: Path) -> Path:
    """One conversation on a port no dissector knows, carrying bytes no heuristic claims."""
    c = TcpConversation(("10.9.0.1", 40001), ("10.9.0.2", 9999))
    c.handshake()
    c.send("c2s", b"\x00\x01garbage that is no protocol\xff" * 4)
    c.send("s2c", b"\x7fnope\x00" * 3)
    c.close()
    write_capture(str(path), [c])
    return path


def system_out(suite: junitparser.TestSuite) -> str:
    return suite._elem.findtext("system-out") or ""


def junit_schema() -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(DATA / "junit-ant.xsd")))


# ---------------------------------------------------------------------------------- exit codes
def test_clean_capture_passes_with_exit_0():
    r = check(CLEAN)
    assert r.exit_code == 0, r.output
    assert "2 conversations (rabbitmq_stream 2), 40 frames, 66 packets; findings: 0 errors, 0 warnings, 0 notes" \
        in r.stdout
    assert r.stdout.rstrip().endswith("pass: no finding at or above error (exit 0)")


def test_error_fails_with_exit_1_and_names_rule_and_packet():
    r = check(ERRS)
    assert r.exit_code == 1, r.output
    assert "E      #9 flow 1 amqp091.reply.connection_error: Connection.Close: 403 ACCESS_REFUSED" in r.stdout
    assert "FAIL: 1 finding at or above error (exit 1)" in r.stdout


def test_fail_on_threshold():
    assert check(WARNS).exit_code == 0  # a warning does not reach the default threshold
    r = check(WARNS, "--fail-on", "warning")
    assert r.exit_code == 1
    assert "W     #11 flow 1 rabbitmq_stream.response.error" in r.stdout
    assert check(CLEAN, "--fail-on", "note").exit_code == 0


def test_unusable_input_exit_2_and_reports_still_name_it(tmp_path):
    bogus = tmp_path / "notes.pcap"
    bogus.write_text("this is not a capture\n")
    missing = tmp_path / "missing.pcap"
    junit = tmp_path / "r.xml"
    r = check(ERRS, bogus, missing, "--junit", junit, "--html", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("streamproto: ") for line in err)
    assert "not a pcap or pcapng capture" in err[0] and "missing.pcap" in err[1]
    assert "unusable input" in r.stdout
    assert "amqp091.reply.connection_error" in r.stdout  # the good capture was still checked
    suites = list(junitparser.JUnitXml.fromfile(str(junit)))
    assert [s.name for s in suites] == [str(ERRS), str(bogus), str(missing)]
    assert suites[1].errors == 1 and suites[2].errors == 1
    case = next(iter(suites[1]))
    assert isinstance(case.result[0], junitparser.Error)
    assert "not a pcap or pcapng capture" in case.result[0].message
    junit_schema().assertValid(etree.parse(str(junit)))
    html = (tmp_path / "r.html").read_text()
    assert "UNUSABLE INPUT:" in html and html.count("Unusable input: ") == 2
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["exit_code"] == 2
    assert [c["error"] is not None for c in doc["captures"]] == [False, True, True]


def test_bad_options_exit_2_one_line():
    for args in (["--disable", "no.such.rule"], ["--severity", "amqp091.reply.connection_error=fatal"],
                 ["--severity", "nolevel"], ["--enable", "nothing.*"], ["--decode-as", "x=y"],
                 ["--baseline", "/nonexistent/base.json"]):
        r = check(ERRS, *args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("streamproto: "), (args, r.stderr)
        assert r.stdout == ""


def test_truncated_capture_checks_what_was_readable(tmp_path):
    cut = tmp_path / "cut.pcap"
    data = ERRS.read_bytes()
    cut.write_bytes(data[:len(data) - 40])
    r = check(cut)
    assert r.exit_code == 2
    assert "unusable: " in r.stdout and "truncated" in r.stdout.lower()
    assert "1 conversation (amqp091 1)" in r.stdout


# --------------------------------------------------------------------------- several captures
def test_directories_recursively_each_file_its_own_capture(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(CLEAN, tmp_path / "a" / "clean.pcap")
    shutil.copy(ERRS, tmp_path / "a" / "b" / "bad.pcap")
    (tmp_path / "a" / "README.md").write_text("not a capture, not taken")
    r = check(tmp_path, WARNS)
    assert r.exit_code == 1
    heads = [line.split(":")[0] for line in r.stdout.splitlines() if not line.startswith((" ", "--"))]
    assert heads == [str(tmp_path / "a" / "b" / "bad.pcap"), str(tmp_path / "a" / "clean.pcap"), str(WARNS)]
    assert "-- 3 captures;" in r.stdout


def test_directory_without_captures_is_unusable(tmp_path):
    (tmp_path / "empty").mkdir()
    r = check(CLEAN, tmp_path / "empty")
    assert r.exit_code == 2
    assert "no capture files" in r.stderr


# -------------------------------------------------------------------------------- undecoded
def test_undecoded_conversation_is_a_note_and_in_the_summary(tmp_path):
    cap = undecoded_capture(tmp_path / "unknown.pcap")
    r = check(cap)
    assert r.exit_code == 0
    assert "1 conversation (undecoded 1)" in r.stdout
    assert "findings: 0 errors, 0 warnings, 1 note" in r.stdout
    # The engine's own note when it has one, else the check's: either way exactly one.
    assert r.stdout.count("flow 1 engine.undecoded: ") == 1
    assert "undecoded: flow 1 10.9.0.1:40001 -> 10.9.0.2:9999 (138 bytes not checked)" in r.stdout
    # A check that must read everything fails on it.
    assert check(cap, "--fail-on", "note").exit_code == 1


def test_undecoded_reported_once_when_forced_it_is_decoded(tmp_path):
    cap = undecoded_capture(tmp_path / "unknown.pcap")
    r = check(cap, "--json", tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [f["id"] for f in doc["captures"][0]["findings"]] == ["engine.undecoded"]
    r = check(cap, "--decode-as", "9999=amqp091")
    assert "engine.undecoded" not in r.stdout
    assert "1 conversation (amqp091 1)" in r.stdout


# ------------------------------------------------------------------------------------ JUnit
def test_junit_suite_per_capture_case_per_conversation(tmp_path):
    junit = tmp_path / "report.xml"
    undecoded = undecoded_capture(tmp_path / "unknown.pcap")
    r = check(ERRS, CAPTURES / "rabbitmq_stream" / "rstream_consume.pcap", undecoded, "--junit", junit)
    assert r.exit_code == 1
    junit_schema().assertValid(etree.parse(str(junit)))
    xml = junitparser.JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [s.name for s in suites] == [str(ERRS), str(CAPTURES / "rabbitmq_stream" / "rstream_consume.pcap"),
                                        str(undecoded)]
    assert [(s.tests, s.failures, s.errors) for s in suites] == [(1, 1, 0), (4, 0, 0), (1, 0, 0)]
    (case,) = list(suites[0])
    assert case.name == "127.0.0.1:35060 -> 127.0.0.1:5672 amqp091/0-9-1 1:dTJ4RBx+NIERmVfginCW4FwqGsE="
    (failure,) = case.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.type == "amqp091.reply.connection_error"
    assert "error amqp091.reply.connection_error at packet 9: Connection.Close: 403 ACCESS_REFUSED" in failure.text
    consume = list(suites[1])
    assert all(c.is_passed for c in consume)
    assert {c.name.split()[3] for c in consume} == {"rabbitmq_stream/current"}
    # Notes below the threshold are listed with the suite, not lost.
    assert "note rabbitmq_stream.response.refused at packet 124" in system_out(suites[1])
    (undec,) = list(suites[2])
    assert undec.name.startswith("10.9.0.1:40001 -> 10.9.0.2:9999 undecoded 1:")
    assert "engine.undecoded" in system_out(suites[2])


def test_junit_fail_on_note_fails_the_undecoded_conversation(tmp_path):
    junit = tmp_path / "report.xml"
    check(undecoded_capture(tmp_path / "u.pcap"), "--junit", junit, "--fail-on", "note")
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    (case,) = list(suite)
    assert case.result[0].type == "engine.undecoded"
    junit_schema().assertValid(etree.parse(str(junit)))


def test_junit_capture_level_findings_get_their_own_case(tmp_path):
    from analyzer.pcapwrite import CaptureWriter

    cap = tmp_path / "snap.pcap"
    with open(cap, "wb") as f:
        w = CaptureWriter(f, snaplen=60)
        c = TcpConversation(("10.2.0.1", 40000), ("10.2.0.2", 5672))
        c.handshake()
        c.send("c2s", b"AMQP\x00\x00\x09\x01" + b"x" * 100)
        w.write_segments(c.segments)
    junit = tmp_path / "r.xml"
    check(cap, "--junit", junit, "--fail-on", "warning")
    junit_schema().assertValid(etree.parse(str(junit)))
    (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
    names = [c.name for c in suite]
    assert "capture (findings about no conversation)" in names
    case = next(c for c in suite if c.name.startswith("capture"))
    assert case.result[0].type == "capture.truncated_packet"


# -------------------------------------------------------------------------- rule selection
def test_disable_enable_and_severity_apply_to_findings():
    assert check(ERRS, "--disable", "amqp091.reply.connection_error").exit_code == 0
    assert check(ERRS, "--disable", "amqp091.reply.*").exit_code == 0
    assert check(ERRS, "--enable", "rabbitmq_stream.*").exit_code == 0
    assert check(ERRS, "--enable", "amqp091.*").exit_code == 1
    r = check(ERRS, "--severity", "amqp091.reply.connection_error=note")
    assert r.exit_code == 0
    assert "N      #9 flow 1 amqp091.reply.connection_error" in r.stdout
    assert check(ERRS, "--severity", "amqp091.reply.connection_error=note", "--fail-on", "note").exit_code == 1
    r = check(WARNS, "--severity", "rabbitmq_stream.response.error=error")
    assert r.exit_code == 1 and "findings: 1 error, 0 warnings, 0 notes" in r.stdout


# -------------------------------------------------------------------------------- baseline
def test_baseline_suppresses_known_findings_and_reports_new_ones(tmp_path):
    base = tmp_path / "baseline.json"
    r = check(ERRS, WARNS, "--write-baseline", base)
    assert r.exit_code == 1
    doc = json.loads(base.read_text())
    assert sorted(e["rule"] for e in doc["findings"]) == ["amqp091.reply.connection_error",
                                                         "rabbitmq_stream.response.error"]
    r = check(ERRS, WARNS, "--baseline", base, "--fail-on", "warning")
    assert r.exit_code == 0, r.output
    assert "baseline: 2 findings left out (known)" in r.stdout
    # A finding not in the baseline is still reported.
    only_warns = tmp_path / "warns.json"
    check(WARNS, "--write-baseline", only_warns)
    r = check(ERRS, WARNS, "--baseline", only_warns, "--fail-on", "warning")
    assert r.exit_code == 1
    assert "amqp091.reply.connection_error" in r.stdout and "rabbitmq_stream.response.error" not in r.stdout


def test_baseline_survives_another_run_of_the_same_capture(tmp_path):
    # Fingerprints hold no packet numbers or times: the same traffic, shifted in time and
    # with other TCP sequence numbers, is the same behaviour.
    base = tmp_path / "b.json"

    def build(path: Path, ts: float, isn: int) -> Path:
        c = TcpConversation(("10.3.0.1", 40000), ("10.3.0.2", 5672), ts=ts, isn_client=isn)
        c.handshake()
        c.send("c2s", b"AMQP\x00\x00\x09\x01")
        c.send("s2c", b"\x01\x00\x00\x00\x00\x00\x04junk\xce")  # not Connection.Start
        c.close()
        write_capture(str(path), [c])
        return path

    first = build(tmp_path / "one.pcap", 1_700_000_000.0, 1000)
    again = build(tmp_path / "two.pcap", 1_800_000_000.0, 777777)
    assert check(first, "--fail-on", "note").exit_code == 1
    check(first, "--write-baseline", base)
    assert check(again, "--baseline", base, "--fail-on", "note").exit_code == 0


def test_bad_baseline_file_is_unusable_input(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{\"format\": \"something else\"}")
    r = check(ERRS, "--baseline", bad)
    assert r.exit_code == 2 and "not a streamproto baseline" in r.stderr


def test_report_file_that_cannot_be_written(tmp_path):
    r = check(ERRS, "--junit", tmp_path / "no" / "such" / "dir" / "r.xml")
    assert r.exit_code == 2 and r.stderr.startswith("streamproto: cannot write")
    assert "Traceback" not in r.output


def test_unreadable_capture(tmp_path):
    # A file that opens but cannot be read, for root too (CI runs as root, which reads a chmod 0
    # file): the kernel answers a read of /proc/self/mem at offset 0 with EIO.
    p = tmp_path / "locked.pcap"
    p.symlink_to("/proc/self/mem")
    r = check(p)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"streamproto: cannot read {p}") and "Traceback" not in r.output


def test_readme_fail_on_warning_line():
    # The README's check example says how the same run ends with --fail-on warning.
    readme = (ROOT / "README.md").read_text()
    claim = re.search(r"With `--fail-on warning` the same run ends `(.+?)`", readme)
    assert claim is not None
    example = re.search(r"\$ streamproto check (.+)\n", readme)
    r = check(*example.group(1).split(), "--fail-on", "warning")
    assert r.exit_code == 1 and r.stdout.rstrip().splitlines()[-1] == claim.group(1)


def test_wire_text_and_odd_file_names_are_safe_in_every_report(tmp_path):
    """A reply text with terminal escapes, NUL and a bidi override, in a file whose name is not
    UTF-8: the summary shows them escaped, the XML stays valid, every report is written."""
    import subprocess
    import sys

    from dissectors.amqp091 import encode as E

    c = TcpConversation(("10.6.0.1", 40000), ("10.6.0.2", 5672))
    c.handshake()
    for d, data, _ in E.Script().handshake().steps:
        c.send(str(d), data)
    evil = "\x1b[2J\x1b]0;pwned\x07 nul\x00 \u202e rtl"
    c.send("s2c", E.method("Connection.Close", reply_code=403, reply_text=evil))
    c.send("c2s", E.method("Connection.CloseOk"))
    c.close()
    name = os.fsdecode(b"caf\xe9.pcap")  # not UTF-8: a lone surrogate in Python's str
    write_capture(os.path.join(str(tmp_path), name), [c])
    r = subprocess.run([sys.executable, "-m", "analyzer", "check", name, "--junit", "r.xml", "--sarif", "r.sarif",
                        "--html", "r.html", "--json", "r.json", "--write-baseline", "b.json"],
                       cwd=tmp_path, capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr
    out = r.stdout.decode("utf-8")  # strict: nothing undecodable was written
    assert "\x1b" not in out and "\x00" not in out and "\u202e" not in out
    assert "(\\x1b[2J\\x1b]0;pwned\\x07 nul\\x00 \\u202e rtl)" in out
    assert out.startswith("caf\\xe9.pcap: 1 conversation (amqp091 1)")
    junit_schema().assertValid(etree.parse(str(tmp_path / "r.xml")))
    for report in ("r.xml", "r.sarif", "r.html", "r.json", "b.json"):
        text = (tmp_path / report).read_bytes().decode("utf-8")  # strict UTF-8: no lone surrogate written
        assert "\x1b" not in text, report
        if report in ("r.xml", "r.sarif", "r.html"):  # text shown to people (JSON data keeps it, escaped by JSON)
            assert "\u202e" not in text and "\\x1b[2J" in text, report
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    assert sarif["runs"][0]["artifacts"][0]["location"]["uri"] == "caf%E9.pcap"


def test_standard_input(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "analyzer", "check", "-", "--fail-on", "warning"], cwd=tmp_path,
                       input=WARNS.read_bytes(), capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert r.stdout.decode().startswith("-: 1 conversation (rabbitmq_stream 1), 6 frames, 16 packets")
