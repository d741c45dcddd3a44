"""args.known: the command's options against the entry script's parser, read from its source (a static reading:
warn at most), on public projects of tests/corpus and on the parser styles they use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jobs.harness import PY, dfdoctor, job_env
from support.in_process import run_here

CORPUS = Path(__file__).resolve().parent / "corpus"


def _check(work: Path, *command: str, here: bool = False) -> dict:
    """`here`: through the same entry in this process (support/in_process), for a test's further readings; each
    test's first goes through the console script."""
    args = ("check", "--cwd", str(work), "--only", "args.known", "--format", "json", "--", *command)
    proc = run_here(*args, cwd=work, full_env=job_env()) if here else dfdoctor(*args, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a reading never fails the gate
    return json.loads(proc.stdout)["checks"][0]


@pytest.fixture
def wlm(tmp_path):
    work = tmp_path / "word_language_model"
    shutil.copytree(CORPUS / "pytorch-examples-word_language_model", work)
    return work


def test_a_mistyped_option_warns_with_the_closest_one_the_script_declares(wlm):
    rec = _check(wlm, PY, "main.py", "--accel", "--epocs", "6")
    assert rec["status"] == "warn" and rec["basis"] == "static", rec
    assert "main.py has no option --epocs; did you mean --epochs (main.py:28)?" in rec["summary"], rec
    assert "--epochs" in rec["fix"], rec


def test_the_readme_line_and_argparse_prefixes_pass(wlm):
    assert _check(wlm, PY, "main.py", "--accel", "--epochs", "6", "--tied")["status"] == "ok"
    assert _check(wlm, PY, "main.py", "--ep", "6", "--", "--not-an-option", here=True)["status"] == "ok"  # a prefix


def test_key_value_configs_are_matched_in_their_own_spelling(tmp_path):
    work = tmp_path / "minGPT"
    shutil.copytree(CORPUS / "minGPT", work)
    chargpt = work / "projects" / "chargpt"
    assert _check(chargpt, PY, "chargpt.py", "--trainer.max_iters=10", "--trainer.device=cpu")["status"] == "ok"
    rec = _check(chargpt, PY, "chargpt.py", "--trainer.max_iter=10", here=True)
    assert rec["status"] == "warn" and "did you mean --trainer.max_iters" in rec["summary"], rec


def test_a_parser_whose_options_are_not_all_in_the_source_is_skipped(tmp_path):
    (tmp_path / "cli.py").write_text("from lightning.pytorch.cli import LightningCLI\nLightningCLI()\n")
    rec = _check(tmp_path, PY, "cli.py", "fit", "--trainer.anything=1")
    assert rec["status"] == "skip" and "not all in its source" in rec["summary"], rec


def test_options_given_to_a_script_that_reads_none_warn_that_they_are_ignored(tmp_path):
    work = tmp_path / "regression"
    shutil.copytree(CORPUS / "pytorch-examples-regression", work)
    rec = _check(work, PY, "main.py", "--lr", "0.1")
    assert rec["status"] == "warn" and "main.py reads no command-line options: --lr is ignored" in rec["summary"]
    (work / "main.py").write_text("import fire\nfire.Fire(lambda lr=1: lr)\n")  # a parser not read here: unknown
    assert _check(work, PY, "main.py", "--lr", "0.1", here=True)["status"] == "skip"
    (work / "main.py").write_text("from mytool.cli import main\nmain()\n")  # an installed package may parse argv
    assert _check(work, PY, "main.py", "--lr", "0.1", here=True)["status"] == "skip"


@pytest.fixture
def makemore(tmp_path):
    work = tmp_path / "makemore"
    shutil.copytree(CORPUS / "makemore", work)
    (work / "names.txt").write_text("emma\nolivia\nava\n")
    return work


def test_short_options_are_read_as_the_parser_reads_its_short_aliases(makemore):
    """makemore declares `-i/--input-file`, `-n/--num-workers`, `-b/--batch-size`, `-l/--learning-rate`: a line of
    short options only was never matched (args.known skipped it: "no options to match"), so a short option the
    parser lacks, or `-lr` (argparse reads it as `-l r`, and 'r' is no float), passed unseen until the launch."""
    ok = _check(makemore, PY, "makemore.py", "-i", "names.txt", "-n2", "-b", "64", "-l3e-4", "--max-steps", "-1")
    assert ok["status"] == "ok", ok
    rec = _check(makemore, PY, "makemore.py", "-i", "names.txt", "-z", "3", here=True)
    assert rec["status"] == "warn" and "makemore.py has no option -z" in rec["summary"], rec
    rec = _check(makemore, PY, "makemore.py", "-i", "names.txt", "-lr", "3e-4", here=True)
    assert rec["status"] == "warn" and "has no option -lr (argparse reads it as -l 'r': --learning-rate takes a " \
        "value of type float); did you mean --learning-rate (makemore.py:617)?" in rec["summary"], rec


def test_a_short_option_whose_file_is_missing_is_said_in_the_users_spelling(makemore):
    """`-i nmes.txt` and `-inmes.txt` (argparse's value attached to a one-letter flag): args.paths names the
    missing file with the flag as typed, and the fix passes the file that exists with that same flag."""
    for words in (("-i", "nmes.txt"), ("-inmes.txt",)):  # the second through the same entry here
        args = ("check", "--cwd", str(makemore), "--only", "args.paths", "--format", "json", "--", PY,
                "makemore.py", *words)
        proc = dfdoctor(*args, cwd=makemore) if len(words) == 2 else run_here(*args, cwd=makemore, full_env=job_env())
        rec = json.loads(proc.stdout)["checks"][0]
        assert rec["status"] == "warn" and rec["summary"].startswith("-i nmes.txt: no such file"), (words, rec)
        assert "did you mean names.txt?" in rec["summary"] and rec["fix"].startswith("Pass -i names.txt "), rec
