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
