"""What a run folder keeps of a launch's secrets, and what its stream copies let through.

- A secret of any length the launch masked stays masked by a later `status` in a shell without it (its
  fingerprints in masks.json), and in the report.json/report.html that `status` writes.
- masks.json alone lets no one test a guess: its fingerprints are keyed by a random key kept apart, in the
  user's private cache, never in the run folder.
- The recorder's copy of a stream (stdout.log) never holds a secret the recorder knows, in any of its forms
  (plain, base64, hex), however it is written: in pieces, at any delays, straddling a 64 KiB line.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfdoctor.agent import record
from dfdoctor.run.masks import KEYS_SUBDIR
from dfdoctor.redact import SecretPrints
from jobs.harness import DFDOCTOR, job_env, kill_runs
from support.in_process import run_here

SHORT = "pw9x7zz1"  # 8 characters: masked at launch, and (the defect) printed in clear by a later status
LONG = "Zx81-Qm2!vT6_secret-value"

LEAVER = '''
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", os.environ["DB_PASSWORD"]],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("started a worker", flush=True)
sys.exit(1)
'''


def forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, base64.b64encode(raw).decode().rstrip("="), raw.hex(), raw.hex().upper(),
            base64.urlsafe_b64encode(raw).decode().rstrip("=")]


def leaks(paths, secret: str) -> list[str]:
    return [f"{p}: {f[:4]}..." for p in paths for f in forms(secret) if f.encode() in Path(p).read_bytes()]


def test_a_short_secret_stays_masked_in_a_later_status_and_what_it_writes(tmp_path, own_cache_dir):
    work = tmp_path / "work"
    work.mkdir()
    (work / "leaver.py").write_text(LEAVER)
    clean = {k: v for k, v in job_env().items() if k != "DB_PASSWORD"}
    try:
        res = subprocess.run([DFDOCTOR, "launch", "--no-check", "--watch", "10", "--", sys.executable, "leaver.py"],
                             cwd=work, env=job_env(DB_PASSWORD=SHORT), capture_output=True, text=True, timeout=120)
        assert res.returncode == 1, res.stdout + res.stderr
        res = subprocess.run([DFDOCTOR, "status", "--format", "json", "--only", "job.leftovers"], cwd=work,
                             env=clean, capture_output=True, text=True, timeout=120)
        doc = json.loads(res.stdout)
        rec = next(c for c in doc["checks"] if c["id"] == "job.leftovers")
        assert rec["status"] == "warn" and "***" in " ".join(rec["evidence"]), rec
        assert SHORT not in res.stdout + res.stderr
        run_dir = next((work / ".dfdoctor" / "runs").iterdir())
        assert (run_dir / "report.json").exists()
        assert leaks([p for p in run_dir.rglob("*") if p.is_file()], SHORT) == []

        # masks.json: fingerprints only; their key lives in the user's private cache, not in the run folder
        masks = json.loads((run_dir / "masks.json").read_text())
        assert set(masks) == {"version", "key_id", "prints"} and masks["prints"]
        key_file = own_cache_dir / KEYS_SUBDIR / f"{masks['key_id']}.key"
        key = key_file.read_bytes()
        assert len(key) == 32 and key_file.stat().st_mode & 0o777 == 0o600
        assert (key_file.parent.stat().st_mode & 0o777) == 0o700
        for p in run_dir.rglob("*"):
            if p.is_file():
                assert key not in p.read_bytes() and key.hex().encode() not in p.read_bytes(), p
        assert SecretPrints.from_dict(masks, key).find(f"x {SHORT} y") == {SHORT}
        assert SecretPrints.from_dict(masks, os.urandom(32)).find(f"x {SHORT} y") == set()

        # without the key (another machine, a copied run folder), status masks by names and shapes only,
        # and still does not crash
        key_file.unlink()
        res = subprocess.run([DFDOCTOR, "status", "--format", "json"], cwd=work, env=clean, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 1, res.stderr
    finally:
        kill_runs(work)


def test_the_fingerprints_of_a_run_cannot_be_searched_without_the_key():
    """The defect: masks.json kept the salt and a 16-bit fingerprint next to a slow digest; a guess was
    filtered at the fingerprint's speed. Now nothing in it depends on a value but through the key."""
    key = os.urandom(32)
    doc = SecretPrints.of([SHORT, LONG], key).to_dict()
    assert set(doc) == {"version", "prints"}
    assert all(len(length_fp_digest) == 3 for length_fp_digest in doc["prints"])
    again = SecretPrints.of([SHORT, LONG], os.urandom(32)).to_dict()
    assert {d for _, _, d in doc["prints"]}.isdisjoint({d for _, _, d in again["prints"]})


class _Copy:
    """A real record.CappedCopy of one stream, with the recorder's own Masker, in a temp folder."""

    def __init__(self, folder: Path, secret: str):
        self.folder = folder
        self.copy = record.CappedCopy(str(folder), "stdout", record.Masker(env={"DB_PASSWORD": secret}))

    def kept(self) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(self.folder.glob("stdout*")))


def test_a_secret_written_in_two_pieces_far_apart_is_masked_whole(tmp_path):
    """The defect: a piece that waited a tick (1 s) was kept as it was; the next piece completed the secret."""
    c = _Copy(tmp_path, LONG)
    c.copy.write(b"logging in with " + LONG[:9].encode())
    for _ in range(3):
        c.copy.tick()
    c.copy.write(LONG[9:].encode() + b" done\n")
    c.copy.tick(final=True)
    assert LONG[:9].encode() not in c.kept() and b"logging in with *** done\n" == c.kept()


def test_a_line_over_64_kib_straddling_a_secret_leaves_no_half(tmp_path):
    c = _Copy(tmp_path, LONG)
    filler = b"x" * (record.PENDING_CAP - 5)
    c.copy.write(filler + LONG[:12].encode())
    c.copy.write(LONG[12:].encode() + b"\n")
    c.copy.tick(final=True)
    assert LONG[:12].encode() not in c.kept() and LONG[12:].encode() not in c.kept()
    assert c.kept().endswith(b"***\n")


def test_base64_and_hex_forms_are_masked(tmp_path):
    c = _Copy(tmp_path, SHORT)
    raw = SHORT.encode()
    lines = [base64.b64encode(raw), base64.b64encode(b"user:" + raw), base64.urlsafe_b64encode(b"ab" + raw + b"z"),
             raw.hex().encode(), raw.hex().upper().encode()]
    c.copy.write(b"\n".join(b"auth " + x for x in lines) + b"\n")
    c.copy.tick(final=True)
    assert leaks([tmp_path / "stdout.log"], SHORT) == []
    assert c.kept().count(b"***") == len(lines)


def _encodings(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, base64.b64encode(raw), base64.urlsafe_b64encode(raw), raw.hex().encode(), raw.hex().upper().encode(),
            base64.b64encode(b"u:" + raw), base64.b64encode(b"xy" + raw + b"q")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.sampled_from([SHORT, LONG, "hunter2!", "a1b2"]), which=st.integers(0, 6),
       cuts=st.lists(st.integers(0, 60), max_size=6), ticks=st.lists(st.integers(0, 3), min_size=7, max_size=7),
       before=st.sampled_from([b"", b"token: ", b"x" * 70000, b"line\nmore ", b"\r"]),
       after=st.sampled_from([b"", b"\n", b" tail", b"y" * 70000]))
def test_a_secret_in_any_pieces_at_any_delays_in_any_encoding_is_never_kept(tmp_path_factory, secret, which, cuts,
                                                                           ticks, before, after):
    """Property: the stream copy never holds the secret, whatever its encoding, however many pieces it is written
    in, with any number of recorder ticks (1 s each) between them."""
    folder = tmp_path_factory.mktemp("copy")
    c = _Copy(folder, secret)
    data = before + _encodings(secret)[which] + after
    pieces, at = [], 0
    for cut in sorted({min(len(before) + x, len(data)) for x in cuts}):
        pieces.append(data[at:cut])
        at = cut
    pieces.append(data[at:])
    for piece, t in zip(pieces, ticks):
        c.copy.write(piece)
        for _ in range(t):
            c.copy.tick()
    c.copy.tick(final=True)
    kept = c.kept()
    for form in forms(secret):
        assert form.encode() not in kept, (form, pieces)
    assert secret.encode() not in decoded(kept), pieces


def decoded(kept: bytes) -> bytes:
    """Every run of base64 or hex letters in `kept`, decoded at every alignment: a secret encoded inside a longer
    text shows up here whatever bytes stood around it."""
    out = []
    for run in re.findall(rb"[A-Za-z0-9+/_-]{4,}", kept):
        for start in range(4):
            chunk = run[start:][: (len(run) - start) // 4 * 4]
            out.append(base64.b64decode(chunk.replace(b"-", b"+").replace(b"_", b"/")))
    for run in re.findall(rb"[0-9a-fA-F]{2,}", kept):
        for start in range(2):
            chunk = run[start:][: (len(run) - start) // 2 * 2]
            out.append(bytes.fromhex(chunk.decode()))
    return b"\0".join(out)


PIECES_JOB = '''
import base64, os, sys, time
s = os.environ["DB_PASSWORD"]
print("connecting with " + s[:3], end="", flush=True)
time.sleep(1.6)
print(s[3:] + " ok", flush=True)
print("basic " + base64.b64encode(("trainer:" + s).encode()).decode(), flush=True)
print("hex " + s.encode().hex(), flush=True)
sys.stderr.write("x" * 70000 + s[:4]); sys.stderr.flush()
time.sleep(1.2)
sys.stderr.write(s[4:] + "\\n"); sys.stderr.flush()
raise SystemExit("login failed for " + s)
'''


def test_a_real_job_writing_its_secret_in_pieces_and_encodings_leaks_it_nowhere(tmp_path, own_cache_dir):
    """A user-shaped job: the password printed in two pieces 1.6 s apart, in a Basic auth header, in hex, and
    straddling a 70 KB stderr line; then launch and a later status (without the variable) in every format."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.py").write_text(PIECES_JOB)
    clean = {k: v for k, v in job_env().items() if k != "DB_PASSWORD"}
    printed = []
    try:
        res = subprocess.run([DFDOCTOR, "launch", "--no-check", "--watch", "15", "--log", "job.log", "--format",
                              "text", "--format", "json", "--output", "l.json", "--", sys.executable, "job.py"],
                             cwd=work, env=job_env(DB_PASSWORD=SHORT), capture_output=True, timeout=120)
        printed.append(res.stdout + res.stderr)
        assert res.returncode == 1, res.stderr
        for fmt in ("text", "json", "html", "github"):  # text through the console script, the others here
            if fmt == "text":
                res = subprocess.run([DFDOCTOR, "status", "--verbose", "--format", fmt], cwd=work, env=clean,
                                     capture_output=True, timeout=120)
            else:  # the same entry in this process, with that environment (support/in_process)
                res = run_here("status", "--verbose", "--format", fmt, cwd=work, full_env=clean, binary=True)
            printed.append(res.stdout + res.stderr)
        assert SHORT.encode() in (work / "job.log").read_bytes()  # the user's own log has it, as written
        files = [p for p in work.rglob("*") if p.is_file() and p.name not in ("job.py", "job.log")]
        assert leaks(files, SHORT) == []
        for out in printed:
            assert SHORT.encode() not in out and SHORT.encode().hex().encode() not in out
            assert SHORT.encode() not in decoded(out)
        assert b"connecting with ***" in (next(work.rglob("stdout.log"))).read_bytes()
    finally:
        kill_runs(work)


SPLIT_JOB = r'''
import os, sys, time
s = os.environ["DB_PASSWORD"]
half = len(s) // 2
sys.stdout.write("token: " + s[:half]); sys.stdout.flush()        # half to stdout, no line end
time.sleep(0.3)
sys.stderr.write(s[half:] + "\n"); sys.stderr.flush()              # the rest to stderr
time.sleep(0.3)
sys.stdout.write("\nagain " + s[:half] + "\n"); sys.stdout.flush()  # the same stream, two writes, a line apart
time.sleep(1.5)
sys.stdout.write(s[half:] + " done\n"); sys.stdout.flush()
'''


def test_a_secret_split_across_stdout_and_stderr_or_across_two_lines_leaves_no_half(tmp_path, own_cache_dir):
    """Round 3 (round 2's N4, partly fixed): each stream was masked alone, so stdout.log kept the first half and
    stderr.log the second, and two lines of one stream kept both halves."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.py").write_text(SPLIT_JOB)
    try:
        res = subprocess.run([DFDOCTOR, "launch", "--no-check", "--watch", "10", "--log", "job.log", "--", sys.executable,
                              "job.py"], cwd=work, env=job_env(DB_PASSWORD=LONG), capture_output=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        half = len(LONG) // 2
        files = [p for p in work.rglob("*") if p.is_file() and p.name not in ("job.py", "job.log")]
        kept = b"".join(p.read_bytes() for p in files)
        assert LONG[:half].encode() not in kept and LONG[half:].encode() not in kept
        assert LONG[half:].encode() not in res.stdout + res.stderr
        assert b"token: ***" in next(work.rglob("stdout.log")).read_bytes()
        assert next(work.rglob("stderr.log")).read_bytes().startswith(b"***\n")
    finally:
        kill_runs(work)


WEBHOOK = "https://hooks.slack.com/services/T0AAAA1XY/B0BBBB2ZQ/abcdefghijklmnopqrstuvwx"
CONNINFO = "host=db user=app pass=Kq7sv2LmnWx9"


def test_the_record_keeps_only_the_environment_a_diagnosis_reads_and_the_folder_is_git_ignored(tmp_path,
                                                                                             own_cache_dir):
    """Round 3: record.jsonl kept the job's whole environment; a Slack webhook and a conninfo password (names and
    shapes no rule knows) were stored in clear, and `git add -A` staged the run folder."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.py").write_text("print('hello')\n")
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    env = job_env(NOTIFY_URL=WEBHOOK, APP_DB=CONNINFO, CUDA_VISIBLE_DEVICES="0,1", MASTER_PORT="29500",
                  HTTPS_PROXY="http://bob:Pr0xyPw77@proxy.corp:3128", NCCL_DEBUG="INFO")
    try:
        res = subprocess.run([DFDOCTOR, "launch", "--no-check", "--watch", "5", "--", sys.executable, "job.py"],
                             cwd=work, env=env, capture_output=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        files = [p for p in (work / ".dfdoctor").rglob("*") if p.is_file()]
        for secret in ("abcdefghijklmnopqrstuvwx", "Kq7sv2LmnWx9", "Pr0xyPw77"):
            assert [str(p) for p in files if secret.encode() in p.read_bytes()] == [], secret
        spawned = next(json.loads(ln) for ln in next(work.rglob("record.jsonl")).read_text().splitlines()
                       if '"spawned"' in ln)
        kept = spawned["env"]
        assert kept["CUDA_VISIBLE_DEVICES"] == "0,1" and kept["MASTER_PORT"] == "29500" and kept["NCCL_DEBUG"] == "INFO"
        assert kept["HTTPS_PROXY"] == "http://***@proxy.corp:3128" and "PATH" in kept
        assert "NOTIFY_URL" not in kept and "APP_DB" not in kept and "HOME" not in kept
        assert (work / ".dfdoctor" / ".gitignore").read_text().endswith("\n*\n")
        staged = subprocess.run(["git", "-C", str(work), "add", "-A", "--dry-run"], capture_output=True, text=True)
        assert ".dfdoctor" not in staged.stdout and "job.py" in staged.stdout
    finally:
        kill_runs(work)


def test_a_piece_is_masked_only_at_a_cut_and_long_enough_to_say_something():
    from dfdoctor.agent.mask import Redactor

    r = Redactor({"DB_PASSWORD": LONG})
    assert r.pieces("login=" + LONG[:9]) == "login=***"              # a beginning that ends the write
    assert r.pieces(LONG[-12:] + " rest\n") == "*** rest\n"          # an end that begins a line
    assert r.pieces("x" + LONG[:9]) == "x" + LONG[:9]                # inside a word: not a cut
    assert r.pieces(LONG[:5] + "\n") == LONG[:5] + "\n"              # 5 of 25 characters: says too little
    assert r.pieces("nothing here\n") == "nothing here\n"
