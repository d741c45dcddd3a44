"""Issue 43, item 5: the smaller points a new user's try-out found, each with the case that showed it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import run_dfdoctor
from dfdoctor.engine import verdict_from_checks
from dfdoctor.model import CheckRecord, Status
from support.in_process import run_here


def test_fail_on_warn_headline_names_the_first_warning_not_a_check_that_could_not_look():
    """Under --fail-on warn a warning is what fails the check; a check that could not look (error) found nothing,
    so the headline is the first warning's words, check id and cause id, and the error is listed below it."""
    records = [CheckRecord("args.paths", "pre", Status.WARN, "--data missing.bin: no such file",
                           cause="input-missing", fix="pass the path where it is"),
               CheckRecord("deps.requirements", "pre", Status.ERROR, "the dependency probe gave no answer"),
               CheckRecord("log.writable", "pre", Status.WARN, "12 MiB free where the log goes", cause="disk-full")]
    v = verdict_from_checks(records, "warn")
    assert v.state == "failed" and v.cause == "input-missing", v
    assert v.summary.startswith("--data missing.bin: no such file (args.paths;"), v.summary
    assert v.fix == "pass the path where it is"
    assert any(e.startswith("deps.requirements (error)") for e in v.evidence), v.evidence
    # under the default level the warnings do not count, and the error alone is "could not look"
    assert verdict_from_checks(records, "error").state == "unknown"


def test_a_missing_module_is_not_blamed_on_the_stdlib_modules_of_its_import_line(tmp_path):
    """`import os, time, torch` without torch said "No module named 'torch' (needed by os, time, torch)"."""
    (tmp_path / "train.py").write_text("import os, time, dfd_g2_absent\nprint('training')\n")
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("import dfd_g2_absent\n")
    (tmp_path / "train2.py").write_text("import os, time, mylib\n")
    for script, said in (("train.py", "No module named 'dfd_g2_absent', imported at"),
                         ("train2.py", "No module named 'dfd_g2_absent' (needed by mylib), imported at")):
        # the first script through the console script, the second through the same entry here
        res = (run_dfdoctor if script == "train.py" else run_here)(
            "check", "--only", "imports.smoke", "--format", "json", "--", sys.executable, script, cwd=tmp_path)
        assert res.returncode == 1, res.stderr
        rec = json.loads(res.stdout)["checks"][0]
        assert rec["cause"] == "missing-module" and rec["summary"].startswith(said), rec["summary"]
        assert "os" not in rec["summary"].split("needed by")[-1].split(")")[0].split(", ")


_GLOO = ("import torch\nimport torch.distributed as dist\n\ndist.init_process_group({backend})\n"
         "t = torch.ones(1)\ndist.all_reduce(t)\nprint(t, flush=True)\n")


@pytest.mark.slow
def test_a_gloo_job_under_torchrun_gets_no_cuda_advice(tmp_path):
    """A CPU job (gloo, no CUDA named) started by torchrun was told "no usable GPU ... install a CUDA build of
    torch": torchrun is no hint of a GPU when the script's ranks form a gloo group."""
    (tmp_path / "train.py").write_text(_GLOO.format(backend='"gloo"'))
    (tmp_path / "train_nccl.py").write_text(_GLOO.format(backend='backend="nccl"'))
    runs = {}
    for script in ("train.py", "train_nccl.py"):
        # the first script through the console script, the second through the same entry here
        res = (run_dfdoctor if script == "train.py" else run_here)(
            "check", "--only", "cuda.init", "--format", "json", "--", sys.executable, "-m", "torch.distributed.run",
            "--nproc_per_node", "2", script, cwd=tmp_path)
        runs[script] = json.loads(res.stdout)["checks"][0]
    gloo = runs["train.py"]
    assert gloo["status"] in ("skip", "ok"), gloo
    assert "cuda" not in gloo["fix"].lower() and "nccl" not in gloo["fix"].lower(), gloo
    if runs["train_nccl.py"]["status"] != "ok":  # no usable GPU here: the NCCL job is still told so
        assert runs["train_nccl.py"]["status"] == "warn", runs["train_nccl.py"]
        assert "gloo backend" in gloo["summary"], gloo["summary"]


@pytest.mark.slow
def test_a_job_waiting_in_accept_waits_for_a_client_on_its_port_not_for_a_download(tmp_path):
    """A server in accept() was "waits for data from socket:[N] (a download or a remote service)", with advice
    to pre-download files; it waits for a client to connect on the port it listens on."""
    from jobs.harness import job, kill_runs, launch, text_of

    try:
        proc, rep = launch(tmp_path, *job("listens.py"), watch=60)
        v = rep["verdict"]
        said = (Path(rep["run"]["dir"]) / "stdout.log").read_text()
        port = re.search(r"listening on port (\d+)", said).group(1)
        assert v["state"] == "unknown" and v["cause"] == "waiting-on-network", text_of(rep)
        assert f"waits for a client to connect on 127.0.0.1:{port}" in v["summary"], v["summary"]
        assert "listens.py:8" in v["summary"] and "download" not in v["fix"].lower(), (v["summary"], v["fix"])
    finally:
        kill_runs(tmp_path)


@pytest.mark.slow
def test_status_from_a_folder_with_no_run_says_first_whose_run_it_shows(tmp_path):
    """From a folder where nothing was launched, `status` showed another folder's run as if it were this one's."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}  # an index of this test's runs alone
    (tmp_path / "a").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "a" / "train.py").write_text("print('x')\n")
    res = run_dfdoctor("launch", "--no-check", "--watch", "2", "--format", "json", "--", sys.executable,
                       "train.py", cwd=tmp_path / "a", env=env)
    run_id = json.loads(res.stdout)["run"]["id"]
    text = run_dfdoctor("status", cwd=tmp_path / "empty", env=env).stdout
    first = " ".join(text.split("dfdoctor status:")[0].split())
    assert first == (f"No run was launched from {tmp_path / 'empty'}: this is your latest run, {run_id}, "
                     f"launched from {tmp_path / 'a'}."), text
    # the further renderings through the same entry here (support/in_process)
    doc = json.loads(run_here("status", "--format", "json", cwd=tmp_path / "empty", env=env).stdout)
    assert doc["run"]["id"] == run_id and doc["run"]["chosen"] == first
    # from the run's own folder nothing is said before the verdict
    own = run_here("status", cwd=tmp_path / "a", env=env).stdout
    assert own.startswith("dfdoctor status:") and "No run was launched" not in own, own


@pytest.mark.slow
def test_report_of_a_saved_running_verdict_says_so_beside_the_verdict_not_in_it(tmp_path):
    """`report` appended "This is the report saved at ..." to the verdict's summary, the HTML's H1."""
    from dfdoctor.render import html as html_render

    res = run_dfdoctor("launch", "--watch", "0", "--log", "t.log", "--", sys.executable, "-c",
                       "import time; print('x'); time.sleep(6)", cwd=tmp_path)
    assert res.returncode == 0 and "RUNNING" in res.stdout, res.stdout + res.stderr
    run = next((tmp_path / ".dfdoctor" / "runs").iterdir()).name
    try:
        page = run_dfdoctor("report", "--format", "html", run, cwd=tmp_path).stdout
        h1 = re.search(r'<h1 id="verdict-summary">(.*?)</h1>', page, re.S).group(1)
        assert "report saved" not in h1, h1
        note = re.search(r'<p class="run-note" id="verdict-as-of">(.*?)</p>', page, re.S).group(1)
        assert "This is the report saved at " in note and f"dfdoctor status {run}" in note, note
        assert "as of" not in [k for k, _ in html_render.run_rows({"as_of": "x"}, rest=True)]
        # json and text through the same entry here (support/in_process); html went through the console script
        doc = json.loads(run_here("report", "--format", "json", run, cwd=tmp_path).stdout)
        assert "report saved" not in doc["verdict"]["summary"] and "report saved" in doc["run"]["as_of"]
        text = run_here("report", run, cwd=tmp_path).stdout
        assert "This is the report saved at " in text, text
    finally:
        assert run_dfdoctor("stop", run, cwd=tmp_path).returncode == 0


def test_an_impossible_slurm_start_time_is_not_repeated_as_a_time(tmp_path):
    """sbatch --test-only answered a start in year 6109 (no node could take the job: all drained); dfdoctor said
    "would start at 6109-..." as if it were a time."""
    from dfdoctor.model import Status as S
    from dfdoctor.slurm import commands, precheck, sbatch, testonly

    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --job-name=train\nsrun python train.py\n")
    sub = sbatch.parse(["sbatch", "job.sbatch"], tmp_path, {})

    def answered(at: str) -> list:
        line = f"sbatch: Job 171 to start at {at} using 1 processors on nodes node1 in partition debug\n"
        return precheck.submission(sub, testonly.Asked(commands.Answer(("sbatch",), 0, "", line)))

    far = answered("6109-04-19T08:12:44")
    assert len(far) == 1 and far[0].status == S.WARN, far
    assert "6109" not in far[0].summary and "names no time it would start" in far[0].summary, far[0].summary
    assert "sinfo -N -l" in far[0].fix
    near = answered("2026-12-06T04:05:00")
    assert near[0].status == S.OK and "would start at 2026-12-06T04:05:00 on node1" in near[0].summary, near


def test_html_folds_raw_json_data_and_never_cuts_the_hop_list():
    """The raw JSON of a check's data stood open in its details; the hop list was cut like any table (rows past a
    share of the page, commands past 300 characters) while it is the one the user reads to find the broken hop."""
    from dfdoctor.model import Report, Verdict
    from dfdoctor.render import html as html_render

    long_cmd = "python -u train.py " + " ".join(f"--opt{i}=value{i}" for i in range(60))  # ~900 characters
    hops = [{"hop": i, "where": "this shell", "parsed by": "bash", "tty": "no", "command": f"{long_cmd} #{i}",
             "note": ""} for i in range(6)]
    records = [CheckRecord("launch.path", "pre", Status.WARN, "a hop is wrong", data={"hops": hops, "line": "x"})]
    # many other wide tables: each gets only a share of the page's budget for tables
    records += [CheckRecord(f"other.{n}", "pre", Status.OK, "fine",
                            data={"rows": [{"k": "v" * 290, "w": "u" * 290} for _ in range(200)]}) for n in range(12)]
    report = Report(tool_version="x", target="local", command=["python", "train.py"], started_at="",
                    finished_at="", verdict=Verdict("ok", None, "fine"), checks=records, mode="check")
    page = html_render.render(report)
    hop_table = re.search(r'id="t-pre-launch\.path-hops".*?</table>', page, re.S).group(0)
    for i in range(6):
        assert f"{long_cmd} #{i}" in hop_table, i
    assert "more rows in the JSON result" not in hop_table
    assert re.search(r'<details class="data"><summary>Data \(raw JSON\)</summary>\s*<pre class="data">', page)
    assert not re.search(r'<h4>Data</h4>', page)


def test_compile_race_progress_says_what_it_does_and_that_its_answer_is_kept(monkeypatch):
    """`[4/5] running: compile.race 41s` for a minute said nothing of what it did, nor that it is done once."""
    import io

    from dfdoctor import progress
    from dfdoctor.registry import discover

    race = next(c for c in discover()[0] if c.id == "compile.race")
    quick = next(c for c in discover()[0] if c.id == "log.writable")
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    buf = io.StringIO()
    p = progress.Progress(5, buf, enabled=True)
    p("start", quick, None)
    p("start", race, None)
    clock[0] += 1.0
    p("tick", None, None)
    assert "reproduces" not in buf.getvalue()  # a second in: the ids alone
    clock[0] += 40.0
    p("end", quick, None)
    line = buf.getvalue().split(progress.ERASE)[-1]
    assert line.startswith("[1/5] running: compile.race 41s: reproduces the torch.compile thread race"), line
    assert "answer is kept" in line and len(line) <= progress.WIDTH


def test_a_changed_request_that_would_wait_in_the_queue_keeps_sbatchs_change(tmp_path):
    """sbatch --test-only changed the request ("setting nnodes to 1") and named no start time (the node busy):
    both are said; round 23's run f dropped the change on the queue path."""
    from dfdoctor.model import Status as S
    from dfdoctor.slurm import commands, precheck, sbatch, testonly

    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=2 --ntasks=1\nsrun python train.py\n")
    sub = sbatch.parse(["sbatch", "job.sbatch"], tmp_path, {})
    said = ("sbatch: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n"
            "sbatch: Job 172 to start at 6109-04-19T08:12:44 using 1 processors on nodes vm in partition debug\n")
    (r,) = precheck.submission(sub, testonly.Asked(commands.Answer(("sbatch",), 0, "", said)))
    assert r.status == S.WARN and "names no time it would start" in r.summary, r.summary
    assert "setting nnodes to 1" in r.summary and "Ask for what sbatch will give" in r.fix, (r.summary, r.fix)
