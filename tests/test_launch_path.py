"""launch.path: the static hop-by-hop analyser, on the seed's lines and the classic mistakes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dfdoctor import causes
from dfdoctor.context import Context
from dfdoctor.model import Status
from dfdoctor.launchline.launchpath import analyse
from dfdoctor.shell import ShellSyntaxError, parse, quote, tokenize

SEED = "ssh root@HOST 'pct exec 200 -- nohup python train.py > /workspace/train.log 2>&1 &'"
SEED_T = "ssh -t root@HOST 'pct exec 200 -- nohup python train.py > /workspace/train.log 2>&1 &'"
FIXED = "ssh root@HOST \"pct exec 200 -- sh -c 'nohup setsid -f python -u train.py </dev/null " \
        ">/workspace/train.log 2>&1'\""


def causes_of(a, status=None):
    """The cause ids found, optionally only those of one status."""
    return {f.cause for f in a.findings if status is None or f.status == status}


def test_seed_line_log_lands_on_the_host():
    a = analyse(SEED)
    assert [h.where for h in a.hops] == ["your machine", "HOST", "container 200 on HOST"]
    assert a.hops[1].parsed_by.startswith("login shell of root on HOST")
    assert a.hops[2].parsed_by.startswith("nobody")
    assert a.job.argv == ["python", "train.py"] and a.job.frame.where == "container 200 on HOST"
    log = [f for f in a.findings if f.cause == causes.LOG_ELSEWHERE]
    assert log and log[0].status == "fail" and log[0].hop == 1
    assert "parsed by the shell on HOST, before the job starts: if /workspace exists on HOST, the log is written " \
        "there" in log[0].summary and "if it does not, that shell cannot open it and nothing starts" in log[0].summary
    assert causes.KILLED_ON_SESSION_EXIT not in causes_of(a)  # without a tty the job does survive
    assert a.corrected == FIXED


def test_seed_line_with_tty_dies_with_the_session():
    for line in (SEED_T, SEED_T.replace("-t ", "-tt ")):
        a = analyse(line)
        assert {causes.LOG_ELSEWHERE, causes.KILLED_ON_SESSION_EXIT} <= causes_of(a, "fail")
        assert a.hops[1].tty and a.hops[2].tty
        assert a.corrected == FIXED  # the fix needs no tty


def test_background_list_holds_ssh_open():
    a = analyse("ssh host 'cd /w && nohup python t.py > log &'")
    f = [f for f in a.findings if f.cause == causes.KILLED_ON_SESSION_EXIT]
    assert f and f[0].status == "warn" and "does not return" in f[0].summary
    assert a.corrected == "ssh host 'cd /w && nohup setsid -f python -u t.py </dev/null >/w/log 2>&1'"


def test_nohup_without_redirect_holds_ssh_open():
    a = analyse("ssh host 'nohup python t.py &'")
    assert any("does not return" in f.summary for f in a.findings)


def test_fully_redirected_background_job_is_fine_without_tty():
    a = analyse("ssh host 'nohup python -u /w/t.py > /w/log 2>&1 < /dev/null &'")
    assert causes_of(a) == set()


def test_unquoted_remote_command_is_cut_by_the_local_shell():
    a = analyse("ssh host cd /w && python t.py")
    assert causes.LOG_ELSEWHERE in causes_of(a, "fail")
    assert a.job.frame.where == "your machine"
    assert a.corrected.startswith("ssh host 'cd /w && nohup setsid -f python -u t.py")


def test_cd_through_pct_exec_is_not_a_program():
    a = analyse("ssh root@h 'pct exec 200 -- cd /workspace && python train.py'")
    assert causes.COMMAND_NOT_FOUND in causes_of(a, "fail")
    assert any("runs on h, not on container 200" in f.summary for f in a.findings)
    assert "sh -c 'cd /workspace && nohup setsid -f" in a.corrected


def test_cd_not_joined_and_relative_log():
    a = analyse("cd /w; python t.py > t.log 2>&1")
    assert any("not joined with `&&`" in f.summary for f in a.findings)
    a = analyse("nohup python -u t.py > t.log 2>&1 &")
    assert any("relative log path" in f.summary for f in a.findings)


def test_tmux_command_output_goes_to_the_pane():
    a = analyse("ssh h \"tmux new -d -s t 'python -u t.py'\"")
    assert a.job.frame.where == "tmux pane on h"
    assert any("pane closes" in f.summary for f in a.findings)
    assert causes.KILLED_ON_SESSION_EXIT not in causes_of(a)


def test_screen_single_word_command():
    a = analyse("screen -dmS t 'python t.py'")
    assert causes.COMMAND_NOT_FOUND in causes_of(a, "fail")


def test_launcher_exec_loses_later_lines(tmp_path):
    text = textwrap.dedent("""\
        #!/bin/bash
        set -e
        cd /workspace
        exec python train.py
        echo finished >> /workspace/train.log
    """)
    a = analyse(None, "launch.sh", text)
    f = [f for f in a.findings if "replaces the shell" in f.summary]
    assert f and f[0].status == "fail" and f[0].cause == causes.LOG_ELSEWHERE
    assert a.job.argv == ["python", "train.py"]


def test_launcher_followed_from_the_shell_command():
    text = "#!/bin/sh\ncd /workspace && python train.py --cfg x.yaml\n"
    a = analyse("ssh -t root@HOST 'pct exec 200 -- bash /workspace/launch.sh > /workspace/l.log 2>&1 &'",
                "/workspace/launch.sh", text)
    assert a.job.argv[:2] == ["python", "train.py"]
    assert a.job.frame.where == "container 200 on HOST"
    assert {causes.LOG_ELSEWHERE, causes.KILLED_ON_SESSION_EXIT} <= causes_of(a, "fail")
    assert "bash /workspace/launch.sh" in a.corrected and "PYTHONUNBUFFERED=1" in a.corrected


def test_tokenizer_keeps_quoted_operators_as_words():
    toks = tokenize("echo '&' \"a;b\" 2>&1 >>x &>y")
    assert [getattr(t, "value", None) for t in toks[:3]] == ["echo", "&", "a;b"]
    reds = [t for t in toks if hasattr(t, "fds")]
    assert [(r.fds, r.op, r.target) for r in reds] == [((2,), ">&", "1"), ((1,), ">>", "x"), ((1, 2), "&>", "y")]
    with pytest.raises(ShellSyntaxError):
        parse("echo 'unterminated")


@pytest.mark.parametrize("word", ["plain", "a b", "it's", "~", "~/x", "a=~/b", "$(rm -rf /)", "a'b\"c$d`e", "; echo pwned", ""])
def test_quote_round_trips_through_a_real_shell(word):
    out = subprocess.run(["sh", "-c", f"printf %s {quote(word)}"], capture_output=True, text=True, check=True)
    assert out.stdout == word


def test_corrected_line_really_runs_through_ssh_and_pct_shims(tmp_path):
    """Run the corrected seed line in bash with `ssh`/`pct` stand-ins that keep the hops' parsing: the log
    must appear at the path the job's own shell opened, and the job must be detached."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # ssh: the remote login shell parses the joined words; pct exec: exec's the words, no shell.
    (bindir / "ssh").write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    (bindir / "pct").write_text('#!/bin/sh\nshift 3\nexec "$@"\n')
    workdir = tmp_path / "work space $(x)"
    workdir.mkdir()
    (workdir / "train.py").write_text("import sys; print('step 1', sys.argv[1:])\n")
    for f in bindir.iterdir():
        f.chmod(0o755)
    log = workdir / "train 'log'.txt"
    remote = f"pct exec 200 -- nohup {sys.executable} {quote(str(workdir / 'train.py'))} 'a b' > {quote(str(log))} 2>&1 &"
    a = analyse("ssh root@HOST " + quote(remote))
    assert causes.LOG_ELSEWHERE in causes_of(a, "fail")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    subprocess.run(["bash", "-c", a.corrected], env=env, timeout=20, check=True)
    for _ in range(100):
        if log.exists() and "step 1" in log.read_text():
            break
        import time
        time.sleep(0.1)
    assert log.read_text().strip() == "step 1 ['a b']"


def test_check_yields_hops_table_and_findings():
    from dfdoctor.checks.launch_path import launch_path
    ctx = Context(shell_command=SEED_T)
    results = list(launch_path.run(ctx))
    # a reading of the line: the analysis says it fails, the check warns (only an observation may fail)
    failing = [r for r in results if "the reading says: fails" in r.evidence]
    assert {r.cause for r in failing} == {causes.LOG_ELSEWHERE, causes.KILLED_ON_SESSION_EXIT}
    assert all(r.status == Status.WARN and r.basis == "static" for r in results if r.cause)
    hops = results[0].data["hops"]
    assert isinstance(hops, list) and all(isinstance(r, dict) for r in hops) and len(hops) == 3
    # HOST cannot be reached, so nothing was rehearsed: the line is offered as not tried, and says why
    assert all(r.fix == "not tried (no rehearsal could run): " + FIXED for r in failing)
    assert all("Could not rehearse the line: could not reach container 200 on HOST" in r.details for r in failing)
    assert list(launch_path.run(Context()))[0].status == Status.SKIP


def test_check_reads_the_launcher_file(tmp_path):
    from dfdoctor.checks.launch_path import launch_path
    (tmp_path / "go.sh").write_text("cd /w\npython t.py > out.log 2>&1\n")
    results = list(launch_path.run(Context(launcher=tmp_path / "go.sh", cwd=tmp_path)))
    assert any("not joined" in r.summary for r in results)
    missing = list(launch_path.run(Context(launcher=tmp_path / "nope.sh", cwd=tmp_path)))
    assert any("cannot read the launcher" in r.summary for r in missing)


def test_cli_exit_code_and_json(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([str(Path(sys.executable).parent / "dfdoctor"), "check", "--only", "launch.path",
                        "--shell-command", SEED, "--format", "json", "--output", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr  # a reading of the line: it warns, it does not fail the check
    import json
    doc = json.loads(out.read_text())
    chk = [c for c in doc["checks"] if c["id"] == "launch.path"][0]
    assert chk["cause"] == causes.LOG_ELSEWHERE and chk["data"]["untried"] == FIXED
    assert chk["data"]["corrected"] is None  # a line is "corrected" only once its rehearsal passed
    assert chk["status"] == "warn" and chk["basis"] == "static"


def test_launcher_that_logs_itself_keeps_its_log_and_gets_its_own_out_file():
    text = textwrap.dedent("""\
        #!/bin/bash
        source /opt/venv/bin/activate
        cd /workspace/dflash
        nohup python -m dflash.train --config cfg.yaml > logs/train.log 2>&1 &
        echo started
    """)
    a = analyse("ssh -t root@pve 'pct exec 200 -- bash /workspace/launch.sh'", "/workspace/launch.sh", text)
    assert a.job.argv[:3] == ["python", "-m", "dflash.train"] and a.job.frame.cwd == "/workspace/dflash"
    assert causes.KILLED_ON_SESSION_EXIT in causes_of(a, "fail")  # `&` in the launcher, under ssh -t
    assert any("not joined" in f.summary and f.hop == 3 for f in a.findings)
    assert a.corrected == ("ssh root@pve \"pct exec 200 -- sh -c 'PYTHONUNBUFFERED=1 nohup setsid -f bash "
                           "/workspace/launch.sh </dev/null >/workspace/launch.out 2>&1'\"")


def test_docker_exec_detached_discards_output():
    a = analyse("docker exec -d trainer python train.py")
    assert a.job.frame.where == "container trainer" and a.job.frame.handoff == "docker exec -d"
    assert any("discards the job's output" in f.summary for f in a.findings)
    assert a.corrected == "docker exec -d trainer sh -c 'nohup setsid -f python -u train.py </dev/null >/tmp/train.log 2>&1'"
    ok = analyse("docker exec -it trainer sh -c 'cd /w && nohup setsid -f python -u t.py </dev/null >/w/t.log 2>&1'")
    assert ok.findings == []


@pytest.mark.parametrize("redirect", [">", ">>", "2>", "&>>"])
def test_the_moved_redirect_is_quoted_as_the_user_typed_it(redirect):
    """The clause quoted every redirect as `> FILE`, also a `>>` that appends (the fix keeps appending)."""
    from dfdoctor.rehearse import changes, rewrite
    from dfdoctor.rehearse.runner import Rehearsal

    line = f"ssh root@gpu1 'python3 -u t.py' {redirect} train.log"
    plan = rewrite.plan(line, "t0")
    said = changes.said(Rehearsal(line, plan=plan), Rehearsal(line, plan=plan))
    assert any(f"your `{redirect} train.log` was read by the shell on your machine" in c for c in said), said
