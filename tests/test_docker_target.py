"""docker:// on a real docker engine (tests/infra/provision.sh starts dockerd and a container whose /workspace
is a folder of this machine): checks probe inside the container, `launch` starts the job there under the
recorder, it outlives dfdoctor, and `status` reads it back. Every job a test starts is killed afterwards."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest

from dfdoctor import causes
from infra.fixtures import Infra, docker_infra, infra, kill_naming, procs_naming  # noqa: F401

pytestmark = pytest.mark.slow

HEALTHY = "import time\nfor i in range({n}):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n"


@pytest.fixture
def work(docker_infra: Infra, tmp_path: Path):
    """A folder in the container's /workspace (seen here under docker_workspace), a local folder, cleanup."""
    name = f"dfd-docker-{uuid.uuid4().hex[:8]}"
    host_side = docker_infra.docker_workspace / name
    host_side.mkdir()
    local = tmp_path / "here"
    local.mkdir()
    yield f"/workspace/{name}", host_side, local
    left = kill_naming(name)  # recorders and jobs still running in the container
    assert not left, f"left behind in the container: {left}"
    shutil.rmtree(host_side, ignore_errors=True)


def test_checks_look_inside_the_container(docker_infra, work, dfdoctor):
    inside, host_side, local = work
    (host_side / "train.py").write_text("import json\nimport no_such_module_in_docker\n")
    (host_side / "logs").mkdir()
    p = dfdoctor("check", "--target", docker_infra.docker_target, "--skip", "persistence.session", "--cwd", inside,
                 "--log", f"{inside}/logs/train.log", "--format", "json", "--", "python3", "train.py", cwd=local)
    doc = json.loads(p.stdout)
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["target.reachable"]["status"] == "ok" and "/usr/bin/python3" in by_id["target.reachable"]["summary"]
    # the log folder exists only in the container (this machine has no /workspace): it was judged there
    assert not Path(inside).exists() and by_id["log.writable"]["status"] == "ok", by_id["log.writable"]
    smoke = by_id["imports.smoke"]
    assert smoke["status"] == "fail" and smoke["cause"] == causes.MISSING_MODULE, smoke
    assert "no_such_module_in_docker" in smoke["summary"]
    assert p.returncode == 1 and doc["verdict"]["cause"] == causes.MISSING_MODULE


def test_launch_in_the_container_outlives_dfdoctor_and_status_follows(docker_infra, work, dfdoctor):
    inside, host_side, local = work
    (host_side / "train.py").write_text(HEALTHY.format(n=200))
    # the job lives 20 s: a short settle, so it is judged alive (4 s, then 10 s, were outlived by a launch on a
    # loaded machine, parallel workers included: the job had ended before it was looked for)
    p = dfdoctor("launch", "--target", docker_infra.docker_target, "--no-check", "--cwd", inside, "--log",
                 f"{inside}/train.log", "--watch", "10", "--settle", "2", "--format", "json", "--", "python3",
                 "train.py", cwd=local, timeout=60)
    rep = json.loads(p.stdout)
    assert p.returncode == 0 and rep["verdict"]["state"] == "running", rep["verdict"]
    assert f"docker exec {docker_infra.docker_name} sh -c" in rep["verdict"]["fix"]
    assert rep["run"]["target"] == docker_infra.docker_target
    # dfdoctor is gone; the job still runs and logs in the container
    assert procs_naming(f"{inside}/.dfdoctor/runs") and "step" in (host_side / "train.log").read_text()
    deadline = time.monotonic() + 45
    while procs_naming(f"{inside}/.dfdoctor/runs") and time.monotonic() < deadline:
        time.sleep(0.3)
    p = dfdoctor("status", "--format", "json", cwd=local, timeout=60)
    st = json.loads(p.stdout)
    assert p.returncode == 0 and st["verdict"]["state"] == "ok" and st["run"]["exit_code"] == 0, st["verdict"]
    assert "step 199" in (host_side / "train.log").read_text()


def test_a_job_that_cannot_import_is_named_in_the_container(docker_infra, work, dfdoctor):
    inside, host_side, local = work
    (host_side / "train.py").write_text("print('start', flush=True)\nimport no_such_module_in_docker\n")
    p = dfdoctor("launch", "--target", docker_infra.docker_target, "--no-check", "--cwd", inside, "--log",
                 f"{inside}/train.log", "--watch", "10", "--format", "json", "--", "python3", "train.py", cwd=local,
                 timeout=60)
    rep = json.loads(p.stdout)
    assert p.returncode == 1 and rep["verdict"]["cause"] == causes.MISSING_MODULE, rep["verdict"]
    assert any("no_such_module_in_docker" in e for e in rep["verdict"]["evidence"])


def test_a_missing_container_is_unreachable_in_dockers_words(docker_infra, tmp_path, dfdoctor):
    p = dfdoctor("check", "--only", "target.reachable", "--target", "docker://dfdoctor-no-such-container",
                 "--format", "json", cwd=tmp_path)
    rec = json.loads(p.stdout)["checks"][0]
    assert p.returncode == 1 and rec["cause"] == causes.TARGET_UNREACHABLE and "No such container" in rec["summary"]


def test_a_job_waiting_on_a_socket_in_the_container_names_its_peer(docker_infra, work, dfdoctor):
    """Issue 23 on a target: a download from a server that accepted and never answers, inside the container
    (a recv with a timeout: a poll, its descriptor read from the process's memory there). The peer host:port
    comes from the container's own socket table (/proc/PID/net/tcp), read by the agent there:
    `waiting-on-network` naming 127.0.0.1:PORT, as for a local job."""
    inside, host_side, local = work
    (host_side / "serve.py").write_text("import socket, sys, time\ns = socket.socket()\n"
                                        "s.bind(('127.0.0.1', 0))\ns.listen(1)\n"
                                        "open(sys.argv[1], 'w').write(str(s.getsockname()[1]))\n"
                                        "c, _ = s.accept()\ntime.sleep(120)\n")
    (host_side / "fetch.py").write_text("import socket, sys, time\nprint('fetching', flush=True)\n"
                                        "while True:\n    try:\n        port = int(open(sys.argv[1]).read())\n"
                                        "        break\n    except (OSError, ValueError):\n        time.sleep(0.1)\n"
                                        "s = socket.create_connection(('127.0.0.1', port), timeout=300)\n"
                                        "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\ndata = s.recv(65536)\n")
    (host_side / "run.sh").write_text(f"python3 {inside}/serve.py {inside}/port &\n"
                                      f"exec python3 {inside}/fetch.py {inside}/port\n")
    t0 = time.monotonic()
    p = dfdoctor("launch", "--target", docker_infra.docker_target, "--no-check", "--cwd", inside, "--watch", "60",
                 "--format", "json", "--", "sh", f"{inside}/run.sh", cwd=local, timeout=120)
    took = time.monotonic() - t0
    v = json.loads(p.stdout)["verdict"]
    port = (host_side / "port").read_text()
    assert p.returncode == 1 and v["cause"] == "waiting-on-network", (v["summary"], v["evidence"])
    assert f"127.0.0.1:{port}" in v["summary"], v["summary"]  # no py-spy in the container: no Python line
    assert took < 40, f"named after {took:.0f} s"


# The container has no torch: a stand-in with torchrun's shape (its name on the command line, --nproc_per_node,
# one child per rank with RANK/LOCAL_RANK/WORLD_SIZE, waiting for all of them) is what the settle check reads.
STANDIN_TORCHRUN = """import os, subprocess, sys
n = int(sys.argv[sys.argv.index('--nproc_per_node') + 1])
script = sys.argv[-1]
kids = [subprocess.Popen([sys.executable, '-u', script], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),
        WORLD_SIZE=str(n))) for r in range(n)]
sys.exit(max(k.wait() for k in kids))
"""
RANK_1_DIES = """import os, sys, time
rank = int(os.environ['RANK'])
for step in range(300):
    print('rank', rank, 'step', step, flush=True)
    if rank == 1 and step == 12:
        sys.exit(1)
    time.sleep(0.25)
"""


def test_torchrun_in_the_container_is_not_running_while_a_rank_is_gone(docker_infra, work, dfdoctor):
    """Settling on a target (issue 23 item 2): rank 1 logs for 3 s then exits 1, while rank 0 and the agent go
    on logging. The output alone looks steady; the agent's look at torchrun's ranks there (each second, as
    locally) sees rank 1 go, and the verdict is never `running`."""
    inside, host_side, local = work
    (host_side / "torchrun").write_text(STANDIN_TORCHRUN)
    (host_side / "train.py").write_text(RANK_1_DIES)
    p = dfdoctor("launch", "--target", docker_infra.docker_target, "--no-check", "--cwd", inside, "--watch", "20",
                 "--format", "json", "--", "python3", f"{inside}/torchrun", "--nproc_per_node", "2",
                 f"{inside}/train.py", cwd=local, timeout=120)
    assert p.stdout.strip(), (p.returncode, p.stderr)
    v = json.loads(p.stdout)["verdict"]
    assert v["state"] != "running", (v["summary"], v["evidence"])
    assert "rank 1" in v["summary"] + " ".join(v["evidence"]) and "ended while dfdoctor watched" in \
        v["summary"] + " ".join(v["evidence"]), (v["summary"], v["evidence"])
