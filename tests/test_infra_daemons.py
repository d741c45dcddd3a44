"""The test infrastructure's own daemons (tests/infra/daemon.sh): a daemon a test session's provisioning starts
must not leave anything of that session behind. CI failed a whole run on one: a test worker that found dockerd not
answering started it again, and the bash that had sent it to the background waited for it with the session's
marker in its environment ("processes left behind: bash tests/infra/provision.sh")."""
import os
import subprocess
import time
import uuid
from pathlib import Path

import psutil

DAEMON_SH = Path(__file__).resolve().parent / "infra" / "daemon.sh"


def _carrying(name: str, value: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get(name) == value and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_detached_daemon_leaves_nothing_of_its_starter_and_holds_neither_its_env_nor_the_lock(tmp_path):
    mark = uuid.uuid4().hex
    token = f"dfdoctor-daemon-{mark[:8]}"
    script = (f'CLEAN_ENV=(env -i PATH=/usr/bin:/bin)\nsource "{DAEMON_SH}"\nexec 9>"{tmp_path}/lock"\n'
              f'detach "{tmp_path}/log" bash -c "exec -a {token} sleep 60"\n')
    t = time.monotonic()
    subprocess.run(["bash", "-c", script], env=dict(os.environ, LEFTOVER_MARK=mark), check=True, timeout=30,
                   stdin=subprocess.DEVNULL, capture_output=True)
    assert time.monotonic() - t < 10, "detach waited for its daemon"
    daemon = None
    try:
        end = time.monotonic() + 10
        while daemon is None and time.monotonic() < end:
            daemon = next((p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] == token),
                          None)
            time.sleep(0.05)
        assert daemon is not None, "the daemon did not start"
        assert _carrying("LEFTOVER_MARK", mark) == [], "something of the starter carries its environment"
        assert "LEFTOVER_MARK" not in daemon.environ()
        held = [f.path for f in daemon.open_files()] + [os.readlink(f"/proc/{daemon.pid}/fd/{fd}")
                                                       for fd in os.listdir(f"/proc/{daemon.pid}/fd")]
        assert str(tmp_path / "lock") not in held, "the daemon holds the provisioning lock"
        assert os.getsid(daemon.pid) == daemon.pid, "the daemon does not lead a session of its own"
    finally:
        if daemon is not None:
            daemon.kill()
