"""Where dfdoctor writes its outputs, it does no harm and never hangs: an --output or $GITHUB_STEP_SUMMARY on a
FIFO nothing reads fails at once, the step summary is never appended through a symlink (into the --log, say),
and any bytes in a path or an argument give exit 0, 1 or 2, never an internal error (3)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.harness import DFDOCTOR, job_env, kill_runs
from support.in_process import run_here

QUICK = ("--only", "launch.path", "--only", "log.writable")


def dfdoctor_b(args: list, cwd, env=None, timeout=120) -> subprocess.CompletedProcess:
    """dfdoctor with argv words given as bytes (what a shell passes), output as bytes."""
    return subprocess.run([os.fsencode(DFDOCTOR), *[a if isinstance(a, bytes) else a.encode() for a in args]],
                          cwd=cwd, env=env or job_env(), capture_output=True, timeout=timeout)


def test_an_output_on_a_fifo_nobody_reads_fails_at_once(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    p = dfdoctor_b(["check", *QUICK, "--format", "json", "--output", str(fifo), "--", "python3", "t.py"],
                   cwd=tmp_path, timeout=60)
    assert p.returncode == 2, p.stderr
    assert b"report.fifo" in p.stderr and time.monotonic() - started < 50


def test_the_step_summary_on_a_fifo_nobody_reads_does_not_hang(tmp_path):
    fifo = tmp_path / "summary.fifo"
    os.mkfifo(fifo)
    p = dfdoctor_b(["check", *QUICK, "--format", "github", "--", "python3", "t.py"], cwd=tmp_path,
                   env=job_env(GITHUB_STEP_SUMMARY=str(fifo)), timeout=60)
    assert p.returncode in (0, 1), p.stderr
    assert b"GITHUB_STEP_SUMMARY" in p.stderr


def test_the_step_summary_is_never_appended_through_a_symlink_into_the_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("epoch 1\n")
    link = tmp_path / "summary.md"
    link.symlink_to(log)
    p = dfdoctor_b(["check", *QUICK, "--log", str(log), "--format", "github", "--", "python3", "t.py"],
                   cwd=tmp_path, env=job_env(GITHUB_STEP_SUMMARY=str(link)), timeout=60)
    assert p.returncode in (0, 1), p.stderr
    assert log.read_text() == "epoch 1\n"
    assert b"symlink" in p.stderr


def test_the_step_summary_is_never_appended_through_a_symlinked_folder_into_the_log(tmp_path):
    """Round 3: O_NOFOLLOW guards the last name only; a folder linked to the log's made `summary.md` there."""
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "summary.md"
    log.write_text("epoch 1\n")
    (tmp_path / "step").symlink_to(tmp_path / "logs")
    p = dfdoctor_b(["check", *QUICK, "--log", str(log), "--format", "github", "--", "python3", "t.py"],
                   cwd=tmp_path, env=job_env(GITHUB_STEP_SUMMARY=str(tmp_path / "step" / "summary.md")), timeout=60)
    assert p.returncode in (0, 1), p.stderr
    assert log.read_text() == "epoch 1\n"
    assert f"{tmp_path / 'step'} is a symlink: not followed".encode() in p.stderr


def test_the_step_summary_is_appended_to_the_plain_file_github_made(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    p = dfdoctor_b(["check", *QUICK, "--format", "github", "--", "python3", "t.py"], cwd=tmp_path,
                   env=job_env(GITHUB_STEP_SUMMARY=str(summary)), timeout=60)
    assert p.returncode in (0, 1), p.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n## dfdoctor check")


FORMATS = [("json", "json"), ("html", "html"), ("junit", "xml"), ("sarif", "sarif"), ("gitlab", "gl.json"),
           ("text", "txt"), ("github", "gh")]


def test_bytes_that_are_not_utf8_are_shown_not_a_crash(tmp_path):
    """The defect: every --output format was an internal error (exit 3) on one byte like \\xff."""
    (tmp_path / "tr\xffain.py".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")).write_text("")
    args = ["check", *QUICK, "--log", b"l\xff.log"]
    for fmt, ext in FORMATS:
        args += ["--format", fmt, "--output", f"o.{ext}"]
    p = dfdoctor_b([*args, "--", "python3", b"tr\xffain.py", b"--x=\xfe"], cwd=tmp_path, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    assert doc["command"][1] == "tr\\xffain.py"
    for _, ext in FORMATS:
        (tmp_path / f"o.{ext}").read_text(encoding="utf-8")  # each is valid UTF-8


def test_launch_with_bytes_that_are_not_utf8_gives_a_verdict(tmp_path):
    (tmp_path / os.fsdecode(b"tr\xffain.py")).write_text("print('step 1', flush=True)\n")
    try:
        p = dfdoctor_b(["launch", "--no-check", "--watch", "5", "--log", b"l\xff.log", "--format", "json", "--",
                        sys.executable, b"tr\xffain.py"], cwd=tmp_path, timeout=180)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["verdict"]["state"] in ("ok", "running")
        assert (tmp_path / os.fsdecode(b"l\xff.log")).read_text() == "step 1\n"
    finally:
        kill_runs(tmp_path)


PIECES = st.binary(min_size=1, max_size=6).filter(lambda b: b"\0" not in b)
_EXAMPLES = itertools.count()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=PIECES, script=PIECES, arg=PIECES, out=PIECES)
def test_any_bytes_in_paths_and_arguments_give_exit_0_1_or_2(tmp_path, log, script, arg, out):
    """The first example's argv goes to the console script as bytes; the others through the same entry here
    (support/in_process), their words decoded as Python decodes its argv: 1 process, not 12."""
    out = out.replace(b"/", b"_")
    args = ["check", *QUICK, "--log", log, "--format", "json", "--output", b"o" + out + b".json",
            "--format", "github", "--", "python3", script, arg]
    if next(_EXAMPLES) == 0:
        p = dfdoctor_b(args, cwd=tmp_path, timeout=120)
    else:
        p = run_here(*args, cwd=tmp_path, full_env=job_env(), binary=True)
    assert p.returncode in (0, 1, 2), p.stderr
    assert b"internal error" not in p.stderr


def test_a_password_written_into_a_target_is_never_echoed(tmp_path):
    """The defect: `ssh://user:password@host` came back in clear in the usage error."""
    (tmp_path / "targets").write_text("ssh://bob:fl@t/pw9x:7zz@host\n")
    for args in (["check", "--target", "ssh://bob:pw9x7zz1@host"], ["check", "--targets-file", "targets"],
                 ["check", "--target", "pct://bob:pw9x7zz1@host:99999/200"],
                 ["launch", "--target", "ssh://bob:pw9x7zz1@host", "--target", "local"]):
        p = dfdoctor_b([*args, "--", "python3", "t.py"], cwd=tmp_path, timeout=60)
        assert p.returncode == 2, p.stderr
        assert b"bob:***@" in p.stderr
        for leak in (b"pw9x", b"7zz", b"fl@t"):
            assert leak not in p.stdout + p.stderr, p.stderr


def test_an_output_on_dev_stdout_through_a_pipe_is_written_through(tmp_path):
    """/dev/stdout leads to a pipe that has no name to resolve: it is written through, not replaced."""
    p = dfdoctor_b(["check", *QUICK, "--format", "json", "--output", "/dev/stdout", "--", "python3", "t.py"],
                   cwd=tmp_path, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    assert json.loads(p.stdout)["mode"] == "check"
