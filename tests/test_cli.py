"""The CLI through the installed console script: outputs, exit codes, bad input, config and silencing. Where a test
runs dfdoctor again only to read another rendering of the same thing, and the tests of a config's or an option's
reading, go through the same entry in this process (support/in_process.run_here); the exit status, the stderr line
and the outputs written through the console script are proved by the tests that still start it."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import DFDOCTOR, run_dfdoctor
from support.in_process import run_here


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text("print('hello')\n")
    return tmp_path


def test_log_dir_missing_in_json_and_junit(project):
    res = run_dfdoctor("check", "--log", "/no/such/dir/train.log", "--format", "json", "--output", "o.json",
                       "--format", "junit", "--output", "o.xml", "--only", "log.*", "--", "python3", "train.py",
                       cwd=project)
    assert res.returncode == 1, res.stderr
    doc = json.loads((project / "o.json").read_text())
    assert doc["schema"] == "dfdoctor/1"
    rec = next(c for c in doc["checks"] if c["id"] == "log.writable")
    assert (rec["status"], rec["cause"]) == ("fail", "log-dir-missing")
    assert rec["fix"] == "mkdir -p /no/such/dir"
    assert doc["verdict"]["state"] == "failed" and doc["verdict"]["cause"] == "log-dir-missing"
    assert doc["command"] == ["python3", "train.py"]
    root = ET.parse(project / "o.xml").getroot()
    case = next(tc for tc in root.iter("testcase") if tc.get("name") == "log.writable")
    assert case.find("failure").get("type") == "log-dir-missing"
    assert root.get("failures") == "1"


def test_saved_result_renders_again(project):
    run_dfdoctor("check", "--log", "nodir/x.log", "--format", "json", "--output", "r.json", cwd=project)
    res = run_dfdoctor("report", "r.json", "--format", "junit", cwd=project)
    assert res.returncode == 1 and "log-dir-missing" in res.stdout
    res = run_here("report", "r.json", cwd=project)
    assert "FAILED [log-dir-missing]" in res.stdout
    again = run_here("report", "r.json", "--format", "json", cwd=project)
    assert json.loads(again.stdout) == json.loads((project / "r.json").read_text())


@pytest.mark.parametrize("args, message", [
    (["check", "--no-such-option"], "No such option"),
    (["check", "--python", "/no/such/python"], "--python /no/such/python: no such executable interpreter"),
    (["check", "--only", "nope.*"], "--only nope.* matches no check (checks: "),
    (["check", "--cwd", "/no/such/dir"], "--cwd /no/such/dir: no such directory"),
    (["check", "--format", "json", "--format", "junit"], "only one --format can go to the terminal"),
    (["check", "--output", "x.weird"], "say its --format"),
    (["report", "missing.json"], "missing.json"),
])
def test_bad_input_is_one_line_and_exit_2(project, args, message):
    """Click's own refusal (an unknown option) and report's go through the console script; the others through the
    same entry here: the exit status and the stderr line are the same code's."""
    real = args[1] == "--no-such-option" or args[0] == "report"
    res = (run_dfdoctor if real else run_here)(*args, cwd=project)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_only_lists_the_ids_when_nothing_matches(project):
    res = run_here("check", "--only", "nope", cwd=project)
    assert "log.writable" in res.stderr


def test_malformed_config_is_usage_error(project):
    (project / "dfdoctor.toml").write_text("fail-on = [broken\n")
    res = run_here("check", cwd=project)
    assert res.returncode == 2 and "dfdoctor.toml" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_unknown_config_key_is_usage_error(project):
    (project / "pyproject.toml").write_text("[tool.dfdoctor]\nfail_on = 'warn'\n")
    res = run_here("check", cwd=project)
    assert res.returncode == 2 and "unknown key(s) fail_on" in res.stderr


def test_silenced_finding_is_listed_but_does_not_fail(project):
    (project / "pyproject.toml").write_text(
        "[tool.dfdoctor]\nsilence = [{cause = 'log-dir-missing', reason = 'the launcher creates it'}]\n")
    res = run_dfdoctor("check", "--only", "log.*", "--log", "logs/x.log", "--format", "json", cwd=project)
    assert res.returncode == 0
    rec = json.loads(res.stdout)["checks"][0]
    assert rec["status"] == "fail" and rec["silenced"] == "the launcher creates it"
    text = run_here("check", "--only", "log.*", "--log", "logs/x.log", cwd=project).stdout
    assert "silenced: the launcher creates it" in text


def test_silence_needs_a_reason(project):
    (project / "dfdoctor.toml").write_text("silence = [{check = 'log.writable'}]\n")
    res = run_here("check", cwd=project)
    assert res.returncode == 2 and "needs a reason" in res.stderr


def test_fail_on_warn_from_config(project):
    # A free-space threshold above what any disk has here turns the log check into a warning.
    (project / "dfdoctor.toml").write_text(
        "fail-on = 'warn'\n[checks.'log.writable']\nwarn_free_mb = 1e12\n")
    res = run_dfdoctor("check", "--only", "log.*", "--log", "x.log", "--", "python3", "-u", "train.py",
                       cwd=project)
    assert res.returncode == 1 and "WARN" in res.stdout
    res = run_here("check", "--only", "log.*", "--log", "x.log", "--fail-on", "error", "--", "python3", "-u",
                   "train.py", cwd=project)
    assert res.returncode == 0


def test_every_output_written_even_on_failure(project):
    res = run_dfdoctor("check", "--log", "no/dir/x.log", "--only", "log.*", "--output", "a.json",
                       "--output", "a.xml", "--output", "a.txt", cwd=project)
    assert res.returncode == 1
    assert json.loads((project / "a.json").read_text())["verdict"]["state"] == "failed"
    ET.parse(project / "a.xml")
    assert "log-dir-missing" in (project / "a.txt").read_text()


def _run_on_tty(args: list[str], cwd: Path, env: dict) -> str:
    """Run dfdoctor with a real pseudo-terminal as stdout and return what it printed."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execve(DFDOCTOR, [DFDOCTOR, *args], env)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def test_colour_only_on_a_tty_and_never_with_no_color(project):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    args = ["check", "--only", "log.*", "--log", "nodir/x.log"]
    sgr = re.compile(r"\x1b\[[0-9;]*m")  # colour codes (the progress line's erase codes are not colour)
    assert sgr.search(_run_on_tty(args, project, env))
    assert not sgr.search(_run_on_tty(args, project, {**env, "NO_COLOR": "1"}))
    piped = subprocess.run([DFDOCTOR, *args], cwd=project, env=env, capture_output=True, text=True)
    assert "\x1b[" not in piped.stdout + piped.stderr


def test_verbose_shows_durations_and_details(project):
    res = run_here("check", "-v", "--only", "log.*", "--log", "nodir/x.log", cwd=project)
    assert " s)" in res.stdout and "nearest existing folder" in res.stdout


def test_internal_bug_exits_3_with_traceback_file(monkeypatch, tmp_path, capsys):
    from dfdoctor.cli import main as cli
    from dfdoctor import engine

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(engine, "discover", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.run(["check"]) == 3
    err = capsys.readouterr().err
    assert "internal error (a bug in dfdoctor): RuntimeError: simulated bug" in err
    saved = list((tmp_path / "dfdoctor").glob("crash-*.txt"))
    assert saved and "Traceback" in saved[0].read_text()


def test_python_m_doctor_works(project):
    import sys
    res = subprocess.run([sys.executable, "-m", "dfdoctor", "list-checks"], capture_output=True, text=True, cwd=project)
    assert res.returncode == 0 and "log.writable" in res.stdout


def test_output_to_a_device_or_symlink_is_written_through(project):
    res = run_dfdoctor("check", "--only", "log.*", "--format", "json", "--output", "/dev/null", cwd=project)
    assert res.returncode == 0 and Path("/dev/null").is_char_device()
    real = project / "real.json"
    real.write_text("old")
    (project / "link.json").symlink_to(real)
    run_here("check", "--only", "log.*", "--format", "json", "--output", "link.json", cwd=project)
    assert (project / "link.json").is_symlink()
    assert json.loads(real.read_text())["schema"] == "dfdoctor/1"


def test_formats_pair_with_outputs_by_extension_whatever_the_order(project):
    from dfdoctor.cli.options import pair_outputs
    assert pair_outputs(("text", "json", "html"), ("a.json", "a.html")) == [
        ("json", "a.json"), ("html", "a.html"), ("text", None)]
    assert pair_outputs(("json", "junit"), ("o.json", "o.xml")) == [("json", "o.json"), ("junit", "o.xml")]
    assert pair_outputs(("junit",), ("report.out",)) == [("junit", "report.out")]
    assert pair_outputs((), ()) == [("text", None)]
    res = run_here("check", "--only", "log.*", "--format", "text", "--format", "json", "--output", "r.json",
                   "--format", "html", "--output", "r.html", cwd=project)
    assert res.stdout.startswith("dfdoctor check:")
    assert json.loads((project / "r.json").read_text())["schema"] == "dfdoctor/1"
    assert (project / "r.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_training_python_defaults_to_the_one_the_launcher_runs(tmp_path):
    import venv
    venv.create(tmp_path / "v", with_pip=False)
    (tmp_path / "train.py").write_text("import json\n")
    launcher = tmp_path / "launch.sh"
    launcher.write_text('#!/bin/bash\ncd "$(dirname "$0")"\nexec ./v/bin/python train.py "$@"\n')
    res = run_dfdoctor("check", "--launcher", "launch.sh", "--only", "log.*", "--format", "json", cwd=tmp_path)
    assert json.loads(res.stdout)["environment"]["training_python"] == str(tmp_path / "v" / "bin" / "python")
