"""A rehearsal does no harm (issue 31, shared/REHEARSAL.md): each repro of the hostile review, over this machine,
over ssh (sshd on 127.0.0.1: the host is this machine) and over ssh + `pct exec` into container 200.

Every test snapshots the user's folder (names and contents) before and after, and checks that nothing of the
rehearsal stays: no process naming its mark, no sentinel folder, no renamed file, no tmux server or screen."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dfdoctor.rehearse import judge
from dfdoctor.rehearse.runner import rehearse
from dfdoctor.shell import quote
from dfdoctor.terminal_signals import as_from_a_terminal
from infra.fixtures import Infra, infra, kill_naming, procs_naming  # noqa: F401
from conftest import DFDOCTOR

TRAIN = "import time\nfor i in range(400):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"
TARGETS = ["local", pytest.param("ssh", marks=pytest.mark.slow), pytest.param("pct", marks=pytest.mark.slow)]


class Place:
    """A user's folder at one target: `path` as the line names it, `here` where this test reads it."""

    def __init__(self, infra: Infra, target: str):
        self.infra, self.target = infra, target
        self.path = f"/tmp/dfd-harm-{uuid.uuid4().hex[:8]}"
        root = infra.rootfs() if target == "pct" else Path("/")
        self.root = root
        self.here = root / self.path.lstrip("/")
        self.here.mkdir()
        (self.here / "t.py").write_text(TRAIN)
        (self.here / "F").write_text("the user's file\n")

    def line(self, line: str) -> str:
        """The line as a user would type it to run `line` at this target."""
        if self.target == "local":
            return line
        if self.target == "ssh":
            return f"ssh root@dfdoctor-host {quote(line)}"
        return f"ssh root@dfdoctor-host {quote(f'pct exec {self.infra.vmid} -- sh -c {quote(line)}')}"

    def snapshot(self) -> dict:
        return {p.name: p.read_bytes() for p in sorted(self.here.iterdir())}

    def home(self) -> Path:
        return self.root / "root"


@pytest.fixture(params=TARGETS)
def place(request, infra, monkeypatch):
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.ssh_config))
    p = Place(infra, request.param)
    yield p
    kill_naming(p.path)
    subprocess.run(["rm", "-rf", str(p.here)])


def _nothing_left(place: Place, r) -> None:
    """No process names the rehearsal's mark, no folder, no renamed file, no tmux server: here or in the
    container."""
    mark = f"dfdoctor-rh-{r.plan.tag}" if r.plan else None
    if mark is None:
        return
    deadline = time.monotonic() + 5
    while [p for p in procs_naming(mark) if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p.info["cmdline"] for p in procs_naming(mark) if _alive(p)]
    for root in (Path("/"), place.infra.rootfs()):
        assert not list((root / "tmp").glob(f"{mark}*")), root
        assert not list((root / "root").glob(f"*{mark}*")), root
        assert not list((root / "tmp").glob(f"tmux-*/{mark}")), root
    assert not [f for f in place.here.iterdir() if "dfdoctor-rh-" in f.name]
    assert not list(Path("/dev/shm").glob(f"{mark}.wall*"))  # the second wall's layers here and at the ssh host


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _rehearse_untouched(place: Place, line: str):
    """Rehearse `line` at the place; the user's folder is exactly as it was, and nothing is left."""
    before = place.snapshot()
    r = rehearse(place.line(line), cwd=str(place.here) if place.target == "local" else None)
    time.sleep(0.3)  # a command that ran would have done its harm by now
    assert place.snapshot() == before, judge.facts(r)
    _nothing_left(place, r)
    return r


def _not_rehearsed(r, word: str) -> None:
    said = " | ".join(f"{c} ({w})" for c, w in (r.plan.not_rehearsed if r.plan else [])) + r.unobservable
    assert word in said, said


def test_a_trap_action_is_not_run(place):
    r = _rehearse_untouched(place, f"trap 'rm -f {place.path}/F' EXIT; cd {place.path} && "
                                   "nohup python3 -u t.py > t.log 2>&1 &")
    _not_rehearsed(r, "trap")
    assert r.started, judge.facts(r)  # the rest of the line was rehearsed


def test_a_command_substitution_in_an_export_is_not_run(place):
    r = _rehearse_untouched(place, f"export X=$(rm -f {place.path}/F); cd {place.path} && "
                                   "nohup python3 -u t.py > t.log 2>&1 &")
    _not_rehearsed(r, "rm -f")
    assert r.plan.uncertain  # what the job sees may differ without it: no observed failure can come of it


def test_backquotes_in_the_jobs_arguments_are_not_run(place):
    r = _rehearse_untouched(place, f"cd {place.path} && nohup python3 -u t.py --x `rm -f {place.path}/F` "
                                   "> t.log 2>&1 &")
    assert r.started and r.job_place.start["argv"][1:] == ["--x", f"`rm -f {place.path}/F`"], judge.facts(r)


def test_a_here_document_body_is_not_run(place):
    _rehearse_untouched(place, f"cat > {place.path}/G <<EOF\n$(rm -f {place.path}/F)\nEOF\n"
                               f"cd {place.path} && nohup python3 -u t.py > t.log 2>&1 &")


def test_a_sourced_file_is_not_run(place):
    (place.here / "env.sh").write_text(f"rm -f {place.path}/F\n")
    r = _rehearse_untouched(place, f". {place.path}/env.sh; cd {place.path} && nohup python3 -u t.py > t.log 2>&1 &")
    _not_rehearsed(r, "sourced file")


def test_a_shells_rcfile_is_read_as_an_option_and_the_real_job_never_runs(place):
    (place.here / "t2.py").write_text(f"open('{place.path}/RAN', 'w').write('ran')\n")
    r = _rehearse_untouched(place, f"python3 -c 'import json' & bash --rcfile /dev/null -c "
                                   f"'nohup python3 -u {place.path}/t2.py > {place.path}/t2.log 2>&1 &'")
    assert "--rcfile /dev/null" in r.plan.line and (r.started or place.target == "pct"), judge.facts(r)  # no bash
    assert not [p for p in procs_naming(f"{place.path}/t2.py") if _alive(p)]


def test_screen_logfile_and_nohup_out_are_renamed(place):
    (place.here / "train.log").write_text("the user's last run\n")
    (place.here / "nohup.out").write_text("the user's nohup.out\n")
    r = _rehearse_untouched(place, f"cd {place.path} && screen -L -Logfile train.log -dmS rh python3 -u t.py")
    assert r.started or place.target == "pct", judge.facts(r)  # the container has no screen
    r = _rehearse_untouched(place, f"cd {place.path} && nohup python3 t.py &")
    assert r.started, judge.facts(r)


def test_a_pid_file_from_dollar_bang_is_renamed(place):
    (place.here / "t.pid").write_text("4242\n")
    _rehearse_untouched(place, f"cd {place.path} && nohup python3 -u t.py > t.log 2>&1 & echo $! > {place.path}/t.pid")


def test_tmux_runs_on_a_private_server(place):
    name = f"rh{uuid.uuid4().hex[:6]}"
    r = _rehearse_untouched(place, f"tmux new -d -s {name} 'python3 -u {place.path}/t.py > {place.path}/t.log 2>&1'")
    assert r.started and f"tmux -L dfdoctor-rh-{r.plan.tag}" in r.plan.line, judge.facts(r)
    if place.target != "pct":  # the user's default server never saw the session: its real start still works
        assert subprocess.run(["tmux", "has-session", "-t", name], capture_output=True).returncode != 0


def test_a_log_under_home_is_expanded_where_it_is_written(place):
    name = f"dfd-harm-{uuid.uuid4().hex[:8]}.log"
    r = _rehearse_untouched(place, f"nohup python3 -u {place.path}/t.py > $HOME/{name} 2>&1 &")
    assert judge.passed(r), judge.facts(r)
    assert f"/root/{name}.dfdoctor-rh-" in r.plan.line  # the path as that hop's shell expands it
    assert not list(place.home().glob(f"{name}*"))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT to the group, as Ctrl-C", "SIGTERM"])
def test_an_interrupted_check_leaves_nothing(infra, how, tmp_path):
    """dfdoctor interrupted while the sentinel runs: its folder, the renamed log and the sentinel are gone."""
    work = Path(f"/tmp/dfd-harm-{uuid.uuid4().hex[:8]}")
    work.mkdir()
    (work / "t.py").write_text(TRAIN)
    # held open (no nohup, no redirect of stdin): the rehearsal waits its whole RETURN_S with a sentinel running
    line = f"ssh -tt root@dfdoctor-host 'cd {work} && python3 -u t.py > {work}/t.log 2>&1'"
    env = {**os.environ, "DFDOCTOR_SSH_CONFIG": str(infra.ssh_config), "NO_COLOR": "1"}
    # started as from a terminal, whose Ctrl-C this is: with the SIGINT a runner's shell ignored in its background
    # jobs (`pytest ... &`) inherited, dfdoctor rightly ignored the Ctrl-C and its check ended by itself (exit 1)
    p = subprocess.Popen([DFDOCTOR, "check", "--only", "launch.path", "--shell-command", line], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         preexec_fn=as_from_a_terminal())
    try:
        mark, deadline = None, time.monotonic() + 30
        while mark is None and time.monotonic() < deadline:
            cmdlines = [a for q in procs_naming(f"{work}/t.log.dfdoctor-rh-") for a in q.info["cmdline"] or []]
            mark = next((re.search(r"dfdoctor-rh-\w+", a).group(0) for a in cmdlines if "t.log.dfdoctor-rh-" in a),
                        None)
            time.sleep(0.05)
        assert mark, "the rehearsal never started"
        time.sleep(0.5)
        if how == "SIGTERM":
            p.send_signal(signal.SIGTERM)
        else:
            os.killpg(p.pid, signal.SIGINT)
        p.communicate(timeout=30)
        assert p.returncode in (130, -signal.SIGTERM), p.returncode
        # a look (its own session, over ssh) reads EOF once dfdoctor is gone, then looks and sweeps its place: about
        # a second on a quiet machine, several on a loaded one (CI's run of the whole suite)
        deadline = time.monotonic() + 15
        while [q for q in procs_naming(mark) if _alive(q)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [q.info["cmdline"] for q in procs_naming(mark) if _alive(q)]
        assert not list(Path("/tmp").glob(f"{mark}*")) and not list(work.glob(f"*{mark}*")), list(work.iterdir())
        assert not list(Path("/dev/shm").glob(f"{mark}.wall*"))  # the second wall's layers (wall.py)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        kill_naming(str(work))
        subprocess.run(["rm", "-rf", str(work)])


# A rehearsal interrupted by SIGINT in a python of its own, while its line runs ("running") or as the line's
# shell has just been started, before the rehearsal has heard so from Popen ("starting": CI's full run of round 16
# hit that window, and no late sweep came); once its sweep is done (at leftovers.done), a session to the host opens
# the renamed log in the user's folder, as the line's own shell does when its sshd started it only after that sweep
# (a login still being set up when the line was cut off: the real race cannot be timed from outside). Prints the
# rehearsal's mark.
_LATE_SHELL = r"""
import json, os, signal, subprocess, sys, threading, time
from dfdoctor import leftovers
from dfdoctor.rehearse import rewrite, runner
line, log, cfg, when = sys.argv[1:5]
plans = []
plan = rewrite.plan
rewrite.plan = lambda *a, **k: plans.append(plan(*a, **k)) or plans[-1]
def interrupt():  # once the line's own shell runs (the looks before it carry the renamed log's name too)
    while not plans or not runner._line_lives(plans[0].tag):
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGINT)
class Starting(subprocess.Popen):
    def __init__(self, args, *rest, **kw):
        super().__init__(args, *rest, **kw)
        if runner.LEADER in args:  # the line's shell is started; Popen is about to return it
            os.kill(os.getpid(), signal.SIGINT)
done = leftovers.done
def late(path):
    done(path)
    subprocess.run(["ssh", "-F", cfg, "-o", "BatchMode=yes", "root@dfdoctor-host",
                    f": > {log}.dfdoctor-rh-{plans[0].tag}"], timeout=60, stdin=subprocess.DEVNULL)
leftovers.done = late
def again(unraisable, before=sys.unraisablehook):  # a SIGINT landing in an at-fork hook (logging's, run as Popen
    # forks its preexec_fn) is printed and dropped by Python, and the rehearsal ran on to its end (CI, round 27): it
    # is sent again a moment later, as dfdoctor's console script does (ctrl_c._unraisable_hook)
    if unraisable.exc_type is not KeyboardInterrupt:
        return before(unraisable)
    threading.Thread(target=lambda: (time.sleep(0.005), os.kill(os.getpid(), signal.SIGINT)), daemon=True).start()
sys.unraisablehook = again
if when == "running":
    threading.Thread(target=interrupt, daemon=True).start()
else:
    subprocess.Popen = Starting
try:
    runner.rehearse(line)
except KeyboardInterrupt:
    print(json.dumps({"mark": f"dfdoctor-rh-{plans[0].tag}"}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["running", "starting"])
def test_a_shell_of_the_line_that_starts_after_an_interrupted_rehearsals_sweep_leaves_nothing(infra, tmp_path, when):
    """SIGINT during a rehearsal: its sweep ran, and a shell of the line its sshd started only after that sweep
    opened the renamed log in the user's folder (`LOG.dfdoctor-rh-TAG`), where it stayed. The line's processes
    here are ended, and every place is swept again a session's setup time later: nothing is left."""
    work = Path(f"/tmp/dfd-harm-{uuid.uuid4().hex[:8]}")
    work.mkdir()
    (work / "t.py").write_text(TRAIN)
    line = f"ssh root@dfdoctor-host 'cd {work} && nohup python3 -u t.py > {work}/t.log 2>&1 &'"
    env = {**os.environ, "DFDOCTOR_SSH_CONFIG": str(infra.ssh_config)}
    try:
        p = subprocess.run([sys.executable, "-c", _LATE_SHELL, line, f"{work}/t.log", str(infra.ssh_config), when],
                           env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 0 and p.stdout.strip(), p.stderr
        mark = json.loads(p.stdout)["mark"]
        assert not list(work.glob(f"*{mark}*")), list(work.iterdir())
        assert not [q.info["cmdline"] for q in procs_naming(mark) if _alive(q)]
    finally:
        kill_naming(str(work))
        subprocess.run(["rm", "-rf", str(work)])
