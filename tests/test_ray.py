"""Ray as a placement, against a real Ray 2.60 head (tests/support/ray_head.py): one head for the whole file (a
head is ~630 MiB and 4.5-13 s to start), which is one unit of the test scheduler (tests/conftest.py), so one
worker holds it. Each launch is a real `ray job submit` of a real driver in tests/jobs/ray_*.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import run_dfdoctor
from dfdoctor.ray import submit
from support import ray_head

JOBS = Path(__file__).parent / "jobs"
WATCH = "300"  # the verdicts come in seconds; a loaded CI machine sets up a Ray worker in tens
TIMEOUT_S = 420


# The file's head lives from its first test that asks for it to its last: a module's fixture, ended as the worker
# moves on to its next unit. As a session's it lived on to the worker's last test (round 26's full run: 700 s, of
# which the Ray tests took the first 270; idle, a head spends ~4 % of a core: ~20 CPU-s in that run). The tests
# that need no head come first in the file (the memory-monitor test brings its own), so that it starts late too.
@pytest.fixture(scope="module")
def head():
    h = ray_head.start(Path(sys.executable))
    yield h
    h.end()
    assert h.processes() == [], "the test's Ray head left processes"


def _folder(tmp_path: Path, *jobs: str) -> Path:
    wd = tmp_path / "proj"
    wd.mkdir()
    for j in jobs:
        shutil.copy(JOBS / j, wd / j)
    return wd


def _submit(head, *rest: str) -> list[str]:
    return ["ray", "job", "submit", "--address", head.address, "--working-dir", ".", *rest]


def _launch(head, wd: Path, *line: str, dfdoctor: tuple[str, ...] = ()) -> tuple[dict, float, str]:
    t0 = time.monotonic()
    p = run_dfdoctor("launch", "--watch", WATCH, "--format", "json", *dfdoctor, "--", *_submit(head, *line), cwd=wd,
                     env=head.env, timeout=TIMEOUT_S)
    took = time.monotonic() - t0
    doc = json.loads(p.stdout)
    print(f"verdict {doc['verdict']['state']} {doc['verdict']['cause']} after {took:.1f} s")
    return doc, took, p.stderr


def _stop(head, wd: Path, ref: str, env: dict | None = None) -> str:
    p = run_dfdoctor("stop", ref, cwd=wd, env=env or head.env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_a_ray_submit_line_is_read_as_rays_cli_reads_it(tmp_path):
    line = ["ray", "job", "submit", "--address=http://h:8265", "--working-dir", "src", "--entrypoint-num-gpus",
            "2", "--runtime-env-json", '{"pip": ["x==1"]}', "--", "python", "train.py", "--lr", "1"]
    sub = submit.parse(line, tmp_path, {"RAY_ADDRESS": "http://other:8265"})
    assert (sub.address, sub.address_from) == ("http://h:8265", "--address")
    assert sub.working_dir == tmp_path / "src" and sub.script == "train.py" and sub.wants == {"GPU": 2.0}
    assert sub.entrypoint == ["python", "train.py", "--lr", "1"]
    again = submit.with_id(sub, "dfdoctor-1")
    assert again[:6] == ["ray", "job", "submit", "--no-wait", "--submission-id", "dfdoctor-1"]
    assert again[6:] == line[3:]
    env_only = submit.parse(["ray", "job", "submit", "--", "python", "t.py"], tmp_path, {"RAY_ADDRESS": "h:1"})
    assert (env_only.address, env_only.address_from) == ("h:1", "RAY_ADDRESS")
    assert submit.http_address(env_only.address) == "http://h:1"


def test_a_driver_whose_output_ends_in_a_missing_module_is_named_before_ray_says_failed(tmp_path):
    """Issue 45: Ray's first word on a missing module is the driver's traceback in its log, 0.4-0.7 s before its
    FAILED. The real driver's own output (run here: it fails the same way at the same import), read while Ray says
    RUNNING, is the verdict; the same traceback with output after it (a program that printed it and lives on) is
    none."""
    from dfdoctor.ray.rules import Seen, missing_module
    shutil.copy(JOBS / "ray_missing_module.py", tmp_path / "ray_missing_module.py")
    p = subprocess.run([sys.executable, "ray_missing_module.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "Traceback (most recent call last)" in p.stderr, p.stderr
    running = Seen("j", "http://h:8265", job={"status": "RUNNING"}, logs="Running entrypoint for job j\n" + p.stderr)
    v = missing_module(running)
    assert v is not None and v.cause == "missing-module" and "dfdoctor_no_such_module_for_ray" in v.summary, v
    assert any("Ray still said RUNNING" in e for e in v.evidence), v.evidence
    # a missing name may be a typo: the runtime env's pip line is offered only as what to do if it is meant (#43)
    assert "typo" in v.fix and "unrelated project" in v.fix and v.fix.index("typo") < v.fix.index("pip"), v.fix
    assert missing_module(Seen("j", "h", job={"status": "RUNNING"}, logs=p.stderr + "step 1: retrying\n")) is None
    assert missing_module(Seen("j", "h", job={"status": "PENDING"}, logs=p.stderr)) is None


def test_check_says_nothing_answers_at_the_address(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a port nothing listens on
    wd = _folder(tmp_path, "ray_steps.py")
    p = run_dfdoctor("check", "--format", "json", "--", "ray", "job", "submit", "--address",
                     f"http://127.0.0.1:{port}", "--working-dir", ".", "--", "python", "ray_steps.py", cwd=wd)
    doc = json.loads(p.stdout)
    rec = {r["id"]: r for r in doc["checks"]}
    assert p.returncode == 1 and rec["ray.address"]["status"] == "fail", p.stdout
    assert rec["ray.address"]["cause"] == "target-unreachable" and "Connection refused" in \
        " ".join(rec["ray.address"]["evidence"])
    assert rec["ray.resources"]["status"] == "skip"


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a port nothing listens on
    return port


def test_a_runtime_env_file_is_read_as_rays_cli_reads_it_and_the_checks_after_it_see_what_it_holds(tmp_path):
    """`--runtime-env FILE.yaml` is read here by Ray's CLI before it submits: a file not there or YAML that does
    not parse fails the submission at once; a good one's working_dir and pip list are what Ray uploads and
    installs, so ray.working_dir and ray.requirements read them (before, they saw no runtime env at all)."""
    wd = _folder(tmp_path, "ray_steps.py")

    def checks(*runtime_env: str) -> dict:
        p = run_dfdoctor("check", "--format", "json", "--", "ray", "job", "submit", "--address",
                         f"http://127.0.0.1:{_free_port()}", *runtime_env, "--", "python", "ray_steps.py", cwd=wd)
        return {r["id"]: r for r in json.loads(p.stdout)["checks"]}

    rec = checks("--runtime-env", "env.yaml")["ray.runtime_env"]
    assert rec["status"] == "fail" and rec["cause"] == "input-missing", rec
    assert f"--runtime-env {wd / 'env.yaml'} cannot be read here" in rec["summary"], rec
    (wd / "env.yaml").write_text("working_dir: src\npip:\n  - torch\n - numpy\n")
    rec = checks("--runtime-env", "env.yaml")["ray.runtime_env"]
    assert rec["status"] == "fail" and rec["cause"] == "config-invalid", rec
    assert "is not valid YAML" in rec["summary"] and "line 4" in rec["summary"], rec
    (wd / "env.yaml").write_text("working_dir: src\npip: reqs.txt\n")
    rec = checks("--runtime-env", "env.yaml")
    assert rec["ray.runtime_env"]["status"] == "ok" and rec["ray.runtime_env"]["summary"].endswith("pip, working_dir")
    assert rec["ray.working_dir"]["status"] == "fail" and f"{wd / 'src'} is not a folder" in \
        rec["ray.working_dir"]["summary"], rec["ray.working_dir"]
    assert rec["ray.requirements"]["cause"] == "input-missing" and "reqs.txt is not there" in \
        rec["ray.requirements"]["summary"], rec["ray.requirements"]
    both = checks("--runtime-env", "env.yaml", "--runtime-env-json", "{}")["ray.runtime_env"]
    assert both["status"] == "warn" and "only one of --runtime-env and --runtime-env-json" in both["summary"], both
    bad_json = checks("--runtime-env-json", "{pip: [x]}")["ray.runtime_env"]
    assert bad_json["status"] == "fail" and "is not valid JSON" in bad_json["summary"], bad_json


def _memory_used() -> tuple[float, int]:
    """The machine's memory in use, as Ray's memory monitor counts it (MemTotal - MemAvailable), and its total."""
    info = {line.split(":")[0]: int(line.split()[1]) << 10 for line in Path("/proc/meminfo").read_text().splitlines()}
    return (info["MemTotal"] - info["MemAvailable"]) / info["MemTotal"], info["MemTotal"]


@pytest.mark.slow
def test_a_task_rays_memory_monitor_kills_is_named_with_its_numbers(tmp_path):
    """A real kill by Ray's memory monitor, on a head of its own whose threshold (RAY_memory_usage_threshold) is
    above what the machine uses as it starts (15 % of it, about 3.5 GB here: the head takes about 0.9 of it). The
    task allocates 128 MiB at a time until killed, at most 8 GiB and never below 3 GiB available: the machine is
    shared, and what others use moves by GBs, which the cap leaves room for. With 6 % (0.5 GB beyond the head) a
    full run's other tests once filled the node before the task held anything, and the monitor took Ray's own
    supervisor of the job (tests/test_ray_oom_victim.py says how that reads). It comes before the file's tests
    that share a head, so that one is not started yet: the two heads never idle side by side."""
    used, total = _memory_used()
    if total * (1 - used) < 12 << 30:
        pytest.skip(f"only {total * (1 - used) / 2**30:.1f} GiB free here: the test may allocate 8 GiB")
    h = ray_head.start(Path(sys.executable), settings={"RAY_memory_usage_threshold": f"{used + 0.15:.3f}"})
    try:
        wd = _folder(tmp_path, "ray_memory_hog.py")
        doc, took, _ = _launch(h, wd, "--", "python", "ray_memory_hog.py", "8192")
    finally:
        h.end()
    v = doc["verdict"]
    assert v["cause"] == "ray-actor-oom" and v["summary"].startswith("Ray's memory monitor killed hog: it held "), v
    assert "the node was at " in v["summary"] and "threshold" in v["summary"], v
    assert any("Selected to kill" in e and "task name=hog" in e for e in v["evidence"]), v


def test_a_ray_target_is_the_heads_job_server_and_never_ray_clients_port(tmp_path):
    """`--target ray://HEAD[:PORT]` names the head's job server (8265 by default); to Ray, ray://HOST:10001 is
    its Client server, which takes no job: refused, with the difference said. A line with another --address is
    two clusters."""
    from dfdoctor.ray import targets
    assert targets.line_for("ray://head", ["python", "t.py"]) == [
        "ray", "job", "submit", "--address", "http://head:8265", "--working-dir", ".", "--", "python", "t.py"]
    assert targets.line_for("ray://h:9000", ["ray", "job", "submit", "--", "python", "t.py"])[:5] == [
        "ray", "job", "submit", "--address", "http://h:9000"]
    # and back: the report's target for a line's address (one ray:// cannot say stays the job API's URL)
    assert [targets.spelled(a) for a in ("http://h:8265", "h:9000", "https://h:443", "http://h")] == [
        "ray://h:8265", "ray://h:9000", "https://h:443", "http://h"]
    for spec, line, words in (("ray://127.0.0.1:10001", ["python", "t.py"], "10001 is Ray Client's port"),
                              ("ray://127.0.0.1:9", ["ray", "job", "submit", "--address", "http://x:8265", "--",
                                                     "python", "t.py"], "name two clusters")):
        p = run_dfdoctor("check", "--target", spec, "--", *line, cwd=tmp_path)
        assert p.returncode == 2 and words in p.stderr, p.stderr


@pytest.mark.slow
def test_check_blocks_an_entrypoint_no_node_can_hold_and_a_script_not_in_the_working_dir(head, tmp_path):
    wd = _folder(tmp_path, "ray_steps.py")
    p = run_dfdoctor("check", "--format", "json", "--", *_submit(head, "--entrypoint-num-gpus", "1", "--",
                                                                 "python", "ray_stepz.py"),
                     cwd=wd, env=head.env, timeout=TIMEOUT_S)
    rec = {r["id"]: r for r in json.loads(p.stdout)["checks"]}
    assert p.returncode == 1 and rec["ray.address"]["status"] == "ok", p.stdout
    assert rec["ray.resources"]["status"] == "fail" and rec["ray.resources"]["cause"] == "ray-infeasible-resources"
    assert "GPU=1" in rec["ray.resources"]["summary"] and "CPU=2" in " ".join(rec["ray.resources"]["evidence"])
    assert rec["ray.script"]["status"] == "fail" and "ray_stepz.py is not in the working_dir" in \
        rec["ray.script"]["summary"]
    # and launch submits nothing: Ray would hold it PENDING for 15 minutes and its stop could not end it
    q = run_dfdoctor("launch", "--format", "json", "--", *_submit(head, "--entrypoint-num-gpus", "1", "--",
                                                                  "python", "ray_steps.py"),
                     cwd=wd, env=head.env, timeout=TIMEOUT_S)
    doc = json.loads(q.stdout)
    assert q.returncode == 1 and doc["verdict"]["cause"] == "ray-infeasible-resources", q.stdout
    assert "Not submitted" in doc["verdict"]["summary"] and not (wd / ".dfdoctor" / "runs").exists()


@pytest.mark.slow
def test_a_task_no_node_can_place_is_named_while_ray_says_running_and_stop_ends_the_job(head, tmp_path):
    wd = _folder(tmp_path, "ray_gpu_task.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_gpu_task.py")
    v = doc["verdict"]
    assert v["cause"] == "ray-infeasible-resources" and "train_step asks for GPU=1" in v["summary"], v
    assert doc["run"]["ray"]["status"] == "RUNNING"  # Ray's own word: it would never say more
    said = _stop(head, wd, doc["run"]["id"])
    assert "it was RUNNING" in said and "Ray now says STOPPED" in said and "nothing of the job is left" in said
    p = run_dfdoctor("status", doc["run"]["id"], "--format", "json", cwd=wd, env=head.env, timeout=TIMEOUT_S)
    assert json.loads(p.stdout)["verdict"]["cause"] == "stopped-by-user"


@pytest.mark.slow
def test_tasks_that_failed_under_a_job_ray_calls_succeeded_are_named(head, tmp_path):
    wd = _folder(tmp_path, "ray_tasks_fail.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_tasks_fail.py")
    v = doc["verdict"]
    assert doc["run"]["ray"]["status"] == "SUCCEEDED" and doc["run"]["exit_code"] == 0, v
    assert v["state"] == "failed" and v["cause"] == "ray-actor-died", v
    assert "2 task(s)" in v["summary"] and "bad record" in v["summary"] and "ray.get" in v["fix"]


@pytest.mark.slow
def test_a_runtime_env_pip_failure_is_named_in_pips_own_words(head, tmp_path):
    wd = _folder(tmp_path, "ray_steps.py")
    doc, took, _ = _launch(head, wd, "--runtime-env-json", '{"pip": ["dfdoctor-no-such-package==0.0.1"]}', "--",
                           "python", "ray_steps.py", dfdoctor=("--skip", "ray.requirements"))  # the watch's word
    v = doc["verdict"]
    assert v["cause"] == "ray-runtime-env-failed", v
    assert "No matching distribution found for dfdoctor-no-such-package==0.0.1" in v["summary"] or \
        "Could not find a version that satisfies the requirement dfdoctor-no-such-package==0.0.1" in v["summary"]
    # read in the node's setup log (logs.py), where pip says it while Ray says PENDING, not from the job's message
    # once Ray says FAILED: the head tries a setup once (tests/support/ray_head.py), so FAILED soon follows
    assert any(e.startswith("runtime_env_setup") and "dfdoctor-no-such-package==0.0.1" in e for e in v["evidence"]), v


@pytest.mark.slow
def test_a_job_whose_driver_prints_steps_is_running_and_status_by_ray_id_sees_it(head, tmp_path):
    wd = _folder(tmp_path, "ray_steps.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_steps.py")
    assert doc["verdict"]["state"] == "running" and doc["run"]["ray"]["status"] == "RUNNING", doc["verdict"]
    job = doc["run"]["ray"]["job_id"]
    p = run_dfdoctor("status", f"ray:{job}", "--watch", "60", "--format", "json", cwd=tmp_path,
                     env={**head.env, "RAY_ADDRESS": head.address}, timeout=TIMEOUT_S)
    assert json.loads(p.stdout)["verdict"]["state"] == "running", p.stdout
    # any Ray job, by its id (the address from RAY_ADDRESS, as Ray's own CLI takes it)
    said = _stop(head, tmp_path, f"ray:{job}", {**head.env, "RAY_ADDRESS": head.address})
    assert f"stopped Ray job {job}" in said and "Ray now says STOPPED" in said, said


@pytest.mark.slow
def test_a_task_waiting_for_cpus_an_actor_holds_is_pending_and_names_the_actor(head, tmp_path):
    wd = _folder(tmp_path, "ray_no_capacity.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_no_capacity.py")
    v = doc["verdict"]
    assert v["state"] == "pending" and v["cause"] == "ray-pending-no-capacity", v
    assert "CPU=1" in v["summary"] and "ParameterServer" in v["summary"] and "CPU 2/2" in v["summary"], v
    said = _stop(head, wd, doc["run"]["id"])
    assert "Ray now says STOPPED" in said


@pytest.mark.slow
def test_check_says_the_cluster_refuses_a_missing_or_wrong_token(head, tmp_path):
    """The head has token auth on (tests/support/ray_head.py); its token is in its HOME, where the other tests
    find it as Ray's own CLI does."""
    wd = _folder(tmp_path, "ray_steps.py")
    line = ["check", "--format", "json", "--", *_submit(head, "--", "python", "ray_steps.py")]
    empty = tmp_path / "home"
    empty.mkdir()
    # (RAY_AUTH_MODE=token names a mode, not a secret: the word "token" is said, not masked)
    for env, words, code in (({"HOME": str(empty)}, "it has token auth on and no token was found", 401),
                             ({"RAY_AUTH_TOKEN": "0" * 64}, "it has token auth on and our token is not its", 403)):
        p = run_dfdoctor(*line, cwd=wd, env={**head.env, **env}, timeout=TIMEOUT_S)
        rec = {r["id"]: r for r in json.loads(p.stdout)["checks"]}["ray.address"]
        assert p.returncode == 1 and rec["status"] == "fail" and words in rec["summary"], rec
        assert f"refused us ({code})" in rec["summary"] and rec["cause"] == "target-unreachable"
    p = run_dfdoctor(*line, cwd=wd, env=head.env, timeout=TIMEOUT_S)
    assert {r["id"]: r for r in json.loads(p.stdout)["checks"]}["ray.address"]["status"] == "ok", p.stdout


@pytest.mark.slow
def test_an_entrypoint_no_node_can_hold_is_named_when_forced_and_stop_says_what_it_could_not_do(head, tmp_path):
    wd = _folder(tmp_path, "ray_steps.py")
    t0 = time.monotonic()
    p = run_dfdoctor("launch", "--force", "--watch", WATCH, "--format", "json", "--",
                     *_submit(head, "--entrypoint-num-gpus", "1", "--", "python", "ray_steps.py"),
                     cwd=wd, env=head.env, timeout=TIMEOUT_S)
    doc = json.loads(p.stdout)
    print(f"verdict {doc['verdict']['cause']} after {time.monotonic() - t0:.1f} s")
    v = doc["verdict"]
    assert v["cause"] == "ray-infeasible-resources" and "the job's entrypoint asks for GPU=1" in v["summary"], v
    assert doc["run"]["ray"]["status"] == "PENDING"
    q = run_dfdoctor("stop", "--grace", "1", doc["run"]["id"], cwd=wd, env=head.env, timeout=120)
    assert q.returncode == 1, q.stdout  # something of the job is left, and said
    assert "it is still PENDING: Ray cannot stop a job whose entrypoint was never placed" in q.stdout, q.stdout
    assert "_ray_internal_job_actor_" in q.stdout and "NOT stopped" in q.stdout


@pytest.mark.slow
def test_a_driver_that_starts_a_private_ray_instance_is_the_wrong_cluster(head, tmp_path):
    """`ray.init(address="local")` in a job's driver: Ray says "Started a local Ray instance" as an INFO line, the
    job stays RUNNING, and later fails blaming an expired package (the private instance has not the working_dir
    the cluster has). dfdoctor names the cluster it did not join."""
    wd = _folder(tmp_path, "ray_private_cluster.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_private_cluster.py")
    v = doc["verdict"]
    assert v["cause"] == "ray-wrong-cluster" and f"did not join the Ray cluster at {head.address}" in v["summary"], v
    assert any("Started a local Ray instance" in e for e in v["evidence"]), v
    assert any("no driver connected to the cluster" in e for e in v["evidence"]) and 'address=\"local\"' in v["fix"]
    assert doc["run"]["ray"]["driver_job_id"] is None
    assert _ray_status(head, doc["run"]["ray"]["job_id"]) == "FAILED"  # by itself: its finally removes its temp dir


def _job_api(head, path: str, body: dict | None = None) -> dict:
    """The head's job API (/api/jobs/...) with its token: GET, or POST of `body`."""
    token = (head.home / ".ray" / "auth_token").read_text().strip()
    req = urllib.request.Request(f"{head.address}/api/jobs/{path}", data=None if body is None else json.dumps(
        body).encode(), headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _ray_status(head, job_id: str, timeout_s: float = 180) -> str:
    """The job's final status, as the job API says it (polled until it is final)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = _job_api(head, job_id)["status"]
        if status in ("FAILED", "SUCCEEDED", "STOPPED") or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


@pytest.mark.slow
def test_a_driver_run_here_says_which_cluster_it_joined_or_that_it_started_a_private_one(head, tmp_path):
    """`launch -- python train.py` whose script calls `ray.init()`: with RAY_ADDRESS set to the head, the report
    says the cluster it joined (Ray's own "Connecting to existing Ray cluster" line); a script that starts a
    private instance all the same (`address="local"`) is ray-wrong-cluster."""
    wd = _folder(tmp_path, "ray_steps.py", "ray_private_cluster.py")
    private = Path(tempfile.mkdtemp(prefix="dfrw", dir="/tmp"))  # short: Ray's socket paths live under it
    env = {**head.env, "RAY_ADDRESS": head.gcs, "DFDOCTOR_TEST_RAY_TMP": str(private)}
    try:
        p = run_dfdoctor("launch", "--watch", WATCH, "--format", "json", "--", sys.executable, "ray_steps.py",
                         cwd=wd, env=env, timeout=TIMEOUT_S)
        doc = json.loads(p.stdout)
        _stop(head, wd, doc["run"]["id"], env)
        assert doc["verdict"]["state"] == "running", doc["verdict"]
        port = head.gcs.rsplit(":", 1)[1]
        joined = [e for e in doc["verdict"]["evidence"] if e.startswith("ray: ")]
        assert len(joined) == 1 and "ray.init() joined the Ray cluster at " in joined[0] and f":{port} " in \
            joined[0] and f"the address {head.gcs} from RAY_ADDRESS" in joined[0], joined
        q = run_dfdoctor("launch", "--watch", WATCH, "--format", "json", "--", sys.executable,
                         "ray_private_cluster.py", cwd=wd, env=env, timeout=TIMEOUT_S)
        doc = json.loads(q.stdout)
        _stop(head, wd, doc["run"]["id"], env)
        v = doc["verdict"]
        assert v["cause"] == "ray-wrong-cluster" and f"did not join the Ray cluster at {head.gcs}" in v["summary"], v
        assert any("started a private local Ray instance" in e and f"RAY_ADDRESS was {head.gcs}" in e
                   for e in v["evidence"]), v
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.slow
def test_stop_lists_a_detached_actor_left_alive_and_status_says_the_stop_in_rays_terms(head, tmp_path):
    wd = _folder(tmp_path, "ray_detached.py")
    doc, took, _ = _launch(head, wd, "--", "python", "ray_detached.py")
    assert doc["verdict"]["state"] == "running", doc["verdict"]
    job = doc["run"]["ray"]["job_id"]
    p = run_dfdoctor("stop", doc["run"]["id"], cwd=wd, env=head.env, timeout=120)
    assert p.returncode == 1, p.stdout  # the job is STOPPED, its detached actor lives on: said, and exit 1
    assert "Ray now says STOPPED" in p.stdout and "left alive: detached actor Cache dfdoctor_test/" \
        "dfdoctor_test_cache (ALIVE" in p.stdout, p.stdout
    assert "ray.kill(ray.get_actor('dfdoctor_test_cache', namespace='dfdoctor_test'))" in p.stdout
    assert p.stdout.strip().splitlines()[-1].startswith("STILL RUNNING after the stop: Ray job "), p.stdout
    q = run_dfdoctor("status", doc["run"]["id"], "--format", "json", cwd=wd, env=head.env, timeout=TIMEOUT_S)
    v = json.loads(q.stdout)["verdict"]
    assert v["cause"] == "stopped-by-user" and v["summary"].startswith(f"Ray job {job} was stopped by you"), v
    assert any(f"Ray's stop endpoint for job {job} (it was RUNNING; Ray then said STOPPED)" in e
               for e in v["evidence"]) and "ray job submit" in v["fix"], v
    # the fix it printed, done from a driver of the cluster: then nothing of the job is left. A driver run here that
    # joins the head (RAY_ADDRESS, as the driver-run-here test's does) is one: as a job of its own it also took a
    # `dfdoctor launch`, a `ray job submit` and Ray's supervisor actor for the job (~3 CPU-s), which prove nothing here
    kill = subprocess.run([sys.executable, "-c", "import ray; ray.init(); ray.kill(ray.get_actor("
                           "'dfdoctor_test_cache', namespace='dfdoctor_test')); print('killed')"], cwd=wd,
                          env={**head.env, "RAY_ADDRESS": head.gcs}, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert kill.returncode == 0 and "killed" in kill.stdout, kill.stdout + kill.stderr
    deadline = time.monotonic() + 60  # the actor's death reaches the state API a moment after ray.kill returns
    while True:
        again = run_dfdoctor("stop", doc["run"]["id"], cwd=wd, env=head.env, timeout=120)
        if again.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert again.returncode == 0 and "nothing to stop" in again.stdout and "left alive" not in again.stdout, \
        again.stdout


@pytest.mark.slow
def test_check_and_launch_with_a_ray_target_submit_to_that_head_and_name_the_drivers_missing_module(head, tmp_path):
    """The target's line is the `ray job submit` line a user writes for this head (the command is asserted below),
    so its launch is also the test of a driver's missing module, which had a job of its own with the same line."""
    wd = _folder(tmp_path, "ray_missing_module.py")
    target = "ray://" + head.address.split("://", 1)[1]
    p = run_dfdoctor("check", "--format", "json", "--target", target, "--", "python", "ray_missing_module.py",
                     cwd=wd, env=head.env, timeout=TIMEOUT_S)
    doc = json.loads(p.stdout)
    rec = {r["id"]: r for r in doc["checks"]}
    assert p.returncode == 0 and rec["ray.address"]["status"] == "ok" and head.address in \
        rec["ray.address"]["summary"], p.stdout
    assert rec["ray.cli"]["status"] == "ok" and rec["ray.script"]["status"] == "ok", p.stdout
    assert doc["target"] == target, doc["target"]  # the cluster it goes to, never `local`
    q = run_dfdoctor("launch", "--watch", WATCH, "--format", "json", "--target", target, "--", "python",
                     "ray_missing_module.py", cwd=wd, env=head.env, timeout=TIMEOUT_S)
    doc = json.loads(q.stdout)
    v = doc["verdict"]
    assert v["cause"] == "missing-module" and "dfdoctor_no_such_module_for_ray" in v["summary"], v
    # said on Ray's FAILED (the driver's exit code known), or on its traceback, Ray's first word, just before it
    early = any("Ray still said RUNNING" in e for e in v["evidence"])
    assert doc["run"]["exit_code"] == 1 or (early and doc["run"]["exit_code"] is None), doc["run"]
    assert doc["run"]["ray"]["address"] == head.address, q.stdout
    assert doc["command"][:7] == ["ray", "job", "submit", "--address", head.address, "--working-dir", "."]
    assert doc["target"] == target, doc["target"]
    s = run_dfdoctor("status", "--format", "json", cwd=wd, env=head.env, timeout=TIMEOUT_S)
    assert json.loads(s.stdout)["target"] == target, s.stdout


@pytest.mark.slow
def test_a_requirements_file_not_there_and_a_pin_no_index_has_are_said_before_the_submission(head, tmp_path):
    """Ray's CLI reads a runtime env's requirements file here (missing: the submission fails); a pin no index has
    fails on the node only after Ray's retries (49-99 s here). Each name is asked of the index as pip asks it."""
    wd = _folder(tmp_path, "ray_steps.py")

    def line(*rest: str) -> list[str]:
        return [*rest, "--format", "json", "--", *_submit(head, "--runtime-env-json", '{"pip": "reqs.txt"}', "--",
                                                          "python", "ray_steps.py")]
    p = run_dfdoctor(*line("check"), cwd=wd, env=head.env, timeout=TIMEOUT_S)
    rec = {r["id"]: r for r in json.loads(p.stdout)["checks"]}["ray.requirements"]
    assert p.returncode == 1 and rec["status"] == "fail" and rec["cause"] == "input-missing", rec
    assert f"requirements file {wd / 'reqs.txt'} is not there" in rec["summary"]
    (wd / "reqs.txt").write_text("# the job's pins\npackaging>=20\ndfdoctor-no-such-package==0.0.1\n")
    p = run_dfdoctor(*line("check"), cwd=wd, env=head.env, timeout=TIMEOUT_S)
    rec = {r["id"]: r for r in json.loads(p.stdout)["checks"]}["ray.requirements"]
    if rec["status"] == "skip":
        pytest.skip(f"no package index answers here: {rec['evidence']}")
    assert rec["status"] == "fail" and rec["cause"] == "ray-runtime-env-failed", rec
    assert "no distribution for 1 of the runtime env's 2 pin(s)" in rec["summary"], rec
    assert rec["evidence"][0] == "dfdoctor-no-such-package==0.0.1: ERROR: No matching distribution found for " \
        "dfdoctor-no-such-package", rec
    t0 = time.monotonic()
    q = run_dfdoctor(*line("launch"), cwd=wd, env=head.env, timeout=TIMEOUT_S)
    doc = json.loads(q.stdout)
    assert q.returncode == 1 and doc["verdict"]["cause"] == "ray-runtime-env-failed", doc["verdict"]
    assert "Not submitted" in doc["verdict"]["summary"] and not (wd / ".dfdoctor" / "runs").exists()
    print(f"named before the submission in {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_the_watch_looks_again_as_soon_as_the_job_api_says_the_job_ended(head):
    """Between two looks the job API alone is asked every 0.2 s, and a young driver's output every 0.05 s: a pause
    of 60 s ends once Ray says it, in the driver's traceback (a missing module) or as FAILED, so the verdict is not
    a second late."""
    from dfdoctor.ray.api import Api
    from dfdoctor.ray.rules import Seen
    from dfdoctor.ray.watch import RaySource
    from dfdoctor.ray import logs
    job = f"dfdoctor-test-quick-{time.time_ns()}"
    # submitted as `ray job submit --no-wait` does, by the job API, with no `ray` process here (~1.3 CPU-s, 3-6 s
    # under load) and no working_dir to set up: the driver fails at the same import all the same
    _job_api(head, "", {"entrypoint": "python -c 'import ray; import dfdoctor_no_such_module_for_ray'",
                        "submission_id": job})
    api = Api(head.address, submit.token(head.env))
    source = RaySource(api, job, Seen(job, head.address), 300, 0, lambda n, d: None, logs.SetupLogs(api))
    t0 = time.monotonic()
    source.pause(60.0)
    took = time.monotonic() - t0
    said = "No module named 'dfdoctor_no_such_module_for_ray'" in (source.last_words or "")
    assert (said or api.job(job)["status"] == "FAILED") and took < 50, took  # 60 s: no quick look
    print(f"the pause ended {took:.1f} s after the submission returned")
