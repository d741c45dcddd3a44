"""dfdoctor never destroys or hijacks a user's file, keeps what it writes private, and shows a job's control bytes
escaped: each test here is a way the build before these fixes did harm."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_dfdoctor
from support.in_process import run_here

SCRIPT = "import time\nprint('step 1', flush=True)\ntime.sleep({s})\n"


def _script(tmp_path: Path, sleep: float = 0) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT.format(s=sleep))
    return tmp_path / "train.py"


# ---- --output never lands on a file the user named for something else ---------------------------------------
@pytest.mark.parametrize("output", ["train.py", "./sub/../train.py", "link.py", "hard.py", "requirements.txt",
                                    "sub/../pyproject.toml", "/proc/self/cwd/train.py"])
def test_check_output_onto_the_users_files_is_refused(tmp_path, output):
    script = _script(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.py").symlink_to("train.py")
    os.link(script, tmp_path / "hard.py")
    (tmp_path / "requirements.txt").write_text("click\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    before = script.read_text()
    # the first case through the console script, the others through the same entry here (support/in_process)
    res = (run_dfdoctor if output == "train.py" else run_here)(
        "check", "--only", "log.*", "--requirements", "requirements.txt", "--format", "json", "--output", output,
        "--", sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "--output" in res.stderr
    assert script.read_text() == before and (tmp_path / "requirements.txt").read_text() == "click\n"


def test_launch_output_onto_the_log_or_into_the_run_folder_is_refused(tmp_path):
    _script(tmp_path)
    (tmp_path / "train.txt").write_text("the user's only log\n")
    for out in (["--output", "train.txt", "--format", "text"], ["--output", ".dfdoctor/runs/r.json"],
                ["--run-dir", "rd", "--output", "rd/r.json"]):
        (tmp_path / ".dfdoctor" / "runs").mkdir(parents=True, exist_ok=True)
        res = run_dfdoctor("launch", "--watch", "0", "--log", "train.txt", *out, "--", sys.executable, "train.py",
                           cwd=tmp_path)
        assert res.returncode == 2, (out, res.stdout, res.stderr)
        assert "--output" in res.stderr
    assert (tmp_path / "train.txt").read_text() == "the user's only log\n"
    assert not any((tmp_path / ".dfdoctor" / "runs").iterdir()), "refused before any job was started"


def test_status_and_report_output_into_the_run_folder_is_refused(tmp_path):
    _script(tmp_path)
    res = run_dfdoctor("launch", "--no-check", "--watch", "5", "--run-dir", "rd", "--", sys.executable, "train.py",
                       cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    for cmd in (["status", "rd", "--output", "rd/report.json"], ["report", "rd", "--output", "rd/report.html"],
                ["report", "rd/report.json", "--output", "rd/../rd/report.json"]):
        # the first through the console script, the others through the same entry here (support/in_process)
        res = (run_dfdoctor if cmd[0] == "status" else run_here)(*cmd, cwd=tmp_path)
        assert res.returncode == 2, (cmd, res.stderr)


# ---- --run-dir is new or empty; status only reads dfdoctor's own run folders ----------------------------------
def test_run_dir_with_the_users_files_is_refused(tmp_path):
    _script(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("spec.json", "report.html", "stdout.log"):
        (mine / name).write_text(f"my own {name}\n")
    res = run_dfdoctor("launch", "--no-check", "--watch", "0", "--run-dir", "mine", "--", sys.executable,
                       "train.py", cwd=tmp_path)
    assert res.returncode == 2 and "not empty" in res.stderr, res.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["report.html", "spec.json", "stdout.log"]
    assert all((mine / n).read_text() == f"my own {n}\n" for n in ("spec.json", "report.html", "stdout.log"))


def test_status_on_a_folder_that_is_not_a_run_is_refused(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "spec.json").write_text(json.dumps({"argv": ["python3", "x.py"]}))
    (fake / "record.jsonl").write_text("")
    res = run_here("status", "fake", cwd=tmp_path)  # the same entry, here (support/in_process)
    assert res.returncode == 2 and "not a dfdoctor run folder" in res.stderr, res.stderr
    assert sorted(p.name for p in fake.iterdir()) == ["record.jsonl", "spec.json"], "nothing written into it"


# ---- what dfdoctor writes is private ---------------------------------------------------------------------
def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_run_folder_files_cache_and_crash_files_are_private(tmp_path):
    _script(tmp_path, sleep=0.5)
    cache = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(cache)}
    res = run_dfdoctor("launch", "--no-check", "--watch", "3", "--log", "t.log", "--", sys.executable, "-u",
                       "train.py", cwd=tmp_path, env=env)
    assert res.returncode in (0, 1), res.stderr
    (run,) = (tmp_path / ".dfdoctor" / "runs").iterdir()
    assert _mode(run) == 0o700
    files = [p for p in run.iterdir() if p.is_file()]
    assert {"spec.json", "record.jsonl", "report.json", "report.html", "stdout.log"} <= {p.name for p in files}
    assert {p.name: oct(_mode(p)) for p in files if _mode(p) != 0o600} == {}
    # the cache (and any crash file in it): 0700 folders, 0600 entries
    from dfdoctor import cache as cache_mod
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        cache_mod.store("kind", "key", {"v": 1})
        code = "from dfdoctor.cli import main as m; m.main = None; raise SystemExit(m.run(['list-checks']))"
        crash = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    finally:
        del os.environ["XDG_CACHE_HOME"]
    assert crash.returncode == 3, crash.stderr
    where = Path(crash.stderr.rsplit("traceback saved to ", 1)[1].strip())
    assert where.parent == cache / "dfdoctor" and _mode(where) == 0o600 and "Traceback" in where.read_text()
    for d in (cache / "dfdoctor", cache / "dfdoctor" / "kind"):
        assert _mode(d) == 0o700, d
    assert all(_mode(p) == 0o600 for p in (cache / "dfdoctor" / "kind").iterdir())


def test_no_predictable_temp_names_in_the_shipped_code():
    """The class, not the one example: no temp file named from a pid, a time or a fixed suffix in anything that
    ships (the CLI, the recorder and remote scripts, the probes, the trainer)."""
    import re
    bad = re.compile(r"dfdoctor-tmp-\{|crash-.*getpid|getpid\(\)\}\.tmp|\.tmp\"\)|\+ \"\.tmp\"|/tmp/dfdoctor-runs|"
                     r"with_suffix\(f\"\.\{os\.getpid|name \+ \"\.tmp\"")
    hits = []
    for folder in ("doctor", "checks", "trainer", "templates"):
        for p in (REPO / folder).rglob("*.py"):
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if bad.search(line):
                    hits.append(f"{p.relative_to(REPO)}:{i}: {line.strip()}")
    assert hits == []


def test_write_atomically_ignores_a_planted_temp_name_and_cleans_up(tmp_path):
    from dfdoctor.safefile import write_atomically
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "r.json"
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the names the old code would have used
        (tmp_path / f".r.json.dfdoctor-tmp-{pid}").symlink_to(victim)
    write_atomically(out, "{}")
    assert out.read_text() == "{}" and victim.read_text() == "precious\n"
    with pytest.raises(OSError):
        write_atomically(Path("/proc/version"), "x")
    assert [p.name for p in tmp_path.iterdir() if "dfdoctor-tmp" in p.name and not p.is_symlink()] == []


# ---- a job's control bytes never reach the terminal raw --------------------------------------------------
def test_job_control_bytes_are_escaped_in_text_output(tmp_path):
    evil = ("import sys\nsys.stderr.write('\\x1b[2J\\x1b[H fake\\x07\\x00\\x9b31m\\rdfdoctor launch: RUNNING\\n')\n"
            "raise SystemExit(1)\n")
    (tmp_path / "evil.py").write_text(evil)
    res = run_dfdoctor("launch", "--no-check", "--watch", "5", "-v", "--", sys.executable, "evil.py", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    out = res.stdout
    for byte in ("\x1b", "\x07", "\x00", "\r", "\x9b"):
        assert byte not in out, repr(byte)
    assert "\\x1b[2J" in out
    for fmt in ("junit", "html", "github", "gitlab"):  # whatever format goes to the terminal
        # junit through the console script, the others through the same entry here (support/in_process): 1 process
        res = (run_dfdoctor if fmt == "junit" else run_here)(
            "report", str(next((tmp_path / ".dfdoctor" / "runs").iterdir())), "--format", fmt, cwd=tmp_path)
        assert res.returncode == 1 and "\x1b" not in res.stdout and "\x07" not in res.stdout, fmt
    from dfdoctor.render.text import visible
    assert visible("a\tb\nc\x1bd\x7f\x85") == "a\tb\nc\\x1bd\\x7f\\x85"


def test_our_own_colour_codes_still_reach_a_terminal():
    from dfdoctor.model import Report, Verdict
    from dfdoctor.render.text import render
    rep = Report(tool_version="x", target="local", command=["a\x1bb"], started_at="", finished_at="",
                 verdict=Verdict("failed", None, "job said \x1b[32mOK\x1b[0m", "", []), checks=[], timeline=[],
                 mode="launch")
    text = render(rep, color=True)
    assert text.startswith("\x1b[1;31m") and "\\x1b[32mOK" in text


# ---- outputs that cannot be written, closed or full standard streams, full disks, unwritable --cwd ------------
def test_unwritable_output_after_the_job_started_keeps_the_verdict_and_the_report(tmp_path):
    _script(tmp_path)
    res = run_dfdoctor("launch", "--no-check", "--watch", "5", "--format", "text", "--format", "json",
                       "--output", "/proc/version.json", "--", sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "could not write --output /proc/version.json" in res.stderr and "report is kept in" in res.stderr
    (run,) = (tmp_path / ".dfdoctor" / "runs").iterdir()
    verdict = json.loads((run / "report.json").read_text())["verdict"]
    assert verdict["summary"][:40] in res.stdout.replace("\n  ", " ")
    assert not [p for p in Path("/proc").glob(".version*")]


def _sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    dfd = Path(sys.executable).with_name("dfdoctor")
    return subprocess.run(["sh", "-c", cmd.replace("DFD", str(dfd))], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full", "2>&- >&-", "2>/dev/full >/dev/full"])
def test_closed_or_full_standard_streams(tmp_path, redirect):
    _script(tmp_path)
    res = _sh(f"DFD launch --no-check --watch 5 --format text --format json --output r.json -- {sys.executable} "
              f"train.py {redirect}", tmp_path)
    assert res.returncode in (0, 1), res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"]["state"] in ("ok", "failed")
    (run,) = (tmp_path / ".dfdoctor" / "runs").iterdir()
    assert (run / "report.json").exists() and (run / "record.jsonl").read_text()


def test_check_with_closed_stdout_still_writes_its_output(tmp_path):
    _script(tmp_path)
    res = _sh(f"DFD check --only log.* --format text --format json --output r.json -- {sys.executable} train.py "
              ">&- 2>/dev/full", tmp_path)
    assert res.returncode == 0
    assert json.loads((tmp_path / "r.json").read_text())["verdict"]["state"] == "ok"


def test_unwritable_cwd_still_gives_a_verdict_and_a_record(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    _script(ro)
    cache = tmp_path / "cache"
    # a read-only bind mount: root ignores permissions, not a read-only file system
    if subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)], capture_output=True).returncode:
        pytest.skip("needs mount (root)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True)
        res = run_dfdoctor("launch", "--no-check", "--watch", "5", "--cwd", str(ro), "--", sys.executable,
                           "train.py", cwd=tmp_path, env={"XDG_CACHE_HOME": str(cache)})
    finally:
        subprocess.run(["umount", str(ro)])
    assert res.returncode in (0, 1), res.stderr
    (run,) = (cache / "dfdoctor" / "runs").iterdir()
    assert str(run) in res.stdout and (run / "record.jsonl").read_text() and (run / "report.json").exists()


def test_run_folder_on_a_full_disk(tmp_path):
    _script(tmp_path)
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                      capture_output=True).returncode:
        pytest.skip("needs mount (root)")
    try:
        subprocess.run(["sh", "-c", f"cat /dev/zero > {full}/filler"], capture_output=True)
        res = run_dfdoctor("launch", "--no-check", "--watch", "5", "--run-dir", str(full / "run"), "--format",
                           "text", "--format", "json", "--output", "r.json", "--", sys.executable, "train.py",
                           cwd=tmp_path)
    finally:
        subprocess.run(["umount", str(full)])
    assert res.returncode in (1, 2), res.stderr
    assert "Not launched" in res.stdout or "FAILED" in res.stdout, res.stdout
    assert json.loads((tmp_path / "r.json").read_text())["verdict"]["state"] == "failed"


def test_output_on_a_full_disk_leaves_no_temp_file_and_keeps_the_report(tmp_path):
    _script(tmp_path)
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                      capture_output=True).returncode:
        pytest.skip("needs mount (root)")
    try:
        (full / "r.html").write_text("an older report\n")
        subprocess.run(["sh", "-c", f"cat /dev/zero > {full}/filler"], capture_output=True)
        res = run_dfdoctor("launch", "--no-check", "--watch", "5", "--format", "text", "--format", "html",
                           "--output", str(full / "r.html"), "--", sys.executable, "train.py", cwd=tmp_path)
        left = sorted(p.name for p in full.iterdir())
        kept = (full / "r.html").read_text()
    finally:
        subprocess.run(["umount", str(full)])
    assert res.returncode == 2, res.stderr
    assert "No space left on device" in res.stderr and "report is kept in" in res.stderr
    assert left == ["filler", "r.html"] and kept == "an older report\n"  # no temp file, the old one intact
    assert "dfdoctor launch:" in res.stdout
    (run,) = (tmp_path / ".dfdoctor" / "runs").iterdir()
    assert (run / "report.html").exists()
