"""What dfdoctor shows while it works: one line on a real terminal, rewritten as the watch goes on and erased
before the verdict; nothing at all where no terminal is, in CI, or under -q."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dfdoctor import progress
from jobs.harness import DFDOCTOR, job, job_env, kill_runs
from support.tty import ERASE, left_on_screen, on_tty

UNREACHABLE = "ssh://root@127.0.0.1:1"
WATCHING = re.compile(r"dfdoctor: watching the job for (\d+) s: ([^\r\x1b]*)")


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


def _env(**extra: str) -> dict[str, str]:
    """The jobs' environment, as a person's terminal has it: no CI (CI's own run sets it), a TERM."""
    env = {k: v for k, v in job_env().items() if k != "CI"}
    return {**env, "TERM": "xterm", **extra}


def _launch(work: Path, *extra: str) -> list[str]:
    return [DFDOCTOR, "launch", "--no-check", "--cwd", str(work), "--log", str(work / "train.log"), "--watch", "30",
            "--settle", "3", *extra, "--", *job("quiet_start_then_prints.py")]


def test_a_launch_on_a_terminal_shows_what_it_waits_for_then_erases_it_before_the_verdict(work):
    out = on_tty(_launch(work), work, env=_env())
    assert "dfdoctor launch: RUNNING" in out, out
    shown = WATCHING.findall(out)
    said = [what for _, what in shown]
    # the job is silent for its first 2 s, then prints: the line says each, and counts the seconds
    assert any(w.startswith("waiting for its first output") for w in said), said
    assert any("steady output" in w and "last line" in w for w in said), said
    assert len({s for s, _ in shown}) >= 2, "the elapsed time is counted up, not drawn once"
    assert not [line for line in left_on_screen(out) if "watching the job" in line or "] running:" in line], out
    verdict_at = out.index("dfdoctor launch: RUNNING")
    assert out.rfind(ERASE, 0, verdict_at) > out.rfind("watching the job", 0, verdict_at), "erased before"


def test_no_line_without_a_terminal_in_ci_or_under_q(work):
    piped = subprocess.run(_launch(work), cwd=work, env=job_env(), capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert ERASE not in piped.stderr + piped.stdout and "watching" not in piped.stderr
    for extra, env in ((("-q",), _env()), ((), _env(CI="true"))):
        out = on_tty(_launch(work, *extra), work, env=env)
        assert out.startswith("dfdoctor launch: RUNNING"), out
        assert "watching" not in out and ERASE not in out, out


def _two_targets(*extra: str) -> list[str]:
    return [DFDOCTOR, "check", *extra, "--target", "local", "--target", UNREACHABLE, "--only", "target.*",
            "--only", "log.*", "--", sys.executable, "-c", "pass"]


def test_a_check_on_two_targets_counts_the_targets_done(tmp_path):
    out = on_tty(_two_targets(), tmp_path, env=_env())
    assert "dfdoctor check: FAILED" in out, out
    assert re.search(r"dfdoctor: checking 2 targets: [01] of 2 done; running: (local|ssh://)", out), out
    assert not [line for line in left_on_screen(out) if "checking 2 targets" in line], out
    verdict_at = out.index("dfdoctor check: FAILED")
    assert out.rfind(ERASE, 0, verdict_at) > out.rfind("checking 2 targets", 0, verdict_at), "erased before"
    assert "] running:" not in out, "a target's own pipeline drew its checks' line over the targets' one"


def test_a_check_on_two_targets_draws_nothing_off_a_terminal_in_ci_or_under_q(tmp_path):
    piped = subprocess.run(_two_targets(), cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert piped.stdout.startswith("dfdoctor check: FAILED"), piped.stdout + piped.stderr
    assert ERASE not in piped.stdout + piped.stderr and "checking 2 targets" not in piped.stderr, piped.stderr
    for extra, env in ((("-q",), _env()), ((), _env(CI="true"))):
        out = on_tty(_two_targets(*extra), tmp_path, env=env)
        assert "dfdoctor check: FAILED" in out.splitlines()[0], out
        assert "checking 2 targets" not in out and ERASE not in out, out


def test_a_status_line_is_one_line_throttled_and_erased():
    buf = io.StringIO()
    line = progress.StatusLine(buf, enabled=True)
    line.show("first\nsecond")
    line.show("too soon")  # within REDRAW_S of the last draw: skipped
    line.show("forced", force=True)
    line.close()
    line.close()  # erasing twice writes nothing more
    assert buf.getvalue() == f"\r{ERASE}first second\r{ERASE}forced\r{ERASE}"
    off = io.StringIO()
    progress.StatusLine(off, enabled=False).show("nothing", force=True)
    assert off.getvalue() == ""


@pytest.mark.parametrize("env,quiet,shown", [({}, False, True), ({"CI": "true"}, False, False),
                                             ({"TERM": "dumb"}, False, False), ({}, True, False)])
def test_a_line_is_wanted_only_on_a_terminal_someone_reads(monkeypatch, env, quiet, shown):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(progress, "quiet", quiet)
    assert progress.wanted(Tty()) is shown
    assert progress.wanted(io.StringIO()) is False
    assert progress.seconds(7.9) == "7 s" and progress.seconds(65) == "1 min 05 s"
