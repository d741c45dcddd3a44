"""Running is earned (issue 41): a live job is `running` (exit 0) only on evidence of progress, and a job whose
every thread waits on something only the job could end, with nothing moving between two looks, is named stuck
with its wait, its line and why nothing ends it (exit 1), in `launch` and again in `status`. The healthy slow
(a warm-up asleep, an evaluation that computes without printing, a slow logger, a download that trickles in)
stay `running`. Real jobs from tests/jobs, launched for real."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from dfdoctor.diagnose import stacks
from infra.fixtures import infra  # noqa: F401
from infra.slurm_fixtures import slurm  # noqa: F401
from jobs.harness import (job, job_env, kill_runs, launch, needs_torch, silent_for, status, text_of,
                          wait_for)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not stacks.py_spy(), reason="py-spy reads the stacks of the silent job")]


@pytest.fixture
def work(tmp_path: Path):
    yield tmp_path
    kill_runs(tmp_path)


def _stuck(proc, rep: dict, cause: str, *words: str) -> dict:
    v = rep["verdict"]
    text = text_of(rep)
    assert proc.returncode == 1 and v["state"] == "failed" and v["cause"] == cause, text
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    assert "is growing" not in v["summary"], text
    return v


def _both(work: Path, name: str, cause: str, *words: str, watch: float = 15) -> None:
    """Launch the job: stuck; `status` a little later says it again, exit 1."""
    proc, rep = launch(work, *job(name), watch=watch)
    _stuck(proc, rep, cause, *words)
    proc, rep = status(work)
    _stuck(proc, rep, cause, *words)


def test_an_event_nobody_can_set_is_stuck(work):
    _both(work, "waits_on_event.py", "stuck", "in its only thread, waits on an Event", "nothing can set it",
          "waits_on_event.py:5")


def test_a_lock_order_deadlock_between_two_threads_is_named(work):
    _both(work, "lock_order_deadlock.py", "waiting-on-lock", "two threads hold each other's lock",
          "thread loader holds `data` and waits for `model`", "lock_order_deadlock.py:13",
          "thread trainer holds `model` and waits for `data`", "lock_order_deadlock.py:20")


def test_a_queue_read_whose_producer_died_is_stuck(work):
    _both(work, "queue_producer_died.py", "stuck", "waits on a read of a multiprocessing pipe (Queue.get)",
          "queue_producer_died.py:22", "the process that wrote to it is gone", "(exit 3)")


def test_a_supervisor_asleep_while_its_workers_died_fails_with_their_traceback(work):
    proc, rep = launch(work, *job("supervisor_workers_died.py"), watch=15)
    v = rep["verdict"]
    assert proc.returncode == 1 and v["state"] == "failed", text_of(rep)
    assert "2 worker process(es) of the job died" in v["summary"] and "(exit 1)" in v["summary"], text_of(rep)
    assert "KeyError: 'shard-" in v["summary"] and "supervisor_workers_died.py" in v["summary"], text_of(rep)
    assert any("return shard[" in e for e in v["evidence"]), text_of(rep)


def test_a_loop_that_printed_every_tenth_of_a_second_and_stopped_is_never_growing(work):
    """The job prints "step N/30: loss" every 0.1 s for 3 s, then takes a lock its own thread holds. Never "running
    and its log is growing" after that; the wait is named. Its steps count to a total it reaches within the settle
    time, so its 3 s of printing are a phase, not the loop that earns `running` early (watch/settle.about_to_end):
    as "step N: loss", 30 lines over 3 s met LOOP_SPAN_S on the last one, and once the evidence of progress came
    within 0.2 s (issue 45) the launch could say `running` in the instant before the stop."""
    proc, rep = launch(work, *job("prints_then_stops.py"), watch=20)
    _stuck(proc, rep, "waiting-on-lock", "in its only thread, waits for lock `lock`",
           "no other thread can release it", "prints_then_stops.py:10", "prints every ~")
    time.sleep(3)
    proc, rep = status(work)
    _stuck(proc, rep, "waiting-on-lock", "prints_then_stops.py:10")


# ---- the healthy slow: running, exit 0 --------------------------------------------------------------------
def _running(proc, rep: dict) -> dict:
    v = rep["verdict"]
    assert proc.returncode == 0 and v["state"] == "running", text_of(rep)
    return v


def test_a_warm_up_asleep_stays_running(work):
    proc, rep = launch(work, *job("sleeps.py"), watch=8)
    assert _running(proc, rep)["cause"] == "sleeping", text_of(rep)
    proc, rep = status(work)
    assert _running(proc, rep)["cause"] == "sleeping", text_of(rep)


def test_an_evaluation_that_computes_without_printing_stays_running(work):
    proc, rep = launch(work, *job("eval_computes_silently.py"), watch=12)
    _running(proc, rep)
    # silent well past its 0.1 s rhythm (quiet after 5 s): most often it is already, the watch having run out
    # on its silence; a fixed 6 s here burned a core of the job's for nothing
    assert wait_for(lambda: silent_for(Path(rep["run"]["dir"])) >= 6.0, 60), "the job did not go silent"
    proc, rep = status(work)
    v = _running(proc, rep)
    assert "silent" in v["summary"] or "working" in v["summary"], text_of(rep)
    assert "makes progress" in v["summary"] or "working on the CPU" in v["summary"], text_of(rep)


def test_a_silent_torch_compile_before_the_first_line_stays_running(work):
    """(Unbuffered: without -u a silence of 10 s in a working Python is output-buffered, a question of its own.)"""
    needs_torch()
    proc, rep = launch(work, *job("compiles_silently.py"), watch=8, env=job_env(PYTHONUNBUFFERED="1"))
    v = _running(proc, rep)
    assert v["cause"] != "import-hang", text_of(rep)
    proc, rep = status(work)
    _running(proc, rep)


def test_a_slow_logger_stays_running(work):
    proc, rep = launch(work, *job("slow_logger.py", "30"), watch=10)
    _running(proc, rep)
    proc, rep = status(work)
    _running(proc, rep)


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Sends 16 bytes every 0.05 s for a minute: a slow download that makes progress all along."""

    def do_GET(self):  # noqa: N802 (the http.server API)
        self.send_response(200)
        self.send_header("Content-Length", str(16 * 1200))
        self.end_headers()
        try:
            for _ in range(1200):
                self.wfile.write(b"x" * 16)
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, *args):
        pass


def test_a_download_that_trickles_in_stays_running(work):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc, rep = launch(work, *job("downloads_slowly.py", str(server.server_address[1])), watch=10)
        _running(proc, rep)
        proc, rep = status(work)
        _running(proc, rep)
    finally:
        kill_runs(work)
        server.shutdown()
        server.server_close()


# ---- in a Slurm job: the same rules on its node's look --------------------------------------------------
@pytest.mark.parametrize("name,cause,words", [
    ("waits_on_event.py", "stuck", ("in its only thread, waits on an Event", "nothing can set it")),
    ("lock_order_deadlock.py", "waiting-on-lock", ("two threads hold each other's lock",
                                                   "thread loader holds `data` and waits for `model`")),
])
def test_a_stuck_batch_job_is_named_from_its_node(slurm, tmp_path, name, cause, words):  # noqa: F811
    from test_slurm_stuck import _cancel, _env, _text
    from test_slurm import dfd, job_script

    script = job_script(tmp_path, f"python3 -u {job(name)[1]}\n")
    rc, doc, err = dfd("launch", "--no-check", "--watch", "60", "--format", "text", "--", "sbatch", "-o",
                       "o-%j.log", str(script), cwd=tmp_path, env=_env())
    assert doc, err
    try:
        v, text = doc["verdict"], _text(doc)
        assert rc == 1 and (v["state"], v["cause"]) == ("failed", cause), text
        for w in words:
            assert w in text, text
    finally:
        _cancel(slurm, doc)


def test_a_quiet_batch_job_that_nothing_moves_is_unknown_not_running(slurm, tmp_path):  # noqa: F811
    """No wait named on the node, and nothing moved between the two looks: `unknown`, exit 1 (it was `running`,
    "no wait proven", exit 0)."""
    from test_slurm_stuck import _cancel, _env, _text
    from test_slurm import dfd, job_script

    script = job_script(tmp_path, f"python3 -u {job('reads_own_pipe.py')[1]}\n")
    rc, doc, err = dfd("launch", "--no-check", "--watch", "30", "--format", "text", "--", "sbatch", "-o",
                       "o-%j.log", str(script), cwd=tmp_path, env=_env())
    assert doc, err
    try:
        v = doc["verdict"]
        assert rc == 1 and v["state"] == "unknown", _text(doc)
        assert "nothing moved between two looks" in v["summary"], _text(doc)
    finally:
        _cancel(slurm, doc)


# ---- on a --target (this machine behind sshd): the agent's looks, read by the same rules ----------------
@pytest.mark.parametrize("name,state,cause,words", [
    ("waits_on_event.py", "failed", "stuck", ("in its only thread, waits on an Event", "nothing can set it")),
    ("lock_order_deadlock.py", "failed", "waiting-on-lock", ("two threads hold each other's lock",)),
    # the agent reports a dead child nobody reaped (a zombie) with its exit, as a look here does; the workers' own
    # traceback names the cause (crashed), as here
    ("supervisor_workers_died.py", "failed", "crashed", ("2 worker process(es) of the job died", "(exit 1)",
                                                        "KeyError")),
    # a server in accept() there: the agent reads the port it listens on from the target's socket table
    ("listens.py", "unknown", "waiting-on-network", ("waits for a client to connect on 127.0.0.1:", "listens.py:8")),
])
def test_a_stuck_job_on_a_target_is_named(infra, tmp_path, dfdoctor, name, state, cause, words):  # noqa: F811
    import json
    import shutil

    from jobs.harness import JOBS, PY

    there, here = tmp_path / "there", tmp_path / "here"
    there.mkdir()
    here.mkdir()
    shutil.copy(JOBS / name, there / name)
    env = dict(infra.env(), XDG_CACHE_HOME=str(here / "cache"))
    try:
        p = dfdoctor("launch", "--target", infra.ssh_target, "--format", "json", "--no-check", "--watch", "30",
                     "--cwd", str(there), "--", PY, str(there / name), cwd=here, env=env, timeout=150)
        v = json.loads(p.stdout)["verdict"]
        text = "\n".join([v["summary"], *v["evidence"]])
        assert p.returncode == 1 and (v["state"], v["cause"]) == (state, cause), text
        for w in words:
            assert w in text, text
    finally:
        kill_runs(tmp_path)
