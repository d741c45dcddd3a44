"""A rehearsal opens one session per place it touches (the job's look places the sentinel first, each look sweeps
its place after), and those ride the check run's shared ssh connection when the line's first hop goes to that
very destination, so a rehearsal pays one login, the line's own; the line itself always logs in as the user's
does (its session's end is what is observed). Over the real chain: sshd on 127.0.0.1 -> `pct exec` ->
lxc-attach -> container 200."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import psutil
import pytest

from dfdoctor import causes, leftovers
from dfdoctor.rehearse import judge, rewrite, runner
from dfdoctor.rehearse.rewrite import Hop
from dfdoctor.targets import parse_target, transport
from infra.fixtures import Infra, infra, kill_naming, procs_naming, ssh_config_env  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def seed(infra: Infra):
    """A folder in container 200 only (not on the host), holding train.py: the seed's /workspace."""
    name = f"dfd-rhs-{uuid.uuid4().hex[:8]}"
    work = f"/tmp/{name}"
    inside = infra.rootfs() / "tmp" / name
    inside.mkdir()
    (inside / "train.py").write_text("print('never run: the sentinel stands in for it')\n")
    yield work, inside
    kill_naming(work)
    shutil.rmtree(inside, ignore_errors=True)


class _Recorded(subprocess.Popen):
    """The real Popen, which also keeps the argv of every process the rehearsal starts."""

    argvs: list[list[str]] = []

    def __init__(self, argv, *a, **k):
        _Recorded.argvs.append([str(w) for w in argv])
        super().__init__(argv, *a, **k)


def _rehearse_recorded(line: str):
    _Recorded.argvs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess, "Popen", _Recorded)
        return runner.rehearse(line), list(_Recorded.argvs)


def _ssh_sessions(argvs: list[list[str]]) -> list[list[str]]:
    """dfdoctor's own sessions: the ssh argvs (the line runs inside the leader shell, `sh -c LEADER ...`)."""
    return [a for a in argvs if a[0] == "ssh"]


def test_own_sessions_ride_the_runs_connection_and_the_line_logs_in_itself(ssh_config_env, seed):
    work, inside = seed
    line = f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'"
    target = parse_target("pct://root@dfdoctor-host/200")
    with transport.connected(target) as err:
        assert err is None, err
        socket = transport.control_path(target)
        shared, argvs = _rehearse_recorded(line)
    own = _ssh_sessions(argvs)
    # one session per place, all over the master: the container's look (which places the sentinel first) and the
    # host's (the log's place, its wall); nothing logs in after the line to sweep
    assert len(own) == 2 and all(f"ControlPath={socket}" in a for a in own), own
    leaders = [a for a in argvs if a[:2] == ["sh", "-c"] and runner.LEADER in a]
    assert leaders and not any("ControlPath" in w for a in leaders for w in a), leaders
    # the same observation as without a shared connection: the host's shell could not open the log
    alone, argvs = _rehearse_recorded(line)
    assert not any("ControlPath" in w for a in _ssh_sessions(argvs) for w in a)
    for r in (shared, alone):
        assert not r.started and [o.cause for o in judge.findings(r, None)] == [causes.LOG_DIR_MISSING], \
            judge.facts(r)
        assert not [p for p in procs_naming(r.plan.tag) if p.is_running()]
    assert not list(inside.iterdir())[1:], list(inside.iterdir())  # train.py only: nothing of either rehearsal


def test_the_fix_rehearsed_over_the_shared_connection_survives(ssh_config_env, seed):
    """The printed fix names dfdoctor's ssh config (-F): still the same destination, still the master."""
    work, inside = seed
    line = (f"ssh -F {ssh_config_env.ssh_config} root@dfdoctor-host \"pct exec 200 -- sh -c 'cd {work} && "
            f"nohup setsid -f python3 -u {work}/train.py </dev/null >>{work}/train.log 2>&1; sleep 1'\"")
    target = parse_target("pct://root@dfdoctor-host/200")
    with transport.connected(target):
        socket = transport.control_path(target)
        r, argvs = _rehearse_recorded(line)
    assert judge.passed(r) and r.alive, judge.facts(r)
    assert all(f"ControlPath={socket}" in a for a in _ssh_sessions(argvs)), _ssh_sessions(argvs)
    assert not (inside / "train.log").exists()


@pytest.mark.parametrize("opts", [["-i", "/var/lib/dfdoctor-infra/id_ed25519"], ["-J", "root@dfdoctor-host"],
                                  ["-o", "User=nobody"], ["-p", "47022"], ["-l", "nobody"], ["-F", "/dev/null"]])
def test_a_hop_with_options_of_its_own_logs_in_itself(ssh_config_env, opts):
    """An option that may reach another place, or the same one otherwise, is not served by the master."""
    target = parse_target("ssh://root@dfdoctor-host")
    plain = Hop("ssh", ("ssh", *rewrite.ssh_extra(), "-T", "root@dfdoctor-host"), "dfdoctor-host")
    hop = Hop("ssh", ("ssh", *rewrite.ssh_extra(), "-T", *opts, "root@dfdoctor-host"), "dfdoctor-host")
    assert runner._shared_socket(plain) is None  # no master open: nothing to ride
    with transport.connected(target):
        assert runner._shared_socket(plain) == transport.control_path(target)
        assert runner._shared_socket(hop) is None


def test_a_place_not_reached_in_time_is_said_and_nothing_stays(infra, seed, tmp_path, monkeypatch):
    """The look that places the sentinel is still logging in after PLACE_S (an ssh that takes 8 s): the rehearsal
    says so, as it did when placing had a session of its own, runs nothing, and leaves nothing there."""
    work, inside = seed
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", str(infra.slow_ssh_config(tmp_path, 8)))
    began = time.monotonic()
    r, argvs = _rehearse_recorded(f"ssh root@slow-host 'pct exec 200 -- nohup python3 {work}/train.py "
                                  f"> {work}/train.log 2>&1 &'")
    assert r.unobservable and "container 200 on slow-host" in r.unobservable, r.unobservable
    assert r.returned_s is None and not any(runner.LEADER in a for a in argvs)  # the line never ran
    assert time.monotonic() - began < runner.PLACE_S + leftovers.CLEAN_S + 5
    time.sleep(1)
    assert not [p for p in procs_naming(r.plan.tag) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not (infra.rootfs() / "tmp" / f"dfdoctor-rh-{r.plan.tag}").exists()
    assert not list(inside.iterdir())[1:], list(inside.iterdir())
