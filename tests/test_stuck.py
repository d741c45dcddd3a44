"""Stuck jobs explained (issue 23): real jobs that sit there, each named within 30 s of going quiet from the stacks
of every process of the job; a job is called running only once settled; "quiet" is the job's own rhythm."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psutil
import pytest

from dfdoctor.diagnose.stuck import WHOLE_JOB
from dfdoctor.launch import local, spawn
from jobs.harness import JOBS, PY, job, kill_runs, launch, status, text_of, wait_for

TORCHRUN = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # a free port each
NAMED_WITHIN_S = 30.0  # from going quiet to the verdict
SLOW_IMPORT_S = 12.0  # jobs/slowimport.py's import, as `import torch` on a loaded machine


@pytest.fixture
def work(tmp_path: Path):
    """A scratch folder; every process of every run in it (torchrun's ranks included) is killed afterwards."""
    yield tmp_path
    kill_runs(tmp_path)


def _left_alive(rep: dict) -> list[int]:
    """Pids the verdict's stop line names that still run (kill_runs must leave none)."""
    line = next((e for e in rep["verdict"]["evidence"] if e.startswith(WHOLE_JOB)), "")
    return [int(p) for p in re.findall(r"\d+", line[len(WHOLE_JOB):]) if psutil.pid_exists(int(p))]


def _named(rep: dict, took: float, quiet_from: Optional[float] = None) -> None:
    """The verdict came early (well before the 60 s watch) and within NAMED_WITHIN_S of the job going quiet.
    `quiet_from`: how far into the launch the job went quiet; by default the job's own time from its start to its
    last line, as its recorder saw them (`_own_s`): a start-up is the job's (three imports of torch under torchrun
    took 15-20 s of CI's 30 s at load 19), the watch's part is the rest, dfdoctor's own start included."""
    own = _own_s(rep) if quiet_from is None else quiet_from
    assert took - own < NAMED_WITHIN_S, (f"named {took - own:.1f} s after going quiet ({took:.1f} s in all, "
                                         f"{own:.1f} s of them the job's own before):\n{text_of(rep)}")


def _own_s(rep: dict) -> float:
    """Seconds from the job's start to its last output, both on its recorder's clock (0: it printed nothing, or
    printed again after the verdict, so its last line says nothing of when it went quiet)."""
    times = {e["event"]: e["t"] for e in rep["timeline"] if e["event"] in ("spawned", "verdict")}
    try:
        last = json.loads((Path(rep["run"]["dir"]) / "heartbeat").read_text()).get("last_output_t")
    except (OSError, ValueError):
        return 0.0
    if not last or "spawned" not in times or "verdict" not in times or last > times["verdict"]:
        return 0.0
    return max(0.0, last - times["spawned"])


@pytest.mark.parametrize("rank0", ["", "slow0"])
def test_a_rank_that_never_joins_is_named_with_its_line(work, rank0):
    """Three ranks: rank 1 held up before init_process_group, rank 2 ended (exit 0) before it, rank 0 waiting
    there for both. `slow0`: rank 0 still works on its way there while the others are seen (round 21, CI's load:
    rank 0 still importing torch); no rank is left behind by a lazy backend while one may still arrive."""
    t0 = time.monotonic()
    proc, rep = launch(work, *TORCHRUN[:-1], "3", job("ddp_never_joins.py")[1], *([rank0] if rank0 else []),
                       watch=60, log=None)
    took = time.monotonic() - t0
    v = rep["verdict"]
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == "rank-missing", text_of(rep)
    assert v["summary"].startswith("ranks 1, 2 never arrived in init_process_group; rank 0 waits"), v["summary"]
    assert any("rank 1 (pid" in e and "ddp_never_joins.py:7" in e for e in v["evidence"]), text_of(rep)
    # --standalone: the rendezvous is this node's alone, so a rank no process here has ended or died; it is not
    # on another node (round 18 said "no such process here (on another node, or it died)")
    assert "rank 2: no such process here (it ended or died: --standalone starts every rank on this node)" in \
        v["evidence"] and not any("another node" in e for e in v["evidence"]), text_of(rep)
    assert any("(rank 0): rendezvous" in e for e in v["evidence"]), text_of(rep)  # every process has its line
    assert any("(torchrun)" in e for e in v["evidence"]), text_of(rep)
    # --standalone: one node's rendezvous, every rank started here; no other node to start with MASTER_ADDR
    # (round 18: the fix said "A rank on another node must be started with the same MASTER_ADDR/MASTER_PORT")
    assert "MASTER_ADDR" not in v["fix"] and "another node" not in v["fix"], v["fix"]
    _named(rep, took)
    pids = _left_alive(rep)
    assert len(pids) >= 3  # torchrun and both ranks, in the stop line
    assert f"`dfdoctor stop {rep['run']['id']}`" in text_of(rep)  # the advice ends them all, never `kill PID`
    kill_runs(work)
    assert wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids),
                    10), "a rank was left behind"


def test_rank_0_that_ended_without_its_peer_names_the_rank_that_never_joined(work):
    """Lazy init (gloo with TORCH_GLOO_LAZY_INIT=1, as NCCL on an H200): rank 0's init_process_group returns
    without rank 1 and rank 0 exits 0; rank 1 sleeps before its init_process_group. Nobody waits in the group,
    so this was `sleeping` (unknown): it is rank-missing, naming rank 1's line and rank 0 as ended."""
    import os
    t0 = time.monotonic()
    proc, rep = launch(work, *TORCHRUN, job("ddp_rank0_leaves.py")[1], watch=60, log=None,
                       env={**os.environ, "TORCH_GLOO_LAZY_INIT": "1"})
    took = time.monotonic() - t0
    v = rep["verdict"]
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == "rank-missing", text_of(rep)
    assert v["summary"].startswith("rank 1 never joined the process group; rank 0 already ended"), v["summary"]
    assert any("rank 1 (pid" in e and "ddp_rank0_leaves.py:8" in e and "no connection to the rendezvous store"
               in e for e in v["evidence"]), text_of(rep)
    assert any("(torchrun)" in e for e in v["evidence"]), text_of(rep)  # every process has its stack excerpt
    _named(rep, took)
    kill_runs(work)


@pytest.fixture(scope="module")
def skips_an_all_reduce(tmp_path_factory):
    """One launch of the job whose rank 1 skips an all_reduce (torchrun, an agent and two ranks: three imports of
    torch, ~4.5 CPU-s), its hang left running, for the two tests that read it: the launch's verdict, and `status`'s
    own later (it looks at the job afresh). Each launched its own before. tests/conftest.py runs both on one
    worker; the status test ends the job once it has its answer."""
    work = tmp_path_factory.mktemp("skips-an-all-reduce")
    t0 = time.monotonic()
    proc, rep = launch(work, *TORCHRUN, job("ddp_skips_collective.py")[1], watch=60, log=None)
    try:
        yield work, proc, rep, time.monotonic() - t0
    finally:
        kill_runs(work)


def test_a_rank_that_skips_an_all_reduce_is_named(skips_an_all_reduce):
    _, proc, rep, took = skips_an_all_reduce
    v = rep["verdict"]
    assert v["state"] == "failed" and v["cause"] == "collective-hang", text_of(rep)
    assert "rank 0 waits in all_reduce" in v["summary"] and "rank 1 never joined it" in v["summary"], v["summary"]
    assert any("rank 1 (pid" in e and "ddp_skips_collective.py:14" in e for e in v["evidence"]), text_of(rep)
    _named(rep, took)


def test_a_rank_that_dies_after_logging_is_never_called_running(work):
    """Both ranks log steadily for 3 s, then rank 1 exits 1: the old watch said running after 2 s of output."""
    proc, rep = launch(work, *TORCHRUN, job("ddp_rank_dies_late.py")[1], watch=60, log=None)
    assert rep["verdict"]["state"] != "running", text_of(rep)
    assert proc.returncode == 1 and "rank 1" in text_of(rep), text_of(rep)


def test_a_dataloader_worker_that_blocks(work):
    t0 = time.monotonic()
    proc, rep = launch(work, *job("loader_worker_blocks.py"), watch=60)
    v = rep["verdict"]
    assert v["cause"] == "dataloader-stuck" and v["state"] == "failed", text_of(rep)
    assert "worker pid" in v["summary"] and "__getitem__" in v["summary"] and "loader_worker_blocks.py:15" in \
        v["summary"], v["summary"]
    _named(rep, time.monotonic() - t0)


def test_a_job_waiting_for_input(work):
    cmd = f"sleep 120 | {PY} {job('asks_input.py')[1]}"  # stdin: a pipe that never delivers
    t0 = time.monotonic()
    proc, rep = launch(work, "sh", "-c", cmd, watch=60)
    v = rep["verdict"]
    assert v["cause"] == "waiting-for-input" and "asks_input.py:3" in v["summary"], text_of(rep)
    _named(rep, time.monotonic() - t0)


def test_a_flock_held_by_another_process(work):
    lock = work / "data.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,sys,time; f=open(sys.argv[1],'w'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
                               str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        proc, rep = launch(work, *job("takes_lock.py", str(lock)), watch=60)
        v = rep["verdict"]
        assert v["cause"] == "waiting-on-lock" and v["state"] == "failed", text_of(rep)
        assert str(lock) in v["summary"] and f"pid {holder.pid}" in v["summary"], v["summary"]
        assert "takes_lock.py:7" in v["summary"]
        _named(rep, time.monotonic() - t0)
    finally:
        holder.kill()
        holder.wait()


def test_a_sleeping_script_is_said_silent_where_it_sleeps_and_is_no_failure(work):
    """Issue 34: a job that printed once and sleeps through its setup is alive and nothing shows it broken:
    `running` (exit 0) with where it sleeps, one age in plain words, and no "settle time"."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("sleeps.py"), watch=60)
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running" and v["cause"] == "sleeping", text_of(rep)
    assert re.search(r"silent: no line for \d+ s: time\.sleep, called from \S*sleeps\.py:5\.$", v["summary"]), v
    assert re.match(r"running for \d+ s; last line \d+ s ago$", v["evidence"][0]), text_of(rep)
    assert not any("settle time" in e for e in v["evidence"]), text_of(rep)
    _named(rep, time.monotonic() - t0)


def test_a_working_job_whose_output_is_buffered(work):
    """It printed a warning on stderr, so the old rule (nothing written at all) missed it: 'running'."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("works_buffered.py"), watch=60)
    v = rep["verdict"]
    assert v["state"] == "failed" and v["cause"] == "output-buffered", text_of(rep)
    assert "is working" in v["summary"] and "works_buffered.py" in v["summary"], v["summary"]
    _named(rep, time.monotonic() - t0)


@pytest.mark.slow
def test_a_job_seen_importing_is_not_called_buffered_for_its_import_time(work):
    """Round 16 (the public corpus's word_language_model at load 24): a job seen importing for 12 s (torch on a
    loaded machine), then working 6 s into its block buffer before its save into a missing folder, was called
    `output-buffered` at the first look past its imports (silent "for 15 s", its start counted). A buffer
    explains only the silence since a look saw it past its imports: the job reaches its own failure."""
    proc, rep = launch(work, *job("imports_slowly_then_saves.py", "6"), watch=60, log=None)
    v = rep["verdict"]
    assert v["cause"] == "output-dir-missing" and proc.returncode == 1, text_of(rep)
    assert "checkpoints" in text_of(rep), text_of(rep)


@pytest.mark.slow
def test_a_job_seen_importing_is_called_buffered_once_it_worked_silently_past_its_imports(work):
    """The same job working on: `output-buffered` once it has been silent BUFFERED_AFTER_S past the look that saw
    it past its imports, and the evidence says how much of its silence that is."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("imports_slowly_then_saves.py", "600"), watch=60, log=None)
    v = rep["verdict"]
    assert v["state"] == "failed" and v["cause"] == "output-buffered", text_of(rep)
    assert any(re.search(r"\d+ s of that silence since a look saw it past its imports", e) for e in v["evidence"]), \
        text_of(rep)
    _named(rep, time.monotonic() - t0, quiet_from=SLOW_IMPORT_S)  # quiet, as a buffer is, once past its import


def test_a_job_printing_every_4_s_is_running_for_status(work):
    """status watches 3 s: a job printing every 4 s was 'did not grow lately' on every status."""
    proc, rep = launch(work, *job("prints_every.py", "4"), watch=0)
    assert wait_for(lambda: (work / "train.log").exists() and (work / "train.log").read_text().count("step") >= 4,
                    40)
    for _ in range(2):
        _, st = status(work)
        v = st["verdict"]
        assert v["state"] == "running" and "log is growing" in v["summary"], text_of(st)
        assert any("prints every ~4" in e for e in v["evidence"]), text_of(st)


def test_settle_time_holds_running_back_and_is_capped_by_the_watch(work):
    """A job that shows no loop (its lines carry no step number) waits out the settle time."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("no_step_line.py", "30"), watch=30, extra=("--settle", "6"))
    took = time.monotonic() - t0
    assert rep["verdict"]["state"] == "running" and took >= 6, (took, text_of(rep))
    assert any("running is said after 6 s of output" in e for e in rep["verdict"]["evidence"]), text_of(rep)
    assert not any("in its loop" in e for e in rep["verdict"]["evidence"]), text_of(rep)
    proc, rep = launch(work, *job("no_step_line.py", "30"), watch=5, log="other.log", extra=("--settle", "60"))
    assert rep["verdict"]["state"] == "running", text_of(rep)
    assert any("running is said after 5 s of output" in e for e in rep["verdict"]["evidence"]), text_of(rep)


def test_a_job_in_its_loop_is_running_before_its_settle_time(work):
    """Issue 20: "running" in 10 s. A job that prints its step line again and again is past its start: it is
    called running once that shows (a few seconds), not after the settle time."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("healthy.py", "60"), watch=60, extra=("--settle", "30"))
    took = time.monotonic() - t0
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running" and took < 20, (took, text_of(rep))
    assert any('in its loop: "step # loss #" printed' in e for e in v["evidence"]), text_of(rep)


def test_a_warm_up_about_to_end_is_not_the_loop_and_the_silence_after_it_is_named(work):
    """A loop that counts to a total it reaches within the settle time is a phase (the bundled trainer's target
    steps before its drafters compile): after it the job goes silent, and that silence is what is named."""
    t0 = time.monotonic()
    proc, rep = launch(work, *job("warmup_then_sleeps.py"), watch=60)
    v = rep["verdict"]
    assert v["state"] == "running" and v["cause"] == "sleeping" and "silent" in v["summary"], text_of(rep)
    assert not any("in its loop" in e for e in v["evidence"]), text_of(rep)
    _named(rep, time.monotonic() - t0, quiet_from=12.0)


def test_one_line_after_a_long_silence_is_not_output_growing_again(work):
    """Output counted since the start made one line after 12 quiet seconds steady again: the job was called
    running at that line, though it died 3 s later. After a silence the job shows its pace anew."""
    proc, rep = launch(work, *job("quiet_then_one_line_then_dies.py"), watch=40)
    v = rep["verdict"]
    assert v["state"] == "failed" and v["cause"] == "input-missing", text_of(rep)


def test_a_wait_seen_just_after_the_job_wrote_explains_no_silence(work):
    """CI: the watch judged a job quiet, and while it looked at the stacks the job printed a line and went to
    sleep; both looks showed the sleep, and "sleeping, nothing written for 12 s" was said of a job that had
    just written. A look during which the job wrote proves no wait: the watch goes on, and names the sleep only
    from a look over a true silence."""
    run_dir = work / "run"
    run_dir.mkdir()
    proc = spawn.start(job("wakes_on_usr1.py"), cwd=work, env=dict(os.environ), python=PY, run_id="wakes",
                       run_dir=run_dir, log=None)
    beat = lambda: json.loads((run_dir / "heartbeat").read_text() or "{}")  # noqa: E731
    looks: list[float] = []

    def sample(run, watched_s):
        if not looks:  # the job writes after the watch read its record, before the stacks are looked at
            before = beat().get("last_output_t")
            os.kill(run.job_pid, signal.SIGUSR1)
            assert wait_for(lambda: beat().get("last_output_t") != before, 10)
        looks.append(time.monotonic())
        return local.sample_stuck(run, watched_s)

    try:
        run, facts = local.watch(local.RunSource(run_dir, proc, 40.0, sample=sample))
        assert facts is not None and facts.stuck is not None and facts.stuck.cause == "sleeping", facts
        assert len(looks) >= 2, "the look the job wrote during was taken as the verdict"
    finally:
        kill_runs(work)
        proc.wait(10)


@pytest.mark.parametrize("silent", ["0", "6"])
def test_a_start_that_repeats_itself_and_dies_is_never_called_running(work, silent):
    """A model summary printed at once and four shards loaded a second apart look like a loop to a careless
    reading; the job dies 5.5 s after its first line, before training. With 6 silent seconds first (CUDA
    coming up on an H200) it died 11.5 s after its start and was called running at 10.2 s: the settle time
    counts from the first line. The launch must wait and see it die."""
    proc, rep = launch(work, *job("starts_then_dies.py", silent), watch=30)
    v = rep["verdict"]
    assert v["state"] == "failed" and v["cause"] == "input-missing", text_of(rep)
    assert not any("in its loop" in e for e in v["evidence"]), text_of(rep)


def test_status_names_a_collective_hang_later(skips_an_all_reduce):
    """Issue 23: `status` 90 s after the launch said "running, though its log did not grow lately". The run is
    the launch test's (its launch watched until it judged; status judges from its own looks)."""
    work = skips_an_all_reduce[0]
    stdout = next(work.glob(".dfdoctor/runs/*")) / "stdout.log"
    try:
        assert wait_for(lambda: "rank 1 step 2" in stdout.read_text(errors="replace"), 90)
        time.sleep(max(0.0, 8 - (time.time() - stdout.stat().st_mtime)))  # quiet past its rhythm: 8 s since a line
        t0 = time.monotonic()
        proc, st = status(work)
        assert proc.returncode == 1 and st["verdict"]["cause"] == "collective-hang", text_of(st)
        assert "rank 1 never joined it" in st["verdict"]["summary"]
        assert time.monotonic() - t0 < 15
    finally:
        kill_runs(work)  # its answer is in: the hung ranks and torchrun's agent end now, not at the module's end


def test_a_download_from_a_host_that_never_answers(work):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # the kernel accepts the connection; nobody ever answers
    port = server.getsockname()[1]
    try:
        t0 = time.monotonic()
        proc, rep = launch(work, *job("reads_socket.py", str(port)), watch=60)
        v = rep["verdict"]
        assert v["state"] == "unknown" and v["cause"] == "waiting-on-network", text_of(rep)
        assert f"127.0.0.1:{port}" in v["summary"] and "reads_socket.py:8" in v["summary"], v["summary"]
        _named(rep, time.monotonic() - t0)
    finally:
        server.close()


@pytest.mark.parametrize("script,args,verdict", [("ranks_poll_silently.py", (), ("running", "sleeping")),
                                                 ("buffered.py", (), ("failed", "output-buffered"))])
def test_a_loop_of_sleeps_gets_one_verdict_however_far_apart_the_looks(tmp_path, script, args, verdict):
    """A poll loop of 0.2 s sleeps printing nothing (buffered stdout): its ranks wake 5 times a second, which
    the looks counted as 5 or 7 wake-ups as they were 1.0 or 1.3 s apart (a look taken ahead makes them up to 3
    gaps apart), against a threshold of 5: `running [sleeping]` one run, `output-buffered` the next. Asleep in
    the same time.sleep, no CPU: sleeping, whatever the gap. A loop of 0.05 s sleeps that prints (buffered.py)
    stays output-buffered at every gap."""
    from dfdoctor.diagnose import jobstacks, stuck

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    shutil.copy(JOBS / script, tmp_path / script)
    with open(tmp_path / "out.log", "w") as out:
        p = subprocess.Popen([PY, str(tmp_path / script), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                             cwd=tmp_path)
    try:
        wanted = 3 if script.startswith("ranks") else 1
        assert wait_for(lambda: len(psutil.Process(p.pid).children()) + 1 >= wanted and
                        _asleep(p.pid, wanted), timeout=60, step=0.2), "the job did not start"
        for gap in (1.0, 1.5, 2.5):
            samples = jobstacks.sample_job(p.pid, gap_s=gap)
            found = stuck.judge(samples, 30.0)
            woke = [(s.pid, s.wakeups()) for s in samples]  # (what flipped the verdict, said when it fails)
            assert found is not None and (found.state, found.cause) == verdict, (gap, woke, found)
    finally:
        (tmp_path / "stop").touch()  # the ranks end on it, and their parent after them
        try:
            p.wait(timeout=5 if script.startswith("ranks") else 0.01)
        except subprocess.TimeoutExpired:
            for kid in psutil.Process(p.pid).children():
                kid.kill()
            p.kill()
            p.wait()


@pytest.mark.slow
@pytest.mark.parametrize("script,verdict", [("sleeps_tenths.py", ("running", "sleeping")),
                                            ("buffered.py", ("failed", "output-buffered"))])
def test_a_loop_of_tenth_second_sleeps_stays_asleep_under_cpu_load(tmp_path, script, verdict):
    """A silent loop of 0.1 s sleeps, the sleep-loop rule's edge (10 wake-ups a second), with two CPU hogs (CI's
    cores) beside it while it is looked at, five times 1.0 to 2.5 s apart: `running [sleeping]` every time. It was
    `output-buffered` one time in a few: its 10 sleeps ending in 0.99 s were 10.1 a second, load's preemptions of
    the loop between two sleeps counted as wake-ups, and a look that caught it woken, waiting for a core, was a
    look elsewhere. A loop of 0.05 s sleeps that prints (buffered.py) stays output-buffered. Looked at by a
    target's agent (its own code, here), the same: it sends the voluntary switches beside the total. (The job keeps
    its priority: niced under the tests beside it, a loop of 0.05 s sleeps wakes 10 times a second or fewer.)"""
    from dfdoctor.agent import target_agent
    from dfdoctor.diagnose import jobstacks, stacks, stuck
    from dfdoctor.diagnose.look import samples_of

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    shutil.copy(JOBS / script, tmp_path / script)
    with open(tmp_path / "out.log", "w") as out:
        p = subprocess.Popen([PY, str(tmp_path / script)], stdout=out, stderr=subprocess.STDOUT, env=env,
                             cwd=tmp_path)
    hogs: list[subprocess.Popen] = []
    try:
        assert wait_for(lambda: _asleep(p.pid, 1), timeout=60, step=0.2), "the job did not start"
        hogs = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(2)]  # one per core of CI
        said = []
        for gap in (1.0, 1.5, 2.5, 1.0, "agent", "agent"):
            samples = jobstacks.sample_job(p.pid, gap_s=gap) if gap != "agent" else \
                samples_of(target_agent.sample([p.pid], stacks.py_spy()))
            assert all(lk.voluntary is not None for s in samples for lk in s.looks), (gap, samples)
            found = stuck.judge(samples, 30.0, local=gap != "agent")
            said.append((gap, found and (found.state, found.cause),  # and what flipped it, said when it fails
                         [(s.wakeups(), round(s.looks[-1].at - s.looks[0].at, 3), [w.kind for w in x.waits])
                          for s, x in zip(samples, stuck.seen(samples))]))
        assert all(v == verdict for _, v, _ in said), said
    finally:
        for q in (*hogs, p):
            q.kill()
            q.wait()


def _asleep(pid: int, wanted: int) -> bool:
    """The job's processes are all started and past their imports (in their loop)."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children()]
    return len(procs) >= wanted and all(pr.status() == psutil.STATUS_SLEEPING for pr in procs)
