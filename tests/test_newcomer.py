"""What a new user meets first: every finding once, one combined fix, skips in one line, the verdict line
whatever the formats, -q/-V/bare help, colour switches, config found from a subfolder, `check` with no command,
`next:` for a running job, CI annotations at the user's own frame."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DFDOCTOR, run_dfdoctor
from dfdoctor.engine import headline
from dfdoctor.model import CheckRecord, Report, Status, Verdict
from dfdoctor.render import render
from dfdoctor.render.text import combined_fixes
from support.in_process import run_here
from support.tty import on_tty

SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def two_missing(tmp_path):
    """A script that imports two modules the interpreter lacks, pinned one of them in requirements.txt."""
    (tmp_path / "train.py").write_text("import os\nimport sys\n\nimport dfd_nc_wandb\nimport dfd_nc_transformers\n"
                                       "print('training')\n")
    (tmp_path / "requirements.txt").write_text("dfd-nc-wandb\ndfd-nc-transformers==4.44.0\n")
    return tmp_path


def _check(cwd, *args, env=None, here=False):
    """`here`: through the same entry in this process (support/in_process), for a test's further runs."""
    return (run_here if here else run_dfdoctor)("check", "--log", "logs/t.log", *args, "--", sys.executable,
                                                "train.py", cwd=cwd, env=env)


def test_every_finding_once_one_combined_fix_skips_in_one_line(two_missing):
    res = _check(two_missing)
    assert res.returncode == 1, res.stderr
    out = res.stdout
    lines = out.splitlines()
    # the headline leads with the first problem in its own words (issue 21's plain headline); below it, each
    # finding on a row of its own, once, the second module too (it was only seen with -v)
    head, rows = lines[:lines.index("")], lines[lines.index(""):]
    assert sum("No module named 'dfd_nc_wandb'" in line for line in head) == 1, out
    for words in ("dfd-nc-wandb is not installed", "dfd-nc-transformers is not installed",
                  "No module named 'dfd_nc_wandb'", "No module named 'dfd_nc_transformers'", "logs does not exist"):
        assert sum(words in line for line in rows) == 1, (words, out)
    # one pip line for both, the pinned requirement winning over the bare import name; said once
    pip = [line for line in lines if "pip install" in line]
    assert len(pip) == 1 and pip[0].strip().startswith("fix: ") and \
        pip[0].rstrip().endswith("pip install dfd-nc-wandb dfd-nc-transformers==4.44.0"), out
    assert sum("mkdir -p" in line for line in lines) == 1
    skips = [line for line in lines if line.startswith("skip")]
    assert not skips and re.search(r"^\d+ skipped: -v says why$", out, re.M), out
    verbose = _check(two_missing, "-v").stdout
    assert "skip " in verbose and "skipped: -v says why" not in verbose


def test_combined_fixes_keep_other_fixes_and_interpreters_apart():
    fixes = ["/v/bin/python -m pip install a", "mkdir -p logs", "/v/bin/python -m pip install b==2   (why)",
             "/w/bin/python -m pip install a", "/v/bin/python -m pip install A_x b", "mkdir -p logs",
             "/v/bin/python -m pip install --user c"]
    assert combined_fixes(fixes) == ["/v/bin/python -m pip install a b==2 A_x", "mkdir -p logs",
                                     "/w/bin/python -m pip install a", "/v/bin/python -m pip install --user c"]
    # one command that two findings give with different notes (deps.requirements and imports.smoke of a missing
    # torchvision: the torch-paired line with --index-url, which the pip merge does not read) is said once
    paired = "/v/bin/python -m pip install torch==2.13.0+cpu torchvision==0.28.0+cpu --index-url " \
             "https://download.pytorch.org/whl/cpu"
    assert combined_fixes([f"{paired}   (paired with the installed torch; dfdoctor did not run it)",
                           f"{paired}   (paired with the installed torch)", "mkdir -p logs"]) == [
        f"{paired}   (paired with the installed torch; dfdoctor did not run it)", "mkdir -p logs"]


def test_quiet_is_the_verdict_line_and_a_files_only_run_still_prints_it(two_missing):
    quiet = _check(two_missing, "-q")
    assert quiet.returncode == 1
    assert quiet.stdout.splitlines() == [quiet.stdout.strip()]
    assert quiet.stdout.startswith("dfdoctor check: FAILED [")
    # the line stands alone: it counts the other problems, it does not point below it (round 5 left "below")
    assert re.search(r"; \d+ more problem\(s\)\); fix: ", quiet.stdout) and "below" not in quiet.stdout, quiet.stdout
    # round 9: the line carries the fix (pip lines merged, as the full output's)
    assert re.search(r"; fix: \S+ -m pip install dfd-nc-wandb dfd-nc-transformers==4\.44\.0 \(and 1 more\)$",
                     quiet.stdout.strip()), quiet.stdout
    html = _check(two_missing, "--format", "html", "--output", "r.html", here=True)
    assert html.returncode == 1 and (two_missing / "r.html").stat().st_size > 1000
    assert html.stdout.startswith("dfdoctor check: FAILED [") and "r.html" in html.stdout
    assert len(html.stdout.splitlines()) == 1 and "below" not in html.stdout


def test_version_bare_help_and_list_checks_header(tmp_path):
    version = run_dfdoctor("-V", cwd=tmp_path)
    assert version.returncode == 0 and re.search(r"\d+\.\d+", version.stdout)
    bare = run_dfdoctor(cwd=tmp_path)
    assert bare.returncode == 0 and "Usage: dfdoctor" in bare.stdout and not bare.stderr
    assert "Exit codes: 0" in bare.stdout and bare.stdout.count("dfdoctor ") >= 3 and "Docs:" in bare.stdout
    listed = run_dfdoctor("list-checks", cwd=tmp_path).stdout.splitlines()
    assert listed[0].split() == ["ID", "PHASES", "SOURCE", "TITLE"] and listed[1].split()[2] == "built-in"


def test_force_color_colours_a_pipe_and_no_color_wins(two_missing):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    forced = subprocess.run([DFDOCTOR, "check", "--only", "log.*", "--log", "x/y.log"], cwd=two_missing,
                            env={**env, "FORCE_COLOR": "1"}, capture_output=True, text=True)
    assert SGR.search(forced.stdout), forced.stdout
    both = run_here("check", "--only", "log.*", "--log", "x/y.log", cwd=two_missing,  # the same entry, here
                    full_env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert not SGR.search(both.stdout)


def _on_tty(args, cwd) -> str:
    return on_tty([DFDOCTOR, *args], cwd, env={**os.environ, "NO_COLOR": "1", "TERM": "xterm"})


def test_progress_lines_are_gone_when_the_checks_are_done(two_missing):
    out = _on_tty(["check", "--only", "log.*", "--only", "imports.*", "--log", "logs/t.log", "--",
                   sys.executable, "train.py"], two_missing)
    assert "dfdoctor check: FAILED" in out
    # what the progress display left on screen: the text before each erase is overwritten by what follows
    kept = [seg.split("\x1b[2K")[-1] for seg in out.replace("\r\n", "\n").split("\n")]
    assert not [k for k in kept if re.match(r"\s+(ok|fail|skip|warn)\s+\S+\s+\(\d+\.\d s\)", k)], kept
    assert not [k for k in kept if "running:" in k], kept


def test_config_is_found_from_a_subfolder_up_to_the_project_root_and_named(tmp_path):
    root = tmp_path / "proj"
    (root / "src" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "pyproject.toml").write_text('[tool.dfdoctor]\nskip = ["imports.*"]\n')
    (root / "src" / "pyproject.toml").write_text('[project]\nname = "inner"\n')  # no [tool.dfdoctor]: walk on
    (root / "src" / "deep" / "train.py").write_text("import dfd_nc_missing\n")
    res = run_dfdoctor("check", "--only", "imports.*", "--only", "log.*", "--format", "json", "--",
                       sys.executable, "train.py", cwd=root / "src" / "deep")
    doc = json.loads(res.stdout)
    assert doc["environment"]["config"] == str(root / "pyproject.toml")
    assert [c["id"] for c in doc["checks"]] == ["log.writable"]
    # the further runs of this test through the same entry here (support/in_process)
    text = run_here("check", "--only", "log.*", "--", sys.executable, "train.py", cwd=root / "src" / "deep")
    assert f"config: {root / 'pyproject.toml'}" in text.stdout
    # above the checkout's root (.git) nothing is read: a stray file there does not configure this project
    (tmp_path / "dfdoctor.toml").write_text('fail-on = "warn"\n')
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n')
    res = run_here("check", "--only", "log.*", "--format", "json", "--", sys.executable, "train.py",
                   cwd=root / "src" / "deep")
    assert "config" not in json.loads(res.stdout)["environment"]


def test_check_without_a_command_says_no_launch_was_checked(tmp_path):
    res = run_dfdoctor("check", cwd=tmp_path)
    assert res.returncode == 0
    assert "no launch was" in res.stdout.splitlines()[1] and "dfdoctor check -- " in res.stdout
    doc = json.loads(run_here("check", "--format", "json", cwd=tmp_path).stdout)  # the same entry, here
    assert doc["verdict"]["summary"].startswith("No command given: the environment was checked")


def _report(state: str, fix: str, evidence=(), command=("python3", "train.py"), mode="launch") -> Report:
    return Report(tool_version="x", target="local", command=list(command), started_at="", finished_at="",
                  verdict=Verdict(state, "crashed" if state == "failed" else None, "the job", fix, list(evidence)),
                  checks=[CheckRecord("log.writable", "pre", Status.OK, "fine")], mode=mode,
                  environment={"cwd": "/work/p"})


def test_a_running_job_s_next_step_is_not_called_a_fix_in_any_format():
    running = _report("running", "Follow it with tail -f /work/p/t.log")
    failed = _report("failed", "mkdir -p logs")
    assert "next: Follow it" in render(running, "text") and "fix: mkdir" in render(failed, "text")
    html = render(running, "html")
    assert re.search(r"<h2>\s*Next\s*</h2>", html) and not re.search(r"<h2>\s*Fix\s*</h2>", html)
    assert re.search(r"<h2>\s*Fix\s*</h2>", render(failed, "html"))
    assert "Next: Follow it" in render(running, "junit") or "Follow it" not in render(running, "junit")
    from dfdoctor.render.github import summary
    assert "**Next:** Follow it" in summary(running) and "**Fix:** " in summary(failed)


def test_annotations_point_at_the_user_s_own_frame_and_code_spans_are_raw():
    trace = ['Traceback (most recent call last):', '  File "/work/p/train.py", line 8, in <module>', '    main()',
             '  File "/work/p/train.py", line 6, in main', '    load()',
             '  File "/usr/lib/python3.11/json/__init__.py", line 293, in load', '    return loads(fp.read())',
             '  File "/v/lib/python3.11/site-packages/x/y.py", line 12, in z', 'ValueError: bad']
    rep = _report("failed", "fix it", trace, command=("python3", "train.py", "a>b"))
    from dfdoctor.render.findings import findings
    (f,) = findings(rep)
    assert (f.path.endswith("train.py"), f.line) == (True, 6)
    assert "line=6" in render(rep, "github")
    assert json.loads(render(rep, "gitlab"))[0]["location"]["lines"]["begin"] == 6
    sarif = json.loads(render(rep, "sarif"))
    assert sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 6
    from dfdoctor.render.github import summary
    assert "`python3 train.py a>b`" in summary(rep) and "&gt;" not in summary(rep).split("Command:")[1].split("\n")[0]


# ---- runs from anywhere: the user's index of runs ------------------------------------------------------------
def test_status_and_report_find_a_run_from_any_folder(tmp_path):
    state = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state), "DFD_NC_API_TOKEN": "tok-s3cr3t-value-42"}
    here, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    (here / "train.py").write_text("import sys\nprint('done', sys.argv[1:])\n")
    res = run_dfdoctor("launch", "--no-check", "--watch", "3", "--format", "json", "--", sys.executable,
                       "train.py", "--api-key", "tok-s3cr3t-value-42", cwd=here, env=env)
    run = json.loads(res.stdout)["run"]
    run_id = run["id"]
    # from another folder: by id, by a prefix of it, and plain `status` (no runs here: the user's latest)
    # the first through the console script, the others through the same entry here (support/in_process)
    for args in (("status", run_id), ("status", run_id[:12]), ("status",), ("report", run_id)):
        got = (run_dfdoctor if args == ("status", run_id) else run_here)(*args, "--format", "json", cwd=elsewhere,
                                                                         env=env)
        assert got.returncode in (0, 1), (args, got.stderr)
        assert json.loads(got.stdout)["run"]["id"] == run_id, args
    # the index is private and names folders only: never the command, its arguments or a secret
    index = state / "dfdoctor" / "runs.jsonl"
    assert oct(index.stat().st_mode & 0o777) == "0o600" and oct(index.parent.stat().st_mode & 0o777) == "0o700"
    text = index.read_text()
    assert run_id in text and "tok-s3cr3t" not in text and "train.py" not in text and "api-key" not in text
    # a run folder that is gone is not found through a stale line
    import shutil
    shutil.rmtree(run["dir"])
    gone = run_here("status", run_id, cwd=elsewhere, env=env)
    assert gone.returncode == 2 and "index of your runs" in gone.stderr


def test_plain_status_prefers_a_run_of_this_folder(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    ids = {}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text("print('x')\n")
        res = run_dfdoctor("launch", "--no-check", "--watch", "2", "--format", "json", "--", sys.executable,
                           "train.py", cwd=tmp_path / name, env=env)
        ids[name] = json.loads(res.stdout)["run"]["id"]
    got = run_dfdoctor("status", "--format", "json", cwd=tmp_path / "a", env=env)
    assert json.loads(got.stdout)["run"]["id"] == ids["a"]  # not b, the user's latest


# ---- dfdoctor env --------------------------------------------------------------------------------------------
def test_env_block_has_the_training_interpreter_s_torch(tmp_path):
    res = run_dfdoctor("env", "--", sys.executable, "train.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    facts = dict(line.split(": ", 1) for line in res.stdout.split("\n\n")[0].splitlines())  # then the libraries
    facts = {k.rstrip(":").strip(): v.strip() for k, v in facts.items()}
    real = _torch_here()
    assert facts["torch"].split()[0] == real[0] and facts["CUDA available"] == real[1]
    assert facts["training interpreter"].startswith(f"{sys.executable} (named by the command)")
    assert facts["target"] == "local" and facts["dfdoctor"].split()[0] and "NVIDIA driver" in facts


def _torch_here() -> list[str]:
    """This interpreter's torch version and whether CUDA is available to it. A CPU-only build (its version.py:
    cuda and hip None) has no CUDA on any machine, and that file names its version: read without importing
    torch (about a CPU-second, which `env` itself spends); any other build is imported and asked."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "checks" / "probes"))
    try:
        import _torch_build
    finally:
        sys.path.pop(0)
    build = _torch_build.read()
    if _torch_build.cpu_only(build):
        return [build["version"], "False"]
    return subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
                          capture_output=True, text=True, check=True).stdout.split()


def test_env_works_where_torch_is_broken(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('broken torch install')\n")
    res = run_dfdoctor("env", "--python", sys.executable, cwd=tmp_path, env={"PYTHONPATH": str(fake.parent)})
    assert res.returncode == 0, res.stderr
    assert re.search(r"^torch: +cannot be imported: RuntimeError: broken torch install$", res.stdout, re.M), res.stdout


def test_an_ok_over_skipped_checks_counts_only_those_that_ran():
    from dfdoctor.engine import verdict_from_checks
    records = [CheckRecord("log.writable", "pre", Status.OK, "fine"),
               *(CheckRecord(f"cuda.{i}", "pre", Status.SKIP, "no GPU") for i in range(2))]
    v = verdict_from_checks(records, "error")
    assert v.state == "ok" and v.summary.startswith("1 check(s) found no problem") and "(2 skipped)" in v.summary


def test_an_annotation_points_at_the_users_line_when_the_job_died_inside_a_library(tmp_path):
    """A crash deep in json: the verdict blames train.py:6 in its words, and the annotation says line 6, not 1."""
    (tmp_path / "train.py").write_text('import json\n\n\ndef main():\n    print("starting", flush=True)\n'
                                       '    return json.loads("{bad")\n\n\nmain()\n')
    res = subprocess.run([DFDOCTOR, "launch", "--watch", "30", "--settle", "2", "--format", "github", "--",
                          sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    errors = [line for line in res.stdout.splitlines() if line.startswith("::error ")]
    assert any("file=train.py,line=6," in line for line in errors), res.stdout


def test_a_headline_keeps_a_command_or_file_name_as_spelled():
    """Round 6 left "Sbatch refuses this submission": the first word is capitalised only when it is a word."""
    assert headline("sbatch refuses this submission: bad time") == "sbatch refuses this submission: bad time"
    assert headline("train.py raises ImportError") == "train.py raises ImportError"
    assert headline("/opt/venv/bin/python cannot start") == "/opt/venv/bin/python cannot start"
    assert headline("nothing in the launch asks for a GPU") == "Nothing in the launch asks for a GPU"
    assert headline("datasets is not installed in /v/bin/python") == "datasets is not installed in /v/bin/python"
    assert headline("numpy 2.4.6 is installed, but requirements.txt:2 requires numpy<2").startswith("numpy 2.4.6")
