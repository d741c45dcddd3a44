"""The fix's `; sleep 1` after its detached start only where a terminal reaches an lxc-attach (issue 45): over the
real chain, ssh without a terminal -> `pct exec` -> lxc-attach leaves a `nohup setsid -f` job alone, every time,
so the seed's fix needs no pause; lxc-attach typed at a prompt (tests/test_rehearse.py) keeps it."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from dfdoctor.rehearse import judge, pause
from dfdoctor.rehearse.fix import find
from dfdoctor.rehearse.rewrite import Hop
from dfdoctor.rehearse.runner import rehearse
from infra.fixtures import infra, procs_naming, ssh_config_env  # noqa: F401
from test_rehearse import seed  # noqa: F401  (a folder in container 200 only, holding train.py)


def _ssh(*opts: str) -> Hop:
    return Hop("ssh", ("ssh", "-T", *opts, "root@dfdoctor-host"), "dfdoctor-host")


PCT = Hop("pct", ("pct", "exec", "200", "--"), "container 200 on dfdoctor-host")
LXC = Hop("lxc", ("lxc-attach", "-n", "200", "--"), "container 200")


def test_a_pause_only_where_a_terminal_reaches_lxc_attach(ssh_config_env):
    assert pause.needed((LXC,))  # typed at a prompt: lxc-attach has the terminal
    assert not pause.needed((_ssh(), PCT))  # ssh with a remote command and no -t: no terminal there
    assert pause.needed((_ssh("-o", "RequestTTY=force"), PCT))  # the configuration asks for one
    assert pause.needed((_ssh("-o", "RequestTTY=yes"), PCT))
    assert not pause.needed((_ssh(),))  # no container hop: nothing to pause for


def test_the_seed_fix_has_no_pause_and_its_job_outlives_the_hop(infra, ssh_config_env, seed):
    """The seed's line: its fix, found and rehearsed, has no `sleep 1`; the detached start it makes over ssh and
    pct exec leaves the job running every time (10 starts, no pause, nothing in between)."""
    work, inside = seed
    r = rehearse(f"ssh root@dfdoctor-host 'pct exec 200 -- nohup python3 {work}/train.py > {work}/train.log 2>&1 &'")
    fx = find(r)
    assert fx is not None and fx.works, fx and fx.words()
    assert "sleep" not in fx.line and not any("sleep 1" in c for c in fx.changes), fx.words()
    assert judge.passed(fx.rehearsal) and fx.rehearsal.alive, judge.facts(fx.rehearsal)
    marks = [f"{work}/s{i}-{uuid.uuid4().hex[:6]}" for i in range(10)]
    init = [_init_pid()]
    hops = []
    for m in marks:
        line = f"pct exec 200 -- sh -c 'nohup setsid -f python3 -c \"import time; time.sleep(60)\" {m} </dev/null >>{work}/x.log 2>&1'"
        t0 = time.monotonic()
        subprocess.run(["ssh", "-F", ssh_config_env.ssh_config, "root@dfdoctor-host", line], check=True, timeout=60,
                       stdin=subprocess.DEVNULL, capture_output=True)
        hops.append(time.monotonic() - t0)
    time.sleep(1.0)  # a second after the last hop returned: nothing ended them meanwhile
    alive = [m for m in marks if _running(m)]
    if alive != marks:
        # A process naming its mark exists from the hop's own shell on (sh, nohup, setsid, its fork, python3: each
        # names it) and nothing starts one later, so one alive at a later look was alive at the first, which missed
        # it (a command line read mid-exec is empty, say). Look again to tell a death from such a miss.
        time.sleep(2.0)
        later = [m for m in marks if _running(m)]
        init.append(_init_pid())
        log = (inside / "x.log").read_text(errors="replace") if (inside / "x.log").exists() else "(no x.log)"
        assert later == marks, (
            f"{len(marks) - len(alive)} of {len(marks)} detached jobs did not outlive the hop "
            f"({len(marks) - len(later)} still gone 2 s later: {sorted(set(marks) - set(later))}); the hops took "
            f"{', '.join(f'{h:.1f}' for h in hops)} s, the jobs sleep 60 s; the container's init pid before and after: "
            f"{init}; x.log's tail:\n{log[-2000:]}")
        print(f"a first look missed {sorted(set(marks) - set(alive))}, alive 2 s later (a look, not a death)")


def _running(mark: str) -> bool:
    """A process whose command line names `mark` runs (a zombie has ended: its parent, the container's init,
    reaps it)."""
    import psutil

    for p in procs_naming(mark):
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def _init_pid() -> str:
    """Container 200's init as the host sees it (a container restarted meanwhile has another)."""
    r = subprocess.run(["lxc-info", "-n", "200", "-pH"], capture_output=True, text=True, timeout=30)
    return r.stdout.strip() or r.stderr.strip()
