"""A torchrun started on one node with --nnodes=2 waits in its rendezvous for a node that never comes: the verdict
names what is missing (1 of 2 nodes), where it waits (the rendezvous endpoint) and how long it will (the rdzv
timeout), from torchrun's own arguments and its stacks; not "0 of 2 ranks alive", not an import hang, not
output-buffered. Real torchrun, both rendezvous kinds (c10d and the static default)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.diagnose.elastic import torchrun_options
from infra.fixtures import Infra, infra  # noqa: F401
from jobs.harness import JOBS, job_env, kill_runs, launch, text_of
from support.no_pyspy import python_without_pyspy

TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_options_are_read_up_to_the_script():
    opts = torchrun_options(["torchrun", "--nnodes", "1:2", "--rdzv-backend=c10d", "--rdzv_endpoint", "h:1",
                             "--rdzv-conf=join_timeout=60", "train.py", "--nnodes=9"])
    assert opts == {"nnodes": "1:2", "rdzv_backend": "c10d", "rdzv_endpoint": "h:1", "rdzv_conf": "join_timeout=60"}
    # `python -m torch.distributed.run`: its -m is the interpreter's (it read no option of such a line)
    opts = torchrun_options(["/usr/bin/python3", "-m", "torch.distributed.run", "--standalone", "--nnodes=2",
                             "-m", "train"])
    assert opts == {"standalone": "", "nnodes": "2"}, opts


def test_what_torchrun_was_asked_is_its_command_line_else_its_pet_environment():
    """torch's run.py reads `PET_` + the option's name for every option it is not given on the command line."""
    from dfdoctor.diagnose.elastic import torchrun_asked

    env = {"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "h:7", "PET_NNODES": "3", "PET_RDZV_CONF": "join_timeout=9",
           "PET_STANDALONE": "0", "PET_NODE_RANK": "1"}
    asked = torchrun_asked(["torchrun", "--nnodes=2", "train.py", "--rdzv-backend=static"], env)
    assert asked == {"nnodes": "2", "rdzv_backend": "c10d", "rdzv_endpoint": "h:7", "rdzv_conf": "join_timeout=9",
                     "node_rank": "1"}, asked


def test_what_torchrun_was_asked_knows_which_options_its_pet_environment_gave():
    from dfdoctor.diagnose.elastic import endpoint_of, torchrun_asked

    asked = torchrun_asked(["torchrun", "--nnodes=2", "--rdzv-endpoint=h:1", "train.py"],
                           {"PET_RDZV_ENDPOINT": "e:2", "PET_RDZV_BACKEND": "c10d", "PET_STANDALONE": "1"})
    assert asked.from_env == {"rdzv_backend": "PET_RDZV_BACKEND", "standalone": "PET_STANDALONE"}, asked.from_env
    # torch's run.py under --standalone: c10d at localhost:0 (a free port), whatever the endpoint given
    assert endpoint_of(asked) == ("c10d", "localhost:0"), endpoint_of(asked)


@pytest.fixture
def work(tmp_path):
    shutil.copy(JOBS / "ddp_cpu" / "positional.py", tmp_path / "train.py")
    yield tmp_path
    kill_runs(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["c10d", "static"])
def test_one_node_of_two_waits_in_the_rendezvous_and_the_verdict_says_for_what_where_and_how_long(work, kind):
    port = _port()
    rdzv, limit = _rendezvous(kind, port)
    proc, rep = launch(work, TORCHRUN, "--nnodes=2", "--nproc_per_node=1", *rdzv, "train.py", watch=20)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == causes.RANK_MISSING, v
    assert "--nnodes=2 asks for 2 nodes, and 1 of 2 nodes has joined" in v["summary"], v["summary"]
    assert f"waits at 127.0.0.1:{port} ({kind} rendezvous)" in v["summary"] and limit in v["summary"], v["summary"]
    assert "0 of 2" not in v["summary"] and "--nnodes=1" in v["fix"], v
    _fix_in_the_backends_words(v["fix"], kind, port)
    assert any("rendezvous" in e and "waits in" in e for e in v["evidence"]), v["evidence"]


@pytest.mark.slow
def test_one_node_of_two_whose_c10d_rendezvous_is_given_by_environment_only_is_read_as_c10d(work):
    """The rendezvous configured by PET_ variables alone (torchrun --nnodes=2 train.py): it was read from the
    command line alone as static at 127.0.0.1:29500, its limit 600 s, its fix in the static rendezvous' words."""
    port = _port()
    env = job_env(PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT=f"127.0.0.1:{port}", PET_RDZV_CONF="join_timeout=300")
    proc, rep = launch(work, TORCHRUN, "--nnodes=2", "--nproc_per_node=1", "train.py", watch=20, env=env)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["cause"] == causes.RANK_MISSING, text_of(rep)
    assert f"waits at 127.0.0.1:{port} (c10d rendezvous)" in v["summary"], v["summary"]
    assert "gives up after 300 s" in v["summary"], v["summary"]
    _fix_in_the_backends_words(v["fix"], "c10d", port)
    # where each option came from, so the user knows where to change it (round 18: the evidence said
    # "rdzv backend c10d, endpoint 127.0.0.1:P" as though the command line had said so)
    assert (f"the launch line: --nnodes=2, rdzv backend c10d (from PET_RDZV_BACKEND), endpoint 127.0.0.1:{port} "
            "(from PET_RDZV_ENDPOINT), rdzv conf join_timeout=300 (from PET_RDZV_CONF)") in v["evidence"], v["evidence"]
    assert f"--rdzv-endpoint=127.0.0.1:{port} (set by PET_RDZV_ENDPOINT here)" in v["fix"], v["fix"]
    assert "--rdzv-conf join_timeout=SECONDS (set by PET_RDZV_CONF here)" in v["fix"], v["fix"]


def test_a_targets_agent_sends_the_pet_variables_torchruns_rendezvous_is_read_from(tmp_path):
    """On a target the agent sends named variables only: those of every rendezvous option torchrun reads from its
    environment, so a target's torchrun configured by environment is read as here (a real process, looked at by
    the agent's own code)."""
    from dfdoctor.agent import target_agent
    from dfdoctor.diagnose.look import samples_of

    script = tmp_path / "torchrun"
    script.write_text("import time\ntime.sleep(60)\n")
    env = dict(job_env(), PET_NNODES="2", PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT="10.0.0.5:29400",
               PET_RDZV_CONF="join_timeout=77", PET_NODE_RANK="0", PET_RDZV_ID="job7")
    p = subprocess.Popen([sys.executable, str(script), "--nproc_per_node=1", "train.py"], env=env)
    try:
        assert _wait(lambda: "torchrun" in open(f"/proc/{p.pid}/cmdline").read()), "the process did not start"
        (agent,) = samples_of(target_agent.sample([p.pid], None))
    finally:
        p.kill()
        p.wait()
    assert agent.asked == {"nproc_per_node": "1", "nnodes": "2", "rdzv_backend": "c10d",
                           "rdzv_endpoint": "10.0.0.5:29400", "rdzv_conf": "join_timeout=77", "node_rank": "0",
                           "rdzv_id": "job7"}, agent.asked
    assert agent.endpoint == "10.0.0.5:29400", agent.endpoint


def _wait(ok, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if ok():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def _fix_in_the_backends_words(fix: str, kind: str, port: int) -> None:
    """The fix names the options the job's own rendezvous meets by (round 17: --rdzv-endpoint was said for the
    static one too, where torchrun meets at --master-addr:--master-port and each node gives its --node-rank)."""
    if kind == "c10d":
        assert f"--rdzv-endpoint=127.0.0.1:{port}" in fix and "--node-rank" not in fix, fix
    else:
        assert "--rdzv-endpoint" not in fix and "--rdzv-id" not in fix, fix
        assert "with --node-rank=1 (this node's is 0)" in fix, fix
        assert "--master-addr=127.0.0.1 (reachable from there" in fix and f"--master-port={port};" in fix, fix


def _dfdoctor(python: Path, work: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = work / f"report-{time.monotonic_ns()}.json"
    p = subprocess.run([str(python), "-m", "dfdoctor", args[0], "--cwd", str(work), "--format", "json", "--output",
                        str(out), "--format", "text", *args[1:]], cwd=work,
                       env=job_env(PATH="/usr/local/bin:/usr/bin:/bin", **env),
                       capture_output=True, text=True, timeout=240)
    assert out.exists(), p.stdout + p.stderr
    return p, json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["c10d", "static"])
def test_without_py_spy_one_node_of_two_waits_in_the_rendezvous_seen_from_the_kernel_never_running(work, kind):
    """No py-spy (a view of the venv without it): the agent waits alone, no rank started, polling its rendezvous
    store. Nothing progresses there; it was `running [sleeping]`, exit 0. From the kernel's view: its connection to
    the endpoint its command line names, how long it has waited, and that how many nodes joined is not established."""
    python = python_without_pyspy(work)
    port = _port()
    rdzv, limit = _rendezvous(kind, port)
    proc, rep = _dfdoctor(python, work, "launch", "--no-check", "--watch", "20", "--log", str(work / "train.log"),
                          "--", TORCHRUN, "--nnodes=2", "--nproc_per_node=1", *rdzv, "train.py")
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == causes.RANK_MISSING, text
    assert "--nnodes=2 asks for 2 nodes" in v["summary"] and limit in v["summary"], v["summary"]
    assert f"waits at 127.0.0.1:{port} ({kind} rendezvous)" in v["summary"], v["summary"]
    assert "how many have joined is not established" in v["summary"], v["summary"]
    assert any(f"a connection to its rendezvous endpoint 127.0.0.1:{port}" in e for e in v["evidence"]), text
    assert any("no rank has started on this node" in e for e in v["evidence"]), text
    assert "0 of 2" not in v["summary"] and "--nnodes=1" in v["fix"], text
    _fix_in_the_backends_words(v["fix"], kind, port)


@pytest.mark.slow
def test_a_standalone_torchrun_asked_for_two_nodes_waits_where_no_node_can_join_and_the_fix_says_so(work):
    """torch's run.py under --standalone makes the rendezvous c10d at localhost:0 (a free port) under a fresh
    uuid, and leaves --nnodes as asked: `torchrun --standalone --nnodes=2` waits for a node that cannot come. It
    was read as static at 127.0.0.1:29500, its fix to start the other node with --master-addr=127.0.0.1 and
    --master-port=29500, "or --standalone" (which it had)."""
    proc, rep = launch(work, TORCHRUN, "--standalone", "--nnodes=2", "--nproc_per_node=1", "train.py", watch=20)
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["cause"] == causes.RANK_MISSING, text
    assert "--nnodes=2 asks for 2 nodes, and 1 of 2 nodes has joined" in v["summary"], v["summary"]
    assert ("It waits at localhost, on a free port it picked (the c10d rendezvous of --standalone, under a fresh "
            "--rdzv-id: no other node can join it) and gives up after 600 s") in v["summary"], v["summary"]
    assert any(e.startswith("the launch line: --nnodes=2, --standalone: rdzv backend c10d, endpoint localhost:0")
               for e in v["evidence"]), v["evidence"]
    _standalone_fix(v["fix"])


@pytest.mark.slow
def test_without_py_spy_a_torchrun_made_standalone_by_its_environment_is_read_so_and_names_the_variables(work):
    """PET_STANDALONE=1 PET_NNODES=2, no py-spy: the agent holds a connection to the store it serves itself on
    localhost (a port it picked). It was `running [sleeping]`: the connection was looked for at 127.0.0.1:29500.
    The evidence and the fix name the variables the options came from."""
    python = python_without_pyspy(work)
    proc, rep = _dfdoctor(python, work, "launch", "--no-check", "--watch", "20", "--log", str(work / "train.log"),
                          "--", TORCHRUN, "--nproc_per_node=1", "train.py", PET_STANDALONE="1", PET_NNODES="2")
    v, text = rep["verdict"], text_of(rep)
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == causes.RANK_MISSING, text
    assert "--nnodes=2 asks for 2 nodes" in v["summary"] and "how many have joined is not established" in \
        v["summary"], v["summary"]
    assert "It waits at localhost, on a free port it picked" in v["summary"], v["summary"]
    assert any("holds a connection to its rendezvous store on localhost (--standalone)" in e
               for e in v["evidence"]), text
    assert any(e.startswith("the launch line: --nnodes=2 (from PET_NNODES), --standalone (from PET_STANDALONE): "
                            "rdzv backend c10d") for e in v["evidence"]), v["evidence"]
    _standalone_fix(v["fix"])
    assert "--nnodes=1 (or set PET_NNODES=1: --nnodes=2 came from it)" in v["fix"], v["fix"]
    assert "drop --standalone (unset PET_STANDALONE, which sets it here)" in v["fix"], v["fix"]


def _standalone_fix(fix: str) -> None:
    """The fix of a --standalone run asked for more nodes: one node drops the count; several drop --standalone
    and meet at one endpoint. Never --master-addr/--node-rank or this run's own localhost endpoint."""
    assert fix.startswith("--standalone makes a rendezvous only this node can join"), fix
    assert "For one node, run with --nnodes=1" in fix and "drop --standalone" in fix, fix
    assert "--rdzv-endpoint=HOST:PORT" in fix and "--rdzv-conf join_timeout=SECONDS" in fix, fix
    assert "--master-addr" not in fix and "--node-rank" not in fix and "29500" not in fix, fix


def test_a_targets_agent_alone_whose_sockets_were_not_read_is_not_running_and_its_connection_not_established(
        tmp_path):
    """A target's answer whose agent read no sockets (an agent before round 17, or sockets it could not read):
    torchrun alone in both looks, asleep, no Python stack. Its endpoint is read from its own command line; its
    connection there is said not established, and so is any progress: `unknown`, never `running [sleeping]` (it
    was, as without py-spy here)."""
    from dfdoctor.diagnose.look import samples_of
    from dfdoctor.diagnose.verdict import diagnose
    from dfdoctor.launch.reading import judge
    from dfdoctor.launch.remote import live_facts
    from dfdoctor.run import record
    from dfdoctor.run.folder import new_run

    argv = ["torchrun", "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.5:29400", "train.py"]
    run_id, run_dir = new_run(tmp_path)
    (run_dir / "spec.json").write_text(json.dumps({"run_id": run_id, "argv": argv, "cwd": "/w",
                                                   "target": "ssh://root@h", "remote_dir": "/w/r"}))
    events = [{"event": "recorder", "pid": 100, "t": time.time() - 40}, {"event": "spawned", "pid": 101,
                                                                          "t": time.time() - 40}]
    (run_dir / "record.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    look = {"syscall": "230 0x0", "fds": {}, "stack": "", "cpu_s": 0.5, "switches": 40}
    answer = {"pid": 101, "python": True, "cpu_s": 0.5, "stdout_targets": [], "other_logs": [],
              "stacks": [{"pid": 101, "text": "", "tool": "kernel", "error": "py-spy is not installed"}],
              "samples": {"procs": [{"pid": 101, "ppid": 1, "cmdline": ["/usr/bin/python3", "/usr/bin/torchrun",
                                                                          *argv[1:]],
                                     "python": True, "env": {}, "looks": [look, dict(look, cpu_s=0.51)]}],
                          "locks": ""}}
    live = live_facts(answer, 30.0)
    judge(record.load(run_dir), live, samples_of(answer["samples"]))
    v = diagnose(record.load(run_dir), live)
    assert v.state == "unknown" and v.cause is None, v
    assert "torchrun (pid 101) is alive and silent" in v.summary and "no rank has started" in v.summary, v.summary
    assert "10.0.0.5:29400 (c10d rendezvous); a connection to it is not established" in v.summary, v.summary
    assert any("a connection to its rendezvous endpoint 10.0.0.5:29400: not established" in e
               for e in v.evidence), v.evidence


@pytest.mark.slow
def test_on_an_ssh_target_torchrun_alone_in_its_rendezvous_is_rank_missing_as_here(infra: Infra, tmp_path, dfdoctor):
    """The same wait on a --target (tests/infra's sshd: this machine behind a real ssh session, no py-spy there).
    The target's agent sent only RANK/LOCAL_RANK/WORLD_SIZE, no sockets: `unknown`, "its sockets could not be
    read". It now sends torchrun's named rendezvous variables and its TCP connections' other ends in the look it
    already makes, and the local reading names the wait: rank-missing, from launch and from status alike."""
    there, here = tmp_path / "there", tmp_path / "here"
    there.mkdir()
    here.mkdir()
    shutil.copy(JOBS / "ddp_cpu" / "positional.py", there / "train.py")
    port = _port()
    endpoint = f"127.0.0.1:{port}"
    job = [TORCHRUN, "--nnodes=2", "--nproc_per_node=1", *_rendezvous("c10d", port)[0], "train.py"]
    env = infra.env()
    try:
        p = dfdoctor("launch", "--target", infra.ssh_target, "--no-check", "--cwd", str(there), "--log",
                     str(there / "train.log"), "--watch", "40", "--format", "json", "--", *job, cwd=here, env=env,
                     timeout=180)
        assert p.stdout.strip(), (p.returncode, p.stderr)
        launched = json.loads(p.stdout)
        p2 = dfdoctor("status", "--watch", "2", "--format", "json", cwd=here, env=env, timeout=180)
        assert p2.stdout.strip(), (p2.returncode, p2.stderr)
        status = json.loads(p2.stdout)
    finally:
        kill_runs(tmp_path)
    for rc, rep in ((p.returncode, launched), (p2.returncode, status)):
        v, text = rep["verdict"], text_of(rep)
        assert rc == 1 and v["state"] == "failed" and v["cause"] == causes.RANK_MISSING, text
        assert "--nnodes=2 asks for 2 nodes" in v["summary"] and "gives up after 300 s" in v["summary"], text
        assert f"waits at {endpoint} (c10d rendezvous)" in v["summary"], v["summary"]
        assert any(f"holds a connection to its rendezvous endpoint {endpoint}" in e for e in v["evidence"]), text
        assert "0 of 2" not in v["summary"] and "--nnodes=1" in v["fix"], text


@pytest.mark.slow
def test_on_an_ssh_target_a_rank_polling_its_own_store_waits_for_the_missing_rank_not_a_download(
        infra: Infra, tmp_path, dfdoctor):
    """tests/test_silent_helpers.py's wait on a --target (no py-spy there): rank 1 sleeps before
    init_process_group, rank 0 polls its socket to the rendezvous store. Its other end is MASTER_ADDR:MASTER_PORT
    of rank 0's own environment, which the target's agent did not send: a socket to somewhere, `waiting-on-network`
    with a download's fix. The agent now sends those named variables and each rank's connections: rank-missing,
    rank 1 named with no connection to the store, as here."""
    there, here = tmp_path / "there", tmp_path / "here"
    there.mkdir()
    here.mkdir()
    env = infra.env()
    try:
        p = dfdoctor("launch", "--target", infra.ssh_target, "--no-check", "--cwd", str(there), "--watch", "40",
                     "--format", "json", "--", "env", "PYTHONUNBUFFERED=1", TORCHRUN, "--nproc_per_node", "2",
                     str(JOBS / "ddp_never_joins.py"), cwd=here, env=env, timeout=180)
    finally:
        kill_runs(tmp_path)
    assert p.stdout.strip(), (p.returncode, p.stderr)
    rep = json.loads(p.stdout)
    v, text = rep["verdict"], text_of(rep)
    assert p.returncode == 1 and v["cause"] == causes.RANK_MISSING, text
    assert "rank 1 never arrived at the rendezvous; rank 0 waits for it on the rendezvous store" in v["summary"], text
    assert "HF_HUB_OFFLINE" not in text and "download" not in text, text
    assert any("rank 1 (pid" in e and "no connection to the rendezvous store" in e for e in v["evidence"]), text


def _rendezvous(kind: str, port: int) -> tuple:
    """torchrun's options for a rendezvous of that kind at 127.0.0.1:port, and the words of its time limit."""
    if kind == "c10d":
        return (["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv-conf=join_timeout=300"],
                "gives up after 300 s")
    return ["--node_rank=0", "--master_addr=127.0.0.1", f"--master_port={port}"], "gives up after 600 s"
