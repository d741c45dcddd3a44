"""A real launch with secrets in its environment and argv, then `status` and `report` in every format from a shell
without them: no file dfdoctor wrote (run folder, outputs, cache) and nothing it printed holds a secret."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from jobs.harness import DFDOCTOR, job_env, kill_runs  # noqa: F401  (DFDOCTOR: the console script under test)
from support.in_process import run_here

WANDB = "0123456789abcdef0123456789abcdef01234567"
HF_ENV = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm01234567"
HF_ARG = "hfcli-" + "9f8e7d6c5b4a39281706aabb"
GH_PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DB_PW = "Sup3r-s3cret-DB-pw"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SECRETS = (WANDB, HF_ENV, HF_ARG, GH_PAT, DB_PW, AWS)

# A job of the shape users write: it logs its config (argv and environment included, as many do), trains a
# little, then dies with a traceback that quotes its token.
TRAIN = '''
import os, sys, time
print("config:", " ".join(sys.argv[1:]), flush=True)
print("env:", {k: v for k, v in os.environ.items() if k in ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY")},
      flush=True)
for step in range(3):
    print(f"step {step} loss {3.0 - step:.2f}", flush=True)
    time.sleep(0.1)
token = sys.argv[sys.argv.index("--hf-token") + 1]
raise RuntimeError(f"login failed for {token} with {os.environ['WANDB_API_KEY']} at {sys.argv[-1]}")
'''


def _forms(secret: str) -> set[bytes]:
    return {secret.encode(), quote(secret, safe="").encode(), json.dumps(secret)[1:-1].encode()}


def _leaks(paths: list[Path]) -> list[str]:
    found = []
    for p in paths:
        data = p.read_bytes()
        for s in SECRETS:
            if any(f in data for f in _forms(s)):
                found.append(f"{p}: {s[:6]}...")
    return found


@pytest.mark.slow
def test_no_file_dfdoctor_writes_and_nothing_it_prints_holds_a_secret(tmp_path, own_cache_dir):
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    secret_env = job_env(WANDB_API_KEY=WANDB, HF_TOKEN=HF_ENV, AWS_SECRET_ACCESS_KEY=AWS)
    clean_env = {k: v for k, v in job_env().items() if k not in ("WANDB_API_KEY", "HF_TOKEN",
                                                                 "AWS_SECRET_ACCESS_KEY")}
    argv = [sys.executable, "train.py", "--hf-token", HF_ARG, f"GH_PAT={GH_PAT}",
            f"postgresql://trainer:{DB_PW}@db.internal:5432/train"]
    printed = []
    import subprocess

    def dfdoctor(*args, env, here=False):
        """`here`: in this process (support/in_process), for a rendering whose point is what it prints and writes;
        each format and each source still goes through the console script once, in its own process."""
        if here:
            res = run_here(*args, cwd=work, full_env=env)
        else:
            res = subprocess.run([DFDOCTOR, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        printed.append((args[0], res.stdout + res.stderr))
        return res

    try:
        res = dfdoctor("launch", "--log", "train.log", "--watch", "20", "--skip", "compile.race",
                       "--format", "json", "--output", "launch.json", "--format", "html", "--output", "launch.html",
                       "--", *argv, env=secret_env)
        assert res.returncode == 1, res.stdout + res.stderr
        assert json.loads((work / "launch.json").read_text())["verdict"]["state"] == "failed"
        run_dir = next((work / ".dfdoctor" / "runs").iterdir())

        # later, in a shell without the secrets
        res = dfdoctor("status", "--format", "json", "--output", "status.json", "--format", "text", env=clean_env)
        assert res.returncode == 1, res.stderr
        for i, (fmt, ext) in enumerate((("html", "html"), ("json", "json"), ("junit", "xml"), ("text", "txt"))):
            for j, source in enumerate(("launch.json", str(run_dir), run_dir.name, "status.json")):
                res = dfdoctor("report", source, "--format", fmt, "--output", f"again-{fmt}-{len(printed)}.{ext}",
                               env=clean_env, here=i != j)
                assert res.returncode == 1, (source, fmt, res.stderr)
            assert dfdoctor("report", "--format", fmt, env=clean_env, here=i != 0).returncode == 1
        dfdoctor("status", "--format", "html", env=clean_env, here=True)

        # what the job itself wrote to the user's own log is theirs (and really holds the secrets)
        assert HF_ARG in (work / "train.log").read_text()
        ours = [p for p in work.rglob("*") if p.is_file() and p.name not in ("train.py", "train.log")]
        ours += [p for p in own_cache_dir.parent.rglob("*") if p.is_file()]
        assert len(ours) > 10 and any(p.name == "record.jsonl" for p in ours)
        assert _leaks(ours) == []
        for command, text in printed:
            for s in SECRETS:
                assert not any(f.decode() in text for f in _forms(s)), (command, s[:6])
        # the report still says what happened, masked
        doc = json.loads((work / "status.json").read_text())
        assert "RuntimeError: login failed for ***" in json.dumps(doc)
    finally:
        kill_runs(work)


LEAVER = '''
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", os.environ["WANDB_API_KEY"]],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("started a worker", flush=True)
sys.exit(1)
'''


@pytest.mark.slow
def test_status_later_masks_what_only_the_launch_knew_was_secret(tmp_path):
    """A worker the job left behind carries the WANDB key as a bare argument (no telling name, no known shape).
    `status` in a shell without WANDB_API_KEY reads that command line live (job.leftovers): only the launch's
    fingerprints (masks.json) can tell it is the secret, and they do."""
    import subprocess
    work = tmp_path / "work"
    work.mkdir()
    (work / "leaver.py").write_text(LEAVER)
    clean_env = {k: v for k, v in job_env().items() if k != "WANDB_API_KEY"}
    try:
        res = subprocess.run([DFDOCTOR, "launch", "--no-check", "--watch", "10", "--", sys.executable, "leaver.py"],
                             cwd=work, env=job_env(WANDB_API_KEY=WANDB), capture_output=True, text=True, timeout=120)
        assert res.returncode == 1, res.stdout + res.stderr
        res = subprocess.run([DFDOCTOR, "status", "--format", "json", "--only", "job.leftovers"], cwd=work,
                             env=clean_env, capture_output=True, text=True, timeout=120)
        doc = json.loads(res.stdout)
        rec = next(c for c in doc["checks"] if c["id"] == "job.leftovers")
        assert rec["status"] == "warn" and "***" in " ".join(rec["evidence"]), rec
        assert WANDB not in res.stdout
        masks = json.loads(next(work.rglob("masks.json")).read_text())
        assert masks["prints"] and WANDB not in json.dumps(masks)
        assert _leaks([p for p in work.rglob("*") if p.is_file() and p.name != "leaver.py"]) == []
    finally:
        kill_runs(work)
