"""args.known: the command's options against the entry script's parser, read from its source (a static reading:
warn at most), on public projects of tests/corpus and on the parser styles they use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jobs.harness import PY, dfdoctor

CORPUS = Path(__file__).resolve().parent / "corpus"


def _check(work: Path, *command: str) -> dict:
    proc = dfdoctor("check", "--cwd", str(work), "--only", "args.known", "--format", "json", "--", *command, cwd=work)
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
    assert _check(wlm, PY, "main.py", "--ep", "6", "--", "--not-an-option")["status"] == "ok"  # a unique prefix


def test_key_value_configs_are_matched_in_their_own_spelling(tmp_path):
    work = tmp_path / "minGPT"
    shutil.copytree(CORPUS / "minGPT", work)
    chargpt = work / "projects" / "chargpt"
    assert _check(chargpt, PY, "chargpt.py", "--trainer.max_iters=10", "--trainer.device=cpu")["status"] == "ok"
    rec = _check(chargpt, PY, "chargpt.py", "--trainer.max_iter=10")
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
    assert _check(work, PY, "main.py", "--lr", "0.1")["status"] == "skip"
    (work / "main.py").write_text("from mytool.cli import main\nmain()\n")  # an installed package may parse argv
    assert _check(work, PY, "main.py", "--lr", "0.1")["status"] == "skip"
