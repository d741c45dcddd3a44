"""A newcomer's second walk (issue 35): a finding said once, text a user need not decode, `-q` that carries the
next step, help with examples, and the secrets a log holds."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from conftest import run_dfdoctor
from support.in_process import run_here


def test_a_blocked_launch_says_its_finding_once(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    res = run_dfdoctor("launch", "--log", "nolog/train.log", "--", sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stdout.startswith("dfdoctor launch: FAILED [log-dir-missing]"), res.stdout
    flat = " ".join(res.stdout.split())
    assert flat.count("would have nowhere to write it") == 1, res.stdout
    assert "--force launches anyway" in res.stdout  # a launch that can start is offered the override
    assert "mkdir -p" in res.stdout


def test_an_unreachable_host_is_said_once_with_its_host_and_no_force(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    res = run_dfdoctor("launch", "--target", "ssh://root@127.0.0.1:1", "--log", "/tmp/t.log", "--",
                       "python3", "train.py", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stdout.startswith("dfdoctor launch: FAILED [target-unreachable]"), res.stdout
    assert " ".join(res.stdout.split()).count("Connection refused") == 1, res.stdout
    assert "--force" not in res.stdout  # nothing can start over a connection that does not exist
    assert "`ssh -p 1 root@127.0.0.1 true`" in res.stdout and "HOST" not in res.stdout, res.stdout


def test_html_puts_failures_first_folds_the_skipped_and_merges_the_pip_lines(tmp_path):
    (tmp_path / "train.py").write_text("import dfd_nc_wandb\nimport dfd_nc_transformers\n")
    (tmp_path / "requirements.txt").write_text("dfd-nc-wandb\ndfd-nc-transformers==4.44.0\n")
    res = run_here("check", "--log", "logs/t.log", "--format", "html", "--output", "r.html", "--",
                   sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    page = (tmp_path / "r.html").read_text()
    cards = re.findall(r'<article class="card st-(\w+)', page)
    order = {"fail": 0, "error": 0, "timeout": 0, "warn": 1, "ok": 2, "skip": 3}
    assert cards[0] == "fail" and [order[c] for c in cards] == sorted(order[c] for c in cards), cards
    skipped = page.split('<details class="skipped">', 1)
    assert len(skipped) == 2 and 'class="card st-skip' not in skipped[0], "the skipped cards are folded"
    fix = page.split('id="verdict-fix"', 1)[1].split("</section>", 1)[0]
    assert re.search(r"pip install dfd-nc-wandb dfd-nc-transformers==4\.44\.0", fix), fix  # one line, as the text's
    assert "mkdir -p" in fix


def test_printed_ssh_lines_keep_the_config_dfdoctors_ssh_used(monkeypatch):
    from dfdoctor.rehearse import rewrite
    from dfdoctor.targets import parse_target, transport
    monkeypatch.setenv("DFDOCTOR_SSH_CONFIG", "/etc/my ssh/config")
    target = parse_target("ssh://root@gpu1:2222")
    assert transport.typed_line(target, "tail -f /w/t.log") == \
        "ssh -F '/etc/my ssh/config' -p 2222 root@gpu1 'tail -f /w/t.log'"
    hop = rewrite.Hop("ssh", ("ssh", *rewrite.ssh_extra(), "-T", "root@gpu1"), "gpu1")
    assert rewrite.typed_line((hop,), "true") == "ssh -F '/etc/my ssh/config' root@gpu1 true"
    monkeypatch.delenv("DFDOCTOR_SSH_CONFIG")
    assert transport.typed_line(target, "true") == "ssh -p 2222 root@gpu1 true"


def test_sizes_are_said_in_units_a_person_reads():
    from dfdoctor.numbers import size_words
    from dfdoctor.rows import Difference
    assert [size_words(k) for k in (12341892, 65536, 8000000, 512, 1536)] == \
        ["11.8 GiB", "64 MiB", "7.6 GiB", "512 KiB", "1.5 MiB"]
    d = Difference("fact", "dev_shm_kb", "12341892", 2, (("ssh://n4", "65536"),))
    assert d.sentence() == "/dev/shm size: 11.8 GiB on 2 targets; 64 MiB on ssh://n4"
    assert d.to_dict()["usual"] == "12341892"  # JSON keeps the raw value


@pytest.mark.skipif(not shutil.which("sbatch"), reason="no Slurm client here")
def test_the_slurm_oversize_request_gives_one_fix_in_gib(tmp_path):
    """sbatch --test-only's refusal and slurm.partition's reading of it gave two near-identical fixes, and the
    sizes in MiB. Only the two checks that ask the controller run (nothing is submitted, no node is used)."""
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\npython3 train.py\n")
    res = run_dfdoctor("check", "--only", "slurm.submission", "--only", "slurm.partition", "--", "sbatch",
                       "--mem=500000", "job.sbatch", cwd=tmp_path)
    assert res.returncode == 1 and "[never-starts]" in res.stdout, res.stdout + res.stderr
    assert res.stdout.count("Ask for what") == 1, res.stdout
    assert "MiB per node" not in res.stdout and re.search(r"asks for 48\d GiB of memory per node", res.stdout)


@pytest.mark.skipif(not shutil.which("scontrol"), reason="no Slurm client here")
def test_a_job_slurm_does_not_know_is_one_clear_line(tmp_path):
    res = run_here("status", "slurm:99999999", cwd=tmp_path)
    assert "Slurm does not know job 99999999" in res.stdout and "ExitCode ?" not in res.stdout, res.stdout
    assert "| " not in res.stdout, res.stdout


def test_a_cancelled_slurm_job_has_a_cause_id():
    from dfdoctor import causes
    from dfdoctor.slurm import job as slurm_job
    from dfdoctor.slurm.rules import Seen, judge
    f = slurm_job.JobFacts("171", state="CANCELLED", exit_code="0:15", state_detail="by 0", run_time="00:00:05")
    v = judge(Seen(job=f))
    assert v.state == "failed" and v.cause == causes.CANCELLED == "cancelled" and "cancelled by" in v.summary


@pytest.fixture(scope="module")
def running_q(tmp_path_factory):
    """`launch -q` of a job that outlives the (zero) watch, for the two tests that read a running verdict: its `-q`
    line and, saved in its run folder, the report `report -q` reads (one launch and one stop, not two of each).
    (folder, the launch's process, its run id)."""
    folder = tmp_path_factory.mktemp("running-q")
    # `print('x')` alone ended before a loaded machine's launch looked at it
    res = run_dfdoctor("launch", "-q", "--watch", "0", "--log", "t.log", "--", sys.executable, "-c",
                       "import time; print('x'); time.sleep(5)", cwd=folder)
    runs = folder / ".dfdoctor" / "runs"
    run = next(runs.iterdir()).name if runs.is_dir() else None
    yield folder, res, run
    if run:
        stopped = run_dfdoctor("stop", run, cwd=folder)  # nothing of the job outlives the tests
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def test_report_of_a_running_verdict_says_it_is_of_its_time(running_q):
    folder, res, run = running_q
    assert res.returncode == 0 and "RUNNING" in res.stdout and run, res.stdout + res.stderr
    shown = run_here("report", "-q", run, cwd=folder)
    assert "This is the report saved at " in shown.stdout and f"`dfdoctor status {run}` looks again" in shown.stdout


def test_github_summary_code_spans_are_raw_and_its_last_line_points_at_nothing_below():
    from dfdoctor.model import CheckRecord, Report, Status, Verdict
    from dfdoctor.render import github
    rec = CheckRecord(id="log.writable", phase="pre", status=Status.FAIL, cause="log-dir-missing",
                      summary="a shell's `> LOG` fails before Python starts, while a < b outside")
    rep = Report(tool_version="0", target="local", command=["python3", "t.py"], started_at="", finished_at="",
                 verdict=Verdict("failed", "log-dir-missing",
                                                 "the log's folder is missing (log.writable; 1 more problem(s) below)"),
                 checks=[rec], mode="check")
    row = next(line for line in github.summary(rep).splitlines() if line.startswith("| ") and "log.writable" in line)
    assert "`> LOG`" in row and "&gt; LOG" not in row and "a &lt; b" in row, row
    last = github.render(rep).splitlines()[-1]
    assert last.endswith("(log.writable; 1 more problem(s))") and "below" not in last, last


def test_launch_q_is_one_line_with_the_run_id_and_the_next_step(running_q, tmp_path):
    _, res, run = running_q
    assert res.returncode == 0 and run, res.stderr
    (line,) = res.stdout.splitlines()
    assert line.startswith("dfdoctor launch: RUNNING: ") and f"; run {run}; next: " in line, line
    blocked = run_dfdoctor("launch", "-q", "--log", "nolog/t.log", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    (line,) = blocked.stdout.splitlines()
    assert line.startswith("dfdoctor launch: FAILED [log-dir-missing]") and line.endswith(
        f"; fix: mkdir -p {tmp_path}/nolog"), line


def test_every_subcommand_s_help_shows_examples_of_itself():
    import click
    from dfdoctor.cli.main import main
    names = main.list_commands(click.Context(main))  # launch, status and stop load only when named
    assert set(names) >= {"check", "launch", "status", "stop", "report", "env", "list-checks"}
    for name in names:  # check's through the console script, the others through the same entry here
        # (support/in_process, as the readings of this file whose point is what dfdoctor prints)
        res = (run_dfdoctor if name == "check" else run_here)(name, "--help")
        assert res.returncode == 0, res.stderr
        shown = res.stdout.split("Examples:", 1)
        assert len(shown) == 2 and f"dfdoctor {name}" in shown[1], f"`dfdoctor {name} --help` shows no example"


def test_output_help_names_every_extension_and_strategy_help_says_each_value():
    from dfdoctor.render import EXTENSIONS
    from dfdoctor.targets.strategies import STRATEGIES
    check = " ".join(run_here("check", "--help").stdout.split())
    assert all(ext in check for ext in EXTENSIONS) and ".sarif sarif" in check
    launch = " ".join(run_here("launch", "--help").stdout.split())
    for s in STRATEGIES:  # each value with what it does, not a bare name such as `amp`
        assert f"{s.name}: " in launch.replace("- ", "-"), s.name
    assert "amp: in the background with a plain `CMD &`" in launch


def test_only_and_skip_complete_check_ids():
    for cmd, opt in (("check", "--only"), ("launch", "--skip"), ("check", "--skip")):
        res = run_dfdoctor(env={"_DFDOCTOR_COMPLETE": "bash_complete", "COMP_WORDS": f"dfdoctor {cmd} {opt} cu",
                                "COMP_CWORD": "3"})
        assert res.stdout.split() == ["plain,cuda.*", "plain,cuda.init", "plain,cuda.nccl"], res.stdout


def test_list_checks_titles_are_in_one_case_style():
    import json
    rows = json.loads(run_here("list-checks", "--format", "json").stdout)["checks"]
    assert rows and all(r["title"][:1].isupper() for r in rows), [r["title"] for r in rows]


def test_env_says_the_distribution_the_cpu_and_the_requirements_versions(tmp_path):
    (tmp_path / "requirements.txt").write_text("pytest>=1\ndfd-nc-absent==1.0\n")
    # env imports torch in the training interpreter (~1.3 CPU-s); nothing here reads torch's facts, so a torch that
    # fails at once stands in (test_newcomer's test_env_block_… reads the real one's)
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch stands aside for this test')\n")
    res = run_dfdoctor("env", "--", sys.executable, "train.py", cwd=tmp_path, env={"PYTHONPATH": str(fake.parent)})
    assert res.returncode == 0, res.stderr
    pretty = next(line.split("=", 1)[1].strip().strip('"') for line in open("/etc/os-release")
                  if line.startswith("PRETTY_NAME="))
    assert re.search(rf"^distribution: +{re.escape(pretty)}$", res.stdout, re.M), res.stdout
    assert re.search(r"^CPU: +\S.* \(\d+ CPUs\)$", res.stdout, re.M), res.stdout
    import importlib.metadata
    libraries = res.stdout.split("Versions of relevant libraries", 1)[1]
    assert re.search(rf"^  pytest +{re.escape(importlib.metadata.version('pytest'))}$", libraries, re.M), libraries
    assert re.search(r"^  dfd-nc-absent +not installed$", libraries, re.M), libraries


def test_log_writable_warns_of_a_secret_value_in_the_log_by_name_only(tmp_path):
    import json
    secret = "hf_dfdNcSecretValue0123456789"
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "train.log").write_text(f"config: token={secret}\nstep 1\n")
    res = run_dfdoctor("check", "--only", "log.writable", "--log", "train.log", "--format", "json", "--",
                       sys.executable, "train.py", cwd=tmp_path, env={"HF_TOKEN": secret})
    assert secret not in res.stdout + res.stderr
    (rec,) = json.loads(res.stdout)["checks"]
    warned = [f for f in rec["findings"] if f["status"] == "warn"]
    assert len(warned) == 1 and "contains the value of secret variable HF_TOKEN" in warned[0]["summary"], rec
    # a log without it: no warning
    (tmp_path / "train.log").write_text("step 1\n")
    res = run_here("check", "--only", "log.writable", "--log", "train.log", "--format", "json", "--",
                   sys.executable, "train.py", cwd=tmp_path, env={"HF_TOKEN": secret})  # the same entry, here
    assert json.loads(res.stdout)["checks"][0]["status"] == "ok", res.stdout


def test_a_secret_cut_by_a_read_boundary_is_still_found(tmp_path):
    from dfdoctor.checks.log_writable import secret_names_in
    secret = "s3cr3t-value-0123456789"
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * ((1 << 20) - 5) + secret.encode() + b"\n")
    assert secret_names_in(log, {"WANDB_API_KEY": secret, "OTHER_TOKEN": "not-in-the-log-123456"}) == \
        (["WANDB_API_KEY"], log.stat().st_size)


def test_a_launch_refused_for_two_missing_modules_gives_one_line_that_installs_both(tmp_path):
    """Only the first blocker's `pip install einops` was shown: the user mended one module per launch."""
    (tmp_path / "train.py").write_text("import einops\nimport tiktoken\nprint('ok')\n")
    (tmp_path / "requirements.txt").write_text("einops\ntiktoken\n")
    res = run_dfdoctor("launch", "--log", "t.log", "--", sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 1 and "Not launched" in res.stdout, res.stdout + res.stderr
    (fix,) = [line for line in res.stdout.splitlines() if line.lstrip().startswith("fix: ")]
    assert re.search(r"-m pip install einops tiktoken\b", fix), res.stdout
    assert not (tmp_path / ".dfdoctor" / "runs").exists() or not any((tmp_path / ".dfdoctor" / "runs").iterdir())


def test_the_check_counts_the_warnings_it_lists(tmp_path):
    """Two warning lines under one check were counted as "1 warning(s)": the count is of the lines shown."""
    (tmp_path / "train.py").write_text("print('ok')\n")
    (tmp_path / "requirements.txt").write_text("einops\ntiktoken\n")  # missing, and never imported: two warnings
    res = run_here("check", "--", sys.executable, "train.py", cwd=tmp_path)
    shown = [line for line in res.stdout.splitlines() if line.startswith("WARN ")]
    assert res.returncode == 0 and len(shown) == 2, res.stdout
    assert "; 2 warning(s)." in res.stdout, res.stdout
