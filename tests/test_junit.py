"""JUnit XML: a launch whose job died fails the CI gate even when every check passed."""

import xml.etree.ElementTree as ET

from dfdoctor.model import CheckRecord, Report, Status, Verdict
from dfdoctor.render import render


def _report(state, cause=None, mode="launch"):
    rec = CheckRecord(id="log.writable", phase="pre", status=Status.OK, summary="fine", duration_s=0.01)
    return Report(tool_version="t", target="local", command=["python", "t.py"], started_at="s", finished_at="f",
                  verdict=Verdict(state, cause, "the job died at start", "pip install x", ["line 1"]),
                  checks=[rec], mode=mode)


def test_failed_launch_is_a_failing_testcase():
    root = ET.fromstring(render(_report("failed", "missing-module"), "junit"))
    case = next(c for c in root.iter("testcase") if c.get("name") == "launch.verdict")
    assert case.find("failure").get("type") == "missing-module"
    assert root.get("failures") == "1" and root.get("tests") == "2"


def test_running_launch_passes_and_check_mode_has_no_verdict_case():
    root = ET.fromstring(render(_report("running"), "junit"))
    assert root.get("failures") == "0"
    assert any(c.get("name") == "launch.verdict" for c in root.iter("testcase"))
    root = ET.fromstring(render(_report("ok", mode="check"), "junit"))
    assert not any(c.get("name", "").endswith(".verdict") for c in root.iter("testcase"))


def test_control_characters_do_not_break_the_xml():
    r = _report("failed", "crashed")
    r.checks[0].output = "colour \x1b[31mred\x1b[0m and a NUL \x00"
    ET.fromstring(render(r, "junit"))


def test_characters_outside_xmls_char_production_become_u_fffd_and_a_strict_parser_reads_it():
    """Round 3: U+FFFE/U+FFFF (and a lone surrogate, a path's byte that was not UTF-8) made the report
    unparseable; Jenkins fails such a report and GitLab drops it."""
    import xml.parsers.expat

    bad = "\ufffe\uffff\udcff\x01\x0b"
    r = _report("failed", "crashed")
    r.checks[0].output = f"out {bad}"
    r.checks[0].summary = f"in /data/{bad}/train.py"
    r.checks[0].id = f"plugin.{bad}"
    r.verdict.summary = f"job said {bad}"
    r.targets = []
    xml_text = render(r, "junit")
    parser = xml.parsers.expat.ParserCreate("UTF-8")
    parser.Parse(xml_text.encode("utf-8"), True)  # strict: raises ExpatError on any character XML forbids
    root = ET.fromstring(xml_text.encode("utf-8"))
    assert "job said \ufffd\ufffd\ufffd\ufffd\ufffd" in root.find(".//testcase[@name='launch.verdict']/failure").get(
        "message")
    assert any(c.get("name") == "plugin.\ufffd\ufffd\ufffd\ufffd\ufffd" for c in root.iter("testcase"))
